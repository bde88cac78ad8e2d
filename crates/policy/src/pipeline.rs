//! One decoding step: constraints, temperature, top-k, top-p, min-p, a stable softmax,
//! then argmax or a seeded draw.
//!
//! The stage order, declared here and nowhere else:
//! 1. constraints: the logit bias, then the repetition penalty (over the whole context),
//!    then frequency and presence penalties (over generated tokens only), then removals:
//!    no-repeat n-gram bans, end-of-sequence before `min_new_tokens`, forbidden ids;
//! 2. temperature (0 is greedy: the argmax, no draw);
//! 3. top-k, top-p, min-p, on the tempered distribution ([`StageOrder::TemperatureFirst`],
//!    Hugging Face's order) or on the untempered one with the temperature applied to the
//!    survivors last ([`StageOrder::TemperatureLast`], llama.cpp's chain);
//! 4. a stable softmax over the survivors (every removed token has probability exactly 0);
//! 5. the choice: the argmax, or one `random()` draw of the seeded stream looked up as
//!    NumPy's `Generator.choice` does ([`choice_index`](crate::rng::choice_index)).
//!
//! Each field of [`Policy`] states its stage's exact rule (ties, what counts, what is off).
//! A step reports only finite numbers, or an error naming the stage whose result
//! overflowed.
//!
//! The work is O(V) in the vocabulary size V with no sort of the vocabulary: constraints
//! touch only the ids they name (kept as sparse overrides of the input logits), top-k reads
//! the maxima of fixed chunks and then only the chunks that can hold a survivor, and top-p
//! finds its cut-off from a logarithmic histogram of the weights. Everything is computed
//! in f64, through [`math`](crate::math)'s exp and sums, which give the same bits on every
//! machine.

use serde::{Deserialize, Serialize};

use crate::chain::Sampler;
use crate::engine::{self, Engine};
use crate::error::Constraint;
use crate::math;
use crate::model_view::ModelView;
use crate::modern;
use crate::rng::{choice_index_of, NumpyRng};
use crate::sequences;
use crate::PolicyError;

/// Version of the policy semantics; recorded in every run record. Bump it whenever a
/// change could make the same seed and settings choose a different token.
pub const POLICY_VERSION: &str = "policy-2";

/// Where temperature sits in the chain, which changes what top-p and min-p keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageOrder {
    /// Hugging Face's order: temperature, then top-k, top-p, min-p on the tempered
    /// distribution.
    #[default]
    #[serde(rename = "hf")]
    TemperatureFirst,
    /// llama.cpp's default chain: top-k, top-p and min-p on the untempered distribution,
    /// temperature applied to the survivors last.
    #[serde(rename = "temperature-last")]
    TemperatureLast,
}

impl StageOrder {
    /// Every order, Hugging Face's first.
    pub const ALL: [StageOrder; 2] = [StageOrder::TemperatureFirst, StageOrder::TemperatureLast];

    /// The order's name wherever it is written: `--order`, the lab's `order=` key and the
    /// run record's `policy.order`.
    pub fn name(self) -> &'static str {
        match self {
            StageOrder::TemperatureFirst => "hf",
            StageOrder::TemperatureLast => "temperature-last",
        }
    }
}

by_name!(StageOrder, UnknownOrder);

/// A decoding policy: every knob of one step. The defaults switch every stage off
/// (temperature 1, sampling from the full softmax).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Token ids that can never be chosen.
    pub forbidden: Vec<u32>,
    /// Additive logit bias per token id.
    pub logit_bias: Vec<(u32, f64)>,
    /// Hugging Face repetition penalty for tokens in the context: positive logits are
    /// divided by it, negative ones multiplied. 1 is off.
    pub repetition_penalty: f64,
    /// OpenAI/vLLM: subtract `count * frequency_penalty` for each generated occurrence.
    pub frequency_penalty: f64,
    /// OpenAI/vLLM: subtract `presence_penalty` once if the token was generated at all.
    pub presence_penalty: f64,
    /// Ban any token that would repeat an n-gram of this size already in the context. 0 is off.
    pub no_repeat_ngram: usize,
    /// The end-of-sequence token is masked until this many tokens have been generated.
    pub min_new_tokens: usize,
    /// The end-of-sequence token, which `min_new_tokens` masks (absent in JSON when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eos_token: Option<u32>,
    /// Divides the logits; 0 means greedy (argmax, ties to the lowest id).
    pub temperature: f64,
    /// Keep the k highest logits (ties at the k-th value kept). 0 is off.
    pub top_k: usize,
    /// Keep the smallest set of most probable tokens whose mass reaches p. 1 is off.
    pub top_p: f64,
    /// Keep tokens at least `min_p` times as probable as the most probable one. 0 is off.
    pub min_p: f64,
    pub order: StageOrder,
    /// An explicit chain of samplers in place of `order` ([`chain`](crate::chain)); absent
    /// in JSON when the order is fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samplers: Option<Vec<Sampler>>,
    /// Whose semantics every stage follows ([`engine`](crate::engine)); absent in JSON for
    /// the lab's own.
    #[serde(skip_serializing_if = "Engine::is_lab")]
    pub engine: Engine,
    /// llama.cpp's penalty window: the last N tokens of prompt and output (-1 all of them,
    /// 0 no penalty); absent for llama.cpp's default of 64, and under any other engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_last_n: Option<i64>,
    /// Hugging Face's `min_tokens_to_keep`, llama.cpp's `min_keep`: a truncating stage
    /// keeps at least this many tokens, the most probable (typical sampling: the most
    /// typical). Which stages honour it is the engine's rule
    /// ([`Engine::min_keep_applies`](crate::Engine::min_keep_applies)); 0 and 1 are off, as
    /// every stage keeps one.
    #[serde(skip_serializing_if = "is_at_most_one")]
    pub min_keep: usize,
    /// Locally typical sampling's mass ([`modern`](crate::modern)); 1 is off.
    #[serde(skip_serializing_if = "is_one")]
    pub typical_p: f64,
    /// ε-cutoff: tokens below this probability are removed; 0 is off.
    #[serde(skip_serializing_if = "is_zero")]
    pub epsilon_cutoff: f64,
    /// η-cutoff's ε: tokens below min(ε, √ε · e^−H) are removed; 0 is off.
    #[serde(skip_serializing_if = "is_zero")]
    pub eta_cutoff: f64,
    /// Top-nσ: tokens more than n standard deviations of the logits below the largest are
    /// removed; absent is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_n_sigma: Option<f64>,
    /// Top-H (Hugging Face's `top_h`, [`modern::top_h`]): of the 100 most probable tokens,
    /// the most probable are kept while their entropy terms sum to at most this share of
    /// the hundred's entropy; absent is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_h: Option<f64>,
    /// Dynamic temperature's range r (llama.cpp's `--dynatemp-range`): the temperature
    /// stage runs at max(0, T − r) + (T + r − max(0, T − r)) · (H / ln N)^exponent, for the
    /// entropy H of the N candidates it is given ([`modern::dynamic_temperature`]); 0 is
    /// off.
    #[serde(skip_serializing_if = "is_zero")]
    pub dynatemp_range: f64,
    /// Dynamic temperature's exponent (llama.cpp's `--dynatemp-exp`): the normalised
    /// entropy is raised to it.
    #[serde(skip_serializing_if = "is_one")]
    pub dynatemp_exponent: f64,
    /// XTC: the chance that a step excludes its top choices; 0 is off.
    #[serde(skip_serializing_if = "is_zero")]
    pub xtc_probability: f64,
    /// XTC: the probability a token needs to count as a top choice.
    #[serde(skip_serializing_if = "is_default_xtc_threshold")]
    pub xtc_threshold: f64,
    /// DRY's multiplier ([`modern`](crate::modern)); 0 is off.
    #[serde(skip_serializing_if = "is_zero")]
    pub dry_multiplier: f64,
    /// DRY's base: a repeat `allowed + e` long costs `multiplier · base^e`.
    #[serde(skip_serializing_if = "is_default_dry_base")]
    pub dry_base: f64,
    /// DRY's free repeat length.
    #[serde(skip_serializing_if = "is_default_dry_allowed_length")]
    pub dry_allowed_length: usize,
    /// DRY's window: the last N tokens of prompt and output (-1 all of them, 0 off).
    #[serde(skip_serializing_if = "is_all")]
    pub dry_penalty_last_n: i64,
    /// DRY's sequence breakers, each a token-id sequence.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dry_sequence_breakers: Vec<Vec<u32>>,
    /// Mirostat's version: 0 off, 2 for mirostat 2.0 ([`modern::mirostat_v2`]), which
    /// replaces the chain by temperature then its own truncation, as llama.cpp does.
    #[serde(skip_serializing_if = "is_zero_u8")]
    pub mirostat: u8,
    /// Mirostat's target surprise τ, in bits (llama.cpp's `--mirostat-ent`).
    #[serde(skip_serializing_if = "is_default_mirostat_tau")]
    pub mirostat_tau: f64,
    /// Mirostat's learning rate η (llama.cpp's `--mirostat-lr`).
    #[serde(skip_serializing_if = "is_default_mirostat_eta")]
    pub mirostat_eta: f64,
    /// Further end-of-sequence ids beside `eos_token`: any of them ends a run, and
    /// `min_new_tokens` masks them all (Hugging Face's list-valued `eos_token_id`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_eos_tokens: Vec<u32>,
    /// Token sequences never to complete ([`sequences`](crate::sequences)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bad_words: Vec<Vec<u32>>,
    /// Bias added to a sequence's last token when the context ends with the rest of it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sequence_bias: Vec<(Vec<u32>, f64)>,
}

/// Mirostat's τ and η when none is given, llama.cpp's defaults.
pub const MIROSTAT_TAU: f64 = 5.0;
pub const MIROSTAT_ETA: f64 = 0.1;

fn is_zero_u8(x: &u8) -> bool {
    *x == 0
}

fn is_default_mirostat_tau(x: &f64) -> bool {
    *x == MIROSTAT_TAU
}

fn is_default_mirostat_eta(x: &f64) -> bool {
    *x == MIROSTAT_ETA
}

