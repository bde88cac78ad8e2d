//! Engine presets: the order of the stages and the exact rule of each, as Hugging Face
//! transformers, llama.cpp and vLLM implement them. `docs/engine-semantics.md` quotes the
//! source lines; the files and commits read were:
//!
//! - Hugging Face: `src/transformers/generation/logits_process.py` at aa5108b4 (the
//!   warpers and the repetition penalty) and `generation/utils.py` at 000034a4
//!   (`_get_logits_processor`, the order);
//! - llama.cpp (ggml-org): `src/llama-sampling.cpp` at e19fb5f1 (top-k, top-p, min-p, temp,
//!   penalties), `common/common.h` at 001d906a (the default chain, `penalty_last_n = 64`),
//!   `tools/main/main.cpp` at 771e0365 (the prompt is accepted into the penalty window);
//! - vLLM (v1): `vllm/v1/sample/sampler.py` at 3e342658 (the order),
//!   `v1/sample/ops/topk_topp_sampler.py` at 01fa3fe7 (`apply_top_k_top_p_pytorch`),
//!   `model_executor/layers/utils.py` at 00358600 (`apply_penalties`) and
//!   `sampling_params.py` at 00388f65 (`_verify_args`, the ranges).
//!
//! A preset sets the order and the semantics, never a knob's value: a stage the user did
//! not switch on stays off under every engine (llama.cpp's own defaults, top-k 40 and
//! top-p 0.95, are not switched on). What differs, engine by engine:
//!
//! | | lab (ours) | hf | llama.cpp | vllm |
//! |---|---|---|---|---|
//! | order | `--order` | penalties, temperature, top-k, top-p, min-p | penalties, top-k, top-p, min-p, temperature | penalties, temperature, min-p, top-k, top-p |
//! | top-k ties at the k-th | kept | kept | exactly k (the lower ids) | kept |
//! | top-p | every token whose mass above is < p; ties with the last kept | ascending cumsum ≤ 1 − p removed, the top token kept | descending prefix until the cumsum ≥ p | as hf |
//! | top-p 0 / above 1 | refused | keeps one / off | keeps one / off (any value) | refused |
//! | min-p | p ≥ min-p · p_max; in [0, 1] | as ours, in probabilities | logit ≥ max + ln(min-p); above 1 keeps one | as hf |
//! | temperature | 0 greedy | 0 greedy (`do_sample=False`) | ≤ 0 greedy, any value | 0 greedy, at most 2, below 0.01 runs at 0.01 |
//! | repetition penalty | whole context | whole context | last `penalty_last_n` (64) of prompt + output | prompt and output |
//! | frequency, presence | output | none | the same window as repetition | output, each in [−2, 2] |
//! | no-repeat n-grams, min new tokens | yes | yes | none | min tokens only |
//! | top-H (`modern::top_h`) | yes | yes | none | none |
//! | dynamic temperature (`modern::dynamic_temperature`) | yes | none | `temp-ext`; never greedy by T alone | none |
//!
//! Where an engine's sort is not stable (llama.cpp's `std::partial_sort`, torch's
//! `sort`) the tokens tied at a cut are ordered by id, lower first: the engine's own
//! choice among them is unspecified, ours is fixed so that a replay is exact. Sums are in
//! f64 where the engines use f32; at an exact boundary the engines may round the other way.

use serde::{Deserialize, Serialize};

use crate::chain::{Sampler, HF_CHAIN, TEMPERATURE_LAST_CHAIN};
use crate::math;
use crate::{Policy, PolicyError, Shortest, StepContext};

/// Whose semantics a policy follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Engine {
    /// The lab's own rules: ties kept at every cut, so a result never depends on a sort.
    #[default]
    #[serde(rename = "lab")]
    Lab,
    #[serde(rename = "hf")]
    Hf,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "vllm")]
    Vllm,
}

/// vLLM's preset order: min-p runs after temperature and before top-k and top-p.
pub const VLLM_CHAIN: [Sampler; 5] = [
    Sampler::Penalties,
    Sampler::Temperature,
    Sampler::MinP,
    Sampler::TopK,
    Sampler::TopP,
];

