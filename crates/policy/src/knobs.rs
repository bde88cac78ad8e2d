//! Every knob of a decoding policy, once: the table [`KNOBS`] (each knob's command-line
//! flag, the lab's URL key, a label, a one-line hint, the value's kind, its stage and its
//! default), and the one reader of a policy from key/value pairs ([`PolicyRequest`]).
//!
//! `decode-lab` builds its policy flags from the table and hands what was typed over as
//! pairs; the lab's forms are drawn from the table and hand over their fields the same way.
//! A value that cannot be read is a [`KnobError`] naming the knob and the text. Whether the
//! values make a policy an engine accepts is [`Policy::validate`]'s rule (it needs the
//! vocabulary), which [`Knob::check`] applies to one knob alone, so that a form can name the
//! field that is wrong.
//!
//! ```
//! use policy::{Knob, PolicyRequest};
//! let top_k = Knob::named("top-k").unwrap();
//! let request = PolicyRequest::new([(top_k, "40".to_string())]);
//! assert_eq!(request.policy(policy::LAB_TEMPERATURE).unwrap().top_k, 40);
//! let bad = PolicyRequest::new([(top_k, "forty".to_string())]).policy(1.0).unwrap_err();
//! assert_eq!(bad.to_string(), "Top-k must be a whole number of at least 0, but it is \"forty\".");
//! ```

use std::fmt;

use crate::chain::{samplers_label, Sampler};
use crate::Shortest;
use crate::{
    parse_bad_words, parse_logit_bias, parse_samplers, parse_sequence_bias, Engine, Policy,
    PolicyError, StageOrder,
};

/// What a knob's value is, which tells a command line and a form how to take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A finite number.
    Number,
    /// A number, or nothing for off.
    OptionalNumber,
    /// A whole number of at least 0.
    Whole,
    /// A whole number from 0 to 255.
    Small,
    /// A whole number, which may be negative.
    Signed,
    /// A whole number, which may be negative, or nothing for the engine's default.
    OptionalSigned,
    /// Token ids, comma-separated.
    Ids,
    /// `id:bias` pairs, comma-separated.
    Bias,
    /// Token-id sequences: ids separated by `,`, sequences by `;`.
    Sequences,
    /// Sequences with a bias each: `1,2:-3.5;7:1.0`.
    SequenceBias,
    /// One of [`Engine::ALL`] by name.
    Engine,
    /// One of [`StageOrder::ALL`] by name.
    Order,
    /// Samplers by llama.cpp's names, separated by `;` or `,`.
    Chain,
    /// Text given any number of times (a command line repeats the flag).
    Texts,
}

/// The stage a knob belongs to, which groups it in a form and in `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobGroup {
    /// The engine, the chain's order, temperature and the classic truncations.
    Sampling,
    /// Typical, ε, η, top-nσ, top-H and XTC.
    Truncation,
    /// The repetition, frequency and presence penalties and n-gram bans.
    Penalties,
    /// DRY.
    Dry,
    /// Mirostat 2.0.
    Mirostat,
    /// Forbidden ids, biases, bad words and the end of sequence.
    Constraints,
}

impl KnobGroup {
    /// Every stage, in the order a form shows them.
    pub const ALL: [KnobGroup; 6] = [
        KnobGroup::Sampling,
        KnobGroup::Truncation,
        KnobGroup::Penalties,
        KnobGroup::Dry,
        KnobGroup::Mirostat,
        KnobGroup::Constraints,
    ];

    /// What a form's group calls it.
    pub fn title(self) -> &'static str {
        match self {
            KnobGroup::Sampling => "Engine, order and sampling",
            KnobGroup::Truncation => "Typical, ε, η, top-nσ, top-H and XTC",
            KnobGroup::Penalties => "Penalties",
            KnobGroup::Dry => "DRY (repetition of sequences)",
            KnobGroup::Mirostat => "Mirostat",
            KnobGroup::Constraints => "Constraints and end of sequence",
        }
    }
}

/// One knob of a policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knob {
    /// `decode-lab`'s flag (`--top-k`), and the name a [`PolicyRequest`] pair goes by.
    pub flag: &'static str,
    /// The lab's URL key (`top_k`).
    pub key: &'static str,
    pub label: &'static str,
    /// One sentence on what it does (the CLI's help, a field's hint).
    pub hint: &'static str,
    /// The value's form in a usage line; empty for one of a choice's names.
    pub value_name: &'static str,
    pub kind: KnobKind,
    pub group: KnobGroup,
    /// The value a policy holds when the knob is not given, as a form writes it; empty
    /// where nothing is the default. The temperature's is the lab's runs'
    /// ([`LAB_TEMPERATURE`](crate::LAB_TEMPERATURE)): `pipeline` reads 1.
    pub default: &'static str,
    /// Flags a command line refuses beside this one.
    pub conflicts: &'static [&'static str],
}

