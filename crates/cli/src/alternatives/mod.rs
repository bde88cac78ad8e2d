//! `decode-lab eval --alternatives`: before adding model complexity, compare the tiny
//! transformer with a rule, a simpler statistical baseline and a different system boundary,
//! per language slice, on the continuation task `traffic` labels outcomes with
//! ([`crate::continuation`]).
//!
//! From each slice's held-out pages, `pages` passages evenly spaced through the file; each
//! system continues each passage's prompt within the same budget of `max_tokens` tokens of
//! the model's tokenizer:
//! - **transformer**: the shipped f32 model through `policy::generate`, greedy and at
//!   temperature 0.7 (seed `seed + i` for the i-th passage), end-of-text stopping it;
//! - **rule**: [`rule::BigramRule`], the most frequent follower of the last token, chained;
//! - **n-gram**: the shipped draft (`draft.ngram`) decoded by the same loop and the same two
//!   policies ([`ngram_lm::NgramLm`]);
//! - **retrieval**: [`retrieval::Index`], BM25 over windows of both languages' training
//!   text in one index; the answer is the text after the best window, cut to the same token
//!   budget (and nothing when the prompt shares no word with the index).
//!
//! Per system and slice: bits per byte where the system is a distribution over tokens (the
//! transformer's and the n-gram's, teacher-forced on the selected pages' text by `eval`'s and
//! `ngram train`'s rule; undefined for the rule and for retrieval, which give one answer and
//! no probabilities), the outcome rate with its 95 % Wilson interval, the mean chrF, the
//! median wall time per output token (each passage's time from prompt text to output text,
//! divided by its output tokens; passages with no output left out), and the artifact's bytes
//! (the tokenizer, 37 kB, which every system uses, counted in none). And per slice, how many
//! prompts occur verbatim in the training text: the help repeats pages, and a verbatim
//! prompt is what retrieval can continue word for word.
//! The conclusion compares the greedy transformer (chosen before any figure was seen: it is
//! deterministic like the rule and retrieval) with the rule, the greedy n-gram and retrieval,
//! and the sampling transformer with the sampling n-gram, by the outcome-rate difference and
//! its 95 % Newcombe interval.

mod ngram_lm;
mod retrieval;
mod rule;

use std::path::Path;
use std::time::Instant;

use observe::group::wilson;
use observe::newcombe;
use policy::{ArtifactId, LanguageModel, Policy, Vocabulary};
use serde::Serialize;
use tokenizer::Tokenizer;

use crate::continuation::{self, Passage};
use crate::error::CliError;
use crate::eval::{teacher_forced, SLICES};
use crate::files;
use crate::model_dir::{self, DRAFT_FILE};
use crate::{draft, eval};

use ngram_lm::NgramLm;
use retrieval::Index;
use rule::BigramRule;

/// The training text every alternative learns from, as `ngram train` reads it.
pub const TRAINING: [&str; 2] = ["train.en.txt", "train.eu.txt"];
/// The temperature of the sampling policy (the traffic demo's baseline version).
pub const SAMPLING_TEMPERATURE: f64 = policy::LAB_TEMPERATURE;

/// What to compare on.
pub struct Settings<'a> {
    pub dir: &'a Path,
    pub corpus: &'a Path,
    pub pages: usize,
    pub prompt_bytes: usize,
    pub max_tokens: usize,
    pub threshold: f64,
    pub seed: u64,
}

/// The systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    Transformer,
    Rule,
    #[serde(rename = "n-gram")]
    Ngram,
    Retrieval,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Transformer => "transformer",
            System::Rule => "rule",
            System::Ngram => "n-gram",
            System::Retrieval => "retrieval",
        }
    }
}

/// How a system that decodes tokens chooses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decoding {
    Greedy,
    Sampled,
    /// The system decides alone (the rule, retrieval).
    Fixed,
}

impl Decoding {
    fn label(self) -> String {
        match self {
            Decoding::Greedy => "greedy".into(),
            Decoding::Sampled => format!("T {SAMPLING_TEMPERATURE}"),
            Decoding::Fixed => "—".into(),
        }
    }

    fn policy(self, eos: u32) -> Policy {
        Policy {
            temperature: if self == Decoding::Sampled {
                SAMPLING_TEMPERATURE
            } else {
                0.0
            },
            eos_token: Some(eos),
            ..Policy::default()
        }
    }
}