/// DRY's base and free length when none is given, llama.cpp's defaults.
pub const DRY_BASE: f64 = 1.75;
pub const DRY_ALLOWED_LENGTH: usize = 2;

fn is_default_dry_base(x: &f64) -> bool {
    *x == DRY_BASE
}

fn is_default_dry_allowed_length(x: &usize) -> bool {
    *x == DRY_ALLOWED_LENGTH
}

fn is_all(x: &i64) -> bool {
    *x == -1
}

/// XTC's threshold when none is given, llama.cpp's default (`common_params_sampling`).
pub const XTC_THRESHOLD: f64 = 0.1;

// Knobs at their off values stay out of JSON, so records made before a knob existed keep
// their digests.
fn is_one(x: &f64) -> bool {
    *x == 1.0
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_at_most_one(x: &usize) -> bool {
    *x <= 1
}

fn is_default_xtc_threshold(x: &f64) -> bool {
    *x == XTC_THRESHOLD
}

/// The temperature a run takes when none is given: the chapter's `decode.py` default
/// (`choose(logits, temperature=0.7, ...)`), for the CLI's runs and the lab's forms alike.
pub const LAB_TEMPERATURE: f64 = 0.7;
/// [`LAB_TEMPERATURE`] as a form's default text, for tables of fields written as constants.
pub const LAB_TEMPERATURE_TEXT: &str = "0.7";

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            forbidden: Vec::new(),
            logit_bias: Vec::new(),
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            no_repeat_ngram: 0,
            min_new_tokens: 0,
            eos_token: None,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            order: StageOrder::TemperatureFirst,
            samplers: None,
            engine: Engine::Lab,
            penalty_last_n: None,
            min_keep: 0,
            typical_p: 1.0,
            epsilon_cutoff: 0.0,
            eta_cutoff: 0.0,
            top_n_sigma: None,
            top_h: None,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            xtc_probability: 0.0,
            xtc_threshold: XTC_THRESHOLD,
            dry_multiplier: 0.0,
            dry_base: DRY_BASE,
            dry_allowed_length: DRY_ALLOWED_LENGTH,
            dry_penalty_last_n: -1,
            dry_sequence_breakers: Vec::new(),
            mirostat: 0,
            mirostat_tau: MIROSTAT_TAU,
            mirostat_eta: MIROSTAT_ETA,
            extra_eos_tokens: Vec::new(),
            bad_words: Vec::new(),
            sequence_bias: Vec::new(),
        }
    }
}

/// The tokens a step conditions on: the prompt followed by what was generated so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepContext<'a> {
    pub tokens: &'a [u32],
    /// How many of `tokens` are the prompt; the rest were generated.
    pub prompt_len: usize,
    /// Mirostat's μ carried from the previous step; `None` at a run's first step (μ starts
    /// at 2τ).
    pub mirostat_mu: Option<f64>,
}

impl<'a> StepContext<'a> {
    pub fn new(tokens: &'a [u32], prompt_len: usize) -> StepContext<'a> {
        StepContext {
            tokens,
            prompt_len: prompt_len.min(tokens.len()),
            mirostat_mu: None,
        }
    }

    /// The same context with mirostat's μ from the previous step.
    pub fn with_mirostat_mu(self, mu: Option<f64>) -> StepContext<'a> {
        StepContext {
            mirostat_mu: mu,
            ..self
        }
    }

    pub(crate) fn generated(&self) -> &'a [u32] {
        &self.tokens[self.prompt_len..]
    }
}

/// The stages of the pipeline, in the order a snapshot list reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Logits after forbidden ids, bias and penalties; probabilities at temperature 1.
    Constraints,
    /// A chain's penalties placed after another sampler ([`chain`](crate::chain)).
    Penalties,
    Dry,
    Mirostat,
    Typical,
    Epsilon,
    Eta,
    TopNSigma,
    TopH,
    Xtc,
    Temperature,
    TopK,
    TopP,
    MinP,
}

impl Stage {
    /// What the stage does, in one line, for the lab's snapshot of it.
    pub fn explanation(self) -> &'static str {
        match self {
            Stage::Constraints => {
                "Forbidden ids, biases and penalties change the logits before any filter."
            }
            Stage::Penalties => {
                "Repetition, frequency and presence penalties, here after another stage."
            }
            Stage::Dry => "DRY lowers each token that would extend a repetition of the context.",
            Stage::Mirostat => {
                "Mirostat keeps the tokens no more surprising than μ bits, then steers μ toward τ."
            }
            Stage::Typical => {
                "Typical sampling keeps the tokens whose surprise is closest to the entropy."
            }
            Stage::Epsilon => "ε-cutoff removes every token below a fixed probability.",
            Stage::Eta => {
                "η-cutoff removes tokens below min(ε, √ε·e^−H): stricter when the entropy is low."
            }
            Stage::TopNSigma => {
                "Top-nσ keeps the logits within n standard deviations of the largest."
            }
            Stage::TopH => {
                "Top-H keeps the most probable tokens while their share of the entropy stays within h."
            }
            Stage::Xtc => {
                "XTC, when its chance fires, removes every top choice but the least probable."
            }
            Stage::Temperature => {
                "Temperature divides the logits: below 1 sharpens, above 1 flattens."
            }
            Stage::TopK => "Top-k keeps the k highest logits.",
            Stage::TopP => "Top-p keeps the most probable tokens until their mass reaches p.",
            Stage::MinP => "Min-p keeps tokens at least min-p times as probable as the top one.",
        }
    }

    /// Whether the stage removes tokens only by a cut-off on likelihood: every token it
    /// keeps is at least as probable as every token it removes, so its cut is one line
    /// across the distribution. Typical sampling and XTC remove by other rules (XTC removes
    /// the most probable), and the constraints by id.
    pub fn cuts_by_likelihood(self) -> bool {
        matches!(
            self,
            Stage::TopK
                | Stage::TopP
                | Stage::MinP
                | Stage::Epsilon
                | Stage::Eta
                | Stage::TopNSigma
                | Stage::TopH
                | Stage::Mirostat
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Stage::Constraints => "constraints",
            Stage::Penalties => "penalties",
            Stage::Dry => "dry",
            Stage::Mirostat => "mirostat",
            Stage::Typical => "typical",
            Stage::Epsilon => "epsilon",
            Stage::Eta => "eta",
            Stage::TopNSigma => "top-n-sigma",
            Stage::TopH => "top-h",
            Stage::Xtc => "xtc",
            Stage::Temperature => "temperature",
            Stage::TopK => "top-k",
            Stage::TopP => "top-p",
            Stage::MinP => "min-p",
        }
    }
}

/// One token in a distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenProb {
    pub id: u32,
    /// The logit this stage sees (scaled by the temperature once it has been applied).
    pub logit: f64,
    pub prob: f64,
}

/// The distribution after one stage: only survivors are listed (every other token has
/// probability exactly 0), in ascending id order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSnapshot {
    pub stage: Stage,
    pub survivors: usize,
    pub tokens: Vec<TokenProb>,
    /// The temperature a dynamic temperature stage set from the entropy
    /// ([`modern::dynamic_temperature`]); absent for every other stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// What one step chose and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    pub token: u32,
    /// Probability of `token` under the final policy (1 for greedy).
    pub prob: f64,
    /// The uniform draw in [0, 1) that picked the token; `None` (absent in JSON) for greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<f64>,
    /// How many tokens survived every filter into the final distribution. At a tiny
    /// temperature a survivor's probability can round to exactly 0; it still counts.
    pub survivors: usize,
    /// Entropy of the final distribution, in nats.
    pub entropy: f64,
    /// The five most probable tokens of the final distribution, most probable first
    /// (ties by lower id).
    pub top: Vec<TokenProb>,
    /// The distribution after each active stage, when asked for.
    pub stages: Option<Vec<StageSnapshot>>,
    /// The model's own distribution at `token` ([`model_view`](crate::model_view)): a step
    /// leaves it `None`; the generation loop, or a device that took the step, fills it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelView>,
    /// Mirostat's μ this step truncated at and the μ it hands the next step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirostat: Option<MirostatMu>,
}

/// Mirostat's state across one step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MirostatMu {
    /// The μ the step truncated at: no token more surprising than μ bits survives.
    pub mu: f64,
    /// μ − η · (surprise of the chosen token − τ), for the next step.
    pub next: f64,
}

impl MirostatMu {
    /// Mirostat 2.0's update after a token the renormalised distribution gave `prob`:
    /// μ − η · (−log₂ prob − τ), with the policy's τ and η.
    pub fn after(policy: &Policy, mu: f64, prob: f64) -> MirostatMu {
        MirostatMu {
            mu,
            next: mu - policy.mirostat_eta * (-math::log2(prob) - policy.mirostat_tau),
        }
    }

    /// The μ of a run's first step: twice τ.
    pub fn first(policy: &Policy) -> f64 {
        2.0 * policy.mirostat_tau
    }
}

impl StepOutcome {
    pub fn logprob(&self) -> f64 {
        math::ln(self.prob)
    }

    /// A greedy step's outcome: the argmax `id`, at `logit`, taken with certainty.
    fn greedy(id: u32, logit: f64, stages: Option<Vec<StageSnapshot>>) -> StepOutcome {
        StepOutcome {
            token: id,
            prob: 1.0,
            draw: None,
            survivors: 1,
            entropy: 0.0,
            top: vec![TokenProb {
                id,
                logit,
                prob: 1.0,
            }],
            stages,
            model: None,
            mirostat: None,
        }
    }
}

/// A logit as a model hands it over: f32 from a model, f64 from NumPy.
pub trait Logit: Copy {
    /// The largest finite value of the type: no logit of it is larger in size.
    const LARGEST: f64;

    fn to_f64(self) -> f64;

    /// The largest value of every [`CHUNK`]-long chunk of `logits`, in order, pushed on
    /// `out`; fails on the first value that is not finite, naming it. Top-k's first pass and
    /// [`max_logit`]: compiled for the widest instruction set the CPU has, over as many
    /// independent lanes as four of its registers hold, so that no chain of packed maxima
    /// waits on itself.
    fn chunk_maxima(logits: &[Self], out: &mut Vec<f64>) -> Result<(), PolicyError>;
}