const fn knob(
    flag: &'static str,
    key: &'static str,
    label: &'static str,
    value_name: &'static str,
    kind: KnobKind,
    default: &'static str,
    hint: &'static str,
) -> Knob {
    Knob {
        flag,
        key,
        label,
        hint,
        value_name,
        kind,
        group: KnobGroup::Sampling,
        default,
        conflicts: &[],
    }
}

const fn at(group: KnobGroup, knob: Knob) -> Knob {
    Knob { group, ..knob }
}

use KnobGroup::*;
use KnobKind::*;

/// How many knobs a policy has.
pub const KNOB_COUNT: usize = 36;

/// Every knob of a policy, stage by stage.
pub const KNOBS: [Knob; KNOB_COUNT] = [
    knob("engine", "engine", "Engine", "", KnobKind::Engine, "lab",
        "Whose semantics every stage follows (lab, hf, llama.cpp or vllm), and its order; a preset switches no stage on."),
    Knob {
        conflicts: &["samplers", "engine"],
        ..knob("order", "order", "Stage order", "", Order, "hf",
            "hf: temperature before top-k, top-p and min-p; temperature-last: after them, as llama.cpp's default chain.")
    },
    Knob {
        conflicts: &["order"],
        ..knob("samplers", "samplers", "Sampler chain", "LIST", Chain, "",
            "The samplers in the order they run, by llama.cpp's names (penalties, top_n_sigma, top_h, top_k, typ_p, top_p, min_p, epsilon, eta, xtc, temperature); every set knob must be listed.")
    },
    knob("temperature", "temperature", "Temperature", "T", Number, crate::LAB_TEMPERATURE_TEXT,
        "Divides the logits: 0 is greedy (unless the temperature is dynamic), higher flattens."),
    knob("dynatemp-range", "dynatemp_range", "Dynamic temperature range", "R", Number, "0",
        "llama.cpp's dynamic temperature: the temperature moves from max(0, T − R) toward T + R as the entropy of the candidates rises; 0 is off."),
    knob("dynatemp-exp", "dynatemp_exp", "Dynamic temperature exponent", "E", Number, "1",
        "The normalised entropy is raised to this power before it sets the dynamic temperature."),
    knob("top-k", "top_k", "Top-k", "K", Whole, "0", "Keep the k highest; 0 is off."),
    knob("top-p", "top_p", "Top-p", "P", Number, "1",
        "Keep the smallest set with this much probability; 1 is off."),
    knob("min-p", "min_p", "Min-p", "P", Number, "0",
        "Keep tokens at least this fraction of the top probability; 0 is off."),
    knob("min-keep", "min_keep", "Min keep", "N", Whole, "0",
        "Each truncating stage the engine applies it to keeps at least N tokens (Hugging Face's min_tokens_to_keep; 0 and 1 are off)."),
    at(Truncation, knob("typical", "typical", "Typical-p", "P", Number, "1",
        "Locally typical sampling's mass (sampler typ_p); 1 is off.")),
    at(Truncation, knob("epsilon-cutoff", "epsilon", "ε-cutoff", "EPS", Number, "0",
        "Remove tokens below this probability (sampler epsilon); 0 is off.")),
    at(Truncation, knob("eta-cutoff", "eta", "η-cutoff", "EPS", Number, "0",
        "Remove tokens below min(ε, √ε·e^−H) (sampler eta); 0 is off.")),
    at(Truncation, knob("top-n-sigma", "top_n_sigma", "Top-nσ", "N", OptionalNumber, "",
        "Remove tokens more than N standard deviations of the logits below the largest; empty is off.")),
    at(Truncation, knob("top-h", "top_h", "Top-H", "H", OptionalNumber, "",
        "Hugging Face's top-H: of the 100 most probable, keep the top while their entropy stays within H of the hundred's (sampler top_h); empty is off.")),
    at(Truncation, knob("xtc-probability", "xtc_probability", "XTC probability", "P", Number, "0",
        "The chance that a step excludes its top choices (drawn from the run's seeded stream); 0 is off.")),
    at(Truncation, knob("xtc-threshold", "xtc_threshold", "XTC threshold", "P", Number, "0.1",
        "The probability a token needs to count as a top choice for XTC.")),
    at(Penalties, knob("repetition-penalty", "repetition_penalty", "Repetition penalty", "R", Number, "1",
        "Divides the logits of tokens already in the text; 1 is off.")),
    at(Penalties, knob("frequency-penalty", "frequency_penalty", "Frequency penalty", "F", Number, "0",
        "Subtracted once per earlier occurrence in the output (OpenAI, vLLM); 0 is off.")),
    at(Penalties, knob("presence-penalty", "presence_penalty", "Presence penalty", "F", Number, "0",
        "Subtracted once from every token the output holds (OpenAI, vLLM); 0 is off.")),
    at(Penalties, knob("penalty-last-n", "penalty_last_n", "Penalty window", "N", OptionalSigned, "",
        "llama.cpp's window: the last N tokens of prompt and output are penalised (-1 all, 0 none; empty is llama.cpp's 64).")),
    at(Penalties, knob("no-repeat-ngram", "no_repeat_ngram", "No-repeat n-gram", "N", Whole, "0",
        "Ban any token that would repeat an n-gram of this size; 0 is off.")),
    at(Dry, knob("dry-multiplier", "dry_multiplier", "DRY multiplier", "M", Number, "0",
        "The penalty for extending a repetition one token past the allowed length (sampler dry); 0 is off.")),
    at(Dry, knob("dry-base", "dry_base", "DRY base", "B", Number, "1.75",
        "Each further token of a repetition multiplies its penalty by this.")),
    at(Dry, knob("dry-allowed-length", "dry_allowed_length", "DRY allowed length", "N", Whole, "2",
        "Repetitions up to this long are free.")),
    at(Dry, knob("dry-penalty-last-n", "dry_penalty_last_n", "DRY window", "N", Signed, "-1",
        "The last N tokens of prompt and output DRY reads (-1 all; 0 off).")),
    at(Dry, knob("dry-sequence-breaker", "dry_breakers", "DRY sequence breakers", "BREAKER", Texts, "",
        "Text that ends a repetition DRY follows, found in the vocabulary as llama.cpp finds it (its \\n, :, \" and * when none is given; none for none).")),
    at(Mirostat, knob("mirostat", "mirostat", "Mirostat", "VERSION", Small, "0",
        "2 for mirostat 2.0, which replaces the chain by temperature and its own truncation, its μ carried from step to step; 0 is off.")),
    at(Mirostat, knob("mirostat-tau", "mirostat_tau", "Mirostat τ", "TAU", Number, "5",
        "Mirostat's target surprise, in bits (llama.cpp's --mirostat-ent).")),
    at(Mirostat, knob("mirostat-eta", "mirostat_eta", "Mirostat η", "ETA", Number, "0.1",
        "Mirostat's learning rate (llama.cpp's --mirostat-lr).")),
    at(Constraints, knob("forbid", "forbidden", "Forbidden ids", "IDS", Ids, "",
        "Token ids that can never be chosen, comma-separated.")),
    at(Constraints, knob("bias", "bias", "Logit bias", "ID:BIAS,...", Bias, "",
        "Added to a token's logit: id:bias pairs, comma-separated.")),
    at(Constraints, knob("bad-words", "bad_words", "Bad words", "SEQUENCES", Sequences, "",
        "Token sequences the run must never complete (Hugging Face's bad words): ids separated by , and sequences by ;.")),
    at(Constraints, knob("sequence-bias", "sequence_bias", "Sequence bias", "SEQUENCES", SequenceBias, "",
        "Added to a sequence's last token when the text ends with the rest of it (Hugging Face's sequence bias): 1,2:-3.5;7:1.0.")),
    at(Constraints, knob("eos", "eos", "End-of-sequence ids", "IDS", Ids, "",
        "Token ids that end a run, comma-separated, all masked until the minimum of new tokens (empty: the tokenizer's end of text).")),
    at(Constraints, knob("min-new-tokens", "min_new_tokens", "Min new tokens", "N", Whole, "0",
        "The end-of-sequence ids are masked until this many tokens are generated.")),
];

