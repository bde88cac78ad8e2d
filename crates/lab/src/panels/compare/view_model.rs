//! The Compare panel's form: the URL's text in, a checked [`CompareRequest`] out for the
//! model worker. Each policy's knobs are checked under its own engine's ranges
//! ([`engine_number`]), as the Decoding step panel checks them.

use policy::{Engine, Policy, RunConfig, SeedSource, StopConfig};

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::number::{engine_number, whole, whole_in, FieldError};
use crate::worker::protocol::CompareRequest;

/// The most seeds a tree in the lab takes (the CLI takes more).
pub const MOST_SEEDS: u64 = 1000;

/// The form's text fields, in order: (URL key, input id, label, hint, default).
pub const FIELDS: [(&str, &str, &str, &str, &str); 14] = [
    (
        "cmp_prompt",
        "cmp-prompt",
        "Prompt",
        "The text both policies continue.",
        "To insert a table, ",
    ),
    (
        "cmp_seed",
        "cmp-seed",
        "Seed",
        "Both runs draw from this one stream; the trees' seeds count up from it.",
        "7",
    ),
    (
        "cmp_max",
        "cmp-max",
        "Max new tokens",
        "Per run (1 to 256).",
        "16",
    ),
    (
        "cmp_a_temperature",
        "cmp-a-temperature",
        "a: temperature",
        "Policy a's temperature.",
        policy::LAB_TEMPERATURE_TEXT,
    ),
    (
        "cmp_a_top_k",
        "cmp-a-top-k",
        "a: top-k",
        "0 keeps every token.",
        "0",
    ),
    (
        "cmp_a_top_p",
        "cmp-a-top-p",
        "a: top-p",
        "1 keeps every token.",
        "1",
    ),
    (
        "cmp_a_min_p",
        "cmp-a-min-p",
        "a: min-p",
        "0 keeps every token.",
        "0",
    ),
    (
        "cmp_b_temperature",
        "cmp-b-temperature",
        "b: temperature",
        "Policy b's temperature.",
        policy::LAB_TEMPERATURE_TEXT,
    ),
    (
        "cmp_b_top_k",
        "cmp-b-top-k",
        "b: top-k",
        "0 keeps every token.",
        "0",
    ),
    (
        "cmp_b_top_p",
        "cmp-b-top-p",
        "b: top-p",
        "1 keeps every token.",
        "0.8",
    ),
    (
        "cmp_b_min_p",
        "cmp-b-min-p",
        "b: min-p",
        "0 keeps every token.",
        "0",
    ),
    ("cmp_a_engine", "cmp-a-engine", "a: engine", "", "lab"),
    ("cmp_b_engine", "cmp-b-engine", "b: engine", "", "lab"),
    (
        "cmp_seeds",
        "cmp-seeds",
        "Seeds per tree",
        "How many runs draw each policy's tree of paths (1 to 1000).",
        "100",
    ),
];

/// The depth field, apart so that [`FIELDS`] stays one table of texts.
pub const DEPTH: (&str, &str, &str, &str, &str) = (
    "cmp_depth",
    "cmp-depth",
    "Tree depth",
    "How many first tokens each tree follows (1 to 4).",
    "3",
);

/// The form, every field as typed: [`FIELDS`] then [`DEPTH`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompareForm(pub [String; 15]);

const KEYS: [&str; 15] = {
    let mut keys = [""; 15];
    let mut i = 0;
    while i < 14 {
        keys[i] = FIELDS[i].0;
        i += 1;
    }
    keys[14] = DEPTH.0;
    keys
};

impl Default for CompareForm {
    fn default() -> CompareForm {
        CompareForm(std::array::from_fn(|i| {
            FIELDS.get(i).map_or(DEPTH.4, |f| f.4).to_string()
        }))
    }
}

impl CompareForm {
    fn text(&self, key: &str) -> &str {
        KEYS.iter()
            .position(|k| *k == key)
            .map_or("", |i| self.0[i].as_str())
    }

    /// One side's policy, its problems named at its own fields (`cmp-a-…` or `cmp-b-…`).
    fn policy(&self, side: &str, problems: &mut Problems) -> Option<Policy> {
        let key = |name: &str| format!("cmp_{side}_{name}");
        let id = |name: &'static str| -> &'static str {
            FIELDS
                .iter()
                .find(|f| f.0 == format!("cmp_{side}_{name}"))
                .map_or("", |f| f.1)
        };
        let engine = match self.text(&key("engine")).parse::<Engine>() {
            Ok(engine) => Some(engine),
            Err(e) => {
                problems.add(id("engine"), report::sentence(e.to_string()));
                None
            }
        };
        let e = engine.unwrap_or(Engine::Lab);
        let of_side = |source| FieldError::Side {
            side: side.to_string(),
            source: Box::new(source),
        };
        let knob = |name: &'static str, label: &str, set: fn(&mut Policy, f64)| {
            engine_number(self.text(&key(name)), label, e, set).map_err(of_side)
        };
        let temperature = problems.field(
            id("temperature"),
            knob("temperature", "Temperature", |p, v| p.temperature = v),
        );
        let top_k = problems.field(
            id("top_k"),
            whole(self.text(&key("top_k")), "Top-k").map_err(of_side),
        );
        let top_p = problems.field(id("top_p"), knob("top_p", "Top-p", |p, v| p.top_p = v));
        let min_p = problems.field(id("min_p"), knob("min_p", "Min-p", |p, v| p.min_p = v));
        Some(Policy {
            engine: engine?,
            temperature: temperature?,
            top_k: top_k? as usize,
            top_p: top_p?,
            min_p: min_p?,
            ..Policy::default()
        })
    }
}

