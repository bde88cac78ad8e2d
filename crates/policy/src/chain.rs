//! An explicit sampler chain: the policy's stages in any order, by llama.cpp's names.
//!
//! A policy without a chain runs one of the two fixed orders of [`StageOrder`] on the
//! fast path of [`pipeline`](crate::pipeline). With a chain ([`Policy::samplers`]) the
//! step runs every listed sampler in turn over the surviving candidates:
//!
//! - `penalties`: the repetition, frequency and presence penalties. First in the chain they
//!   are the constraints of the fixed orders; later, they change only the survivors'
//!   logits, on the scale the earlier stages left (after a temperature T, subtracting a
//!   frequency penalty f lowers the scaled logit by f, as llama.cpp does).
//! - `top_k`, `top_p`, `min_p`: each on the distribution the earlier stages left, at the
//!   temperature in force (1 before `temperature`).
//! - `temperature`: the policy's temperature applies from here on; 0 keeps the argmax alone
//!   (ties to the lowest id), as llama.cpp's `temp` sampler does, and the step is greedy.
//!
//! The logit bias and the removals (forbidden ids, no-repeat n-grams, end-of-sequence
//! before `min_new_tokens`) always come first, before any listed sampler, as llama.cpp's
//! logit-bias sampler and Hugging Face's processors do.
//!
//! A chain lists each sampler at most once and lists every sampler whose knob is set: a
//! knob that would silently do nothing is refused, naming the knob. A listed sampler whose
//! knob is off does nothing. [`HF_CHAIN`] and [`TEMPERATURE_LAST_CHAIN`] are the fixed
//! orders written as chains; run either way, a step chooses bit for bit the same token.

use serde::{Deserialize, Serialize};

use crate::{Policy, PolicyError, Shortest, StageOrder};

/// One stage of a chain, named as llama.cpp's `--samplers` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Sampler {
    Penalties,
    Dry,
    TopNSigma,
    TopH,
    TopK,
    Typical,
    TopP,
    MinP,
    Epsilon,
    Eta,
    Xtc,
    Temperature,
}

impl Sampler {
    /// Every sampler, in llama.cpp's default order (Hugging Face's top-H before top-k, its ε
    /// and η after min-p).
    pub const ALL: [Sampler; 12] = TEMPERATURE_LAST_CHAIN;

    /// The samplers the fixed fast path does not run ([`modern`](crate::modern)).
    pub const MODERN: [Sampler; 7] = [
        Sampler::Dry,
        Sampler::TopNSigma,
        Sampler::TopH,
        Sampler::Typical,
        Sampler::Epsilon,
        Sampler::Eta,
        Sampler::Xtc,
    ];