/// `Logit` for a float type; the lane loops compile to packed max and add.
macro_rules! impl_logit {
    ($float:ty) => {
        impl Logit for $float {
            const LARGEST: f64 = <$float>::MAX as f64;

            fn to_f64(self) -> f64 {
                f64::from(self)
            }

            fn chunk_maxima(logits: &[$float], out: &mut Vec<f64>) -> Result<(), PolicyError> {
                /// 256 bytes of lanes natively: four AVX-512 registers, eight AVX2 ones. In
                /// WebAssembly (no packed maxima, a vocabulary of 768) eight, which the
                /// compiler does not unroll into kilobytes of the page.
                const LANES: usize = if cfg!(target_arch = "wasm32") {
                    8
                } else {
                    256 / std::mem::size_of::<$float>()
                };
                /// The index of the first chunk holding a value that is not finite.
                #[inline(always)]
                fn lanes(logits: &[$float], out: &mut Vec<f64>) -> Option<usize> {
                    for (c, chunk) in logits.chunks(CHUNK).enumerate() {
                        let mut max = [<$float>::NEG_INFINITY; LANES];
                        // x - x is 0 for a finite x and NaN for an infinity or a NaN, and a
                        // NaN stays in the sum: one packed subtract and add per value.
                        let mut non_finite = [0.0 as $float; LANES];
                        let rows = chunk.chunks_exact(LANES);
                        let tail = rows.remainder();
                        for row in rows {
                            for j in 0..LANES {
                                let x = row[j];
                                max[j] = if x > max[j] { x } else { max[j] };
                                non_finite[j] += x - x;
                            }
                        }
                        let mut width = LANES;
                        while width > 1 {
                            width /= 2;
                            for j in 0..width {
                                let (a, b) = (max[j], max[j + width]);
                                max[j] = if b > a { b } else { a };
                                non_finite[j] += non_finite[j + width];
                            }
                        }
                        let mut top = max[0];
                        for &x in tail {
                            non_finite[0] += x - x;
                            top = if x > top { x } else { top };
                        }
                        if non_finite[0] != 0.0 {
                            return Some(c);
                        }
                        out.push(f64::from(top));
                    }
                    None
                }
                math::widest!(widest [] = lanes(logits: &[$float], out: &mut Vec<f64>) -> Option<usize>);
                match widest(logits, out) {
                    None => Ok(()),
                    Some(c) => Err(first_non_finite(&logits[c * CHUNK..], c * CHUNK)),
                }
            }
        }
    };
}

impl_logit!(f32);
impl_logit!(f64);

/// Whether a step should also return the per-stage snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshots {
    Skip,
    Record,
}

impl Policy {
    /// Checks every parameter against a vocabulary of `vocab` tokens.
    pub fn validate(&self, vocab: usize) -> Result<(), PolicyError> {
        if vocab == 0 {
            return Err(PolicyError::EmptyVocabulary);
        }
        self.engine.check(self)?;
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return Err(PolicyError::InvalidRepetitionPenalty(
                self.repetition_penalty,
            ));
        }
        for (name, value) in [
            ("frequency penalty", self.frequency_penalty),
            ("presence penalty", self.presence_penalty),
        ] {
            if !value.is_finite() {
                return Err(PolicyError::NonFiniteParameter { name, value });
            }
        }
        let check = |role: &'static str, id: u32| {
            if (id as usize) < vocab {
                Ok(())
            } else {
                Err(PolicyError::TokenOutOfRange { role, id, vocab })
            }
        };
        for &id in &self.forbidden {
            check("forbidden", id)?;
        }
        for &(id, bias) in &self.logit_bias {
            check("logit-bias", id)?;
            if !bias.is_finite() {
                return Err(PolicyError::NonFiniteParameter {
                    name: "logit bias",
                    value: bias,
                });
            }
        }
        if let Some(eos) = self.eos_token {
            check("end-of-sequence", eos)?;
        }
        for &id in self.dry_sequence_breakers.iter().flatten() {
            check("DRY sequence breaker", id)?;
        }
        for &id in &self.extra_eos_tokens {
            check("end-of-sequence", id)?;
        }
        for word in &self.bad_words {
            if word.is_empty() {
                return Err(PolicyError::EmptySequence("bad word"));
            }
            for &id in word {
                check("bad-word", id)?;
            }
            if let [id] = word[..] {
                if self.is_eos(id) {
                    return Err(PolicyError::BadWordIsEos(id));
                }
            }
        }
        for (sequence, bias) in &self.sequence_bias {
            if sequence.is_empty() {
                return Err(PolicyError::EmptySequence("sequence bias"));
            }
            for &id in sequence {
                check("sequence-bias", id)?;
            }
            if !bias.is_finite() {
                return Err(PolicyError::NonFiniteParameter {
                    name: "sequence bias",
                    value: *bias,
                });
            }
        }
        crate::chain::check(self)
    }

    /// Every end-of-sequence id: `eos_token`, then `extra_eos_tokens`.
    pub fn eos_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.eos_token
            .into_iter()
            .chain(self.extra_eos_tokens.iter().copied())
    }

    /// Whether `token` ends a run.
    pub fn is_eos(&self, token: u32) -> bool {
        self.eos_ids().any(|id| id == token)
    }

    /// Temperature 0 (at most 0 under llama.cpp): the argmax, with no draw. A dynamic
    /// temperature is never greedy: llama.cpp's `temp-ext` sets its own temperature from
    /// the entropy whatever T is (at T = 0, between 0 and the range).
    pub fn is_greedy(&self) -> bool {
        self.engine.is_greedy(self.temperature) && !self.has_dynamic_temperature()
    }

    /// Whether the temperature stage's value is dynamic ([`modern::dynamic_temperature`]).
    pub fn has_dynamic_temperature(&self) -> bool {
        self.dynatemp_range > 0.0
    }

    /// True when the policy is only temperature, top-k, top-p and min-p in Hugging Face's
    /// order: no constraint reads the context. Such a step needs nothing but the logits
    /// and one draw, so a device that holds the logits can take it (see
    /// [`LanguageModel::choose_on_device`](crate::LanguageModel::choose_on_device)).
    pub fn is_filter_only(&self) -> bool {
        self.forbidden.is_empty()
            && self.logit_bias.is_empty()
            && self.repetition_penalty == 1.0
            && self.frequency_penalty == 0.0
            && self.presence_penalty == 0.0
            && self.is_filters_and_table()
    }

    /// The filters in Hugging Face's order, with no constraint beyond what a
    /// [`ConstraintTable`] holds (bias, bans and the lab engine's three penalties).
    fn is_filters_and_table(&self) -> bool {
        self.no_repeat_ngram == 0
            && (self.min_new_tokens == 0 || self.eos_ids().next().is_none())
            && self.bad_words.is_empty()
            && self.sequence_bias.is_empty()
            && self.order == StageOrder::TemperatureFirst
            && self.samplers.is_none()
            && self.engine.is_lab()
            && !self.has_modern_sampler()
            && self.mirostat == 0
            && self.min_keep <= 1
    }

    /// True when a device that holds the logits can take the step from a
    /// [`ConstraintTable`] and one draw: the filters of [`is_filter_only`](Self::is_filter_only),
    /// plus logit bias, forbidden ids and the repetition, frequency and presence penalties
    /// of the lab's engine, with magnitudes that cannot overflow an f32 logit (bias and the
    /// two subtracted penalties within ±[`DEVICE_CONSTRAINT_LIMIT`], the repetition penalty
    /// within its inverse and itself), so that the device's f32 arithmetic cannot fail
    /// where the host's f64 would not.
    pub fn is_device_step(&self) -> bool {
        let limit = DEVICE_CONSTRAINT_LIMIT;
        let within = |v: f64| v.abs() <= limit;
        self.is_filters_and_table()
            && self.logit_bias.iter().map(|(_, b)| b.abs()).sum::<f64>() <= limit
            && (1.0 / limit..=limit).contains(&self.repetition_penalty)
            && within(self.frequency_penalty)
            && within(self.presence_penalty)
    }

    /// The constraints this step applies to each token, dense over a vocabulary of
    /// `vocab`, for a device to apply itself (see [`is_device_step`](Self::is_device_step)):
    /// what the host's step reads from the policy and the context, computed by the same
    /// rule.
    pub fn constraint_table(&self, context: StepContext<'_>, vocab: usize) -> ConstraintTable {
        let mut table = ConstraintTable {
            bias: vec![0.0; vocab],
            repeated: vec![false; vocab],
            counts: vec![0; vocab],
            removed: vec![false; vocab],
        };
        let inside = |id: u32| (id as usize) < vocab;
        for &(id, bias) in self.logit_bias.iter().filter(|(id, _)| inside(*id)) {
            table.bias[id as usize] += bias;
        }
        let (repeated, counted) = self.engine.penalised(self, context);
        if self.repetition_penalty != 1.0 {
            for &id in repeated.iter().filter(|&&id| inside(id)) {
                table.repeated[id as usize] = true;
            }
        }
        if self.frequency_penalty != 0.0 || self.presence_penalty != 0.0 {
            for &id in counted.iter().filter(|&&id| inside(id)) {
                table.counts[id as usize] += 1;
            }
        }
        for &id in self.forbidden.iter().filter(|&&id| inside(id)) {
            table.removed[id as usize] = true;
        }
        table
    }

    /// Whether a modern sampler ([`modern`](crate::modern)) or a dynamic temperature is
    /// on: such a policy runs on the chain path even in a fixed order.
    pub fn has_modern_sampler(&self) -> bool {
        Sampler::MODERN.iter().any(|s| s.is_on(self)) || self.has_dynamic_temperature()
    }

    /// The chain the policy runs: its own list, else its engine's order, else its fixed
    /// order written as one.
    pub fn chain(&self) -> &[Sampler] {
        match &self.samplers {
            Some(chain) => chain,
            None if !self.engine.is_lab() => self.engine.chain(),
            None => self.order.chain(),
        }
    }

    /// How the stages are ordered, in words a table or a file column can hold: the fixed
    /// order's name, or the chain as `--samplers` takes it.
    pub fn order_label(&self) -> String {
        match &self.samplers {
            Some(chain) => crate::chain::samplers_label(chain),
            None => self.order.name().to_string(),
        }
    }

    /// The temperature the filters see: the policy's own in HF order, 1 when it comes last.
    fn filter_temperature(&self) -> f64 {
        match self.order {
            StageOrder::TemperatureFirst => self.temperature,
            StageOrder::TemperatureLast => 1.0,
        }
    }
}

