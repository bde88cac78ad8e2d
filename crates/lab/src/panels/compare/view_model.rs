//! The Compare panel's form: the URL's text in, a checked [`CompareRequest`] out for the
//! model worker. Each policy is every knob of the policy's table ([`policy::KNOBS`]),
//! checked under its own engine's rules and named at its own fields (`cmp-a-…`,
//! `cmp-b-…`), as Generate's are.

use policy::{RunConfig, SeedSource, StopConfig, KNOB_COUNT};

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::knobs::{
    knob_defaults, knob_from_url, knob_ids, knob_keys, knob_labels, knob_pairs, knob_words,
    read_knobs, KnobNames, KnobTexts,
};
use crate::widgets::number::{whole, whole_in, FieldError};
use crate::worker::protocol::CompareRequest;

/// The most seeds a tree in the lab takes (the CLI takes more).
pub const MOST_SEEDS: u64 = 1000;

/// The fields of the run both policies share, in order: (URL key, input id, label, hint,
/// default).
pub const FIELDS: [(&str, &str, &str, &str, &str); 5] = [
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
        "cmp_seeds",
        "cmp-seeds",
        "Seeds per tree",
        "How many runs draw each policy's tree of paths (1 to 1000).",
        "100",
    ),
    (
        "cmp_depth",
        "cmp-depth",
        "Tree depth",
        "How many first tokens each tree follows (1 to 4).",
        "3",
    ),
];

/// The knobs each policy shows before its "More controls", in order.
pub const SHOWN: [&str; 5] = ["engine", "temperature", "top-k", "top-p", "min-p"];

/// One policy of the two: `a` or `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::A, Side::B];

    pub fn name(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }

    /// The side's field ids: `cmp-a-top-k`.
    pub fn ids(self) -> &'static [&'static str; KNOB_COUNT] {
        knob_ids(match self {
            Side::A => "cmp-a",
            Side::B => "cmp-b",
        })
    }

    /// The side's field ids and labels (`a: top-p`).
    pub fn names(self) -> KnobNames {
        let labels = knob_labels(match self {
            Side::A => "a: ",
            Side::B => "b: ",
        });
        (self.ids(), labels)
    }

    /// The side's URL keys: `cmp_a_top_k`.
    pub fn keys(self) -> &'static [&'static str; KNOB_COUNT] {
        knob_keys(match self {
            Side::A => "cmp_a",
            Side::B => "cmp_b",
        })
    }

    /// The side's starting policy: the README's example, b at top-p 0.8.
    pub fn defaults(self) -> KnobTexts {
        match self {
            Side::A => knob_defaults(&[]),
            Side::B => knob_defaults(&[("top-p", "0.8")]),
        }
    }
}

/// The form, every field as typed: [`FIELDS`], then each policy's knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareForm {
    pub run: [String; 5],
    pub a: KnobTexts,
    pub b: KnobTexts,
}

const KEYS: [&str; 5] = [
    FIELDS[0].0,
    FIELDS[1].0,
    FIELDS[2].0,
    FIELDS[3].0,
    FIELDS[4].0,
];

impl Default for CompareForm {
    fn default() -> CompareForm {
        CompareForm {
            run: FIELDS.map(|f| f.4.to_string()),
            a: Side::A.defaults(),
            b: Side::B.defaults(),
        }
    }
}

impl CompareForm {
    fn text(&self, key: &str) -> &str {
        KEYS.iter()
            .position(|k| *k == key)
            .map_or("", |i| self.run[i].as_str())
    }

    /// One side's knobs.
    pub fn side(&self, side: Side) -> &KnobTexts {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut KnobTexts {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }
}

impl Form for CompareForm {
    type Checked = CompareRequest;

