//! The one error type of a policy step: every variant names the offending value, each number
//! in its shortest round-trip form.

use std::fmt;

use thiserror::Error;

use crate::{BackendChoice, Engine, Precision, Sampler, Shortest, StageOrder};

/// Why a policy step (or a policy configuration) was refused.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum PolicyError {
    #[error("the vocabulary is empty: there are no logits to choose from")]
    EmptyVocabulary,
    #[error("logit {index} is {}, but every logit must be a finite number", Shortest(*.value))]
    NonFiniteLogit { index: usize, value: f64 },
    /// A constraint (bias or penalty) took a finite logit beyond the range of a float.
    #[error(
        "{constraint} takes logit {index} from {} to {}, beyond the range of a float: \
         every constrained logit must stay a finite number (at most 1.8e308 in size)",
        Shortest(*.logit),
        Shortest(*.value)
    )]
    ConstraintOverflow {
        constraint: Constraint,
        index: usize,
        logit: f64,
        value: f64,
    },
    /// Dividing by the temperature took a finite logit beyond the range of a float.
    #[error(
        "temperature {} scales logit {index} ({}) to {}, beyond the range of a float: \
         every scaled logit must stay a finite number, so raise the temperature or lower the logits",
        Shortest(*.temperature),
        Shortest(*.logit),
        Shortest(*.value)
    )]
    TemperatureOverflow {
        temperature: f64,
        index: usize,
        logit: f64,
        value: f64,
    },
    #[error(
        "temperature {} is invalid: it must be a finite number, at least 0 (0 means greedy)",
        Shortest(*.0)
    )]
    InvalidTemperature(f64),
    /// The chapter's `choose` divides by the temperature, so it has no greedy 0.
    #[error(
        "temperature {} is invalid for the chapter's choose: it must be a finite number greater \
         than 0, because decode.py divides the logits by it (it has no greedy temperature 0)",
        Shortest(*.0)
    )]
    ChapterTemperature(f64),
    #[error("top-p {} is invalid: it must be greater than 0 and at most 1", Shortest(*.0))]
    InvalidTopP(f64),
    #[error("min-p {} is invalid: it must be between 0 and 1", Shortest(*.0))]
    InvalidMinP(f64),
    #[error("top-k {top_k} is invalid here: it must be between 1 and the vocabulary size {vocab}")]
    InvalidTopK { top_k: usize, vocab: usize },
    #[error(
        "repetition penalty {} is invalid: it must be a finite number greater than 0 (1 is off)",
        Shortest(*.0)
    )]
    InvalidRepetitionPenalty(f64),
    #[error("{name} {} is invalid: it must be a finite number", Shortest(*.value))]
    NonFiniteParameter { name: &'static str, value: f64 },
    #[error("{role} token id {id} is out of range for a vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        role: &'static str,
        id: u32,
        vocab: usize,
    },
    #[error("every one of the {vocab} tokens is forbidden or masked, so nothing can be chosen")]
    AllTokensMasked { vocab: usize },
    /// A draw handed in from outside (a device's step) that no generator could give.
    #[error(
        "draw {} is invalid: a uniform draw must be a number from 0 up to, not including, 1",
        Shortest(*.0)
    )]
    InvalidDraw(f64),
    #[error(
        "order {name:?} is not known: expected {}",
        StageOrder::ALL.map(StageOrder::name).join(" or ")
    )]
    UnknownOrder { name: String },
    #[error("sampler {name:?} is not known: expected {}", crate::names::one_of(&Sampler::ALL.map(Sampler::name)))]
    UnknownSampler { name: String },
    #[error("the sampler list is empty: name at least one of {}", crate::names::one_of(&Sampler::ALL.map(Sampler::name)))]
    EmptySamplers,
    #[error("sampler {0} is listed twice: a chain runs each sampler once")]
    RepeatedSampler(Sampler),
    /// A knob is set but the chain leaves its sampler out, so it would do nothing.
    #[error(
        "{knob} is set but {sampler} is not in the sampler list: add it, or leave the knob off"
    )]
    SamplerNotListed { knob: String, sampler: Sampler },
    #[error("a policy takes a fixed order or a sampler list, not both: the list sets the order")]
    OrderAndSamplers,
    #[error(
        "engine {name:?} is not known: expected {}",
        crate::names::one_of(&Engine::ALL.map(Engine::name))
    )]
    UnknownEngine { name: String },
    /// A setting the chosen engine does not accept (out of its range, or not one it has).
    #[error("{engine} does not take {knob}: it takes {accepts}")]
    EngineRefuses {
        engine: Engine,
        knob: String,
        accepts: &'static str,
    },
    #[error(
        "a penalty window (penalty-last-n) is llama.cpp's: {engine} penalises over the whole \
         context, so drop it or choose the llama.cpp engine"
    )]
    PenaltyWindowWithout { engine: Engine },
    #[error(
        "penalty-last-n {0} is invalid: it is a count of tokens, or -1 for the whole context \
         (0 turns the penalties off)"
    )]
    InvalidPenaltyWindow(i64),
    #[error("a policy takes a fixed order or an engine's, not both: the engine sets the order")]
    OrderAndEngine,
    #[error("a DRY sequence breaker is empty: each is one or more token ids")]
    EmptySequenceBreaker,
    #[error(
        "sequence {0:?} is not token ids separated by commas (with :bias for a sequence \
         bias), for example 1,2:-3.5"
    )]
    SequenceEntry(String),
    #[error("a {0} is an empty sequence: each is one or more token ids")]
    EmptySequence(&'static str),
    /// Hugging Face's `NoBadWordsLogitsProcessor` silently drops such a bad word.
    #[error(
        "bad word {0} is an end-of-sequence token, which Hugging Face drops from its bad words: \
         to keep a run from ending early use min-new-tokens"
    )]
    BadWordIsEos(u32),
    #[error("mirostat {0} is not one the lab has: 2 is mirostat 2.0, 0 is off")]
    UnsupportedMirostat(u8),
    /// llama.cpp's chain under mirostat is temperature then mirostat; anything else would be
    /// ignored, so it is refused.
    #[error(
        "mirostat replaces the sampler chain (temperature, then its own truncation, as in \
         llama.cpp), so {knob} would be ignored: drop it, or drop mirostat"
    )]
    MirostatReplaces { knob: String },
    #[error(
        "precision {name:?} is not known: expected {}",
        Precision::ALL.map(Precision::name).join(" or ")
    )]
    UnknownPrecision { name: String },
    #[error(
        "backend {name:?} is not known: expected {}",
        BackendChoice::ALL.map(BackendChoice::name).join(" or ")
    )]
    UnknownBackend { name: String },
    /// A logit-bias entry without the `:` between token id and value.
    #[error("logit bias {0:?} is not of the form id:value, for example 2:-1.5")]
    LogitBiasEntry(String),
    #[error("logit bias token {0:?} is not a token id (a whole number)")]
    LogitBiasToken(String),
    #[error("logit bias for token {id} must be a finite number, but it is {value:?}")]
    LogitBiasValue { id: u32, value: String },
    /// Speculative decoding compares two distributions over one vocabulary.
    #[error(
        "the target's distribution has {target} tokens but the draft's has {draft}: \
         speculative decoding needs both over the same vocabulary"
    )]
    DistributionLengths { target: usize, draft: usize },
    #[error(
        "the {role}'s probability of token {index} is {}, but a probability must be a finite \
         number from 0 to 1",
        Shortest(*.value)
    )]
    InvalidProbability {
        role: &'static str,
        index: usize,
        value: f64,
    },
    #[error("the {role}'s distribution sums to {}, not 1", Shortest(*.sum))]
    DistributionSum { role: &'static str, sum: f64 },
    #[error(
        "drafted token {token} has probability 0 under the draft's distribution, so the draft \
         cannot have drawn it"
    )]
    ImpossibleDraft { token: u32 },
    #[error("k = 0 drafts no token: speculative decoding needs k of at least 1")]
    NoDraftTokens,
    #[error(
        "acceptance rate {} is invalid: it is a probability, from 0 to 1",
        Shortest(*.0)
    )]
    InvalidAcceptanceRate(f64),
    #[error(
        "a verification of {drafted} drafted tokens needs {drafted} draft distributions and \
         {} target distributions, but it has {drafts} and {targets}",
        drafted + 1
    )]
    BlockShape {
        drafted: usize,
        drafts: usize,
        targets: usize,
    },
}

/// The constraint whose arithmetic overflowed, with its setting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Constraint {
    LogitBias {
        bias: f64,
    },
    RepetitionPenalty {
        penalty: f64,
    },
    /// DRY's penalty for the token, `multiplier · base^(length − allowed)`.
    Dry {
        penalty: f64,
    },
    /// `count * frequency + presence` is subtracted from a generated token's logit.
    FrequencyPresence {
        frequency: f64,
        count: usize,
        presence: f64,
    },
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Constraint::LogitBias { bias } => write!(f, "logit bias {}", Shortest(bias)),
            Constraint::RepetitionPenalty { penalty } => {
                write!(f, "repetition penalty {}", Shortest(penalty))
            }
            Constraint::Dry { penalty } => write!(f, "DRY penalty {}", Shortest(penalty)),
            Constraint::FrequencyPresence {
                frequency,
                count,
                presence,
            } => write!(
                f,
                "frequency penalty {} (for {count} {}) with presence penalty {}",
                Shortest(frequency),
                if count == 1 {
                    "occurrence"
                } else {
                    "occurrences"
                },
                Shortest(presence)
            ),
        }
    }
}