/// Runs one step with fresh scratch memory; see [`Stepper`] to reuse it across steps.
pub fn step<L: Logit>(
    policy: &Policy,
    logits: &[L],
    context: StepContext<'_>,
    rng: &mut NumpyRng,
    snapshots: Snapshots,
) -> Result<StepOutcome, PolicyError> {
    Stepper::default().step(policy, logits, context, rng, snapshots)
}

/// A constrained logit: its new value, or `None` when the token is removed.
type Override = (u32, Option<f64>);

/// Scratch buffers for steps over one vocabulary, reused so that a generation loop does
/// not allocate per token.
#[derive(Clone, Debug, Default)]
pub struct Stepper {
    overrides: Vec<Override>,
    /// (logit, id) candidates: top-k survivors, or every live token.
    candidates: Vec<(f64, u32)>,
    /// exp((logit - max) / filter temperature) per candidate.
    weights: Vec<f64>,
    /// The (max, temperature) that `weights` were computed with.
    scale: (f64, f64),
    /// Every token's weight, by id, when top-p runs over the whole vocabulary.
    dense: Vec<f64>,
    /// The final probabilities, and their cumulative sums for the draw.
    probs: Vec<f64>,
    cumulative: Vec<f64>,
    /// Top-k's maximum per chunk of logits.
    maxima: Vec<f64>,
    /// Top-p's buckets, histogram and masks.
    nucleus: NucleusScratch,
    /// Scratch that selections reorder: top-k's chunk maxima.
    select: Vec<f64>,
    /// Sorted context or generated ids, for the penalties.
    counts: Vec<u32>,
}

impl Stepper {
    /// Turns final-position `logits` into one chosen token under `policy`.
    pub fn step<L: Logit>(
        &mut self,
        policy: &Policy,
        logits: &[L],
        context: StepContext<'_>,
        rng: &mut NumpyRng,
        snapshots: Snapshots,
    ) -> Result<StepOutcome, PolicyError> {
        self.step_drawing(policy, logits, context, &mut || rng.random(), snapshots)
    }

    /// [`step`](Self::step) with the uniform draw given rather than taken from a generator
    /// (it is used only when the policy samples): how a step taken elsewhere, from the same
    /// generator stream, is checked.
    pub fn step_with_draw<L: Logit>(
        &mut self,
        policy: &Policy,
        logits: &[L],
        context: StepContext<'_>,
        draw: f64,
        snapshots: Snapshots,
    ) -> Result<StepOutcome, PolicyError> {
        self.step_drawing(policy, logits, context, &mut || draw, snapshots)
    }

    fn step_drawing<L: Logit>(
        &mut self,
        policy: &Policy,
        logits: &[L],
        context: StepContext<'_>,
        draw: &mut dyn FnMut() -> f64,
        snapshots: Snapshots,
    ) -> Result<StepOutcome, PolicyError> {
        let vocab = logits.len();
        policy.validate(vocab)?;
        for &id in context.tokens {
            if id as usize >= vocab {
                return Err(PolicyError::TokenOutOfRange {
                    role: "context",
                    id,
                    vocab,
                });
            }
        }
        // In WebAssembly every step takes the chain path, which chooses bit for bit what the
        // fixed path does (tests/chain.rs): the lab's vocabulary is small, and one path
        // instead of two keeps the page and its workers smaller.
        if cfg!(target_arch = "wasm32")
            || policy.samplers.is_some()
            || !policy.engine.is_lab()
            || policy.has_modern_sampler()
            || policy.mirostat != 0
            || policy.min_keep > 1
        {
            return self.run_chain(policy, policy.chain(), logits, context, draw, snapshots);
        }
        self.build_overrides(policy, logits, context, true)?;
        let mut stages = (snapshots == Snapshots::Record).then(Vec::new);

        // Stage 1: constraints. Every logit is read here: validated, and filtered by top-k
        // when it is on (two passes: chunk maxima, then the chunks that can hold a survivor).
        let live = self.live(vocab)?;
        let greedy = policy.is_greedy();
        let use_top_k = policy.top_k > 0 && policy.top_k < live && !greedy;
        // Top-p over the whole vocabulary with no constraint in force: the weights are
        // computed straight from the logits (the candidates would be every token, in id
        // order) and only the survivors become candidates.
        let dense = !use_top_k
            && !greedy
            && policy.top_p < 1.0
            && self.overrides.is_empty()
            && stages.is_none();
        let filter_t = policy.filter_temperature();
        self.candidates.clear();
        let mut dense_max = f64::NEG_INFINITY;
        if dense {
            dense_max = max_logit(logits)?;
            let total = math::weigh(logits, L::to_f64, dense_max, filter_t, &mut self.dense);
            self.scale = (dense_max, filter_t);
            let cutoff = nucleus_cutoff(&self.dense, policy.top_p, total, &mut self.nucleus);
            keep_dense(
                logits,
                &self.dense,
                cutoff,
                &mut self.nucleus.masks,
                &mut self.weights,
                &mut self.candidates,
            );
        } else if use_top_k {
            top_k_candidates(
                logits,
                &self.overrides,
                policy.top_k,
                &mut self.maxima,
                &mut self.select,
                &mut self.candidates,
            )?;
            self.candidates.sort_unstable_by_key(|c| c.1);
        } else {
            let candidates = &mut self.candidates;
            scan_live(logits, &self.overrides, |id, logit| {
                candidates.push((logit, id))
            })?;
        }
        // From here on candidates are in ascending id order.
        if !greedy && policy.order == StageOrder::TemperatureFirst {
            check_scaled(logits, &self.overrides, policy.temperature)?;
        }
        if let Some(stages) = stages.as_mut() {
            let mut all = Vec::with_capacity(live);
            scan_live(logits, &self.overrides, |id, logit| all.push((logit, id)))?;
            stages.push(snapshot(Stage::Constraints, &all, 1.0));
            if !greedy && policy.order == StageOrder::TemperatureFirst {
                stages.push(snapshot(Stage::Temperature, &all, policy.temperature));
            }
        }

        // Stage 2, greedy: the argmax, ties to the lowest id; the filters cannot remove it.
        if greedy {
            let best = argmax(&self.candidates);
            let only = TokenProb {
                id: best.1,
                logit: best.0,
                prob: 1.0,
            };
            if let Some(stages) = stages.as_mut() {
                stages.push(StageSnapshot {
                    stage: Stage::Temperature,
                    survivors: 1,
                    tokens: vec![only],
                    temperature: None,
                });
            }
            return Ok(StepOutcome::greedy(best.1, best.0, stages));
        }

        // Stage 3: top-k (done above), top-p (done above when dense) and min-p at the filter
        // temperature.
        if let Some(stages) = stages.as_mut().filter(|_| policy.top_k > 0) {
            stages.push(snapshot(Stage::TopK, &self.candidates, filter_t));
        }
        let max = if dense {
            dense_max
        } else {
            self.candidates
                .iter()
                .map(|c| c.0)
                .fold(f64::NEG_INFINITY, f64::max)
        };
        if !dense {
            let total = self.weigh_at(max, filter_t);
            if policy.top_p < 1.0 {
                let cutoff = nucleus_cutoff(&self.weights, policy.top_p, total, &mut self.nucleus);
                self.retain(|w| w >= cutoff);
                if let Some(stages) = stages.as_mut() {
                    stages.push(snapshot(Stage::TopP, &self.candidates, filter_t));
                }
            }
        }
        if policy.min_p > 0.0 {
            // The most probable survivor has weight exp(0) = 1, so a weight is its ratio.
            self.retain(|w| w >= policy.min_p);
            if let Some(stages) = stages.as_mut() {
                stages.push(snapshot(Stage::MinP, &self.candidates, filter_t));
            }
        }
        if policy.order == StageOrder::TemperatureLast {
            let t = policy.temperature;
            // Here the temperature scales the survivors only; see `check_scaled`.
            if t < 1.0 {
                if let Some(&(logit, id)) = self.candidates.iter().find(|c| !(c.0 / t).is_finite())
                {
                    return Err(temperature_overflow(t, id, logit));
                }
            }
            let _ = self.weigh_at(max, t);
            if let Some(stages) = stages.as_mut() {
                stages.push(snapshot(Stage::Temperature, &self.candidates, t));
            }
        }

        // Stages 4 and 5: normalise the survivors and draw as `Generator.choice` does.
        let total = math::sum(&self.weights);
        self.choose(draw, total, policy.temperature, stages)
    }

    /// How many of `vocab` tokens no constraint masks: an error when none is left.
    fn live(&self, vocab: usize) -> Result<usize, PolicyError> {
        let live = vocab - self.overrides.iter().filter(|o| o.1.is_none()).count();
        if live == 0 {
            return Err(PolicyError::AllTokensMasked { vocab });
        }
        Ok(live)
    }

    /// A step through an explicit chain ([`chain`](crate::chain)): every live token is a
    /// candidate, and each listed sampler in turn filters the candidates or changes their
    /// logits. Candidates keep their unscaled logits and stay in ascending id order; the
    /// temperature in force scales them wherever a probability is computed, exactly as the
    /// fixed path does, so the fixed orders written as chains choose the same token.
    fn run_chain<L: Logit>(
        &mut self,
        policy: &Policy,
        chain: &[Sampler],
        logits: &[L],
        context: StepContext<'_>,
        draw: &mut dyn FnMut() -> f64,
        snapshots: Snapshots,
    ) -> Result<StepOutcome, PolicyError> {
        let vocab = logits.len();
        let penalties_first = chain.first() == Some(&Sampler::Penalties);
        self.build_overrides(policy, logits, context, penalties_first)?;
        self.live(vocab)?;
        self.candidates.clear();
        let candidates = &mut self.candidates;
        scan_live(logits, &self.overrides, |id, logit| {
            candidates.push((logit, id))
        })?;
        self.run_chain_on_candidates(policy, chain, context, draw, snapshots)
    }

