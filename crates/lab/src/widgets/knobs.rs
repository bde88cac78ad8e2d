//! The policy's knobs as a panel's fields, drawn from the policy crate's table
//! ([`policy::KNOBS`]): each knob's field id in a panel (`gen-top-k`), the texts a form
//! holds for them ([`KnobTexts`], in the table's order), reading those texts into a
//! [`Policy`] with every bad one named at its field ([`read_knobs`]), and the fields
//! themselves, the ones a panel does not show first grouped by stage under a "More
//! controls" disclosure ([`more_controls`]).
//!
//! A value is read by the policy crate's [`PolicyRequest`] and checked by its rule under the
//! form's engine ([`policy::Knob::check`]); this module only words what the lab's other
//! fields word the same way (a number that is not one).

use std::sync::{Mutex, PoisonError};

use leptos::prelude::*;
use policy::{
    Engine, Knob, KnobGroup, KnobKind, KnobProblem, Policy, PolicyRequest, KNOBS, KNOB_COUNT,
};

use crate::widgets::field::{Choice, Field, TextArea};
use crate::widgets::form::Problems;
use crate::widgets::number::{number, whole, FieldError};

/// Every knob's text in a form, in [`KNOBS`]' order.
pub type KnobTexts = [String; KNOB_COUNT];

/// Each knob's field id and label in a panel ([`knob_ids`], [`knob_labels`]).
pub type KnobNames = (
    &'static [&'static str; KNOB_COUNT],
    &'static [&'static str; KNOB_COUNT],
);

/// Names made once per prefix and leaked, as the fields' ids, keys and labels live as long
/// as the page: one list of them per kind of name.
type Names = &'static [&'static str; KNOB_COUNT];
type Made = Mutex<Vec<(&'static str, Names)>>;

/// The names `name` gives each knob for `prefix`, made at the first ask.
fn made(cache: &Made, prefix: &'static str, name: impl Fn(&Knob) -> String) -> Names {
    let mut made = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, names)) = made.iter().find(|(p, _)| *p == prefix) {
        return names;
    }
    let names: Names = Box::leak(Box::new(std::array::from_fn(|i| {
        &*Box::leak(name(&KNOBS[i]).into_boxed_str())
    })));
    made.push((prefix, names));
    names
}

/// Each knob's field id in the panel whose ids start with `prefix`: `{prefix}-{key}`, the
/// URL key's `_` written `-` (`gen-top-k`), or that alone for an empty prefix (`top-k`).
pub fn knob_ids(prefix: &'static str) -> Names {
    static IDS: Made = Mutex::new(Vec::new());
    made(&IDS, prefix, |knob| {
        let id = knob.key.replace('_', "-");
        match prefix {
            "" => id,
            _ => format!("{prefix}-{id}"),
        }
    })
}

/// Each knob's URL key in a panel whose keys start with `prefix`: `{prefix}_{key}`
/// (`cmp_a_top_k`), or the table's key itself for an empty prefix.
pub fn knob_keys(prefix: &'static str) -> Names {
    static KEYS: Made = Mutex::new(Vec::new());
    made(&KEYS, prefix, |knob| match prefix {
        "" => knob.key.to_string(),
        _ => format!("{prefix}_{}", knob.key),
    })
}

/// Each knob's label in a form that names a side by `prefix` (`a: `): `a: top-p` (the
/// label's first letter in lower case unless the word is an acronym: `a: XTC probability`),
/// or the table's label itself for an empty prefix.
pub fn knob_labels(prefix: &'static str) -> Names {
    static LABELS: Made = Mutex::new(Vec::new());
    made(&LABELS, prefix, |knob| match prefix {
        "" => knob.label.to_string(),
        _ => format!("{prefix}{}", lowered(knob.label)),
    })
}

/// `label` with its first letter in lower case, unless its first word is an acronym.
fn lowered(label: &str) -> String {
    let mut chars = label.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if !second.is_uppercase() => {
            first.to_lowercase().chain(label.chars().skip(1)).collect()
        }
        _ => label.to_string(),
    }
}