/// llama.cpp's `penalty_last_n` default (`common_params_sampling`).
pub const LLAMA_CPP_PENALTY_LAST_N: i64 = 64;

/// vLLM raises a temperature in (0, 0.01) to 0.01 (`SamplingParams.__post_init__`).
const VLLM_MIN_TEMPERATURE: f64 = 0.01;
/// vLLM's largest temperature (`_verify_args`).
const VLLM_MAX_TEMPERATURE: f64 = 2.0;

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Lab, Engine::Hf, Engine::LlamaCpp, Engine::Vllm];

    /// The name in `--engine`, the lab's `engine=` key and the run record.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Lab => "lab",
            Engine::Hf => "hf",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Vllm => "vllm",
        }
    }

    pub fn is_lab(&self) -> bool {
        *self == Engine::Lab
    }

    /// The engine's own order of the stages this policy has.
    pub fn chain(self) -> &'static [Sampler] {
        match self {
            Engine::Lab | Engine::Hf => &HF_CHAIN,
            Engine::LlamaCpp => &TEMPERATURE_LAST_CHAIN,
            Engine::Vllm => &VLLM_CHAIN,
        }
    }

    /// Whether temperature `t` means the argmax.
    pub fn is_greedy(self, t: f64) -> bool {
        match self {
            Engine::LlamaCpp => t <= 0.0,
            _ => t == 0.0,
        }
    }

    /// The temperature the engine runs at when asked for `t`.
    pub fn temperature(self, t: f64) -> f64 {
        match self {
            Engine::Vllm if t > 0.0 && t < VLLM_MIN_TEMPERATURE => VLLM_MIN_TEMPERATURE,
            _ => t,
        }
    }

    /// What this engine takes for the knob whose flag is `flag` ([`crate::KNOBS`]), in the
    /// words its rule refuses other values with: the range [`Policy::validate`] checks, or
    /// that the engine has no such setting. `None` where the engine's rule is only the
    /// knob's kind (a whole number, any finite number).
    ///
    /// ```
    /// use policy::Engine;
    /// assert_eq!(Engine::Vllm.accepts("temperature"), Some("a temperature from 0 to 2"));
    /// assert_eq!(Engine::Hf.accepts("xtc-probability"), Some("no such sampler"));
    /// ```
    pub fn accepts(self, flag: &str) -> Option<&'static str> {
        use Engine::*;
        const FINITE: &str = "any finite number here";
        const NONE: &str = "no such sampler";
        const UNIT: &str = "a min-p from 0 to 1";
        const CUTOFF: &str = "a cutoff from 0 (off) up to, not including, 1";
        const TYPICAL: &str = "a typical mass greater than 0 and at most 1 (1 is off)";
        const XTC: &str = "an XTC probability and threshold from 0 to 1";
        const TOP_H: &str = "a top-h greater than 0 and at most 1";
        const NO_DYNATEMP: &str = "no dynamic temperature";
        const DRY: &str = "a finite DRY multiplier of at least 0 and a finite base of at least 1";
        const MIROSTAT: &str =
            "a finite target surprise τ and learning rate η, each greater than 0";
        const SEQUENCES: &str = "no Hugging Face sequence processor (bad words, sequence bias)";
        let (lab, hf, llama, vllm) = match flag {
            "temperature" => (
                "a finite number, at least 0 (0 means greedy)",
                "a finite temperature of at least 0 (0 is do_sample=False)",
                FINITE,
                "a temperature from 0 to 2",
            ),
            "top-p" => (
                "greater than 0 and at most 1",
                "a top-p of at least 0 (0 keeps the top token, 1 or more is off)",
                FINITE,
                "a top-p greater than 0 and at most 1",
            ),
            "min-p" => ("between 0 and 1", UNIT, FINITE, UNIT),
            "min-keep" => ("", "", "", "no such setting"),
            "frequency-penalty" | "presence-penalty" => (
                "",
                "no frequency or presence penalty, only repetition",
                "",
                "frequency and presence penalties from -2 to 2",
            ),
            "no-repeat-ngram" => ("", "", "no n-gram ban", "no n-gram ban"),
            "min-new-tokens" => ("", "", "no minimum of new tokens", ""),
            // vLLM takes any bad words (matched against the output alone: `sequences.rs`).
            "bad-words" => ("", "", SEQUENCES, ""),
            "sequence-bias" => ("", "", SEQUENCES, "no sequence bias"),
            "typical" => (TYPICAL, TYPICAL, FINITE, NONE),
            "epsilon-cutoff" | "eta-cutoff" => (CUTOFF, CUTOFF, NONE, NONE),
            "top-n-sigma" => (
                "a finite number of standard deviations greater than 0",
                NONE,
                FINITE,
                NONE,
            ),
            "top-h" => (TOP_H, TOP_H, NONE, NONE),
            "dynatemp-range" => (
                "a finite dynamic temperature range of at least 0 (0 is off)",
                NO_DYNATEMP,
                FINITE,
                NO_DYNATEMP,
            ),
            "dynatemp-exp" => (FINITE, FINITE, FINITE, FINITE),
            "xtc-probability" => (XTC, NONE, FINITE, NONE),
            "xtc-threshold" => (XTC, XTC, FINITE, XTC),
            "dry-multiplier" => (DRY, NONE, FINITE, NONE),
            "dry-base" => (DRY, DRY, FINITE, DRY),
            "mirostat" => ("", NONE, "", NONE),
            "mirostat-tau" | "mirostat-eta" => (MIROSTAT, MIROSTAT, FINITE, MIROSTAT),
            _ => return None,
        };
        let words = match self {
            Lab => lab,
            Hf => hf,
            LlamaCpp => llama,
            Vllm => vllm,
        };
        (!words.is_empty()).then_some(words)
    }

    /// [`accepts`](Self::accepts) for a knob this engine's rule refuses: its words.
    fn rule(self, flag: &str) -> &'static str {
        self.accepts(flag).unwrap_or("what its rule allows")
    }

    /// Checks the knobs whose ranges or existence depend on the engine.
    pub(crate) fn check(self, policy: &Policy) -> Result<(), PolicyError> {
        let refuse = |knob: String, flag: &str| {
            Err(PolicyError::EngineRefuses {
                engine: self,
                knob,
                accepts: self.rule(flag),
            })
        };
        let t = policy.temperature;
        match self {
            Engine::Lab => {
                if !(t >= 0.0 && t.is_finite()) {
                    return Err(PolicyError::InvalidTemperature(t));
                }
                if !(policy.top_p > 0.0 && policy.top_p <= 1.0) {
                    return Err(PolicyError::InvalidTopP(policy.top_p));
                }
                if !(0.0..=1.0).contains(&policy.min_p) {
                    return Err(PolicyError::InvalidMinP(policy.min_p));
                }
            }
            Engine::Hf => {
                if !(t >= 0.0 && t.is_finite()) {
                    return refuse(format!("temperature {}", Shortest(t)), "temperature");
                }
                if !(policy.top_p >= 0.0 && policy.top_p.is_finite()) {
                    return refuse(format!("top-p {}", Shortest(policy.top_p)), "top-p");
                }
                if !(0.0..=1.0).contains(&policy.min_p) {
                    return refuse(format!("min-p {}", Shortest(policy.min_p)), "min-p");
                }
                if let Some(knob) = counted_penalties(policy) {
                    return refuse(knob, "frequency-penalty");
                }
            }
            Engine::LlamaCpp => {
                for (name, value) in [
                    ("temperature", t),
                    ("top-p", policy.top_p),
                    ("min-p", policy.min_p),
                ] {
                    if !value.is_finite() {
                        return refuse(format!("{name} {}", Shortest(value)), name);
                    }
                }
                if policy.no_repeat_ngram > 0 {
                    return refuse(
                        format!("no-repeat {}-grams", policy.no_repeat_ngram),
                        "no-repeat-ngram",
                    );
                }
                if policy.min_new_tokens > 0 {
                    return refuse(
                        format!("min-new-tokens {}", policy.min_new_tokens),
                        "min-new-tokens",
                    );
                }
            }
            Engine::Vllm => {
                if !(0.0..=VLLM_MAX_TEMPERATURE).contains(&t) {
                    return refuse(format!("temperature {}", Shortest(t)), "temperature");
                }
                if !(policy.top_p > 0.0 && policy.top_p <= 1.0) {
                    return refuse(format!("top-p {}", Shortest(policy.top_p)), "top-p");
                }
                if !(0.0..=1.0).contains(&policy.min_p) {
                    return refuse(format!("min-p {}", Shortest(policy.min_p)), "min-p");
                }
                for (name, value) in [
                    ("frequency penalty", policy.frequency_penalty),
                    ("presence penalty", policy.presence_penalty),
                ] {
                    if !(-2.0..=2.0).contains(&value) {
                        return refuse(format!("{name} {}", Shortest(value)), "frequency-penalty");
                    }
                }
                if policy.no_repeat_ngram > 0 {
                    return refuse(
                        format!("no-repeat {}-grams", policy.no_repeat_ngram),
                        "no-repeat-ngram",
                    );
                }
            }
        }
        self.check_modern(policy)?;
        self.check_mirostat(policy)?;
        self.check_dynamic_temperature(policy)?;
        // Any bad words or sequence bias where the table above states a rule for them:
        // llama.cpp has neither; vLLM v1 has bad words (matched against the output alone:
        // `crate::sequences`) but no sequence bias.
        let sequences = [
            ("bad words", policy.bad_words.len(), "bad-words"),
            (
                "sequence biases",
                policy.sequence_bias.len(),
                "sequence-bias",
            ),
        ];
        let refused = sequences
            .into_iter()
            .find(|&(_, n, flag)| n > 0 && self.accepts(flag).is_some());
        if let Some((name, n, flag)) = refused {
            return Err(PolicyError::EngineRefuses {
                engine: self,
                knob: format!("{n} {name}"),
                accepts: self.rule(flag),
            });
        }
        if policy.dry_penalty_last_n < -1 {
            return Err(PolicyError::InvalidPenaltyWindow(policy.dry_penalty_last_n));
        }
        if policy.dry_sequence_breakers.iter().any(Vec::is_empty) {
            return Err(PolicyError::EmptySequenceBreaker);
        }
        if let Some(n) = policy.penalty_last_n {
            if self != Engine::LlamaCpp {
                return Err(PolicyError::PenaltyWindowWithout { engine: self });
            }
            if n < -1 {
                return Err(PolicyError::InvalidPenaltyWindow(n));
            }
        }
        Ok(())
    }

    /// Whether `sampler` honours [`Policy::min_keep`] under this engine: Hugging Face's
    /// top-k, top-p, min-p, typical, ε and η warpers take `min_tokens_to_keep`
    /// (`logits_process.py`); llama.cpp's top-p, min-p and typical take `min_keep`
    /// (`llama-sampling.cpp`; its top-k does not); vLLM has no such setting.
    pub fn min_keep_applies(self, sampler: Sampler) -> bool {
        use Sampler::*;
        match self {
            Engine::Lab | Engine::Hf => {
                matches!(sampler, TopK | TopP | MinP | Typical | Epsilon | Eta)
            }
            Engine::LlamaCpp => matches!(sampler, TopP | MinP | Typical),
            Engine::Vllm => false,
        }
    }

    /// Checks the modern samplers' knobs: which engines have each, and its range.
    fn check_modern(self, policy: &Policy) -> Result<(), PolicyError> {
        let refuse = |knob: String, flag: &str| {
            Err(PolicyError::EngineRefuses {
                engine: self,
                knob,
                accepts: self.rule(flag),
            })
        };
        if self == Engine::Vllm && policy.min_keep > 1 {
            return refuse(format!("min-keep {}", policy.min_keep), "min-keep");
        }
        let typical = policy.typical_p;
        let (epsilon, eta) = (policy.epsilon_cutoff, policy.eta_cutoff);
        let (xtc, threshold) = (policy.xtc_probability, policy.xtc_threshold);
        let has = |sampler: Sampler| match self {
            Engine::Lab => true,
            Engine::Hf => !matches!(sampler, Sampler::Dry | Sampler::TopNSigma | Sampler::Xtc),
            Engine::LlamaCpp => !matches!(sampler, Sampler::Epsilon | Sampler::Eta | Sampler::TopH),
            Engine::Vllm => !Sampler::MODERN.contains(&sampler),
        };
        for sampler in Sampler::MODERN.into_iter().filter(|&s| !has(s)) {
            let set = match sampler {
                Sampler::TopNSigma => policy
                    .top_n_sigma
                    .map(|n| format!("top-n-sigma {}", Shortest(n))),
                _ => sampler.knob(policy),
            };
            // The knob that switches the sampler on, by its flag.
            let flag = match sampler {
                Sampler::Dry => "dry-multiplier",
                Sampler::TopNSigma => "top-n-sigma",
                Sampler::TopH => "top-h",
                Sampler::Typical => "typical",
                Sampler::Epsilon => "epsilon-cutoff",
                Sampler::Eta => "eta-cutoff",
                _ => "xtc-probability",
            };
            if let Some(knob) = set {
                return refuse(knob, flag);
            }
        }
        let unit = |x: f64, open_top: bool| x >= 0.0 && if open_top { x < 1.0 } else { x <= 1.0 };
        match self {
            Engine::LlamaCpp => {
                for (name, flag, value) in [
                    ("typical-p", "typical", typical),
                    (
                        "top-n-sigma",
                        "top-n-sigma",
                        policy.top_n_sigma.unwrap_or(0.0),
                    ),
                    ("xtc-probability", "xtc-probability", xtc),
                    ("xtc-threshold", "xtc-threshold", threshold),
                    ("dry-multiplier", "dry-multiplier", policy.dry_multiplier),
                    ("dry-base", "dry-base", policy.dry_base),
                ] {
                    if !value.is_finite() {
                        return refuse(format!("{name} {}", Shortest(value)), flag);
                    }
                }
            }
            _ => {
                if !(typical > 0.0 && typical <= 1.0) {
                    return refuse(format!("typical-p {}", Shortest(typical)), "typical");
                }
                for (name, value) in [("epsilon-cutoff", epsilon), ("eta-cutoff", eta)] {
                    if !unit(value, true) {
                        return refuse(format!("{name} {}", Shortest(value)), name);
                    }
                }
                if let Some(n) = policy.top_n_sigma {
                    if !(n > 0.0 && n.is_finite()) {
                        return refuse(format!("top-n-sigma {}", Shortest(n)), "top-n-sigma");
                    }
                }
                if let Some(h) = policy.top_h {
                    if !(h > 0.0 && h <= 1.0) {
                        return refuse(format!("top-h {}", Shortest(h)), "top-h");
                    }
                }
                let (m, b) = (policy.dry_multiplier, policy.dry_base);
                if !(m >= 0.0 && m.is_finite() && b >= 1.0 && b.is_finite()) {
                    return refuse(
                        format!(
                            "dry-multiplier {} with dry-base {}",
                            Shortest(policy.dry_multiplier),
                            Shortest(policy.dry_base)
                        ),
                        "dry-base",
                    );
                }
                if !unit(xtc, false) || !unit(threshold, false) {
                    return refuse(
                        format!(
                            "xtc-probability {} with xtc-threshold {}",
                            Shortest(xtc),
                            Shortest(threshold)
                        ),
                        "xtc-threshold",
                    );
                }
            }
        }
        Ok(())
    }

    /// Mirostat 2.0: which engines have it, its parameters, and that nothing it would
    /// replace is set (llama.cpp's chain under `--mirostat` is temperature then mirostat, and
    /// ignores the other samplers; here a set knob that would be ignored is refused).
    /// τ and η are checked whether or not mirostat is on: a value no run could use is
    /// refused where it is given, not kept in a record that its own replay would refuse.
    fn check_mirostat(self, policy: &Policy) -> Result<(), PolicyError> {
        let (tau, eta) = (policy.mirostat_tau, policy.mirostat_eta);
        if !(tau.is_finite()
            && eta.is_finite()
            && (self == Engine::LlamaCpp || tau > 0.0 && eta > 0.0))
        {
            return Err(PolicyError::EngineRefuses {
                engine: self,
                knob: format!("mirostat tau {} with eta {}", Shortest(tau), Shortest(eta)),
                accepts: self.rule("mirostat-tau"),
            });
        }
        match policy.mirostat {
            0 => return Ok(()),
            2 => {}
            other => return Err(PolicyError::UnsupportedMirostat(other)),
        }
        if matches!(self, Engine::Hf | Engine::Vllm) {
            return Err(PolicyError::EngineRefuses {
                engine: self,
                knob: "mirostat 2".into(),
                accepts: self.rule("mirostat"),
            });
        }
        if policy.samplers.is_some() {
            return Err(PolicyError::MirostatReplaces {
                knob: "a sampler list".into(),
            });
        }
        if policy.is_greedy() {
            return Err(PolicyError::MirostatReplaces {
                knob: format!("temperature {} (greedy)", Shortest(policy.temperature)),
            });
        }
        for sampler in Sampler::ALL
            .into_iter()
            .filter(|&s| s != Sampler::Temperature)
        {
            if let Some(knob) = sampler.knob(policy) {
                return Err(PolicyError::MirostatReplaces { knob });
            }
        }
        // llama.cpp's mirostat chain starts with the plain `temp` sampler, not `temp-ext`.
        if policy.has_dynamic_temperature() {
            return Err(PolicyError::MirostatReplaces {
                knob: format!("dynatemp-range {}", Shortest(policy.dynatemp_range)),
            });
        }
        Ok(())
    }

    /// Dynamic temperature (llama.cpp's `--dynatemp-range` and `--dynatemp-exp`): only
    /// llama.cpp and the lab have it. llama.cpp takes any range (at most 0 is off); the lab
    /// refuses a negative one. The exponent must be finite whether or not the range is on,
    /// as mirostat's τ and η are.
    fn check_dynamic_temperature(self, policy: &Policy) -> Result<(), PolicyError> {
        let (range, exponent) = (policy.dynatemp_range, policy.dynatemp_exponent);
        let refused = match self {
            Engine::Lab => !(range >= 0.0 && range.is_finite()),
            Engine::Hf | Engine::Vllm => range != 0.0,
            Engine::LlamaCpp => !range.is_finite(),
        };
        if refused {
            return Err(PolicyError::EngineRefuses {
                engine: self,
                knob: format!("dynatemp-range {}", Shortest(range)),
                accepts: self.rule("dynatemp-range"),
            });
        }
        if !exponent.is_finite() {
            return Err(PolicyError::EngineRefuses {
                engine: self,
                knob: format!("dynatemp-exp {}", Shortest(exponent)),
                accepts: self.rule("dynatemp-exp"),
            });
        }
        Ok(())
    }

    /// The tokens the repetition penalty applies to and the tokens the frequency and
    /// presence penalties count.
    pub(crate) fn penalised<'a>(
        self,
        policy: &Policy,
        context: StepContext<'a>,
    ) -> (&'a [u32], &'a [u32]) {
        match self {
            Engine::LlamaCpp => {
                let n = policy.penalty_last_n.unwrap_or(LLAMA_CPP_PENALTY_LAST_N);
                let tokens = context.tokens;
                let window = match n {
                    -1 => tokens,
                    n => &tokens[tokens.len().saturating_sub(n.max(0) as usize)..],
                };
                (window, window)
            }
            _ => (context.tokens, context.generated()),
        }
    }
}