/// The position in [`KNOBS`] of the knob whose flag is `flag`, for a constant: evaluated
/// at compile time, a flag the table lacks stops the build.
///
/// ```
/// const TOP_K: usize = policy::knob_index("top-k");
/// assert_eq!(policy::KNOBS[TOP_K].key, "top_k");
/// ```
pub const fn knob_index(flag: &str) -> usize {
    let mut i = 0;
    while i < KNOB_COUNT {
        let (a, b) = (KNOBS[i].flag.as_bytes(), flag.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("no knob of the policy has this flag")
}

/// Why a knob's text was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum KnobProblem {
    /// Not a finite number.
    Number,
    /// Not a whole number of at least 0 (at most 255 for a [`KnobKind::Small`]).
    Whole,
    /// Not a whole number.
    Signed,
    /// One entry of a list of ids is not a token id.
    Id { entry: String },
    /// A list with an empty entry (`4,,8`, a trailing comma).
    EmptyEntry,
    /// A value the policy's own rule refuses (a range, an engine's rule, a list's form).
    Policy(PolicyError),
    /// DRY's sequence breakers without its multiplier, which leaves DRY off.
    BreakersWithoutDry,
    /// A knob the reader has no policy field for: a flag in [`KNOBS`] spelled otherwise
    /// than in [`Knob::apply`].
    NoField,
}

/// A knob's text that cannot be read, or that the policy refuses.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobError {
    pub knob: &'static Knob,
    pub text: String,
    pub problem: KnobProblem,
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (label, text) = (self.knob.label, &self.text);
        match &self.problem {
            KnobProblem::Number => write!(f, "{label} must be a number, but it is \"{text}\"."),
            KnobProblem::Whole if self.knob.kind == Small => write!(
                f,
                "{label} must be a whole number from 0 to 255, but it is \"{text}\"."
            ),
            KnobProblem::Whole => write!(
                f,
                "{label} must be a whole number of at least 0, but it is \"{text}\"."
            ),
            KnobProblem::Signed => {
                write!(f, "{label} must be a whole number, but it is \"{text}\".")
            }
            KnobProblem::Id { entry } => write!(
                f,
                "{label} must be token ids separated by commas, but \"{entry}\" in \"{text}\" is not a token id."
            ),
            KnobProblem::EmptyEntry => write!(
                f,
                "{label} must be token ids separated by commas, but \"{text}\" has an empty entry."
            ),
            KnobProblem::Policy(e) => write!(f, "{label} \"{text}\": {e}."),
            KnobProblem::BreakersWithoutDry => write!(
                f,
                "{label} need a DRY multiplier: without it DRY is off, but it is 0."
            ),
            KnobProblem::NoField => write!(
                f,
                "{label} (--{}) has no field in this version's policy, so \"{text}\" is not read.",
                self.knob.flag
            ),
        }
    }
}

