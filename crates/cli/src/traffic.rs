//! `decode-lab traffic`: telemetry to observe without a real service. Runs of the tiny model
//! from held-out prompts of both language slices, under two or more versions (each a set of
//! `generate` flags), with Poisson arrival times, and an outcome for each, labelled by a
//! stated rule and delivered after a delay.
//!
//! The prompts and the outcome rule are the continuation task of [`crate::continuation`]:
//! the opening of a held-out page as prompt, and **accepted when the chrF of the generated
//! text against as many bytes of the page's true continuation is at least `threshold`**.
//! Each run is tagged with
//! its slice (the generator knows it; the identifier is left to untagged runs), its version
//! name and its arrival `at_s`. Everything is drawn from `--seed`: the same flags give the
//! same files.

use std::collections::BTreeMap;
use std::path::Path;

use policy::{Policy, Precision, RunRecord, Shortest, SplitMix64};
use serde::Serialize;

use crate::continuation;
use crate::error::CliError;
use crate::eval::SLICES;
use crate::files;
use crate::model_dir;

/// One version of the service: a name and what its flags set.
#[derive(Clone, Debug)]
pub struct Version {
    pub name: String,
    pub policy: Policy,
    pub precision: Precision,
    pub max_tokens: usize,
}

/// What the generator is asked for.
pub struct Traffic<'a> {
    pub dir: &'a Path,
    pub corpus: &'a Path,
    pub versions: &'a [Version],
    /// The share of runs each version after the first takes (the rest go to the first).
    pub canary_share: f64,
    pub runs: usize,
    pub eu_share: f64,
    pub rate_per_s: f64,
    pub mean_outcome_delay_s: f64,
    pub prompt_bytes: usize,
    pub threshold: f64,
    pub seed: u64,
}

/// The generated files' lines, and what they hold per version and slice.
pub struct Generated {
    pub runs: Vec<String>,
    pub outcomes: Vec<String>,
    pub summary: Vec<Cell>,
}

/// One version on one slice.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub version: String,
    pub version_id: String,
    pub slice: String,
    pub runs: u64,
    pub accepted: u64,
    pub mean_chrf: f64,
}

#[derive(Serialize)]
struct OutcomeRow<'a> {
    run_id: &'a str,
    outcome: &'static str,
    at_s: f64,
}

/// A draw from the exponential distribution of mean `mean`.
fn exponential(rng: &mut SplitMix64, mean: f64) -> f64 {
    -mean * (1.0 - rng.uniform()).ln()
}

/// The most runs one `traffic` makes.
pub const MAX_RUNS: usize = 100_000;
/// Arrivals a second: from one every 11.6 days to a million a second.
const MIN_RATE_PER_S: f64 = 1e-6;
const MAX_RATE_PER_S: f64 = 1e6;
/// The mean delay of an outcome: from a millisecond to a year.
const MIN_OUTCOME_DELAY_S: f64 = 1e-3;
const MAX_OUTCOME_DELAY_S: f64 = 31_536_000.0;
/// Seconds between progress lines on standard error.
const PROGRESS_EVERY_S: f64 = 5.0;