    /// The chain over `candidates` (every live token, constrained), apart from the logits'
    /// type so that one copy serves f32 and f64 logits alike.
    fn run_chain_on_candidates(
        &mut self,
        policy: &Policy,
        chain: &[Sampler],
        context: StepContext<'_>,
        draw: &mut dyn FnMut() -> f64,
        snapshots: Snapshots,
    ) -> Result<StepOutcome, PolicyError> {
        let mut stages = (snapshots == Snapshots::Record).then(Vec::new);
        let mut record = |stage: Stage, candidates: &[(f64, u32)], t: f64| {
            if let Some(stages) = stages.as_mut() {
                stages.push(snapshot(stage, candidates, t));
            }
        };
        record(Stage::Constraints, &self.candidates, 1.0);

        let greedy = policy.is_greedy();
        let engine = policy.engine;
        // Mirostat replaces the chain: temperature, then its own truncation (below).
        let chain = if policy.mirostat != 0 {
            &[Sampler::Temperature][..]
        } else {
            chain
        };
        // The temperature in force: 1 until the temperature stage (and for greedy).
        let mut t = 1.0;
        // The temperature a dynamic temperature stage set, for its snapshot.
        let mut dynamic_temperature = None;
        // llama.cpp's array holds a masked token (a forbidden id, `--logit-bias ID-inf`) at
        // −inf until a truncation drops it, and top-nσ masks without dropping: the tokens
        // there that are not candidates here, which its dynamic temperature counts
        // (`max_entropy = -logf(1.0f / cur_p->size)`).
        let mut masked = match engine {
            Engine::LlamaCpp => self.overrides.iter().filter(|o| o.1.is_none()).count(),
            _ => 0,
        };
        for (i, &sampler) in chain.iter().enumerate() {
            // What a stage that honours min_keep was given, to fall back on.
            let given =
                (policy.min_keep > 1 && engine.min_keep_applies(sampler) && sampler.is_on(policy))
                    .then(|| self.candidates.clone());
            match sampler {
                Sampler::Penalties => {
                    if i > 0 && sampler.is_on(policy) {
                        self.penalise_candidates(policy, context, t)?;
                        record(Stage::Penalties, &self.candidates, t);
                    }
                }
                Sampler::Temperature => {
                    // The temperature from here on: the policy's, or llama.cpp's temp-ext
                    // one, set by the entropy of the candidates as they reach it (at the
                    // temperature 1 in force until here); temp-ext leaves one candidate
                    // as it is.
                    let next = if greedy {
                        None
                    } else if policy.has_dynamic_temperature() {
                        let total = self.weigh(t);
                        let probs: Vec<f64> = self.weights.iter().map(|w| w / total).collect();
                        let dynamic = modern::dynamic_temperature(
                            &probs,
                            probs.len() + masked,
                            policy.temperature,
                            policy.dynatemp_range,
                            policy.dynatemp_exponent,
                        );
                        dynamic_temperature = dynamic;
                        dynamic.or(Some(t))
                    } else {
                        Some(engine.temperature(policy.temperature))
                    };
                    match next {
                        Some(next) if next > 0.0 => {
                            t = next;
                            if t < 1.0 {
                                if let Some(&(logit, id)) =
                                    self.candidates.iter().find(|c| !(c.0 / t).is_finite())
                                {
                                    return Err(temperature_overflow(t, id, logit));
                                }
                            }
                        }
                        // Greedy, or `llama_sampler_temp_impl` at a temperature of at most
                        // 0: the highest logit alone.
                        _ => {
                            let best = argmax(&self.candidates);
                            self.candidates.clear();
                            self.candidates.push(best);
                        }
                    }
                    record(Stage::Temperature, &self.candidates, t);
                }
                Sampler::TopK => {
                    let k = policy.top_k;
                    if k == 0 {
                        continue;
                    }
                    // llama.cpp keeps the first k of its array, masked tokens last.
                    let live = self.candidates.len();
                    masked = k.min(live + masked) - k.min(live);
                    if engine == Engine::LlamaCpp && k < self.candidates.len() {
                        let keep = engine::top_k_exact(&self.candidates, k, &mut self.select);
                        self.retain_marked(&keep);
                    } else if k < self.candidates.len() {
                        self.select.clear();
                        self.select.extend(self.candidates.iter().map(|c| c.0));
                        let kth = kth_largest(&mut self.select, k);
                        self.candidates.retain(|c| c.0 >= kth);
                    }
                    self.keep_at_least(given.as_deref(), policy, t, false);
                    record(Stage::TopK, &self.candidates, t);
                }
                Sampler::TopP => {
                    if policy.top_p >= 1.0 {
                        continue;
                    }
                    // A masked token's probability is 0: the cut comes before it.
                    masked = 0;
                    let total = self.weigh(t);
                    if !engine.is_lab() {
                        let probs: Vec<f64> = self.weights.iter().map(|w| w / total).collect();
                        let keep =
                            engine::top_p_ranked(engine, &self.candidates, &probs, policy.top_p);
                        self.retain_marked(&keep);
                        self.keep_at_least(given.as_deref(), policy, t, false);
                        record(Stage::TopP, &self.candidates, t);
                        continue;
                    }
                    let cutoff =
                        nucleus_cutoff(&self.weights, policy.top_p, total, &mut self.nucleus);
                    self.retain(|w| w >= cutoff);
                    self.keep_at_least(given.as_deref(), policy, t, false);
                    record(Stage::TopP, &self.candidates, t);
                }
                Sampler::MinP => {
                    if policy.min_p <= 0.0 {
                        continue;
                    }
                    masked = 0;
                    // The most probable candidate has weight exp(0) = 1.
                    let total = self.weigh(t);
                    if engine.is_lab() {
                        self.retain(|w| w >= policy.min_p);
                    } else {
                        let probs: Vec<f64> = self.weights.iter().map(|w| w / total).collect();
                        let keep =
                            engine::min_p_engine(engine, &self.candidates, &probs, policy.min_p, t);
                        self.retain_marked(&keep);
                    }
                    self.keep_at_least(given.as_deref(), policy, t, false);
                    record(Stage::MinP, &self.candidates, t);
                }
                Sampler::Typical
                | Sampler::Epsilon
                | Sampler::Eta
                | Sampler::TopNSigma
                | Sampler::TopH => {
                    if !sampler.is_on(policy) {
                        continue;
                    }
                    let probs = |stepper: &mut Stepper| {
                        let total = stepper.weigh(t);
                        stepper
                            .weights
                            .iter()
                            .map(|w| w / total)
                            .collect::<Vec<f64>>()
                    };
                    let scaled: Vec<f64> = match sampler {
                        Sampler::TopH | Sampler::TopNSigma => {
                            self.candidates.iter().map(|c| c.0 / t).collect()
                        }
                        _ => Vec::new(),
                    };
                    let (keep, stage) = match sampler {
                        Sampler::Typical => (
                            modern::typical(engine, &probs(self), policy.typical_p),
                            Stage::Typical,
                        ),
                        Sampler::Epsilon => (
                            modern::epsilon(&probs(self), policy.epsilon_cutoff),
                            Stage::Epsilon,
                        ),
                        Sampler::Eta => (modern::eta(&probs(self), policy.eta_cutoff), Stage::Eta),
                        Sampler::TopH => {
                            let h = policy.top_h.unwrap_or(1.0);
                            (modern::top_h(&scaled, h), Stage::TopH)
                        }
                        _ => {
                            let n = policy.top_n_sigma.unwrap_or(0.0);
                            (modern::top_n_sigma(&scaled, n), Stage::TopNSigma)
                        }
                    };
                    let before = self.candidates.len();
                    self.retain_marked(&keep);
                    // llama.cpp's top-nσ masks what it removes and keeps it in the array;
                    // its typical cut comes before every token of probability 0.
                    match stage {
                        Stage::TopNSigma => masked += before - self.candidates.len(),
                        _ => masked = 0,
                    }
                    self.keep_at_least(given.as_deref(), policy, t, stage == Stage::Typical);
                    record(stage, &self.candidates, t);
                }
                Sampler::Dry => {
                    if !sampler.is_on(policy) {
                        continue;
                    }
                    let tokens = context.tokens;
                    let window = match policy.dry_penalty_last_n {
                        -1 => tokens,
                        n => &tokens[tokens.len().saturating_sub(n.max(0) as usize)..],
                    };
                    let penalties = modern::dry(
                        window,
                        policy.dry_multiplier,
                        policy.dry_base,
                        policy.dry_allowed_length,
                        &policy.dry_sequence_breakers,
                    );
                    for (token, penalty) in penalties {
                        if let Ok(at) = self.candidates.binary_search_by_key(&token, |c| c.1) {
                            let l = self.candidates[at].0;
                            let constraint = Constraint::Dry { penalty };
                            self.candidates[at].0 =
                                constrained(constraint, token, l, l - penalty * t)?;
                        }
                    }
                    record(Stage::Dry, &self.candidates, t);
                }
                Sampler::Xtc => {
                    let (probability, threshold) = (policy.xtc_probability, policy.xtc_threshold);
                    if !modern::xtc_draws(probability, threshold, self.candidates.len()) {
                        continue;
                    }
                    let chance = draw();
                    if !(0.0..1.0).contains(&chance) {
                        return Err(PolicyError::InvalidDraw(chance));
                    }
                    let total = self.weigh(t);
                    let probs: Vec<f64> = self.weights.iter().map(|w| w / total).collect();
                    let keep = modern::xtc(&probs, probability, threshold, chance);
                    self.retain_marked(&keep);
                    record(Stage::Xtc, &self.candidates, t);
                }
            }
        }

        if greedy {
            let (logit, id) = self.candidates[0];
            return Ok(StepOutcome::greedy(id, logit, stages));
        }
        let mut mirostat = None;
        if policy.mirostat != 0 {
            let mu = context
                .mirostat_mu
                .unwrap_or_else(|| MirostatMu::first(policy));
            let total = self.weigh(t);
            let probs: Vec<f64> = self.weights.iter().map(|w| w / total).collect();
            let keep = modern::mirostat_v2(&probs, mu);
            self.retain_marked(&keep);
            record(Stage::Mirostat, &self.candidates, t);
            mirostat = Some(mu);
        }
        if let (Some(stages), Some(dynamic)) = (stages.as_mut(), dynamic_temperature) {
            let at = stages
                .iter_mut()
                .rev()
                .find(|s| s.stage == Stage::Temperature);
            if let Some(snapshot) = at {
                snapshot.temperature = Some(dynamic);
            }
        }
        let total = self.weigh(t);
        let mut outcome = self.choose(draw, total, t, stages)?;
        if let Some(mu) = mirostat {
            outcome.mirostat = Some(MirostatMu::after(policy, mu, outcome.prob));
        }
        Ok(outcome)
    }

