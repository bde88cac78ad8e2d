//! `decode-lab lengths`: where answers stop under a decoding policy, per language slice.
//!
//! The model is started where it learned that pages start: the end-of-text token, then
//! the first line (the title) of a held-out page. It then writes the page under the policy
//! until it chooses end-of-text or its budget runs out (`--max-new-tokens`, less where the
//! title leaves less of the context). One run per page, seeded by the page's index. The
//! capacity planner reads the runs (`capacity::LengthProfile`, `--lengths-from-policy`).

use std::path::Path;

use capacity::{LengthRun, SliceLengths};
use policy::generate::StopReason;
use policy::Policy;
use serde::Serialize;

use crate::error::CliError;
use crate::eval::SLICES;
use crate::files;
use crate::model_dir;

/// What the planner's file and `--json` hold: `capacity`'s own types.
pub use capacity::{LengthProfile as PlannerFile, PolicyLengths};

/// The prompt: the end-of-text token that precedes every page in training, then the title.
const TEMPLATE: &str = "<|endoftext|>{prompt}";

/// `decode-lab lengths --json`.
#[derive(Serialize)]
pub struct Report {
    pub model: String,
    pub max_new_tokens: u32,
    pub policy: String,
    pub slices: Vec<SliceSummary>,
}

/// One slice's runs, summarised.
#[derive(Serialize)]
pub struct SliceSummary {
    pub slice: String,
    pub runs: usize,
    /// Share of the runs that chose end-of-text before their budget ran out.
    pub eos_share: f64,
    pub mean_tokens: f64,
    /// Mean share of its budget a run used.
    pub mean_budget_share: f64,
    pub tokens: Vec<u32>,
}

impl SliceSummary {
    pub fn of(slice: &SliceLengths) -> SliceSummary {
        let n = slice.runs.len().max(1) as f64;
        SliceSummary {
            slice: slice.slice.clone(),
            runs: slice.runs.len(),
            eos_share: slice.runs.iter().filter(|r| r.eos).count() as f64 / n,
            mean_tokens: slice.runs.iter().map(|r| f64::from(r.tokens)).sum::<f64>() / n,
            mean_budget_share: slice.runs.iter().map(LengthRun::share).sum::<f64>() / n,
            tokens: slice.runs.iter().map(|r| r.tokens).collect(),
        }
    }
}

/// Each policy's runs on the first `pages` held-out pages of each slice.
pub fn measure(
    dir: &Path,
    corpus: &Path,
    policies: &[(String, Policy)],
    pages: usize,
    max_new_tokens: usize,
) -> Result<PlannerFile, CliError> {
    if pages == 0 {
        return Err(CliError::TooSmall {
            flag: "--pages",
            value: 0,
            why: "measures nothing: give at least 1".into(),
        });
    }
    if max_new_tokens == 0 {
        return Err(CliError::TooSmall {
            flag: "--max-new-tokens",
            value: 0,
            why: "generates nothing: give at least 1".into(),
        });
    }
    let mut loaded = model_dir::load(dir, model::Precision::F32)?;
    let context = loaded.model.config().context_len;
    let budget_cap = u32::try_from(max_new_tokens.min(context)).map_err(|_| CliError::Flag {
        flag: "--max-new-tokens",
        value: max_new_tokens.to_string(),
        why: "too large".into(),
    })?;
    let eos = loaded.tokenizer.end_of_text();
    let mut file = PlannerFile {
        model: model_dir::config(dir)?.name,
        max_new_tokens: budget_cap,
        policies: policies
            .iter()
            .map(|(name, _)| PolicyLengths {
                policy: name.clone(),
                slices: Vec::new(),
            })
            .collect(),
    };
    for (code, name, file_name) in SLICES {
        let path = corpus.join(file_name);
        let text = files::read_text(&path)?;
        // Pages are separated by one blank line; a page's first line is its title.
        let titles: Vec<&str> = text
            .split("\n\n")
            .filter_map(|page| page.lines().next())
            .filter(|title| !title.trim().is_empty())
            .take(pages)
            .collect();
        if titles.len() < pages {
            return Err(CliError::TooFewPages {
                path,
                found: titles.len(),
                pages,
            });
        }
        for ((_, policy), out) in policies.iter().zip(&mut file.policies) {
            let mut runs = Vec::with_capacity(pages);
            for (page, title) in titles.iter().enumerate() {
                let record = model_dir::generate(
                    &mut loaded.model,
                    &loaded.tokenizer,
                    TEMPLATE,
                    format!("{title}\n"),
                    Policy {
                        eos_token: Some(eos),
                        ..policy.clone()
                    },
                    page as u64,
                    budget_cap as usize,
                )
                .map_err(|source| CliError::Page {
                    page,
                    path: path.clone(),
                    source,
                })?;
                let left = context.saturating_sub(record.prompt_tokens.len());
                let budget = (budget_cap as usize).min(left) as u32;
                let tokens = record.steps.len() as u32;
                let run = match record.stop_reason {
                    StopReason::Eos => LengthRun {
                        tokens,
                        budget,
                        eos: true,
                    },
                    StopReason::MaxTokens | StopReason::ContextFull => LengthRun {
                        tokens,
                        budget,
                        eos: false,
                    },
                    reason => return Err(CliError::PageStopped { page, path, reason }),
                };
                if run.tokens == 0 {
                    return Err(CliError::TitleFillsContext { page, path });
                }
                runs.push(run);
            }
            out.slices.push(SliceLengths {
                slice: format!("{code}: {name}"),
                runs,
            });
        }
    }
    // What the planner will read must read back.
    let json = serde_json::to_string(&file)?;
    capacity::LengthProfile::from_json(&json)?;
    Ok(file)
}

/// The report for people.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "model {}, policy {}, at most {} new tokens\n\nslice | runs | chose end-of-text | mean tokens | mean share of budget\n",
        report.model, report.policy, report.max_new_tokens
    );
    for s in &report.slices {
        out += &format!(
            "{} | {} | {:.0} % | {:.1} | {:.3}\n",
            s.slice,
            s.runs,
            s.eos_share * 100.0,
            s.mean_tokens,
            s.mean_budget_share
        );
    }
    out
}