    /// The name in `--samplers`, the lab's `samplers=` key and the run record.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Penalties => "penalties",
            Sampler::Dry => "dry",
            Sampler::TopNSigma => "top_n_sigma",
            Sampler::TopH => "top_h",
            Sampler::TopK => "top_k",
            Sampler::Typical => "typ_p",
            Sampler::TopP => "top_p",
            Sampler::MinP => "min_p",
            Sampler::Epsilon => "epsilon",
            Sampler::Eta => "eta",
            Sampler::Xtc => "xtc",
            Sampler::Temperature => "temperature",
        }
    }

    /// Whether the policy switches this sampler on. The step asks this of every stage of
    /// every step, so it formats nothing; [`knob`](Sampler::knob) says it in words.
    pub fn is_on(self, policy: &Policy) -> bool {
        match self {
            Sampler::Penalties => {
                policy.repetition_penalty != 1.0
                    || policy.frequency_penalty != 0.0
                    || policy.presence_penalty != 0.0
            }
            Sampler::TopK => policy.top_k > 0,
            Sampler::TopP => policy.top_p < 1.0,
            Sampler::MinP => policy.min_p > 0.0,
            Sampler::Temperature => policy.temperature != 1.0 || policy.has_dynamic_temperature(),
            Sampler::Typical => policy.typical_p < 1.0,
            Sampler::Epsilon => policy.epsilon_cutoff > 0.0,
            Sampler::Eta => policy.eta_cutoff > 0.0,
            Sampler::TopNSigma => policy.top_n_sigma.is_some_and(|n| n > 0.0),
            Sampler::TopH => policy.top_h.is_some(),
            Sampler::Dry => policy.dry_multiplier != 0.0,
            Sampler::Xtc => policy.xtc_probability > 0.0,
        }
    }

    /// The setting that switches this sampler on, in words (`top-p 0.9`), or `None` when
    /// the policy leaves it off ([`is_on`](Sampler::is_on)).
    pub fn knob(self, policy: &Policy) -> Option<String> {
        if !self.is_on(policy) {
            return None;
        }
        Some(match self {
            Sampler::Penalties => {
                let mut on = Vec::new();
                for (name, value, off) in [
                    ("repetition penalty", policy.repetition_penalty, 1.0),
                    ("frequency penalty", policy.frequency_penalty, 0.0),
                    ("presence penalty", policy.presence_penalty, 0.0),
                ] {
                    if value != off {
                        on.push(format!("{name} {}", Shortest(value)));
                    }
                }
                on.join(" and ")
            }
            Sampler::TopK => format!("top-k {}", policy.top_k),
            Sampler::TopP => format!("top-p {}", Shortest(policy.top_p)),
            Sampler::MinP => format!("min-p {}", Shortest(policy.min_p)),
            Sampler::Temperature if policy.has_dynamic_temperature() => format!(
                "temperature {} with dynatemp-range {}",
                Shortest(policy.temperature),
                Shortest(policy.dynatemp_range)
            ),
            Sampler::Temperature => format!("temperature {}", Shortest(policy.temperature)),
            Sampler::Typical => format!("typical-p {}", Shortest(policy.typical_p)),
            Sampler::Epsilon => format!("epsilon-cutoff {}", Shortest(policy.epsilon_cutoff)),
            Sampler::Eta => format!("eta-cutoff {}", Shortest(policy.eta_cutoff)),
            Sampler::TopNSigma => {
                format!(
                    "top-n-sigma {}",
                    Shortest(policy.top_n_sigma.unwrap_or(0.0))
                )
            }
            Sampler::TopH => format!("top-h {}", Shortest(policy.top_h.unwrap_or(0.0))),
            Sampler::Dry => format!("dry-multiplier {}", Shortest(policy.dry_multiplier)),
            Sampler::Xtc => format!("xtc-probability {}", Shortest(policy.xtc_probability)),
        })
    }
}

by_name!(Sampler, UnknownSampler);

impl TryFrom<String> for Sampler {
    type Error = PolicyError;

    fn try_from(name: String) -> Result<Sampler, PolicyError> {
        name.parse()
    }
}

impl From<Sampler> for String {
    fn from(sampler: Sampler) -> String {
        sampler.name().to_string()
    }
}

/// Hugging Face's order as a chain (`_get_logits_processor`): the penalties, then
/// temperature before the warpers top-H, top-k, top-p, min-p, typical, ε and η. DRY,
/// top-nσ and XTC, which Hugging Face does not have, sit where llama.cpp's order puts them
/// relative to the others.
pub const HF_CHAIN: [Sampler; 12] = [
    Sampler::Penalties,
    Sampler::Dry,
    Sampler::Temperature,
    Sampler::TopNSigma,
    Sampler::TopH,
    Sampler::TopK,
    Sampler::TopP,
    Sampler::MinP,
    Sampler::Typical,
    Sampler::Epsilon,
    Sampler::Eta,
    Sampler::Xtc,
];

/// The temperature-last order as a chain: llama.cpp's default chain (`common.h`: penalties,
/// dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature), with Hugging Face's
/// top-H before top-k and its ε and η after min-p.
pub const TEMPERATURE_LAST_CHAIN: [Sampler; 12] = [
    Sampler::Penalties,
    Sampler::Dry,
    Sampler::TopNSigma,
    Sampler::TopH,
    Sampler::TopK,
    Sampler::Typical,
    Sampler::TopP,
    Sampler::MinP,
    Sampler::Epsilon,
    Sampler::Eta,
    Sampler::Xtc,
    Sampler::Temperature,
];