/// The policy's error is part of the message, so it is not also a source.
impl std::error::Error for KnobError {}

fn ids(text: &str) -> Result<Vec<u32>, KnobProblem> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(str::trim)
        .map(|entry| match entry {
            "" => Err(KnobProblem::EmptyEntry),
            entry => entry.parse().map_err(|_| KnobProblem::Id {
                entry: entry.to_string(),
            }),
        })
        .collect()
}

/// Any number a float holds, NaN and the infinities included: the policy's rule for the
/// knob names such a value with the reason it is refused.
fn number(text: &str) -> Result<f64, KnobProblem> {
    text.parse::<f64>().map_err(|_| KnobProblem::Number)
}

fn whole(text: &str) -> Result<usize, KnobProblem> {
    text.parse().map_err(|_| KnobProblem::Whole)
}

fn signed(text: &str) -> Result<i64, KnobProblem> {
    text.parse().map_err(|_| KnobProblem::Signed)
}

impl Knob {
    /// The knob whose flag is `flag` (`top-k`).
    pub fn named(flag: &str) -> Option<&'static Knob> {
        KNOBS.iter().find(|k| k.flag == flag)
    }

    /// The knob whose lab URL key is `key` (`top_k`).
    pub fn at_url(key: &str) -> Option<&'static Knob> {
        KNOBS.iter().find(|k| k.key == key)
    }

    /// What each engine takes for this knob where its rule says more than the knob's kind
    /// ([`Engine::accepts`]): `(engine, words)` in [`Engine::ALL`]'s order.
    pub fn ranges(&self) -> Vec<(Engine, &'static str)> {
        Engine::ALL
            .into_iter()
            .filter_map(|engine| engine.accepts(self.flag).map(|words| (engine, words)))
            .collect()
    }

    /// The names a choice takes (an engine's, an order's); none for other kinds.
    pub fn choices(&self) -> Vec<&'static str> {
        match self.kind {
            KnobKind::Engine => Engine::ALL.map(Engine::name).to_vec(),
            Order => StageOrder::ALL.map(StageOrder::name).to_vec(),
            _ => Vec::new(),
        }
    }

    /// Reads `text` into `policy`'s field. Empty text is the knob's off value where its
    /// kind has one (a list, an optional number); [`KnobKind::Texts`] is the caller's to
    /// keep (a command finds breakers in its vocabulary, or reads ids).
    pub fn apply(&'static self, text: &str, policy: &mut Policy) -> Result<(), KnobError> {
        let t = text.trim();
        self.read(t, policy).map_err(|problem| KnobError {
            knob: self,
            text: t.to_string(),
            problem,
        })
    }

    fn read(&self, t: &str, p: &mut Policy) -> Result<(), KnobProblem> {
        let optional = (!t.is_empty()).then_some(t);
        match self.flag {
            "engine" => p.engine = t.parse().map_err(KnobProblem::Policy)?,
            "order" => p.order = t.parse().map_err(KnobProblem::Policy)?,
            "samplers" if t.is_empty() => p.samplers = None,
            "samplers" => p.samplers = Some(parse_samplers(t).map_err(KnobProblem::Policy)?),
            "temperature" => p.temperature = number(t)?,
            "top-k" => p.top_k = whole(t)?,
            "top-p" => p.top_p = number(t)?,
            "min-p" => p.min_p = number(t)?,
            "min-keep" => p.min_keep = whole(t)?,
            "typical" => p.typical_p = number(t)?,
            "epsilon-cutoff" => p.epsilon_cutoff = number(t)?,
            "eta-cutoff" => p.eta_cutoff = number(t)?,
            "top-n-sigma" => p.top_n_sigma = optional.map(number).transpose()?,
            "top-h" => p.top_h = optional.map(number).transpose()?,
            "dynatemp-range" => p.dynatemp_range = number(t)?,
            "dynatemp-exp" => p.dynatemp_exponent = number(t)?,
            "xtc-probability" => p.xtc_probability = number(t)?,
            "xtc-threshold" => p.xtc_threshold = number(t)?,
            "repetition-penalty" => p.repetition_penalty = number(t)?,
            "frequency-penalty" => p.frequency_penalty = number(t)?,
            "presence-penalty" => p.presence_penalty = number(t)?,
            "penalty-last-n" => p.penalty_last_n = optional.map(signed).transpose()?,
            "no-repeat-ngram" => p.no_repeat_ngram = whole(t)?,
            "dry-multiplier" => p.dry_multiplier = number(t)?,
            "dry-base" => p.dry_base = number(t)?,
            "dry-allowed-length" => p.dry_allowed_length = whole(t)?,
            "dry-penalty-last-n" => p.dry_penalty_last_n = signed(t)?,
            "mirostat" => p.mirostat = t.parse().map_err(|_| KnobProblem::Whole)?,
            "mirostat-tau" => p.mirostat_tau = number(t)?,
            "mirostat-eta" => p.mirostat_eta = number(t)?,
            "forbid" => p.forbidden = ids(t)?,
            "bias" if t.is_empty() => p.logit_bias.clear(),
            "bias" => p.logit_bias = parse_logit_bias(t).map_err(KnobProblem::Policy)?,
            "bad-words" if t.is_empty() => p.bad_words.clear(),
            "bad-words" => p.bad_words = parse_bad_words(t).map_err(KnobProblem::Policy)?,
            "sequence-bias" if t.is_empty() => p.sequence_bias.clear(),
            "sequence-bias" => {
                p.sequence_bias = parse_sequence_bias(t).map_err(KnobProblem::Policy)?
            }
            "eos" => {
                let eos = ids(t)?;
                p.eos_token = eos.first().copied();
                p.extra_eos_tokens = eos.get(1..).unwrap_or_default().to_vec();
            }
            "min-new-tokens" => p.min_new_tokens = whole(t)?,
            // Breakers are text until a vocabulary finds them.
            "dry-sequence-breaker" => {}
            // A flag of the table this reader has no field for (the table test reads each).
            _ => return Err(KnobProblem::NoField),
        }
        Ok(())
    }

    /// The knob's text in `policy` ([`text`](Self::text)), or `None` where it is the
    /// default policy's: a knob the policy leaves alone.
    pub fn changed(&self, policy: &Policy) -> Option<String> {
        let text = self.text(policy);
        (text != self.text(&Policy::default())).then_some(text)
    }

    /// The knob's value in `policy` as a form writes it, which [`apply`](Self::apply) reads
    /// back to the same value: the shortest number that round-trips, ids comma-separated,
    /// sequences `;`-separated. DRY's breakers are token ids in a policy, no longer text:
    /// empty.
    pub fn text(&self, p: &Policy) -> String {
        let ids = |ids: &mut dyn Iterator<Item = u32>| {
            ids.map(|id| id.to_string()).collect::<Vec<_>>().join(",")
        };
        let number = |x: f64| Shortest(x).to_string();
        match self.flag {
            "engine" => p.engine.name().to_string(),
            "order" => p.order.name().to_string(),
            "samplers" => p
                .samplers
                .as_deref()
                .map(samplers_label)
                .unwrap_or_default(),
            "temperature" => number(p.temperature),
            "top-k" => p.top_k.to_string(),
            "top-p" => number(p.top_p),
            "min-p" => number(p.min_p),
            "min-keep" => p.min_keep.to_string(),
            "typical" => number(p.typical_p),
            "epsilon-cutoff" => number(p.epsilon_cutoff),
            "eta-cutoff" => number(p.eta_cutoff),
            "top-n-sigma" => p.top_n_sigma.map(number).unwrap_or_default(),
            "top-h" => p.top_h.map(number).unwrap_or_default(),
            "dynatemp-range" => number(p.dynatemp_range),
            "dynatemp-exp" => number(p.dynatemp_exponent),
            "xtc-probability" => number(p.xtc_probability),
            "xtc-threshold" => number(p.xtc_threshold),
            "repetition-penalty" => number(p.repetition_penalty),
            "frequency-penalty" => number(p.frequency_penalty),
            "presence-penalty" => number(p.presence_penalty),
            "penalty-last-n" => p.penalty_last_n.map(|n| n.to_string()).unwrap_or_default(),
            "no-repeat-ngram" => p.no_repeat_ngram.to_string(),
            "dry-multiplier" => number(p.dry_multiplier),
            "dry-base" => number(p.dry_base),
            "dry-allowed-length" => p.dry_allowed_length.to_string(),
            "dry-penalty-last-n" => p.dry_penalty_last_n.to_string(),
            "mirostat" => p.mirostat.to_string(),
            "mirostat-tau" => number(p.mirostat_tau),
            "mirostat-eta" => number(p.mirostat_eta),
            "forbid" => ids(&mut p.forbidden.iter().copied()),
            "bias" => p
                .logit_bias
                .iter()
                .map(|&(id, bias)| format!("{id}:{}", number(bias)))
                .collect::<Vec<_>>()
                .join(","),
            "bad-words" => p
                .bad_words
                .iter()
                .map(|words| ids(&mut words.iter().copied()))
                .collect::<Vec<_>>()
                .join(";"),
            "sequence-bias" => p
                .sequence_bias
                .iter()
                .map(|(words, bias)| {
                    format!("{}:{}", ids(&mut words.iter().copied()), number(*bias))
                })
                .collect::<Vec<_>>()
                .join(";"),
            "eos" => ids(&mut p.eos_ids()),
            "min-new-tokens" => p.min_new_tokens.to_string(),
            _ => String::new(),
        }
    }

    /// Reads `text` alone into a policy of `engine`, and checks it as that engine would
    /// ([`Policy::validate`] on an unbounded vocabulary): what a form shows at this knob's
    /// field. Rules between knobs and a vocabulary's bounds are checked with the whole
    /// policy.
    pub fn check(&'static self, text: &str, engine: Engine) -> Result<(), KnobError> {
        let mut policy = Policy {
            engine,
            ..Policy::default()
        };
        self.apply(text, &mut policy)?;
        policy.validate(usize::MAX).map_err(|e| KnobError {
            knob: self,
            text: text.trim().to_string(),
            problem: KnobProblem::Policy(e),
        })
    }
}