    /// The URL keys are [`FIELDS`]' and each side's knobs' (`cmp_a_top_k`); missing keys
    /// keep the defaults.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (CompareForm, Problems) {
        let mut form = CompareForm::default();
        let mut run = Vec::new();
        for (key, value) in pairs {
            let knob = Side::BOTH
                .into_iter()
                .any(|side| knob_from_url(form.side_mut(side), side.keys(), key, value));
            if !knob {
                run.push((key, value));
            }
        }
        form.run = texts_from_pairs(KEYS, form.run, run);
        (form, Problems::default())
    }

    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = pairs_from_texts(KEYS, std::array::from_fn(|i| self.run[i].as_str()));
        // The prompt as typed: its spaces matter.
        pairs[0].1 = self.run[0].clone();
        for side in Side::BOTH {
            pairs.extend(knob_pairs(self.side(side), &side.defaults(), side.keys()));
        }
        pairs
    }

    /// Reads every field, so that every bad one is named at once.
    fn check(&self) -> Result<CompareRequest, Problems> {
        let mut problems = Problems::default();
        let prompt = self.text("cmp_prompt");
        problems.prompt("cmp-prompt", prompt);
        let seed = problems.field("cmp-seed", whole(self.text("cmp_seed"), "Seed"));
        let max_tokens = problems.field(
            "cmp-max",
            whole_in(self.text("cmp_max"), "Max new tokens", 1, 256),
        );
        let [a, b] = Side::BOTH.map(|side| {
            let of_side = |source| FieldError::Side {
                side: side.name().to_string(),
                source: Box::new(source),
            };
            read_knobs(self.side(side), side.ids(), &mut problems, &of_side)
        });
        let seeds = problems.field(
            "cmp-seeds",
            whole_in(self.text("cmp_seeds"), "Seeds per tree", 1, MOST_SEEDS),
        );
        let depth = problems.field(
            "cmp-depth",
            whole_in(self.text("cmp_depth"), "Tree depth", 1, 4),
        );
        problems.or(|| {
            let config = |policy| -> Option<RunConfig> {
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
            let ((a, a_breakers), (b, b_breakers)) = (a?, b?);
            Some(CompareRequest {
                a: config(a)?,
                b: config(b)?,
                breakers: [a_breakers, b_breakers],
                words: Side::BOTH.map(|side| knob_words(self.side(side))),
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
    use crate::widgets::knobs::at;
    use policy::Engine;

    /// Sets knob `flag` of one side.
    fn knob(form: &mut CompareForm, side: Side, flag: &str, text: &str) {
        form.side_mut(side)[at(flag).unwrap()] = text.into();
    }

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
        knob(&mut form, Side::A, "temperature", "1.3");
        knob(&mut form, Side::B, "engine", "llama.cpp");
        knob(&mut form, Side::B, "xtc-probability", "0.5");
        let pairs = form.to_pairs();
        assert!(pairs.contains(&("cmp_b_xtc_probability", "0.5".to_string())));
        let (back, problems) = CompareForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert!(problems.is_empty());
        assert_eq!(back, form);
        let request = back.check().unwrap();
        assert_eq!(request.a.policy.temperature, 1.3);
        assert_eq!(request.b.policy.engine, Engine::LlamaCpp);
        assert_eq!(request.b.policy.xtc_probability, 0.5);
    }

    #[test]
    fn each_bad_value_is_named_at_its_own_field_under_its_own_engine() {
        let side = |side, flag: &'static str, text: &'static str| {
            move |f: &mut CompareForm| knob(f, side, flag, text)
        };
        let run = |i: usize, text: &'static str| move |f: &mut CompareForm| f.run[i] = text.into();
        assert!(
            the_only_problem(side(Side::A, "temperature", "-1"), "cmp-a-temperature")
                .starts_with("Policy a: ")
        );
        assert!(
            the_only_problem(side(Side::B, "top-p", "2"), "cmp-b-top-p").starts_with("Policy b: ")
        );
        assert!(the_only_problem(run(3, "1001"), "cmp-seeds").contains("1 to 1000"));
        assert!(the_only_problem(run(4, "5"), "cmp-depth").contains("1 to 4"));
        assert!(the_only_problem(side(Side::A, "engine", "gpt"), "cmp-a-engine").contains("gpt"));
        // Top-p 0 is llama.cpp's "keep the top token", and refused by the lab's rules.
        let mut form = CompareForm::default();
        knob(&mut form, Side::B, "top-p", "0");
        assert!(form.check().is_err());
        knob(&mut form, Side::B, "engine", "llama.cpp");
        assert_eq!(form.check().unwrap().b.policy.top_p, 0.0);
    }
}
