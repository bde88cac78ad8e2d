//! `decode-lab speculate`: how often speculative decoding would accept the draft's tokens
//! under a decoding policy, measured teacher-forced on each language slice's held-out pages.
//!
//! At every position `eval` scores (each context-length window predicts its tokens after the
//! first, the window's first token playing the prompt and the rest the generated text), the
//! target's and the draft's logits go through the same policy, and the position contributes
//! α = Σ_x min(p(x), q(x)) of the two final distributions (for greedy, 1 when the argmaxes
//! agree, else 0): the probability that the rule of `policy::speculative` accepts a drafted
//! token there. A slice's acceptance rate is the mean over its positions, and
//! E = (1 − α^(k+1)) / (1 − α) the tokens one verification of k drafted tokens emits.

use std::path::Path;

use ngram::NgramModel;
use policy::speculative::{acceptance_rate, expected_tokens_per_verify, final_distribution};
use policy::{Policy, Shortest, StageOrder, StepContext, Stepper};
use serde::{Deserialize, Serialize};

use crate::error::CliError;
use crate::eval::SLICES;
use crate::files;
use crate::model_dir::{self, Loaded};

/// Fewer scored positions than this in a slice give an acceptance rate that measures
/// nothing; the command refuses rather than print it.
pub const MIN_POSITIONS: usize = 32;

/// The draft models `--draft` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftKind {
    /// The interpolated Kneser–Ney model of the `ngram` crate (`draft.ngram`).
    Ngram,
}

impl DraftKind {
    pub const ALL: [DraftKind; 1] = [DraftKind::Ngram];

    pub fn name(self) -> &'static str {
        match self {
            DraftKind::Ngram => "ngram",
        }
    }
}

impl std::fmt::Display for DraftKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--draft` names no draft model this build knows.
#[derive(Debug)]
pub struct UnknownDraft(String);

impl std::fmt::Display for UnknownDraft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "draft {:?} is not known: expected ngram", self.0)
    }
}

impl std::error::Error for UnknownDraft {}

impl std::str::FromStr for DraftKind {
    type Err = UnknownDraft;

    fn from_str(name: &str) -> Result<DraftKind, UnknownDraft> {
        DraftKind::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| UnknownDraft(name.to_string()))
    }
}

/// One slice's figures, and one policy's slices: the capacity planner's own types, so the
/// file `--planner` writes is the one `capacity::SpeculationProfile` reads.
pub use capacity::{PolicyAcceptance, SliceAcceptance, SpeculationProfile as PlannerFile};

/// `decode-lab speculate --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub model: String,
    pub draft: String,
    pub k: usize,
    pub policy: String,
    pub slices: Vec<SliceAcceptance>,
}

/// The three policies the planner compares: greedy, temperature 0.7 and 1.5, the rest default.
pub fn planner_policies() -> [Policy; 3] {
    [0.0, 0.7, 1.5].map(|temperature| Policy {
        temperature,
        ..Policy::default()
    })
}

/// A policy's name: `greedy` or `temperature T`, then every other stage that is on.
pub fn policy_name(policy: &Policy) -> String {
    let mut parts = vec![if policy.is_greedy() {
        "greedy".to_string()
    } else {
        format!("temperature {}", Shortest(policy.temperature))
    }];
    let mut on = |cond: bool, text: String| {
        if cond {
            parts.push(text);
        }
    };
    on(
        policy.has_dynamic_temperature(),
        format!("dynatemp-range {}", Shortest(policy.dynatemp_range)),
    );
    on(policy.top_k > 0, format!("top-k {}", policy.top_k));
    on(
        policy.top_p < 1.0,
        format!("top-p {}", Shortest(policy.top_p)),
    );
    on(
        policy.min_p > 0.0,
        format!("min-p {}", Shortest(policy.min_p)),
    );
    on(
        policy.repetition_penalty != 1.0,
        format!("repetition penalty {}", Shortest(policy.repetition_penalty)),
    );
    on(
        policy.frequency_penalty != 0.0,
        format!("frequency penalty {}", Shortest(policy.frequency_penalty)),
    );
    on(
        policy.presence_penalty != 0.0,
        format!("presence penalty {}", Shortest(policy.presence_penalty)),
    );
    on(
        policy.no_repeat_ngram > 0,
        format!("no-repeat {}-grams", policy.no_repeat_ngram),
    );
    on(
        policy.min_new_tokens > 0,
        format!("min-new-tokens {}", policy.min_new_tokens),
    );
    on(
        !policy.forbidden.is_empty(),
        format!("{} forbidden ids", policy.forbidden.len()),
    );
    on(
        !policy.logit_bias.is_empty(),
        format!("{} logit biases", policy.logit_bias.len()),
    );
    on(
        policy.order == StageOrder::TemperatureLast,
        "temperature last".to_string(),
    );
    on(
        policy.samplers.is_some(),
        format!("samplers {}", policy.order_label()),
    );
    for sampler in policy::Sampler::MODERN {
        if let Some(knob) = sampler.knob(policy) {
            on(true, knob);
        }
    }
    on(
        !policy.engine.is_lab(),
        format!("{} semantics", policy.engine),
    );
    parts.join(", ")
}

/// What [`measure`] found.
pub struct Measured {
    pub model: String,
    /// The draft's name (`ngram-3`).
    pub draft: String,
    /// `[policy][slice]`, in the order the policies were given.
    pub by_policy: Vec<Vec<SliceAcceptance>>,
}