pub fn generate(t: &Traffic) -> Result<Generated, CliError> {
    if t.versions.len() < 2 {
        return Err(CliError::TooFewVersions);
    }
    for (what, value, lo, hi) in [
        ("--canary-share", t.canary_share, 0.0, 1.0),
        ("--eu-share", t.eu_share, 0.0, 1.0),
        ("--threshold", t.threshold, 0.0, 100.0),
    ] {
        if !(lo..=hi).contains(&value) {
            return Err(CliError::Flag {
                flag: what,
                value: value.to_string(),
                why: format!("expected a number from {lo} to {hi}"),
            });
        }
    }
    // Bounded so that every arrival and outcome time stays a finite number of seconds that
    // a record's tag and an outcome row can hold.
    for (what, value, lo, hi) in [
        ("--rate", t.rate_per_s, MIN_RATE_PER_S, MAX_RATE_PER_S),
        (
            "--outcome-delay",
            t.mean_outcome_delay_s,
            MIN_OUTCOME_DELAY_S,
            MAX_OUTCOME_DELAY_S,
        ),
    ] {
        if !(lo..=hi).contains(&value) {
            return Err(CliError::Flag {
                flag: what,
                value: Shortest(value).to_string(),
                why: format!(
                    "expected a number from {} to {}",
                    Shortest(lo),
                    Shortest(hi)
                ),
            });
        }
    }
    if t.runs == 0 {
        return Err(CliError::TooSmall {
            flag: "--runs",
            value: 0,
            why: "generates nothing: give at least 1".into(),
        });
    }
    if t.runs > MAX_RUNS {
        return Err(CliError::Flag {
            flag: "--runs",
            value: t.runs.to_string(),
            why: format!(
                "at most {MAX_RUNS} runs (each is a generation; at about 30 ms a run that is \
                 under an hour)"
            ),
        });
    }
    if t.prompt_bytes < 8 {
        return Err(CliError::Flag {
            flag: "--prompt-bytes",
            value: t.prompt_bytes.to_string(),
            why: "a prompt needs at least 8 bytes".into(),
        });
    }
    let mut slices = Vec::new();
    for (code, _, file) in SLICES {
        let path = t.corpus.join(file);
        let text = files::read_text(&path)?;
        let found = continuation::passages(&text, t.prompt_bytes);
        if found.is_empty() {
            return Err(CliError::NoPassage {
                path,
                prompt_bytes: t.prompt_bytes,
            });
        }
        slices.push((code, found));
    }
    let mut models = BTreeMap::new();
    for v in t.versions {
        if let std::collections::btree_map::Entry::Vacant(slot) = models.entry(v.precision.name()) {
            slot.insert(model_dir::load(t.dir, v.precision)?);
        }
    }
    let mut rng = SplitMix64::new(t.seed);
    let mut clock_s = 0.0;
    let (mut runs, mut outcomes) = (Vec::new(), Vec::<(f64, String)>::new());
    let mut cells: BTreeMap<(usize, &str), (String, u64, u64, f64)> = BTreeMap::new();
    let start = std::time::Instant::now();
    let mut last_note = 0.0;
    for i in 0..t.runs {
        let elapsed = start.elapsed().as_secs_f64();
        if elapsed - last_note >= PROGRESS_EVERY_S {
            last_note = elapsed;
            let left = elapsed / i.max(1) as f64 * (t.runs - i) as f64;
            crate::output::note(&format!(
                "traffic: {i} of {} runs generated in {elapsed:.0} s, about {left:.0} s left",
                t.runs
            ));
        }
        clock_s += exponential(&mut rng, 1.0 / t.rate_per_s);
        let (code, passages) = &slices[usize::from(rng.uniform() < t.eu_share)];
        let passage = &passages[rng.below(passages.len() as u64) as usize];
        let candidates = t.versions.len() - 1;
        let which = if rng.uniform() < t.canary_share {
            1 + rng.below(candidates as u64) as usize
        } else {
            0
        };
        let version = &t.versions[which];
        let loaded = models
            .get_mut(&version.precision.name())
            .expect("every version's weights were loaded above");
        let eos = loaded.tokenizer.end_of_text();
        let record: RunRecord = model_dir::generate(
            &mut loaded.model,
            &loaded.tokenizer,
            "{prompt}",
            passage.prompt.clone(),
            Policy {
                eos_token: version.policy.eos_token.or(Some(eos)),
                ..version.policy.clone()
            },
            t.seed.wrapping_add(i as u64),
            version.max_tokens,
        )
        .map_err(|source| CliError::TrafficRun {
            run: i,
            version: version.name.clone(),
            source,
        })?;
        let tags = BTreeMap::from([
            ("slice".to_string(), code.to_string()),
            ("version".to_string(), version.name.clone()),
            ("at_s".to_string(), format!("{clock_s:.3}")),
        ]);
        let record = record.labelled(Some(version.precision), tags);
        let continuation::Outcome {
            chrf: score,
            accepted,
        } = continuation::outcome(&record.output_text, &passage.continuation, t.threshold);
        let run_id = record.run_id.clone().unwrap_or_default();
        let at = clock_s + exponential(&mut rng, t.mean_outcome_delay_s);
        let row = OutcomeRow {
            run_id: &run_id,
            outcome: if accepted { "accepted" } else { "rejected" },
            at_s: (at * 1e3).round() / 1e3,
        };
        outcomes.push((at, serde_json::to_string(&row)?));
        let cell = cells
            .entry((which, code))
            .or_insert_with(|| (record.version_id.clone().unwrap_or_default(), 0, 0, 0.0));
        cell.1 += 1;
        cell.2 += u64::from(accepted);
        cell.3 += score;
        runs.push(serde_json::to_string(&record)?);
    }
    // Outcomes arrive in the order they become known.
    outcomes.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Generated {
        runs,
        outcomes: outcomes.into_iter().map(|(_, line)| line).collect(),
        summary: cells
            .into_iter()
            .map(|((which, slice), (version_id, n, ok, sum))| Cell {
                version: t.versions[which].name.clone(),
                version_id,
                slice: slice.to_string(),
                runs: n,
                accepted: ok,
                mean_chrf: sum / n as f64,
            })
            .collect(),
    })
}

/// What was generated, for people.
pub fn table(cells: &[Cell], threshold: f64) -> String {
    let mut out = format!(
        "outcome rule: accepted when chrF ≥ {threshold}\n\nversion | version_id | slice | runs | accepted | mean chrF\n"
    );
    for c in cells {
        out += &format!(
            "{} | {} | {} | {} | {:.1} % | {:.1}\n",
            c.version,
            c.version_id,
            c.slice,
            c.runs,
            100.0 * c.accepted as f64 / c.runs.max(1) as f64,
            c.mean_chrf
        );
    }
    out
}