/// The knobs of `policy` that differ from the default policy's, in words
/// (`temperature 0.7, top-k 40, engine llama.cpp`), in [`KNOBS`]' order; `the defaults`
/// when none does. What a report calls a policy.
///
/// ```
/// let policy = policy::Policy { top_k: 40, ..policy::Policy::default() };
/// assert_eq!(policy::knob_words(&policy), "top-k 40");
/// ```
pub fn knob_words(policy: &Policy) -> String {
    let words: Vec<String> = KNOBS
        .iter()
        .filter_map(|knob| {
            knob.changed(policy).map(|text| match text.as_str() {
                "" => format!("{} off", knob.flag),
                _ => format!("{} {text}", knob.flag),
            })
        })
        .collect();
    match words.is_empty() {
        true => "the defaults".to_string(),
        false => words.join(", "),
    }
}

/// A policy as its knobs' texts: each knob given, as typed (a command line's flags, a
/// form's fields), read into a [`Policy`] by [`policy`](Self::policy).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyRequest {
    pairs: Vec<(&'static Knob, String)>,
}

impl PolicyRequest {
    pub fn new(pairs: impl IntoIterator<Item = (&'static Knob, String)>) -> PolicyRequest {
        PolicyRequest {
            pairs: pairs.into_iter().collect(),
        }
    }

    /// Whether the knob named `flag` was given.
    pub fn given(&self, flag: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k.flag == flag)
    }