/// The six rows of a slice, in the order they are reported.
const ROWS: [(System, Decoding); 6] = [
    (System::Transformer, Decoding::Greedy),
    (System::Transformer, Decoding::Sampled),
    (System::Rule, Decoding::Fixed),
    (System::Ngram, Decoding::Greedy),
    (System::Ngram, Decoding::Sampled),
    (System::Retrieval, Decoding::Fixed),
];

/// One system's answer to one passage.
#[derive(Clone, Debug, Serialize)]
pub struct PassageResult {
    pub slice: String,
    pub system: System,
    pub decoding: Decoding,
    /// The passage's index among the slice's held-out passages.
    pub passage: usize,
    pub output_tokens: usize,
    pub output_bytes: usize,
    pub chrf: f64,
    pub accepted: bool,
    pub wall_us: f64,
}

/// One system on one slice.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub slice: String,
    pub system: System,
    pub decoding: Decoding,
    /// `None` where the system gives no probabilities.
    pub bits_per_byte: Option<f64>,
    pub passages: u64,
    pub accepted: u64,
    pub outcome_rate: f64,
    pub outcome_rate_95: (f64, f64),
    pub mean_chrf: f64,
    /// So that the budgets can be seen to be alike.
    pub mean_output_bytes: f64,
    /// Median over the passages with output; `None` when none had any.
    pub us_per_token: Option<f64>,
    pub artifact_bytes: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Verbatim {
    pub slice: String,
    pub passages: u64,
    pub prompts_in_training: u64,
}

#[derive(Serialize)]
pub struct Report {
    pub model: String,
    pub threshold: f64,
    pub pages: usize,
    pub prompt_bytes: usize,
    pub max_tokens: usize,
    /// What each system's `artifact_bytes` counts.
    pub artifacts: Vec<(System, String)>,
    pub rows: Vec<Row>,
    /// Per slice: how many of its prompts occur verbatim in the training text (the help
    /// repeats pages), which is what retrieval can find whole.
    pub verbatim: Vec<Verbatim>,
    pub conclusions: Vec<String>,
    pub results: Vec<PassageResult>,
}

/// Everything the systems are built from.
struct Systems {
    model: model_dir::Loaded,
    draft: ngram::NgramModel,
    draft_id: ArtifactId,
    rule: BigramRule,
    index: Index,
    sizes: [(System, usize, String); 4],
}

fn file_bytes(path: &Path) -> Result<usize, CliError> {
    std::fs::metadata(path)
        .map(|m| m.len() as usize)
        .map_err(CliError::read(path))
}

fn check(s: &Settings) -> Result<(), CliError> {
    if s.pages == 0 {
        return Err(CliError::TooSmall {
            flag: "--pages",
            value: 0,
            why: "compares nothing: give at least 1".into(),
        });
    }
    if s.max_tokens == 0 {
        return Err(CliError::TooSmall {
            flag: "--new-tokens",
            value: 0,
            why: "lets no system answer: give at least 1".into(),
        });
    }
    if s.prompt_bytes < 8 {
        return Err(CliError::Flag {
            flag: "--prompt-bytes",
            value: s.prompt_bytes.to_string(),
            why: "a prompt needs at least 8 bytes".into(),
        });
    }
    if !(0.0..=100.0).contains(&s.threshold) {
        return Err(CliError::Flag {
            flag: "--threshold",
            value: s.threshold.to_string(),
            why: "expected a number from 0 to 100".into(),
        });
    }
    Ok(())
}

/// `pages` passages evenly spaced through a slice's held-out passages, with their indices.
fn held_out(s: &Settings, file: &str) -> Result<Vec<(usize, Passage)>, CliError> {
    let path = s.corpus.join(file);
    let all = continuation::passages(&files::read_text(&path)?, s.prompt_bytes);
    if all.len() < s.pages {
        return Err(CliError::TooFewPassages {
            pages: s.pages,
            path,
            found: all.len(),
            prompt_bytes: s.prompt_bytes,
        });
    }
    Ok((0..s.pages)
        .map(|k| k * all.len() / s.pages)
        .map(|i| (i, all[i].clone()))
        .collect())
}