/// The position of the knob whose flag is `flag` in [`KNOBS`].
pub fn at(flag: &str) -> Option<usize> {
    KNOBS.iter().position(|k| k.flag == flag)
}

/// The table's defaults, with `overrides` (flag, text) in their place: a panel's own
/// starting values (Generate starts at top-k 40).
pub fn knob_defaults(overrides: &[(&str, &str)]) -> KnobTexts {
    std::array::from_fn(|i| {
        let knob = &KNOBS[i];
        overrides
            .iter()
            .find(|(flag, _)| *flag == knob.flag)
            .map_or(knob.default, |(_, text)| text)
            .to_string()
    })
}

/// Sets the knob whose URL key among `keys` is `key` from a URL's pair; false when no knob
/// has the key.
pub fn knob_from_url(
    texts: &mut KnobTexts,
    keys: &[&str; KNOB_COUNT],
    key: &str,
    value: &str,
) -> bool {
    match keys.iter().position(|k| *k == key) {
        Some(i) => {
            texts[i] = value.to_string();
            true
        }
        None => false,
    }
}

/// The URL's pairs, under `keys`, for the knobs whose text is not `defaults`'.
pub fn knob_pairs(
    texts: &KnobTexts,
    defaults: &KnobTexts,
    keys: &'static [&'static str; KNOB_COUNT],
) -> Vec<(&'static str, String)> {
    keys.iter()
        .zip(texts.iter().zip(defaults))
        .filter(|(_, (text, default))| text.trim() != default.trim())
        .map(|(key, (text, _))| (*key, text.trim().to_string()))
        .collect()
}