by_name!(Engine, UnknownEngine);

/// The frequency and presence penalties in words, when either is set.
fn counted_penalties(policy: &Policy) -> Option<String> {
    match (policy.frequency_penalty, policy.presence_penalty) {
        (f, _) if f != 0.0 => Some(format!("frequency penalty {}", Shortest(f))),
        (_, p) if p != 0.0 => Some(format!("presence penalty {}", Shortest(p))),
        _ => None,
    }
}

/// Candidate indices in descending order of logit, ties to the lower id.
fn ranked(candidates: &[(f64, u32)]) -> Vec<usize> {
    let logits: Vec<f64> = candidates.iter().map(|c| c.0).collect();
    crate::pipeline::descending(&logits)
}

/// llama.cpp's top-k (`llama_sampler_top_k_impl`): exactly the first k after a sort by
/// logit; the tokens tied at the k-th are kept lower ids first. O(V): a selection finds the
/// k-th logit, and the candidates (in ascending id order) are read once. `k` is at least 1
/// and less than the number of candidates.
pub(crate) fn top_k_exact(
    candidates: &[(f64, u32)],
    k: usize,
    scratch: &mut Vec<f64>,
) -> Vec<bool> {
    scratch.clear();
    scratch.extend(candidates.iter().map(|c| c.0));
    let kth = crate::pipeline::kth_largest(scratch, k);
    let above = candidates.iter().filter(|c| c.0 > kth).count();
    let mut ties = k - above;
    candidates
        .iter()
        .map(|c| {
            if c.0 > kth {
                true
            } else if c.0 == kth && ties > 0 {
                ties -= 1;
                true
            } else {
                false
            }
        })
        .collect()
}