    /// Sets `weights` to exp((logit - max) / t) over the candidates; returns their sum.
    fn weigh(&mut self, t: f64) -> f64 {
        let max = self
            .candidates
            .iter()
            .map(|c| c.0)
            .fold(f64::NEG_INFINITY, f64::max);
        self.weigh_at(max, t)
    }

    /// Sets `weights` to exp((logit - max) / t) over the candidates; returns their sum.
    fn weigh_at(&mut self, max: f64, t: f64) -> f64 {
        self.scale = (max, t);
        weigh_candidates(&self.candidates, max, t, &mut self.weights)
    }

    /// Normalises the candidates' `weights` (which sum to `total`) and draws as NumPy's
    /// `Generator.choice` does.
    fn choose(
        &mut self,
        draw: &mut dyn FnMut() -> f64,
        total: f64,
        t: f64,
        stages: Option<Vec<StageSnapshot>>,
    ) -> Result<StepOutcome, PolicyError> {
        let draw = draw();
        if !(0.0..1.0).contains(&draw) {
            return Err(PolicyError::InvalidDraw(draw));
        }
        self.probs.clear();
        self.probs.extend(self.weights.iter().map(|w| w / total));
        let chosen = choice_index_of(&self.probs, draw, &mut self.cumulative);
        // With p = w / total and ln w = s = (logit − max) / t, −Σ p ln p is
        // ln total − Σ w s / total: one logarithm, not one per survivor.
        let (max, scale_t) = self.scale;
        let weighted = math::weighted_sum(&self.candidates, logit, max, scale_t, &self.weights);
        let entropy = (math::ln(total) - weighted / total).max(0.0);
        Ok(StepOutcome {
            token: self.candidates[chosen].1,
            prob: self.weights[chosen] / total,
            draw: Some(draw),
            survivors: self.candidates.len(),
            entropy,
            top: top_five(&self.candidates, &self.weights, total, t),
            stages,
            model: None,
            mirostat: None,
        })
    }

    /// The penalties as a later stage of a chain: the repetition penalty over the context,
    /// then frequency and presence over the generated tokens, on the survivors only. On
    /// the scale of temperature `t`, subtracting d from a scaled logit subtracts d·t from
    /// the unscaled one; dividing or multiplying does not depend on the scale.
    fn penalise_candidates(
        &mut self,
        policy: &Policy,
        context: StepContext<'_>,
        t: f64,
    ) -> Result<(), PolicyError> {
        let (repeated, counted) = policy.engine.penalised(policy, context);
        let r = policy.repetition_penalty;
        if r != 1.0 {
            let seen = &mut self.counts;
            seen.clear();
            seen.extend_from_slice(repeated);
            seen.sort_unstable();
            for c in self.candidates.iter_mut() {
                if seen.binary_search(&c.1).is_ok() {
                    let l = c.0;
                    let value = if l > 0.0 { l / r } else { l * r };
                    let constraint = Constraint::RepetitionPenalty { penalty: r };
                    c.0 = constrained(constraint, c.1, l, value)?;
                }
            }
        }
        let (f, p) = (policy.frequency_penalty, policy.presence_penalty);
        if f != 0.0 || p != 0.0 {
            let counts = &mut self.counts;
            counts.clear();
            counts.extend_from_slice(counted);
            counts.sort_unstable();
            for run in counts.chunk_by(|a, b| a == b) {
                let Ok(at) = self.candidates.binary_search_by_key(&run[0], |c| c.1) else {
                    continue;
                };
                let l = self.candidates[at].0;
                let n = run.len() as f64;
                let value = if t == 1.0 {
                    l - n * f - p
                } else {
                    l - (n * f + p) * t
                };
                let constraint = Constraint::FrequencyPresence {
                    frequency: f,
                    count: run.len(),
                    presence: p,
                };
                self.candidates[at].0 = constrained(constraint, run[0], l, value)?;
            }
        }
        Ok(())
    }

    /// Keeps the candidates marked in `keep` (one mark per candidate), in order.
    fn retain_marked(&mut self, keep: &[bool]) {
        let mut marks = keep.iter();
        self.candidates.retain(|_| *marks.next().unwrap_or(&false));
        self.weights.clear();
    }

    /// `min_keep` ([`Policy::min_keep`]): when the stage just run left fewer than
    /// `policy.min_keep` of the candidates it was `given`, the best `min_keep` of those
    /// survive instead, in id order: the most probable, or with `typical` the smallest
    /// |−ln p − H| (Hugging Face's and llama.cpp's order for typical sampling). The lab keeps
    /// every token tied with the last one kept, as at its other cuts; an engine keeps
    /// exactly `min_keep`, ties to the lower id.
    fn keep_at_least(
        &mut self,
        given: Option<&[(f64, u32)]>,
        policy: &Policy,
        t: f64,
        typical: bool,
    ) {
        let Some(given) = given else { return };
        let want = policy.min_keep.min(given.len());
        if self.candidates.len() >= want {
            return;
        }
        // Higher is better; the descending order puts ties in id order.
        let merit: Vec<f64> = if typical {
            let max = given.iter().map(|c| c.0).fold(f64::NEG_INFINITY, f64::max);
            let mut w = Vec::new();
            let total = weigh_candidates(given, max, t, &mut w);
            let p: Vec<f64> = w.iter().map(|w| w / total).collect();
            modern::typical_scores(&p).iter().map(|s| -s).collect()
        } else {
            given.iter().map(|c| c.0).collect()
        };
        let order = descending(&merit);
        let last = merit[order[want - 1]];
        let mut keep = vec![false; given.len()];
        for (n, &i) in order.iter().enumerate() {
            keep[i] = n < want || (policy.engine.is_lab() && merit[i] == last);
        }
        self.candidates.clear();
        self.candidates
            .extend(given.iter().zip(&keep).filter(|(_, &k)| k).map(|(c, _)| *c));
        self.weights.clear();
    }

    /// Keeps the candidates whose weight passes `keep`, in order.
    fn retain(&mut self, keep: impl Fn(f64) -> bool) {
        let mut kept = 0;
        for i in 0..self.candidates.len() {
            if keep(self.weights[i]) {
                self.candidates[kept] = self.candidates[i];
                self.weights[kept] = self.weights[i];
                kept += 1;
            }
        }
        self.candidates.truncate(kept);
        self.weights.truncate(kept);
    }

    /// Collects the constrained logits as sparse overrides, sorted by id; fails at the first
    /// constraint whose result leaves the range of a float. Without `penalties` only the
    /// bias and the removals are collected (a chain that penalises later).
    fn build_overrides<L: Logit>(
        &mut self,
        policy: &Policy,
        logits: &[L],
        context: StepContext<'_>,
        penalties: bool,
    ) -> Result<(), PolicyError> {
        let overrides = &mut self.overrides;
        overrides.clear();
        let base = |id: u32| Some(logits[id as usize].to_f64());
        let sequence_bias = sequences::biased(&policy.sequence_bias, context.tokens);
        for &(id, _) in policy.logit_bias.iter().chain(&sequence_bias) {
            overrides.push((id, base(id)));
        }
        let (repeated, counted_tokens) = policy.engine.penalised(policy, context);
        let penalised = penalties && policy.repetition_penalty != 1.0;
        if penalised {
            overrides.extend(repeated.iter().map(|&id| (id, base(id))));
        }
        let counted =
            penalties && (policy.frequency_penalty != 0.0 || policy.presence_penalty != 0.0);
        if counted {
            overrides.extend(counted_tokens.iter().map(|&id| (id, base(id))));
        }
        overrides.sort_unstable_by_key(|o| o.0);
        overrides.dedup_by_key(|o| o.0);

        // Logit bias, then the repetition penalty, then frequency and presence.
        // Each stage's results are checked before the next stage reads them, so an overflow
        // is blamed on the stage that made it.
        for &(id, bias) in policy.logit_bias.iter().chain(&sequence_bias) {
            if let Ok(at) = overrides.binary_search_by_key(&id, |o| o.0) {
                if let Some(l) = overrides[at].1 {
                    overrides[at].1 = Some(constrained(
                        Constraint::LogitBias { bias },
                        id,
                        l,
                        l + bias,
                    )?);
                }
            }
        }
        if penalised {
            let r = policy.repetition_penalty;
            let seen = &mut self.counts;
            seen.clear();
            seen.extend_from_slice(repeated);
            seen.sort_unstable();
            for o in overrides.iter_mut() {
                if let (Ok(_), Some(l)) = (seen.binary_search(&o.0), o.1) {
                    let value = if l > 0.0 { l / r } else { l * r };
                    let constraint = Constraint::RepetitionPenalty { penalty: r };
                    o.1 = Some(constrained(constraint, o.0, l, value)?);
                }
            }
        }
        if counted {
            let counts = &mut self.counts;
            counts.clear();
            counts.extend_from_slice(counted_tokens);
            counts.sort_unstable();
            for run in counts.chunk_by(|a, b| a == b) {
                let at = overrides
                    .binary_search_by_key(&run[0], |o| o.0)
                    .expect("counted tokens were added as overrides");
                if let Some(l) = overrides[at].1 {
                    let n = run.len() as f64;
                    let value = l - n * policy.frequency_penalty - policy.presence_penalty;
                    let constraint = Constraint::FrequencyPresence {
                        frequency: policy.frequency_penalty,
                        count: run.len(),
                        presence: policy.presence_penalty,
                    };
                    overrides[at].1 = Some(constrained(constraint, run[0], l, value)?);
                }
            }
        }

        // Removals: no-repeat n-grams, bad words, end-of-sequence before min_new_tokens,
        // forbidden ids.
        let mut removed: Vec<u32> = policy.forbidden.clone();
        removed.extend(banned_by_ngram(context.tokens, policy.no_repeat_ngram));
        removed.extend(sequences::banned(
            &policy.bad_words,
            sequences::bad_words_context(policy.engine, context),
        ));
        if context.generated().len() < policy.min_new_tokens {
            removed.extend(policy.eos_ids());
        }
        for id in removed {
            match overrides.binary_search_by_key(&id, |o| o.0) {
                Ok(at) => overrides[at].1 = None,
                Err(at) => overrides.insert(at, (id, None)),
            }
        }
        Ok(())
    }
}