fn build(s: &Settings) -> Result<Systems, CliError> {
    let config = model_dir::config(s.dir)?;
    let model = model_dir::load(s.dir, model::Precision::F32)?;
    let draft_path = s.dir.join(DRAFT_FILE);
    let draft = model_dir::load_draft(s.dir, &draft_path)?;
    let draft_id = ArtifactId {
        name: draft::name(&draft),
        hash: model::sha256_hex(&draft.to_bytes()),
    };
    let texts = TRAINING
        .iter()
        .map(|file| files::read_text(&s.corpus.join(file)))
        .collect::<Result<Vec<_>, _>>()?;
    let streams: Vec<Vec<u32>> = texts.iter().map(|t| model.tokenizer.encode(t)).collect();
    let views: Vec<&[u32]> = streams.iter().map(Vec::as_slice).collect();
    let rule = BigramRule::train(&views, model.tokenizer.vocab_size())?;
    let index = Index::build(&texts.iter().map(String::as_str).collect::<Vec<_>>());
    let weights = s.dir.join(&config.file("weights-f32")?.path);
    let sizes = [
        (
            System::Transformer,
            file_bytes(&weights)?,
            format!("{} (f32 weights)", weights.display()),
        ),
        (
            System::Rule,
            rule.size_bytes(),
            "the bigram argmax table, one Option<u32> per token".into(),
        ),
        (
            System::Ngram,
            file_bytes(&draft_path)?,
            draft_path.display().to_string(),
        ),
        (
            System::Retrieval,
            index.size_bytes(),
            format!(
                "the training text, its {} windows and their postings",
                index.windows()
            ),
        ),
    ];
    Ok(Systems {
        model,
        draft,
        draft_id,
        rule,
        index,
        sizes,
    })
}