    /// Each knob given with its text, in order.
    pub fn pairs(&self) -> &[(&'static Knob, String)] {
        &self.pairs
    }

    /// Whether no knob was given.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The texts given for the knob named `flag`, in order (a repeated knob's several).
    pub fn texts(&self, flag: &str) -> impl Iterator<Item = &str> + '_ {
        let flag = flag.to_string();
        self.pairs
            .iter()
            .filter(move |(k, _)| k.flag == flag)
            .map(|(_, text)| text.as_str())
    }

    /// The policy: every knob given read into its field, the rest at their defaults, and
    /// the temperature `default_temperature` when not given, 1 when a sampler chain is
    /// given without temperature (llama.cpp's chain without its stage does not scale).
    /// The first knob that cannot be read is the error, and DRY's breakers without its
    /// multiplier one; the rules of
    /// [`Policy::validate`] are checked where the vocabulary is known.
    pub fn policy(&self, default_temperature: f64) -> Result<Policy, KnobError> {
        let mut policy = Policy::default();
        for (knob, text) in &self.pairs {
            knob.apply(text, &mut policy)?;
        }
        if let Some((knob, text)) = self.pairs.iter().find(|(k, _)| k.kind == Texts) {
            if policy.dry_multiplier == 0.0 {
                return Err(KnobError {
                    knob,
                    text: text.clone(),
                    problem: KnobProblem::BreakersWithoutDry,
                });
            }
        }
        if !self.given("temperature") {
            policy.temperature = match &policy.samplers {
                Some(chain) if !chain.contains(&Sampler::Temperature) => 1.0,
                _ => default_temperature,
            };
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_knob_is_named_once_and_its_default_is_the_policy_default() {
        for (i, knob) in KNOBS.iter().enumerate() {
            assert!(KNOBS[..i]
                .iter()
                .all(|k| k.flag != knob.flag && k.key != knob.key));
            assert_eq!(Knob::named(knob.flag).map(|k| k.key), Some(knob.key));
            assert_eq!(Knob::at_url(knob.key).map(|k| k.flag), Some(knob.flag));
        }
        // Each knob's reader knows its flag: a flag spelled otherwise than the reader's
        // would be refused here, not dropped.
        for knob in &KNOBS {
            let mut policy = Policy::default();
            assert_eq!(
                knob.apply(knob.default, &mut policy),
                Ok(()),
                "{}",
                knob.flag
            );
        }
        // Breakers given at all need DRY on; their default is none given.
        let given = KNOBS.iter().filter(|k| k.kind != KnobKind::Texts);
        let defaults = PolicyRequest::new(given.map(|k| (k, k.default.to_string())));
        let policy = defaults.policy(1.0).unwrap();
        assert_eq!(
            policy,
            Policy {
                // The table's default temperature is the lab's runs'.
                temperature: crate::LAB_TEMPERATURE,
                ..Policy::default()
            }
        );
    }

    #[test]
    fn each_kind_reads_its_texts_and_names_what_it_refuses() {
        let read = |flag: &str, text: &str| {
            let mut policy = Policy::default();
            Knob::named(flag)
                .unwrap()
                .apply(text, &mut policy)
                .map(|()| policy)
        };
        assert_eq!(
            read("eos", "3, 5,9").unwrap().eos_ids().collect::<Vec<_>>(),
            [3, 5, 9]
        );
        assert_eq!(read("top-n-sigma", "").unwrap().top_n_sigma, None);
        assert_eq!(read("top-n-sigma", "1.5").unwrap().top_n_sigma, Some(1.5));
        assert_eq!(
            read("penalty-last-n", "-1").unwrap().penalty_last_n,
            Some(-1)
        );
        assert_eq!(
            read("engine", "llama.cpp").unwrap().engine,
            Engine::LlamaCpp
        );
        assert_eq!(
            read("forbid", "4,,8").unwrap_err().to_string(),
            "Forbidden ids must be token ids separated by commas, but \"4,,8\" has an empty entry."
        );
        assert_eq!(
            read("forbid", "4,x").unwrap_err().to_string(),
            "Forbidden ids must be token ids separated by commas, but \"x\" in \"4,x\" is not a token id."
        );
        assert_eq!(
            read("temperature", "hot").unwrap_err().to_string(),
            "Temperature must be a number, but it is \"hot\"."
        );
        assert_eq!(
            read("mirostat", "300").unwrap_err().to_string(),
            "Mirostat must be a whole number from 0 to 255, but it is \"300\"."
        );
        assert_eq!(
            read("dry-penalty-last-n", "1.5").unwrap_err().to_string(),
            "DRY window must be a whole number, but it is \"1.5\"."
        );
        let engine = read("engine", "tgi").unwrap_err();
        assert!(matches!(
            engine.problem,
            KnobProblem::Policy(PolicyError::UnknownEngine { .. })
        ));
    }

    #[test]
    fn a_knob_is_checked_under_its_engines_rule() {
        let top_p = Knob::named("top-p").unwrap();
        // llama.cpp keeps the top token at top-p 0; vLLM refuses it (engine.rs's table).
        assert!(top_p.check("0", Engine::LlamaCpp).is_ok());
        let refused = top_p.check("0", Engine::Vllm).unwrap_err();
        assert!(matches!(
            refused.problem,
            KnobProblem::Policy(PolicyError::EngineRefuses { .. })
        ));
        let window = Knob::named("penalty-last-n").unwrap();
        assert!(window.check("32", Engine::LlamaCpp).is_ok());
        assert!(window.check("32", Engine::Hf).is_err());
    }

    /// Each engine's stated range for a knob is the one its rule refuses a value with: some
    /// value of the knob is refused under the engine, in those words.
    #[test]
    fn each_engine_s_stated_range_is_the_words_of_its_refusal() {
        let candidates: &[&str] = &[
            "-3", "-1", "0", "0.5", "1", "1.5", "2", "2.5", "3", "300", "NaN", "inf", "-inf",
            "1,2", "1,2:-3.5",
        ];
        let mut stated = 0;
        for engine in Engine::ALL {
            for knob in &KNOBS {
                let Some(accepts) = engine.accepts(knob.flag) else {
                    continue;
                };
                stated += 1;
                let refusals: Vec<String> = candidates
                    .iter()
                    .filter_map(|text| knob.check(text, engine).err())
                    .filter(|e| matches!(e.problem, KnobProblem::Policy(_)))
                    .map(|e| e.to_string())
                    .collect();
                assert!(
                    refusals.iter().any(|r| r.contains(accepts)),
                    "{engine} {}: {accepts:?} is in none of {refusals:?}",
                    knob.flag
                );
            }
        }
        assert!(stated > 40, "{stated}");
    }

    /// Each knob's text reads back to the value it was written from: the table's defaults,
    /// and a value off its default for each.
    #[test]
    fn a_knob_s_text_reads_back_to_its_value() {
        let samples = [
            ("engine", "llama.cpp"),
            ("order", "temperature-last"),
            ("samplers", "top_k;temperature"),
            ("temperature", "0.35"),
            ("top-k", "7"),
            ("top-p", "0.9"),
            ("min-p", "0.05"),
            ("min-keep", "2"),
            ("typical", "0.9"),
            ("epsilon-cutoff", "3e-4"),
            ("eta-cutoff", "0.001"),
            ("top-n-sigma", "1.5"),
            ("top-h", "0.4"),
            ("dynatemp-range", "0.5"),
            ("dynatemp-exp", "2"),
            ("xtc-probability", "0.5"),
            ("xtc-threshold", "0.2"),
            ("repetition-penalty", "1.2"),
            ("frequency-penalty", "-0.5"),
            ("presence-penalty", "0.5"),
            ("penalty-last-n", "-1"),
            ("no-repeat-ngram", "3"),
            ("dry-multiplier", "0.8"),
            ("dry-base", "2"),
            ("dry-allowed-length", "3"),
            ("dry-penalty-last-n", "64"),
            ("mirostat", "2"),
            ("mirostat-tau", "4"),
            ("mirostat-eta", "0.2"),
            ("forbid", "4,9"),
            ("bias", "4:1.5,2:-1e-7"),
            ("bad-words", "1,2;5"),
            ("sequence-bias", "1,2:-3.5;7:1"),
            ("eos", "3,5"),
            ("min-new-tokens", "2"),
        ];
        for (flag, text) in samples {
            let knob = Knob::named(flag).unwrap();
            let mut policy = Policy::default();
            knob.apply(text, &mut policy).unwrap();
            let written = knob.text(&policy);
            let mut back = Policy::default();
            knob.apply(&written, &mut back).unwrap();
            assert_eq!(back, policy, "{flag}: {text} wrote {written}");
            assert_eq!(knob_words(&policy), format!("{flag} {written}"));
        }
        let breakers = KNOBS.iter().filter(|k| k.kind == Texts).count();
        assert_eq!(
            samples.len() + breakers,
            KNOB_COUNT,
            "every knob but the breakers"
        );
        for knob in &KNOBS {
            let written = knob.text(&Policy::default());
            let mut back = Policy::default();
            knob.apply(&written, &mut back).unwrap();
            assert_eq!(back, Policy::default(), "{}", knob.flag);
        }
        assert_eq!(knob_words(&Policy::default()), "the defaults");
    }

    #[test]
    fn the_temperature_defaults_to_the_command_s_and_to_one_for_a_chain_without_it() {
        let chain = Knob::named("samplers").unwrap();
        let request = PolicyRequest::new([(chain, "top_k;top_p".to_string())]);
        assert_eq!(request.policy(0.7).unwrap().temperature, 1.0);
        assert_eq!(
            PolicyRequest::default().policy(0.7).unwrap().temperature,
            0.7
        );
        let with = PolicyRequest::new([(chain, "top_k;temperature".to_string())]);
        assert_eq!(with.policy(0.7).unwrap().temperature, 0.7);
    }
}