/// The largest bias or subtracted penalty a device step takes (and the repetition
/// penalty's range, its inverse to itself): with the model's logits, far from the largest
/// f32.
pub const DEVICE_CONSTRAINT_LIMIT: f64 = 1e6;

/// Per token, what a step's constraints do to its logit, in the host step's order: add
/// `bias`; when `repeated`, divide a positive logit by the repetition penalty and multiply
/// a negative one; subtract `counts` times the frequency penalty, and the presence penalty
/// once when `counts` is above 0; then drop the token when `removed`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstraintTable {
    pub bias: Vec<f64>,
    pub repeated: Vec<bool>,
    pub counts: Vec<u32>,
    pub removed: Vec<bool>,
}

/// A constraint's result for token `id`, or the error that names the constraint when the
/// result is not a finite number.
fn constrained(
    constraint: Constraint,
    id: u32,
    logit: f64,
    value: f64,
) -> Result<f64, PolicyError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(PolicyError::ConstraintOverflow {
            constraint,
            index: id as usize,
            logit,
            value,
        })
    }
}

fn temperature_overflow(temperature: f64, id: u32, logit: f64) -> PolicyError {
    PolicyError::TemperatureOverflow {
        temperature,
        index: id as usize,
        logit,
        value: logit / temperature,
    }
}

/// In Hugging Face's order the temperature divides every live logit, and each quotient is
/// reported (the temperature snapshot, top five), so each must be finite. |l| / t can exceed
/// `f64::MAX` only when t < 1; then the overrides (few) are checked one by one, and the raw
/// logits only when the type's largest value would overflow (f64 logits, or an f32 logit
/// over a temperature below 2e-270), in one more pass over the vocabulary.
fn check_scaled<L: Logit>(logits: &[L], overrides: &[Override], t: f64) -> Result<(), PolicyError> {
    if t >= 1.0 {
        return Ok(());
    }
    let mut first = None;
    if (L::LARGEST / t).is_finite() {
        first = overrides
            .iter()
            .find_map(|&(id, v)| v.filter(|v| !(v / t).is_finite()).map(|v| (id, v)));
    } else {
        scan_live(logits, overrides, |id, logit| {
            if first.is_none() && !(logit / t).is_finite() {
                first = Some((id, logit));
            }
        })?;
    }
    match first {
        Some((id, logit)) => Err(temperature_overflow(t, id, logit)),
        None => Ok(()),
    }
}

/// Tokens that would complete an n-gram already present in `tokens` (Hugging Face's
/// `NoRepeatNGramLogitsProcessor`).
fn banned_by_ngram(tokens: &[u32], n: usize) -> Vec<u32> {
    if n == 0 || tokens.len() + 1 < n {
        return Vec::new();
    }
    let prefix = &tokens[tokens.len() + 1 - n..];
    tokens
        .windows(n)
        .filter(|w| &w[..n - 1] == prefix)
        .map(|w| w[n - 1])
        .collect()
}

/// Logits per chunk: top-k reads the maxima of chunks this long before any logit.
const CHUNK: usize = 256;

/// The logits in chunks of [`CHUNK`], each with its first id and the overrides inside it.
fn chunks<'a, L: Logit>(
    logits: &'a [L],
    overrides: &'a [Override],
) -> impl Iterator<Item = (usize, &'a [L], &'a [Override])> + 'a {
    let mut pending = overrides;
    logits.chunks(CHUNK).enumerate().map(move |(c, chunk)| {
        let base = c * CHUNK;
        let end = base + chunk.len();
        let (here, rest) = pending.split_at(pending.partition_point(|o| (o.0 as usize) < end));
        pending = rest;
        (base, chunk, here)
    })
}

/// Calls `visit(id, logit)` for every live token of one chunk, overrides applied.
#[inline(always)]
fn visit_chunk<L: Logit>(
    chunk: &[L],
    base: usize,
    overrides: &[Override],
    mut visit: impl FnMut(u32, f64),
) {
    let mut next = overrides.iter().peekable();
    for (offset, &l) in chunk.iter().enumerate() {
        let id = (base + offset) as u32;
        match next.peek() {
            Some(&&(overridden, value)) if overridden == id => {
                next.next();
                if let Some(v) = value {
                    visit(id, v);
                }
            }
            _ => visit(id, l.to_f64()),
        }
    }
}

/// Whether a step can read `logits`: at least one, and every one finite. The step checks
/// the same; a caller that must refuse them before (a form, a message that cannot carry
/// NaN) asks here.
pub fn check_logits<L: Logit>(logits: &[L]) -> Result<(), PolicyError> {
    if logits.is_empty() {
        return Err(PolicyError::EmptyVocabulary);
    }
    max_logit(logits).map(drop)
}

/// The largest of `logits`, from the maxima of chunks of [`CHUNK`]; fails on the first
/// logit that is not finite.
pub(crate) fn max_logit<L: Logit>(logits: &[L]) -> Result<f64, PolicyError> {
    let mut maxima = Vec::with_capacity(logits.len().div_ceil(CHUNK));
    L::chunk_maxima(logits, &mut maxima)?;
    Ok(maxima.into_iter().fold(f64::NEG_INFINITY, f64::max))
}

pub(crate) fn first_non_finite<L: Logit>(chunk: &[L], base: usize) -> PolicyError {
    let (offset, value) = chunk
        .iter()
        .map(|l| l.to_f64())
        .enumerate()
        .find(|(_, v)| !v.is_finite())
        .unwrap_or((0, f64::NAN));
    PolicyError::NonFiniteLogit {
        index: base + offset,
        value,
    }
}

/// Calls `visit(id, logit)` for every token not removed, in id order, with overrides
/// applied; fails on the first non-finite input logit.
fn scan_live<L: Logit>(
    logits: &[L],
    overrides: &[Override],
    mut visit: impl FnMut(u32, f64),
) -> Result<(), PolicyError> {
    for (base, chunk, here) in chunks(logits, overrides) {
        if chunk.iter().any(|l| !l.to_f64().is_finite()) {
            return Err(first_non_finite(chunk, base));
        }
        visit_chunk(chunk, base, here, &mut visit);
    }
    Ok(())
}

/// Leaves in `out` every live token whose logit is at least the k-th largest (ties at the
/// k-th value kept, as Hugging Face does), in no particular order. Two passes:
/// 1. the maximum of every chunk (vectorised; it also rejects non-finite logits);
/// 2. only the chunks whose maximum reaches the k-th largest chunk maximum are read
///    again. That value is a lower bound of the k-th largest logit, since the k largest
///    chunk maxima are k distinct logits at least as large; so nothing is missed.
fn top_k_candidates<L: Logit>(
    logits: &[L],
    overrides: &[Override],
    k: usize,
    maxima: &mut Vec<f64>,
    scratch: &mut Vec<f64>,
    out: &mut Vec<(f64, u32)>,
) -> Result<(), PolicyError> {
    maxima.clear();
    L::chunk_maxima(logits, maxima)?;
    // A chunk with overrides is weighed again as they leave it.
    let mut rest = overrides;
    while let Some(&(id, _)) = rest.first() {
        let base = id as usize / CHUNK * CHUNK;
        if base >= logits.len() {
            break;
        }
        let (here, after) = rest.split_at(rest.partition_point(|o| (o.0 as usize) < base + CHUNK));
        let mut max = f64::NEG_INFINITY;
        visit_chunk(
            &logits[base..logits.len().min(base + CHUNK)],
            base,
            here,
            |_, v| max = max.max(v),
        );
        maxima[base / CHUNK] = max;
        rest = after;
    }
    let threshold = if maxima.len() > k {
        scratch.clear();
        scratch.extend_from_slice(maxima);
        kth_largest(scratch, k)
    } else {
        f64::NEG_INFINITY
    };
    for ((base, chunk, here), &max) in chunks(logits, overrides).zip(maxima.iter()) {
        if max < threshold {
            continue;
        }
        if !here.is_empty() {
            // An override may lift a logit above its sub-block's raw maximum.
            visit_chunk(chunk, base, here, |id, v| {
                if v >= threshold {
                    out.push((v, id));
                }
            });
            continue;
        }
        let mut masks = [0u64; CHUNK / 64];
        at_least(chunk, threshold, &mut masks);
        for offset in math::set_bits(&masks) {
            out.push((chunk[offset].to_f64(), (base + offset) as u32));
        }
    }
    if out.len() > k {
        keep_top_k(out, k);
    }
    Ok(())
}

/// Bit j of `masks[b]` set when `chunk[64 b + j]` is at least `threshold`: packed compares,
/// so that top-k's second pass visits only the logits it keeps.
#[inline(always)]
fn at_least_lanes<L: Logit>(chunk: &[L], threshold: f64, masks: &mut [u64]) {
    let mask = |block: &[L]| {
        let mut mask = 0u64;
        for (j, &x) in block.iter().enumerate() {
            mask |= u64::from(x.to_f64() >= threshold) << j;
        }
        mask
    };
    // Natively in blocks of exactly 64, which the compiler packs; in WebAssembly as one
    // loop, which it does not unroll (as `math::masks` does).
    if cfg!(target_arch = "wasm32") {
        for (block, m) in chunk.chunks(64).zip(masks.iter_mut()) {
            *m = mask(block);
        }
        return;
    }
    let blocks = chunk.chunks_exact(64);
    let tail = blocks.remainder();
    let n = blocks.len();
    for (block, m) in blocks.zip(masks.iter_mut()) {
        *m = mask(block);
    }
    if !tail.is_empty() {
        masks[n] = mask(tail);
    }
}

math::widest!(at_least [L: Logit] = at_least_lanes(chunk: &[L], threshold: f64, masks: &mut [u64]) -> ());