/// A form's policy in words, for a report: the temperature, then each knob whose text is
/// not the table's default (`temperature 0.7, top-p 0.8, engine vllm`). What
/// `policy::knob_words` says of a policy, read from the form's texts, so that the model
/// worker need not write a policy back as text.
pub fn knob_words(texts: &KnobTexts) -> String {
    KNOBS
        .iter()
        .zip(texts)
        .filter(|(knob, text)| knob.flag == "temperature" || text.trim() != knob.default)
        .map(|(knob, text)| match text.trim() {
            "" => format!("{} off", knob.flag),
            text => format!("{} {}", knob.flag, text.replace('\n', " / ")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A breaker or stop string as typed on one line: `\n` is a line break, `\t` a tab, `\\` a
/// backslash.
pub fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `text` as one line of a breaker or stop field: the inverse of [`unescape`].
pub fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// One knob's text alone, as its field shows it: a number field that holds no finite
/// number is worded as every number field of the lab is, and a value the policy's rule
/// refuses under `engine` as the rule words it.
fn knob_field(knob: &'static Knob, text: &str, engine: Engine) -> Result<(), FieldError> {
    let given = !text.trim().is_empty();
    match knob.kind {
        KnobKind::Number => drop(number(text, knob.label)?),
        KnobKind::OptionalNumber if given => drop(number(text, knob.label)?),
        KnobKind::Whole => drop(whole(text, knob.label)?),
        _ => {}
    }
    knob.check(text, engine).map_err(|e| match e.problem {
        KnobProblem::Policy(e) => FieldError::Policy(e),
        _ => FieldError::Knob(e),
    })
}

/// The texts as a policy request: each knob's text, a breaker per line.
fn request(texts: &KnobTexts) -> PolicyRequest {
    PolicyRequest::new(KNOBS.iter().zip(texts).flat_map(|(knob, text)| {
        let texts: Vec<String> = match knob.kind {
            KnobKind::Texts => text
                .lines()
                .filter(|l| !l.is_empty())
                .map(unescape)
                .collect(),
            _ => vec![text.clone()],
        };
        texts.into_iter().map(move |text| (knob, text))
    }))
}

/// The policy the texts give, with DRY's breakers as typed (the model worker finds them in
/// its vocabulary), at `ids` every field that is wrong: each knob alone under the form's
/// engine, then the rules between knobs (a breaker without DRY at the breakers' field; a
/// chain or an engine that refuses the rest at the chain's field, or the engine's).
/// `None` when any field is wrong. The vocabulary's bounds on ids are the worker's to check.
pub fn read_knobs(
    texts: &KnobTexts,
    ids: &'static [&'static str; KNOB_COUNT],
    problems: &mut Problems,
    wrap: &dyn Fn(FieldError) -> FieldError,
) -> Option<(Policy, Vec<String>)> {
    let engine_at = at("engine")?;
    let before = problems.len();
    let engine = match texts[engine_at].trim().parse() {
        Ok(engine) => engine,
        Err(e) => {
            problems.add(ids[engine_at], wrap(FieldError::Policy(e)).to_string());
            Engine::Lab
        }
    };
    for (i, knob) in KNOBS.iter().enumerate().filter(|(i, _)| *i != engine_at) {
        problems.field(ids[i], knob_field(knob, &texts[i], engine).map_err(wrap));
    }
    if problems.len() > before {
        return None;
    }
    let request = request(texts);
    let policy = match request.policy(policy::LAB_TEMPERATURE) {
        Ok(policy) => policy,
        Err(e) => {
            let i = at(e.knob.flag)?;
            problems.add(ids[i], wrap(FieldError::Knob(e)).to_string());
            return None;
        }
    };
    if let Err(e) = policy.validate(usize::MAX) {
        let chain = at("samplers")?;
        let i = if texts[chain].trim().is_empty() {
            engine_at
        } else {
            chain
        };
        problems.add(ids[i], wrap(FieldError::Policy(e)).to_string());
        return None;
    }
    let breakers = request
        .texts("dry-sequence-breaker")
        .map(str::to_string)
        .collect();
    Some((policy, breakers))
}

/// The engine's knob in [`KNOBS`].
const ENGINE: usize = policy::knob_index("engine");

/// What the form's engine takes for knob `i`, after its hint: " Under vllm: a temperature
/// from 0 to 2." ([`Engine::accepts`]); nothing where the engine's rule is only the kind.
fn range(i: usize, engine: RwSignal<String>) -> Signal<String> {
    let flag = KNOBS[i].flag;
    Signal::derive(move || {
        let engine: Option<Engine> = engine.with(|e| e.trim().parse().ok());
        engine
            .and_then(|e| e.accepts(flag).map(|words| format!(" Under {e}: {words}.")))
            .unwrap_or_default()
    })
}

/// One knob's field: a choice for an engine or an order, a text area for breakers (one per
/// line), a text field otherwise; its hint goes on with what the form's engine takes.
fn knob_view(
    i: usize,
    (id, label): (&'static str, &'static str),
    values: &[RwSignal<String>; KNOB_COUNT],
    problem: Signal<Option<String>>,
) -> AnyView {
    let knob = &KNOBS[i];
    let (value, more) = (values[i], range(i, values[ENGINE]));
    match knob.kind {
        KnobKind::Engine | KnobKind::Order => {
            let options = knob
                .choices()
                .into_iter()
                .map(|name| (name.to_string(), name.to_string()))
                .collect();
            let set = Callback::new(move |chosen| value.set(chosen));
            view! { <Choice id=id problem=problem label=label options=options value=value set=set/> }
                .into_any()
        }
        KnobKind::Texts => view! {
            <TextArea id=id problem=problem label=label hint=knob.hint value=value.into() set=value.write_only() more=more/>
        }
        .into_any(),
        kind => {
            let inputmode = match kind {
                KnobKind::Whole | KnobKind::Small => "numeric",
                KnobKind::Number | KnobKind::OptionalNumber => "decimal",
                _ => "text",
            };
            view! {
                <Field id=id problem=problem label=label hint=knob.hint value=value.into() set=value.write_only() inputmode=inputmode more=more/>
            }
            .into_any()
        }
    }
}

/// The fields of the knobs whose flags are `shown` (in that order), for a panel's first
/// row.
pub fn knob_fields(
    shown: &[&str],
    names: KnobNames,
    values: [RwSignal<String>; KNOB_COUNT],
    problem: impl Fn(&'static str) -> Signal<Option<String>>,
) -> impl IntoView {
    let (ids, labels) = names;
    shown
        .iter()
        .filter_map(|flag| at(flag))
        .map(|i| knob_view(i, (ids[i], labels[i]), &values, problem(ids[i])))
        .collect_view()
}

/// Every knob not in `shown`, grouped by stage, under a keyboard-reachable "More controls"
/// disclosure, open from the start when one of them is not at `defaults` (the URL set it).
pub fn more_controls(
    shown: &[&str],
    (ids, labels): KnobNames,
    values: [RwSignal<String>; KNOB_COUNT],
    defaults: &KnobTexts,
    problem: impl Fn(&'static str) -> Signal<Option<String>>,
) -> impl IntoView {
    let more = |i: &usize| !shown.contains(&KNOBS[*i].flag);
    let open = (0..KNOB_COUNT)
        .filter(more)
        .any(|i| values[i].get_untracked().trim() != defaults[i].trim());
    let groups = KnobGroup::ALL
        .into_iter()
        .map(|group| {
            let fields = (0..KNOB_COUNT)
                .filter(more)
                .filter(|&i| KNOBS[i].group == group)
                .map(|i| knob_view(i, (ids[i], labels[i]), &values, problem(ids[i])))
                .collect_view();
            view! {
                <fieldset class="knob-group">
                    <legend>{group.title()}</legend>
                    <div class="controls">{fields}</div>
                </fieldset>
            }
        })
        .collect_view();
    view! {
        <details class="more-controls" open=open>
            <summary>"More controls"</summary>
            {groups}
        </details>
    }
}

/// A knob's flag, a text for it, and the (flag, text) pairs it needs beside it.
#[cfg(test)]
pub type KnobSample = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// A value each knob takes that is not its default, with the knobs it needs beside it, in
/// [`KNOBS`]' order: what the panels' tests send from the URL to a job.
#[cfg(test)]
pub const SAMPLES: [KnobSample; KNOB_COUNT] = [
    ("engine", "hf", &[]),
    ("order", "temperature-last", &[]),
    ("samplers", "top_k;temperature", &[]),
    ("temperature", "0.5", &[]),
    ("dynatemp-range", "0.3", &[]),
    ("dynatemp-exp", "2", &[]),
    ("top-k", "7", &[]),
    ("top-p", "0.9", &[]),
    ("min-p", "0.05", &[]),
    ("min-keep", "2", &[]),
    ("typical", "0.9", &[]),
    ("epsilon-cutoff", "0.001", &[]),
    ("eta-cutoff", "0.001", &[]),
    ("top-n-sigma", "1.5", &[]),
    ("top-h", "0.4", &[]),
    ("xtc-probability", "0.5", &[]),
    ("xtc-threshold", "0.2", &[]),
    ("repetition-penalty", "1.2", &[]),
    ("frequency-penalty", "0.5", &[]),
    ("presence-penalty", "0.5", &[]),
    ("penalty-last-n", "32", &[("engine", "llama.cpp")]),
    ("no-repeat-ngram", "3", &[]),
    ("dry-multiplier", "0.8", &[]),
    ("dry-base", "2", &[]),
    ("dry-allowed-length", "3", &[]),
    ("dry-penalty-last-n", "64", &[]),
    ("dry-sequence-breaker", "\\n", &[("dry-multiplier", "0.8")]),
    ("mirostat", "2", &[("top-k", "0")]),
    ("mirostat-tau", "4", &[]),
    ("mirostat-eta", "0.2", &[]),
    ("forbid", "4,9", &[]),
    ("bias", "4:1.5", &[]),
    ("bad-words", "1,2;5", &[]),
    ("sequence-bias", "1,2:-3.5", &[]),
    ("eos", "3,5", &[]),
    ("min-new-tokens", "2", &[]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_keys_and_are_made_once() {
        let ids = knob_ids("gen");
        assert_eq!(ids[at("top-k").unwrap()], "gen-top-k");
        assert_eq!(ids[at("forbid").unwrap()], "gen-forbidden");
        assert!(std::ptr::eq(ids, knob_ids("gen")));
        assert_eq!(knob_ids("yt")[at("top-k").unwrap()], "yt-top-k");
        assert_eq!(
            knob_ids("")[at("xtc-probability").unwrap()],
            "xtc-probability"
        );
    }

    #[test]
    fn the_defaults_read_as_the_default_policy() {
        let mut problems = Problems::default();
        let (policy, breakers) =
            read_knobs(&knob_defaults(&[]), knob_ids("t"), &mut problems, &|e| e).unwrap();
        assert_eq!(
            policy,
            Policy {
                temperature: policy::LAB_TEMPERATURE,
                ..Policy::default()
            }
        );
        assert!(breakers.is_empty() && problems.is_empty());
    }

    #[test]
    fn each_bad_knob_is_named_at_its_field_and_rules_between_knobs_after() {
        let ids = knob_ids("t");
        let read = |edits: &[(&str, &str)]| {
            let mut problems = Problems::default();
            let read = read_knobs(&knob_defaults(edits), ids, &mut problems, &|e| e);
            (read, problems)
        };
        let (none, problems) = read(&[("top-k", "-1"), ("forbid", "4,,8"), ("engine", "tgi")]);
        assert!(none.is_none());
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["t-engine", "t-top-k", "t-forbidden"]);
        assert_eq!(
            problems.of("t-forbidden").unwrap(),
            "Forbidden ids must be token ids separated by commas, but \"4,,8\" has an empty entry."
        );
        // vLLM has no typical sampling: named at typical's field, under the form's engine.
        let (_, problems) = read(&[("engine", "vllm"), ("typical", "0.5")]);
        assert!(problems
            .of("t-typical")
            .unwrap()
            .contains("does not take typical-p 0.5"));
        // Breakers without DRY's multiplier: a rule between two knobs, at the breakers.
        let (_, problems) = read(&[("dry-sequence-breaker", "\\n")]);
        assert!(problems
            .of("t-dry-breakers")
            .unwrap()
            .contains("DRY multiplier"));
        let (read, problems) = read(&[
            ("dry-multiplier", "0.8"),
            ("dry-sequence-breaker", "\\n\n:"),
            ("eos", "3,5"),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        let (policy, breakers) = read.unwrap();
        assert_eq!(breakers, ["\n", ":"]);
        assert_eq!(policy.eos_ids().collect::<Vec<_>>(), [3, 5]);
    }

    #[test]
    fn a_form_s_words_name_the_temperature_and_each_knob_off_its_default() {
        let mut texts = knob_defaults(&[("top-p", "0.8"), ("engine", "vllm")]);
        assert_eq!(
            knob_words(&texts),
            "engine vllm, temperature 0.7, top-p 0.8"
        );
        texts[at("top-n-sigma").unwrap()] = "1.5".into();
        assert!(knob_words(&texts).ends_with(", top-n-sigma 1.5"));
    }

    #[test]
    fn only_the_knobs_off_their_defaults_go_to_the_url() {
        let defaults = knob_defaults(&[("top-k", "40")]);
        let mut texts = defaults.clone();
        let keys = knob_keys("");
        assert!(knob_from_url(&mut texts, keys, "xtc_probability", "0.5"));
        assert!(!knob_from_url(&mut texts, keys, "prompt", "x"));
        assert_eq!(
            knob_pairs(&texts, &defaults, keys),
            [("xtc_probability", "0.5".to_string())]
        );
        assert_eq!(knob_keys("cmp_a")[at("top-k").unwrap()], "cmp_a_top_k");
        let labels = knob_labels("a: ");
        assert_eq!(labels[at("top-p").unwrap()], "a: top-p");
        assert_eq!(labels[at("xtc-probability").unwrap()], "a: XTC probability");
        assert_eq!(knob_labels("")[at("top-p").unwrap()], "Top-p");
    }
}