impl Form for CompareForm {
    type Checked = CompareRequest;

    /// The URL keys are [`FIELDS`]' and [`DEPTH`]'s; missing keys keep the defaults.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (CompareForm, Problems) {
        (
            CompareForm(texts_from_pairs(KEYS, CompareForm::default().0, pairs)),
            Problems::default(),
        )
    }

    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = pairs_from_texts(KEYS, std::array::from_fn(|i| self.0[i].as_str()));
        // The prompt as typed: its spaces matter.
        pairs[0].1 = self.0[0].clone();
        pairs
    }

    /// Reads every field, so that every bad one is named at once.
    fn check(&self) -> Result<CompareRequest, Problems> {
        let mut problems = Problems::default();
        let prompt = self.text("cmp_prompt");
        if prompt.trim().is_empty() {
            problems.add(
                "cmp-prompt",
                "Type a prompt: the model needs at least one token to start from.",
            );
        }
        let seed = problems.field("cmp-seed", whole(self.text("cmp_seed"), "Seed"));
        let max_tokens = problems.field(
            "cmp-max",
            whole_in(self.text("cmp_max"), "Max new tokens", 1, 256),
        );
        let a = self.policy("a", &mut problems);
        let b = self.policy("b", &mut problems);
        let seeds = problems.field(
            "cmp-seeds",
            whole_in(self.text("cmp_seeds"), "Seeds per tree", 1, MOST_SEEDS),
        );
        let depth = problems.field(
            "cmp-depth",
            whole_in(self.text("cmp_depth"), "Tree depth", 1, 4),
        );
        problems.or(|| {
            let config = |policy: Policy| -> Option<RunConfig> {
                Some(RunConfig {
                    app_version: env!("CARGO_PKG_VERSION").into(),
                    prompt_template: "{prompt}".into(),
                    prompt: prompt.to_string(),
                    policy,
                    seed: seed?,
                    seed_source: SeedSource::User,
                    max_tokens: max_tokens? as usize,
                    stop: StopConfig::default(),
                })
            };
            Some(CompareRequest {
                a: config(a?)?,
                b: config(b?)?,
                seeds: seeds? as usize,
                depth: depth? as usize,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::form::the_only_problem;

    #[test]
    fn the_defaults_are_the_readmes_example() {
        let request = CompareForm::default().check().unwrap();
        assert_eq!(request.a.policy.temperature, 0.7);
        assert_eq!(request.b.policy.top_p, 0.8);
        assert_eq!(request.a.prompt, "To insert a table, ");
        assert_eq!((request.a.seed, request.a.max_tokens), (7, 16));
        assert_eq!((request.seeds, request.depth), (100, 3));
        assert_eq!(request.a.policy.engine, Engine::Lab);
    }

    #[test]
    fn the_url_round_trips() {
        let mut form = CompareForm::default();
        form.0[3] = "1.3".into();
        form.0[12] = "llama.cpp".into();
        let pairs = form.to_pairs();
        let (back, problems) = CompareForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert!(problems.is_empty());
        assert_eq!(back, form);
        let request = back.check().unwrap();
        assert_eq!(request.a.policy.temperature, 1.3);
        assert_eq!(request.b.policy.engine, Engine::LlamaCpp);
    }

    #[test]
    fn each_bad_value_is_named_at_its_own_field_under_its_own_engine() {
        let edit = |i: usize, text: &'static str| move |f: &mut CompareForm| f.0[i] = text.into();
        assert!(the_only_problem(edit(3, "-1"), "cmp-a-temperature").starts_with("Policy a: "));
        assert!(the_only_problem(edit(9, "2"), "cmp-b-top-p").starts_with("Policy b: "));
        assert!(the_only_problem(edit(13, "1001"), "cmp-seeds").contains("1 to 1000"));
        assert!(the_only_problem(edit(14, "5"), "cmp-depth").contains("1 to 4"));
        assert!(the_only_problem(edit(11, "gpt"), "cmp-a-engine").contains("gpt"));
        // Top-p 0 is llama.cpp's "keep the top token", and refused by the lab's rules.
        let mut form = CompareForm::default();
        form.0[9] = "0".into();
        assert!(form.check().is_err());
        form.0[12] = "llama.cpp".into();
        assert_eq!(form.check().unwrap().b.policy.top_p, 0.0);
    }
}