/// The k-th largest of `values` (k from 1), which it reorders. Every selection of the
/// policy goes through this one function, so the selection is compiled once.
pub(crate) fn kth_largest(values: &mut [f64], k: usize) -> f64 {
    *values
        .select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a))
        .1
}

/// Indices of `keys` from the largest key to the smallest, ties in index order (a stable
/// sort): candidates are in id order, so ties go to the lower id. Every ranking of the
/// engines and samplers goes through this one function, so the sort is compiled once.
pub(crate) fn descending(keys: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| keys[b].total_cmp(&keys[a]));
    order
}

/// Keeps the entries at least as large as the k-th largest; returns that k-th value.
fn keep_top_k(buf: &mut Vec<(f64, u32)>, k: usize) -> f64 {
    let (_, kth, _) = buf.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
    let kth = kth.0;
    buf.retain(|c| c.0 >= kth);
    kth
}

/// The weights of `candidates` ([`math::weigh`]); one function for every list of candidates,
/// so that the kernel is compiled once for them.
fn weigh_candidates(candidates: &[(f64, u32)], max: f64, t: f64, out: &mut Vec<f64>) -> f64 {
    math::weigh(candidates, logit, max, t, out)
}

/// A candidate's logit.
fn logit(candidate: (f64, u32)) -> f64 {
    candidate.0
}

/// Sets `weights` to the weights of `dense` (every token's, by id) that are at least
/// `cutoff`, in id order, and makes their tokens the `candidates`: what [`Stepper::retain`]
/// leaves of a candidate per token. The survivors are found 64 weights at a time as a bit
/// mask, so the work is one compare per token and one move per survivor, without a branch
/// per token that a fraction of them take.
fn keep_dense<L: Logit>(
    logits: &[L],
    dense: &[f64],
    cutoff: f64,
    masks: &mut Vec<u64>,
    weights: &mut Vec<f64>,
    candidates: &mut Vec<(f64, u32)>,
) {
    weights.clear();
    math::masks(dense, cutoff, f64::INFINITY, masks);
    for id in math::set_bits(masks) {
        weights.push(dense[id]);
        candidates.push((logits[id].to_f64(), id as u32));
    }
}

/// At most this many weights, top-p resolves its cut-off by one quickselect over all of
/// them, without the histogram (whose buckets would outnumber the weights).
const DIRECT_NUCLEUS: usize = 1024;

/// Top-p's histogram has 2^(52 - BUCKET_SHIFT) = 64 buckets per octave of weight.
const BUCKET_SHIFT: u32 = 46;

/// The smallest weight top-p keeps. `weights` are exp((logit - max) / t), so the largest
/// is 1; a token survives when the mass strictly above it is below `top_p` times the total
/// (ties with the last survivor are kept).
///
/// Up to [`DIRECT_NUCLEUS`] weights, one quickselect over them all. Above, O(V) and
/// cache-friendly: one packed pass computes each weight's logarithmic bucket, one
/// pass sums the weights into the buckets, a walk down the buckets finds the one where the
/// mass crosses the target, and only that bucket's weights (found by a packed compare) are
/// resolved exactly, by a quickselect. Weights below (1 - top_p) / V can never survive (the
/// total is at least 1 and V of them hold less than 1 - top_p), so they share bucket 0.
fn nucleus_cutoff(weights: &[f64], top_p: f64, total: f64, scratch: &mut NucleusScratch) -> f64 {
    let target = top_p * total;
    if weights.len() <= DIRECT_NUCLEUS {
        scratch.select.clear();
        scratch.select.extend_from_slice(weights);
        return select_cutoff(&mut scratch.select, 0.0, target);
    }
    let floor_bits = ((1.0 - top_p) / weights.len() as f64).to_bits();
    let top = math::bucket(1.0, floor_bits, BUCKET_SHIFT) as usize;
    math::buckets(
        weights,
        floor_bits,
        BUCKET_SHIFT,
        top as u32,
        &mut scratch.buckets,
    );
    // Four interleaved histograms (weight i into copy i mod 4), so that weights falling in
    // the same bucket one after another do not each wait for the previous sum.
    let buckets = top + 1;
    let histogram = &mut scratch.histogram;
    histogram.clear();
    histogram.resize(4 * buckets, 0.0);
    let (h0, rest) = histogram.split_at_mut(buckets);
    let (h1, rest) = rest.split_at_mut(buckets);
    let (h2, h3) = rest.split_at_mut(buckets);
    let quads = weights.chunks_exact(4).zip(scratch.buckets.chunks_exact(4));
    for (w, b) in quads {
        h0[b[0] as usize] += w[0];
        h1[b[1] as usize] += w[1];
        h2[b[2] as usize] += w[2];
        h3[b[3] as usize] += w[3];
    }
    let done = weights.len() / 4 * 4;
    for (k, (&w, &b)) in weights[done..]
        .iter()
        .zip(&scratch.buckets[done..])
        .enumerate()
    {
        [&mut *h0, &mut *h1, &mut *h2][k][b as usize] += w;
    }
    let mass = |b: usize| (h0[b] + h1[b]) + (h2[b] + h3[b]);
    let mut above = 0.0;
    let mut crossing = top;
    while crossing > 0 && above + mass(crossing) < target {
        above += mass(crossing);
        crossing -= 1;
    }
    // The crossing bucket's weights, as a range of values.
    let lower = if crossing == 0 {
        0.0
    } else {
        f64::from_bits(floor_bits + (((crossing - 1) as u64) << BUCKET_SHIFT))
    };
    let upper = if crossing == top {
        f64::INFINITY
    } else {
        f64::from_bits(floor_bits + ((crossing as u64) << BUCKET_SHIFT))
    };
    math::masks(weights, lower, upper, &mut scratch.masks);
    let select = &mut scratch.select;
    select.clear();
    select.extend(math::set_bits(&scratch.masks).map(|i| weights[i]));
    select_cutoff(select, above, target)
}

/// The scratch of [`nucleus_cutoff`], kept across steps.
#[derive(Clone, Debug, Default)]
struct NucleusScratch {
    buckets: Vec<u32>,
    histogram: Vec<f64>,
    masks: Vec<u64>,
    select: Vec<f64>,
}

/// Within one bucket: the smallest weight whose mass strictly above (`above` plus the
/// larger weights of this bucket) is below `target`. A three-way quickselect that only
/// descends into one side.
fn select_cutoff(weights: &mut [f64], mut above: f64, target: f64) -> f64 {
    let mut cutoff = f64::INFINITY;
    let mut slice = weights;
    while !slice.is_empty() {
        let pivot = median_of_three(slice);
        // Dutch-flag partition: [greater | equal | less].
        let (mut gt, mut i, mut lt) = (0, 0, slice.len());
        let (mut gt_sum, mut eq_sum) = (0.0, 0.0);
        while i < lt {
            let w = slice[i];
            if w > pivot {
                gt_sum += w;
                slice.swap(i, gt);
                gt += 1;
                i += 1;
            } else if w < pivot {
                lt -= 1;
                slice.swap(i, lt);
            } else {
                eq_sum += w;
                i += 1;
            }
        }
        if above + gt_sum >= target {
            slice = &mut slice[..gt];
            continue;
        }
        cutoff = pivot;
        above += gt_sum + eq_sum;
        if above >= target {
            break;
        }
        slice = &mut slice[lt..];
    }
    cutoff
}

fn median_of_three(s: &[f64]) -> f64 {
    let (a, b, c) = (s[0], s[s.len() / 2], s[s.len() - 1]);
    a.max(b).min(a.min(b).max(c))
}

/// The highest-logit of `candidates`, ties to the earlier (in id order, the lower id).
fn argmax(candidates: &[(f64, u32)]) -> (f64, u32) {
    let mut best = candidates[0];
    for &c in &candidates[1..] {
        if c.0 > best.0 {
            best = c;
        }
    }
    best
}

/// The distribution of `candidates` (ascending ids) at temperature `t`.
fn snapshot(stage: Stage, candidates: &[(f64, u32)], t: f64) -> StageSnapshot {
    let max = candidates
        .iter()
        .map(|c| c.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut weights = Vec::new();
    let total = weigh_candidates(candidates, max, t, &mut weights);
    StageSnapshot {
        temperature: None,
        stage,
        survivors: candidates.len(),
        tokens: candidates
            .iter()
            .zip(&weights)
            .map(|(&(logit, id), w)| TokenProb {
                id,
                logit: logit / t,
                prob: w / total,
            })
            .collect(),
    }
}

/// The five most probable survivors, most probable first (ties to the lower id).
fn top_five(candidates: &[(f64, u32)], weights: &[f64], total: f64, t: f64) -> Vec<TokenProb> {
    // Each with its weight: a weight not above the fifth's has a probability not above it,
    // and loses a tie to the fifth, whose id is lower.
    let mut best: Vec<(f64, TokenProb)> = Vec::with_capacity(6);
    for (&(logit, id), &w) in candidates.iter().zip(weights) {
        if best.len() == 5 && w <= best[4].0 {
            continue;
        }
        let prob = w / total;
        if best.len() == 5 && best[4].1.prob >= prob {
            continue;
        }
        let at = best.partition_point(|b| b.1.prob >= prob);
        let token = TokenProb {
            id,
            logit: logit / t,
            prob,
        };
        best.insert(at, (w, token));
        best.truncate(5);
    }
    best.into_iter().map(|(_, token)| token).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::tests::reads_back;

    #[test]
    fn the_lab_temperatures_text_is_the_lab_temperature() {
        assert_eq!(LAB_TEMPERATURE_TEXT.parse::<f64>(), Ok(LAB_TEMPERATURE));
        assert_eq!(
            crate::Shortest(LAB_TEMPERATURE).to_string(),
            LAB_TEMPERATURE_TEXT
        );
    }

    #[test]
    fn an_order_reads_back_from_its_name_in_text_and_in_json() {
        for order in StageOrder::ALL {
            reads_back(order);
        }
    }

    #[test]
    fn an_unknown_order_is_named_with_the_known_ones() {
        assert_eq!(
            "llama".parse::<StageOrder>().unwrap_err().to_string(),
            "order \"llama\" is not known: expected hf or temperature-last"
        );
    }
}