/// Top-p by rank, as the engines compute it over `probs` (the softmax of the candidates):
/// llama.cpp keeps the descending prefix up to the first whose cumulative sum reaches p
/// (`cum_sum >= p`, so p ≤ 0 keeps one); Hugging Face and vLLM sort ascending and remove
/// every token whose cumulative sum is at most 1 − p, never the last (the top token).
pub(crate) fn top_p_ranked(
    engine: Engine,
    candidates: &[(f64, u32)],
    probs: &[f64],
    top_p: f64,
) -> Vec<bool> {
    let order = ranked(candidates);
    let mut keep = vec![false; candidates.len()];
    match engine {
        Engine::LlamaCpp => {
            let mut cum = 0.0;
            for &i in &order {
                keep[i] = true;
                cum += probs[i];
                if cum >= top_p {
                    break;
                }
            }
        }
        _ => {
            let mut cum = 0.0;
            for &i in order.iter().rev() {
                cum += probs[i];
                keep[i] = cum > 1.0 - top_p;
            }
            keep[order[0]] = true;
        }
    }
    keep
}

/// Min-p as the engines compute it. llama.cpp compares logits (`logit >= max_logit +
/// logf(p)`, on the temperature's scale `t`) and, when nothing passes (p above 1), keeps
/// the top token alone; Hugging Face and vLLM compare probabilities
/// (`probs >= min_p * max_prob`).
pub(crate) fn min_p_engine(
    engine: Engine,
    candidates: &[(f64, u32)],
    probs: &[f64],
    min_p: f64,
    t: f64,
) -> Vec<bool> {
    match engine {
        Engine::LlamaCpp => {
            let max = candidates
                .iter()
                .map(|c| c.0 / t)
                .fold(f64::NEG_INFINITY, f64::max);
            let min_logit = max + math::ln(min_p);
            let mut keep: Vec<bool> = candidates.iter().map(|c| c.0 / t >= min_logit).collect();
            if !keep.contains(&true) {
                keep[ranked(candidates)[0]] = true;
            }
            keep
        }
        _ => {
            let max = probs.iter().copied().fold(0.0, f64::max);
            probs.iter().map(|&p| p >= min_p * max).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::tests::reads_back;

    #[test]
    fn an_engine_reads_back_from_its_name() {
        for engine in Engine::ALL {
            reads_back(engine);
        }
        assert_eq!(
            "ollama".parse::<Engine>().unwrap_err().to_string(),
            "engine \"ollama\" is not known: expected lab, hf, llama.cpp or vllm"
        );
    }

    #[test]
    fn the_llama_cpp_window_is_the_last_n_tokens_of_prompt_and_output() {
        let tokens = [1, 2, 3, 4, 5];
        let context = StepContext::new(&tokens, 3);
        let window = |n| {
            let policy = Policy {
                penalty_last_n: n,
                ..Policy::default()
            };
            Engine::LlamaCpp.penalised(&policy, context).0.to_vec()
        };
        assert_eq!(window(Some(2)), [4, 5]);
        assert_eq!(window(Some(0)), Vec::<u32>::new());
        assert_eq!(window(Some(-1)), tokens);
        assert_eq!(window(None), tokens, "64 by default");
        assert_eq!(
            Engine::Vllm.penalised(&Policy::default(), context),
            (&tokens[..], &tokens[3..])
        );
    }
}

/// One engine's result in a [`conformance`] comparison: its final distribution (ascending
/// ids), or why it refuses the settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineResult {
    pub engine: Engine,
    pub result: Result<Vec<crate::TokenProb>, PolicyError>,
}

/// The same logits through every engine preset, and what differs, in words.
#[derive(Clone, Debug, PartialEq)]
pub struct Conformance {
    pub engines: Vec<EngineResult>,
    pub summary: String,
}

/// Runs `policy` under each engine's order and semantics (its own order and chain set
/// aside) on the same logits and seed, and says which engines keep which tokens: the
/// conformance view of the lab's decoding step.
pub fn conformance<L: crate::Logit>(
    policy: &Policy,
    logits: &[L],
    context: StepContext<'_>,
    seed: u64,
) -> Conformance {
    let engines: Vec<EngineResult> = Engine::ALL
        .into_iter()
        .map(|engine| {
            let policy = Policy {
                engine,
                samplers: None,
                order: crate::StageOrder::default(),
                ..policy.clone()
            };
            let result = crate::step(
                &policy,
                logits,
                context,
                &mut crate::NumpyRng::new(seed),
                crate::Snapshots::Record,
            )
            .map(|outcome| {
                outcome
                    .stages
                    .and_then(|mut stages| stages.pop())
                    .map(|last| last.tokens)
                    .unwrap_or_default()
            });
            EngineResult { engine, result }
        })
        .collect();
    let summary = summarise(&engines);
    Conformance { engines, summary }
}

/// "lab, hf and vllm keep {0}; llama.cpp keeps {0, 1}. vllm refuses the settings: …"
fn summarise(engines: &[EngineResult]) -> String {
    let mut groups: Vec<(Vec<u32>, Vec<Engine>)> = Vec::new();
    let mut refusals = Vec::new();
    for e in engines {
        match &e.result {
            Ok(tokens) => {
                let kept: Vec<u32> = tokens.iter().map(|t| t.id).collect();
                match groups.iter_mut().find(|(k, _)| *k == kept) {
                    Some((_, names)) => names.push(e.engine),
                    None => groups.push((kept, vec![e.engine])),
                }
            }
            Err(err) => refusals.push(format!("{} refuses these settings: {err}.", e.engine)),
        }
    }
    let set = |kept: &[u32]| {
        const SHOWN: usize = 8;
        let ids: Vec<String> = kept.iter().take(SHOWN).map(u32::to_string).collect();
        if kept.len() > SHOWN {
            format!("{{{}, … {} tokens}}", ids.join(", "), kept.len())
        } else {
            format!("{{{}}}", ids.join(", "))
        }
    };
    let mut sentence = match groups.len() {
        0 => String::new(),
        1 if refusals.is_empty() => format!("Every engine keeps {}.", set(&groups[0].0)),
        _ => {
            let parts: Vec<String> = groups
                .iter()
                .map(|(kept, names)| {
                    let names: Vec<&str> = names.iter().map(|e| e.name()).collect();
                    let verb = if names.len() == 1 { "keeps" } else { "keep" };
                    format!("{} {verb} {}", crate::names::all_of(&names), set(kept))
                })
                .collect();
            format!("{}.", parts.join("; "))
        }
    };
    for refusal in refusals {
        if !sentence.is_empty() {
            sentence.push(' ');
        }
        sentence.push_str(&refusal);
    }
    sentence
}