/// The measured acceptance of each policy on each slice.
pub fn measure(
    dir: &Path,
    corpus: &Path,
    draft_path: &Path,
    policies: &[Policy],
    k: usize,
    max_tokens: usize,
) -> Result<Measured, CliError> {
    if k == 0 {
        return Err(CliError::TooSmall {
            flag: "--k",
            value: 0,
            why: "drafts no token: speculative decoding needs --k of at least 1".into(),
        });
    }
    if max_tokens <= MIN_POSITIONS {
        return Err(CliError::TooSmall {
            flag: "--max-tokens",
            value: max_tokens,
            why: format!(
                "is too few: a slice needs more than {MIN_POSITIONS} held-out tokens for its \
                 acceptance rate to mean anything"
            ),
        });
    }
    let draft = model_dir::load_draft(dir, draft_path)?;
    let mut loaded = model_dir::load(dir, model::Precision::F32)?;
    if draft.vocab() as usize != loaded.tokenizer.vocab_size() {
        return Err(CliError::DraftVocabulary {
            path: draft_path.to_path_buf(),
            draft: draft.vocab(),
            model: loaded.tokenizer.vocab_size(),
        });
    }
    let eos = loaded.tokenizer.end_of_text();
    let policies: Vec<Policy> = policies
        .iter()
        .map(|p| Policy {
            eos_token: p.eos_token.or(Some(eos)),
            ..p.clone()
        })
        .collect();
    for policy in &policies {
        policy.validate(loaded.tokenizer.vocab_size())?;
    }
    let mut by_policy = vec![Vec::new(); policies.len()];
    for (code, name, file) in SLICES {
        let path = corpus.join(file);
        let text = files::read_text(&path)?;
        let tokens = loaded.tokenizer.encode(&text);
        let tokens = &tokens[..tokens.len().min(max_tokens)];
        let (sums, positions) = teacher_forced(&mut loaded, &draft, &policies, tokens)?;
        if positions < MIN_POSITIONS {
            return Err(CliError::TooShortToMeasure {
                path,
                positions,
                needed: MIN_POSITIONS,
            });
        }
        for (slices, sum) in by_policy.iter_mut().zip(sums) {
            // A mean of numbers in [0, 1] can round a hair past 1.
            let alpha = (sum / positions as f64).min(1.0);
            slices.push(SliceAcceptance {
                slice: format!("{code}: {name}"),
                tokens: positions as u64,
                acceptance_rate: alpha,
                expected_tokens_per_verify: expected_tokens_per_verify(alpha, k)?,
            });
        }
    }
    Ok(Measured {
        model: model_dir::config(dir)?.name,
        draft: crate::draft::name(&draft),
        by_policy,
    })
}

/// Σ α over the scored positions of `tokens`, per policy, and how many positions there were.
fn teacher_forced(
    loaded: &mut Loaded,
    draft: &NgramModel,
    policies: &[Policy],
    tokens: &[u32],
) -> Result<(Vec<f64>, usize), CliError> {
    let context = loaded.model.config().context_len;
    let vocab = loaded.model.config().vocab_size;
    let mut stepper = Stepper::default();
    let (mut q_raw, mut q_logits, mut p, mut q) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut sums = vec![0.0; policies.len()];
    let mut positions = 0;
    for window in tokens.chunks(context).filter(|w| w.len() > 1) {
        let logits = loaded.model.prefill_all(window)?.to_vec();
        for i in 1..window.len() {
            let row = &logits[(i - 1) * vocab..i * vocab];
            draft.next_distribution(&window[..i], &mut q_raw)?;
            // Every n-gram probability is above 0 (the uniform floor), so its log is finite.
            q_logits.clear();
            q_logits.extend(q_raw.iter().map(|x| x.ln()));
            let step_context = StepContext::new(&window[..i], 1);
            for (sum, policy) in sums.iter_mut().zip(policies) {
                final_distribution(&mut stepper, policy, row, step_context, &mut p)?;
                final_distribution(&mut stepper, policy, &q_logits, step_context, &mut q)?;
                *sum += acceptance_rate(&p, &q)?;
            }
            positions += 1;
        }
    }
    Ok((sums, positions))
}

/// The report for people.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "model {}, draft {}, policy {}, k = {}\n\nslice | positions | acceptance rate α | tokens per verification E\n",
        report.model, report.draft, report.policy, report.k
    );
    for s in &report.slices {
        out += &format!(
            "{} | {} | {:.3} | {:.3}\n",
            s.slice, s.tokens, s.acceptance_rate, s.expected_tokens_per_verify
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_named_as_eval_names_them() {
        let [greedy, warm, hot] = planner_policies();
        assert_eq!(policy_name(&greedy), "greedy");
        assert_eq!(policy_name(&warm), "temperature 0.7");
        assert_eq!(policy_name(&hot), "temperature 1.5");
        let filtered = Policy {
            temperature: 0.7,
            top_k: 40,
            ..Policy::default()
        };
        assert_eq!(policy_name(&filtered), "temperature 0.7, top-k 40");
    }

    #[test]
    fn drafts_read_back_by_name() {
        for draft in DraftKind::ALL {
            assert_eq!(draft.name().parse::<DraftKind>().unwrap(), draft);
        }
        let err = "medusa".parse::<DraftKind>().unwrap_err().to_string();
        assert_eq!(err, "draft \"medusa\" is not known: expected ngram");
    }
}