/// The bytes of `ids` as text (a token may hold part of a character).
fn text_of(tokenizer: &Tokenizer, ids: &[u32]) -> String {
    let bytes: Vec<u8> = ids
        .iter()
        .flat_map(|&id| Vocabulary::token_bytes(tokenizer, id).iter().copied())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `model` under `decoding` on `prompt`: (output text, output tokens).
fn decode<M: LanguageModel>(
    model: &mut M,
    tokenizer: &Tokenizer,
    prompt: &str,
    decoding: Decoding,
    seed: u64,
    max_tokens: usize,
) -> Result<(String, usize), CliError> {
    let record = model_dir::generate(
        model,
        tokenizer,
        "{prompt}",
        prompt.into(),
        decoding.policy(tokenizer.end_of_text()),
        seed,
        max_tokens,
    )?;
    Ok((record.output_text, record.steps.len()))
}

/// One system's answer to one prompt: (output text, output tokens).
fn answer(
    systems: &mut Systems,
    (system, decoding): (System, Decoding),
    prompt: &str,
    seed: u64,
    max_tokens: usize,
) -> Result<(String, usize), CliError> {
    let Systems {
        model,
        draft,
        draft_id,
        rule,
        index,
        ..
    } = systems;
    let tokenizer = &model.tokenizer;
    match system {
        System::Transformer => decode(
            &mut model.model,
            tokenizer,
            prompt,
            decoding,
            seed,
            max_tokens,
        ),
        System::Ngram => {
            let context = model.model.config().context_len;
            let mut lm = NgramLm::new(draft, draft_id.clone(), context);
            decode(&mut lm, tokenizer, prompt, decoding, seed, max_tokens)
        }
        System::Rule => {
            let ids = rule.continue_from(&tokenizer.encode(prompt), max_tokens);
            Ok((text_of(tokenizer, &ids), ids.len()))
        }
        System::Retrieval => Ok(match index.best(prompt) {
            Some(hit) => {
                // A token holds at most a few bytes: this head holds the whole budget.
                let head = continuation::head(hit.continuation, 64 * max_tokens);
                let ids = tokenizer.encode(head);
                let ids = &ids[..ids.len().min(max_tokens)];
                (text_of(tokenizer, ids), ids.len())
            }
            None => (String::new(), 0),
        }),
    }
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// A row from its passages' results: a direct count.
fn row(
    slice: &str,
    (system, decoding): (System, Decoding),
    results: &[PassageResult],
    bits_per_byte: Option<f64>,
    artifact_bytes: usize,
) -> Row {
    let mine: Vec<&PassageResult> = results
        .iter()
        .filter(|r| r.slice == slice && r.system == system && r.decoding == decoding)
        .collect();
    let n = mine.len() as u64;
    let accepted = mine.iter().filter(|r| r.accepted).count() as u64;
    Row {
        slice: slice.to_string(),
        system,
        decoding,
        bits_per_byte,
        passages: n,
        accepted,
        outcome_rate: accepted as f64 / n.max(1) as f64,
        outcome_rate_95: wilson(accepted, n).unwrap_or((0.0, 1.0)),
        mean_chrf: mine.iter().map(|r| r.chrf).sum::<f64>() / n.max(1) as f64,
        mean_output_bytes: mine.iter().map(|r| r.output_bytes as f64).sum::<f64>()
            / n.max(1) as f64,
        us_per_token: median(
            mine.iter()
                .filter(|r| r.output_tokens > 0)
                .map(|r| r.wall_us / r.output_tokens as f64)
                .collect(),
        ),
        artifact_bytes,
    }
}

/// Bits per byte of the transformer and of the n-gram on the text of the selected pages.
fn bits_per_byte(
    systems: &mut Systems,
    passages: &[(usize, Passage)],
) -> Result<(f64, f64), CliError> {
    let text: Vec<String> = passages
        .iter()
        .map(|(_, p)| format!("{}{}", p.prompt, p.continuation))
        .collect();
    let tokens = systems.model.tokenizer.encode(&text.join("\n\n"));
    let context = systems.model.model.config().context_len;
    let (predicted, _, transformer, _) = teacher_forced(&mut systems.model, &tokens)?;
    if predicted < eval::MIN_PREDICTED_TOKENS {
        return Err(CliError::Flag {
            flag: "--pages",
            value: passages.len().to_string(),
            why: format!(
                "the pages give {predicted} predicted tokens, and bits per byte needs at least \
                 {}",
                eval::MIN_PREDICTED_TOKENS
            ),
        });
    }
    let (_, _, ngram) =
        draft::held_out_bits(&systems.draft, &systems.model.tokenizer, &tokens, context)?;
    Ok((transformer, ngram))
}

pub fn evaluate(s: &Settings) -> Result<Report, CliError> {
    check(s)?;
    let slices = SLICES
        .iter()
        .map(|(code, _, file)| held_out(s, file).map(|p| (*code, p)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut systems = build(s)?;
    let mut results = Vec::new();
    let mut rows = Vec::new();
    let mut verbatim = Vec::new();
    for (code, passages) in &slices {
        let (transformer_bits, ngram_bits) = bits_per_byte(&mut systems, passages)?;
        verbatim.push(Verbatim {
            slice: code.to_string(),
            passages: passages.len() as u64,
            prompts_in_training: passages
                .iter()
                .filter(|(_, p)| systems.index.contains(&p.prompt))
                .count() as u64,
        });
        for (k, (i, passage)) in passages.iter().enumerate() {
            let seed = s.seed.wrapping_add(k as u64);
            for which in ROWS {
                let start = Instant::now();
                let (output, tokens) =
                    answer(&mut systems, which, &passage.prompt, seed, s.max_tokens).map_err(
                        |e| CliError::Passage {
                            system: which.0.name(),
                            slice: code,
                            passage: *i,
                            source: Box::new(e),
                        },
                    )?;
                let wall_us = start.elapsed().as_secs_f64() * 1e6;
                let outcome = continuation::outcome(&output, &passage.continuation, s.threshold);
                results.push(PassageResult {
                    slice: code.to_string(),
                    system: which.0,
                    decoding: which.1,
                    passage: *i,
                    output_tokens: tokens,
                    output_bytes: output.len(),
                    chrf: outcome.chrf,
                    accepted: outcome.accepted,
                    wall_us,
                });
            }
        }
        for which in ROWS {
            let bits = match which.0 {
                System::Transformer => Some(transformer_bits),
                System::Ngram => Some(ngram_bits),
                System::Rule | System::Retrieval => None,
            };
            let size = systems
                .sizes
                .iter()
                .find(|(system, _, _)| *system == which.0)
                .map_or(0, |(_, bytes, _)| *bytes);
            rows.push(row(code, which, &results, bits, size));
        }
    }
    let conclusions = verbatim.iter().flat_map(|v| conclude(v, &rows)).collect();
    Ok(Report {
        model: systems.model.model.config().name.clone(),
        threshold: s.threshold,
        pages: s.pages,
        prompt_bytes: s.prompt_bytes,
        max_tokens: s.max_tokens,
        artifacts: systems
            .sizes
            .iter()
            .map(|(system, _, what)| (*system, what.clone()))
            .collect(),
        rows,
        verbatim,
        conclusions,
        results,
    })
}

fn percent(rate: f64) -> String {
    format!("{:.1} %", 100.0 * rate)
}

/// What the transformer buys over each alternative on one slice, in words.
fn conclude(verbatim: &Verbatim, rows: &[Row]) -> Vec<String> {
    let slice = verbatim.slice.as_str();
    let find = |system, decoding| {
        rows.iter()
            .find(|r| r.slice == slice && r.system == system && r.decoding == decoding)
    };
    let pairs = [
        (
            (System::Transformer, Decoding::Greedy),
            (System::Rule, Decoding::Fixed),
        ),
        (
            (System::Transformer, Decoding::Greedy),
            (System::Ngram, Decoding::Greedy),
        ),
        (
            (System::Transformer, Decoding::Sampled),
            (System::Ngram, Decoding::Sampled),
        ),
        (
            (System::Transformer, Decoding::Greedy),
            (System::Retrieval, Decoding::Fixed),
        ),
    ];
    let mut out = Vec::new();
    for (model, other) in pairs {
        let (Some(m), Some(o)) = (find(model.0, model.1), find(other.0, other.1)) else {
            continue;
        };
        let name = |r: &Row| match r.decoding {
            Decoding::Fixed => r.system.name().to_string(),
            d => format!("{} ({})", r.system.name(), d.label()),
        };
        let head = format!(
            "{slice}: {} accepts {}, {} {}",
            name(m),
            percent(m.outcome_rate),
            name(o),
            percent(o.outcome_rate)
        );
        let verdict = match newcombe(m.accepted, m.passages, o.accepted, o.passages) {
            Some((lo, hi)) => {
                let words = if lo > 0.0 {
                    "the model wins".to_string()
                } else if hi < 0.0 {
                    format!("{} wins", name(o))
                } else {
                    format!("no significant difference on {} pages", m.passages)
                };
                format!(
                    ": {:+.1} points (95 % {:+.1} to {:+.1}), {words}",
                    100.0 * (m.outcome_rate - o.outcome_rate),
                    100.0 * lo,
                    100.0 * hi
                )
            }
            None => ": no pages to compare".into(),
        };
        let context = match (m.bits_per_byte, o.bits_per_byte) {
            (Some(a), Some(b)) => format!("; bits per byte {a:.3} against {b:.3}"),
            _ if o.system == System::Retrieval => format!(
                "; {} of {} prompts occur verbatim in the training text",
                verbatim.prompts_in_training, verbatim.passages
            ),
            _ => String::new(),
        };
        out.push(format!("{head}{verdict}{context}."));
    }
    out
}

/// The columns of [`rows`].
const COLUMNS: [&str; 9] = [
    "slice",
    "system",
    "decoding",
    "bits/byte",
    "outcome rate (95 %)",
    "mean chrF",
    "output bytes (mean)",
    "µs/token (median)",
    "artifact bytes",
];

/// The report's rows in words, as the table and the lab's copy show them.
fn rows(report: &Report) -> Vec<Vec<String>> {
    report
        .rows
        .iter()
        .map(|r| {
            vec![
                r.slice.clone(),
                r.system.name().to_string(),
                r.decoding.label(),
                r.bits_per_byte
                    .map_or("undefined".into(), |b| format!("{b:.3}")),
                format!(
                    "{} ({:.1}–{:.1})",
                    percent(r.outcome_rate),
                    100.0 * r.outcome_rate_95.0,
                    100.0 * r.outcome_rate_95.1
                ),
                format!("{:.1}", r.mean_chrf),
                format!("{:.1}", r.mean_output_bytes),
                r.us_per_token.map_or("—".into(), |u| format!("{u:.1}")),
                r.artifact_bytes.to_string(),
            ]
        })
        .collect()
}

/// What was compared, in a sentence.
fn caption(report: &Report) -> String {
    format!(
        "{} against the alternatives: {} held-out pages a slice, prompts of up to {} bytes, \
         {} tokens each; accepted when chrF ≥ {}",
        report.model, report.pages, report.prompt_bytes, report.max_tokens, report.threshold
    )
}

/// The report for people.
pub fn table(report: &Report) -> String {
    let mut out = format!("{}\n\n{}\n", caption(report), COLUMNS.join(" | "));
    for row in rows(report) {
        out += &row.join(" | ");
        out += "\n";
    }
    out += "\nartifacts:\n";
    for (system, what) in &report.artifacts {
        out += &format!("  {}: {what}\n", system.name());
    }
    out += "\n";
    for line in &report.conclusions {
        out += line;
        out += "\n";
    }
    out
}

/// The table in words for the lab's Observe panel (`alternatives.json` beside the model):
/// the same caption, columns, rows and conclusions as [`table`], and what each artifact is.
pub fn lab_table(report: &Report) -> serde_json::Value {
    let artifacts: Vec<String> = report
        .artifacts
        .iter()
        .map(|(system, what)| format!("The {} artifact is {what}.", system.name()))
        .collect();
    serde_json::json!({
        "caption": caption(report),
        "columns": COLUMNS,
        "rows": rows(report),
        "conclusions": report.conclusions.iter().chain(&artifacts).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        slice: &str,
        system: System,
        accepted: bool,
        chrf: f64,
        tokens: usize,
    ) -> PassageResult {
        PassageResult {
            slice: slice.into(),
            system,
            decoding: Decoding::Fixed,
            passage: 0,
            output_tokens: tokens,
            output_bytes: tokens,
            chrf,
            accepted,
            wall_us: 10.0 * tokens as f64,
        }
    }

    #[test]
    fn a_row_counts_its_own_passages_only() {
        let results = [
            result("en", System::Rule, true, 30.0, 2),
            result("en", System::Rule, false, 10.0, 0),
            result("en", System::Rule, false, 5.0, 4),
            result("eu", System::Rule, true, 50.0, 1),
            result("en", System::Retrieval, true, 40.0, 1),
        ];
        let r = row("en", (System::Rule, Decoding::Fixed), &results, None, 7);
        assert_eq!((r.passages, r.accepted), (3, 1));
        assert!((r.mean_chrf - 15.0).abs() < 1e-12);
        assert!((r.mean_output_bytes - 2.0).abs() < 1e-12);
        // 10 µs a token for both passages with output; the empty one is left out.
        assert_eq!(r.us_per_token, Some(10.0));
        assert_eq!(r.outcome_rate_95, wilson(1, 3).unwrap());
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn the_conclusion_names_the_winner_from_the_interval() {
        let make = |system, decoding, accepted, passages| Row {
            slice: "eu".into(),
            system,
            decoding,
            bits_per_byte: None,
            passages,
            accepted,
            outcome_rate: accepted as f64 / passages as f64,
            outcome_rate_95: (0.0, 1.0),
            mean_chrf: 0.0,
            mean_output_bytes: 0.0,
            us_per_token: None,
            artifact_bytes: 0,
        };
        let rows = [
            make(System::Transformer, Decoding::Greedy, 12, 100),
            make(System::Retrieval, Decoding::Fixed, 31, 100),
            make(System::Rule, Decoding::Fixed, 1, 100),
            make(System::Ngram, Decoding::Greedy, 14, 100),
        ];
        let verbatim = Verbatim {
            slice: "eu".into(),
            passages: 100,
            prompts_in_training: 9,
        };
        let lines = conclude(&verbatim, &rows);
        assert_eq!(lines.len(), 3, "no sampled rows, no sampled comparison");
        assert!(lines[0].ends_with("the model wins."), "{}", lines[0]);
        assert!(
            lines[1].contains("no significant difference on 100 pages"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with(
                "eu: transformer (greedy) accepts 12.0 %, retrieval 31.0 %: -19.0 points"
            ) && lines[2]
                .ends_with("retrieval wins; 9 of 100 prompts occur verbatim in the training text."),
            "{}",
            lines[2]
        );
    }
}