impl StageOrder {
    /// The fixed order written as a chain.
    pub fn chain(self) -> &'static [Sampler] {
        match self {
            StageOrder::TemperatureFirst => &HF_CHAIN,
            StageOrder::TemperatureLast => &TEMPERATURE_LAST_CHAIN,
        }
    }
}

/// Reads a sampler list as llama.cpp's `--samplers` takes it: names separated by `;` (or
/// `,`), spaces around a name ignored.
pub fn parse_samplers(list: &str) -> Result<Vec<Sampler>, PolicyError> {
    let samplers = list
        .split([';', ','])
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::parse)
        .collect::<Result<Vec<Sampler>, PolicyError>>()?;
    if samplers.is_empty() {
        return Err(PolicyError::EmptySamplers);
    }
    Ok(samplers)
}

/// Writes a chain as `parse_samplers` reads it back.
pub fn samplers_label(chain: &[Sampler]) -> String {
    chain.iter().map(|s| s.name()).collect::<Vec<_>>().join(";")
}

/// Checks a policy's chain: not empty, each sampler once, every set knob's sampler listed,
/// and no fixed order beside it.
pub(crate) fn check(policy: &Policy) -> Result<(), PolicyError> {
    if !policy.engine.is_lab() && policy.order != StageOrder::default() {
        return Err(PolicyError::OrderAndEngine);
    }
    let Some(chain) = &policy.samplers else {
        return Ok(());
    };
    if chain.is_empty() {
        return Err(PolicyError::EmptySamplers);
    }
    if policy.order != StageOrder::default() {
        return Err(PolicyError::OrderAndSamplers);
    }
    for (i, sampler) in chain.iter().enumerate() {
        if chain[..i].contains(sampler) {
            return Err(PolicyError::RepeatedSampler(*sampler));
        }
    }
    for sampler in Sampler::ALL {
        if !chain.contains(&sampler) {
            if let Some(knob) = sampler.knob(policy) {
                return Err(PolicyError::SamplerNotListed { knob, sampler });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::tests::reads_back;

    #[test]
    fn a_sampler_reads_back_from_its_name_in_text_and_in_json() {
        for sampler in Sampler::ALL {
            reads_back(sampler);
        }
    }

    #[test]
    fn a_list_reads_with_either_separator_and_writes_back() {
        let chain = parse_samplers(" top_k; temperature ,min_p").unwrap();
        assert_eq!(chain, [Sampler::TopK, Sampler::Temperature, Sampler::MinP]);
        assert_eq!(parse_samplers(&samplers_label(&chain)).unwrap(), chain);
    }

    #[test]
    fn bad_lists_are_named() {
        for (list, says) in [
            (
                "top_k;temp",
                "sampler \"temp\" is not known: expected penalties, dry, top_n_sigma, top_h, \
                 top_k, typ_p, top_p, min_p, epsilon, eta, xtc or temperature",
            ),
            (
                " ; ",
                "the sampler list is empty: name at least one of penalties, dry, \
                 top_n_sigma, top_h, top_k, typ_p, top_p, min_p, epsilon, eta, xtc or \
                 temperature",
            ),
        ] {
            assert_eq!(parse_samplers(list).unwrap_err().to_string(), says);
        }
    }

    #[test]
    fn a_chain_is_checked_against_the_knobs() {
        let chain = |names: &str| Some(parse_samplers(names).unwrap());
        let policy = |samplers, top_p| Policy {
            samplers,
            top_p,
            ..Policy::default()
        };
        assert_eq!(
            check(&policy(chain("top_p;top_p"), 0.5))
                .unwrap_err()
                .to_string(),
            "sampler top_p is listed twice: a chain runs each sampler once"
        );
        assert_eq!(
            check(&policy(chain("top_k"), 0.5)).unwrap_err().to_string(),
            "top-p 0.5 is set but top_p is not in the sampler list: add it, or leave the \
             knob off"
        );
        assert_eq!(
            check(&policy(Some(Vec::new()), 1.0)),
            Err(PolicyError::EmptySamplers)
        );
        check(&policy(chain("top_p;top_k"), 0.5)).unwrap();
        let both = Policy {
            order: StageOrder::TemperatureLast,
            ..policy(chain("top_p"), 0.5)
        };
        assert_eq!(check(&both), Err(PolicyError::OrderAndSamplers));
    }
}
