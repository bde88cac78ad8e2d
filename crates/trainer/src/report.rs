//! The released directory's `report.md` and `loss.svg`: how the model was trained and how
//! to repeat it, its shape, the corpus, held-out bits per byte, the loss curve and samples.
//! [`Report::to_markdown`] writes one section per method, in the report's order.

use std::fmt::Write as _;

use model::ModelConfig;

use crate::args::TrainArgs;
use crate::data::{Corpus, Streams};
use crate::eval::{HeldOutScore, Sample, SAMPLE_TOKENS};
use crate::net::parameter_count;
use crate::release::Release;
use crate::svg::{line_chart, Mark, Series};
use crate::training::{TrainLog, PROBE_WINDOWS};

/// Steps averaged into each point of the chart's training-loss line.
pub const CURVE_CHUNK: usize = 10;

/// Wall-clock times of the run's parts, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    pub tokenizer: f64,
    /// Held-out bits per byte with the reference forward pass.
    pub scoring: f64,
    /// The whole run so far.
    pub run: f64,
}

/// Everything the report states.
pub struct Report<'a> {
    pub args: &'a TrainArgs,
    /// The trained model's config (its files are listed in `config.json`, not here).
    pub config: &'a ModelConfig,
    pub corpus: &'a Corpus,
    pub streams: &'a Streams,
    pub log: &'a TrainLog,
    pub release: &'a Release,
    pub scores: &'a [HeldOutScore],
    pub samples: &'a [Sample],
    pub timings: Timings,
    /// CPU, cores and compute threads.
    pub machine: String,
}

impl Report<'_> {
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        self.introduction(&mut md);
        self.reproduce(&mut md);
        self.model(&mut md);
        self.training(&mut md);
        self.corpus(&mut md);
        self.bits_per_byte(&mut md);
        self.loss_curve(&mut md);
        self.samples(&mut md);
        md
    }

    fn introduction(&self, md: &mut String) {
        let _ = writeln!(md, "# {}: training report\n", self.config.name);
        let _ = writeln!(
            md,
            "A {}-parameter decoder-only transformer (the `model` crate's architecture) and a \
             {}-id byte-level BPE tokenizer, trained from scratch on the LibreOffice help corpus \
             (English and Basque) with candle on the CPU by `crates/trainer`.\n",
            parameter_count(self.config),
            self.config.vocab_size
        );
    }

    fn reproduce(&self, md: &mut String) {
        let _ = writeln!(md, "## Reproduce\n\n```sh");
        let _ = writeln!(md, "{}", self.args.command_line());
        let _ = writeln!(md, "```\n");
        let _ = writeln!(
            md,
            "{}\n",
            match self.args.steps {
                Some(n) => format!(
                    "The learning rate followed a fixed schedule of {n} steps, so the same \
                     command on the same thread count repeats the run step for step."
                ),
                None => format!(
                    "Weights are initialised and batches drawn from the seed alone, but the \
                     learning rate's cosine decay followed wall-clock time (it ends when the \
                     {}-minute budget does), so a rerun on a differently loaded machine takes a \
                     different number of steps and ends near, not exactly at, these numbers. \
                     Add `--steps {}` to decay over this run's step count instead.",
                    self.args.minutes, self.log.steps
                ),
            }
        );
    }

    fn model(&self, md: &mut String) {
        let c = self.config;
        let _ = writeln!(md, "## Model\n\n| setting | value |\n|---|---|");
        settings_table(
            md,
            [
                ("vocab_size", c.vocab_size.to_string()),
                ("d_model", c.d_model.to_string()),
                ("n_layers", c.n_layers.to_string()),
                (
                    "n_heads / n_kv_heads",
                    format!("{} / {}", c.n_heads, c.n_kv_heads),
                ),
                ("head_dim", c.head_dim().to_string()),
                ("d_ff (SwiGLU)", c.d_ff.to_string()),
                ("context_len", c.context_len.to_string()),
                ("rope_theta", c.rope_theta.to_string()),
                ("norm_eps", format!("{:e}", c.norm_eps)),
                (
                    "parameters (embedding tied, counted once)",
                    parameter_count(c).to_string(),
                ),
                (
                    "model.f32.safetensors",
                    format!("{} bytes", self.release.f32_bytes.len()),
                ),
                (
                    "model.int8.safetensors",
                    format!("{} bytes", self.release.int8_bytes.len()),
                ),
            ],
        );
    }

    fn training(&self, md: &mut String) {
        let (args, log, t) = (self.args, self.log, self.timings);
        let schedule = args.schedule();
        let context = self.config.context_len;
        let _ = writeln!(md, "\n## Training\n\n| setting | value |\n|---|---|");
        settings_table(
            md,
            [
                ("seed", args.seed.to_string()),
                (
                    "optimizer",
                    "AdamW (β1 0.9, β2 0.95, ε 1e-8, weight decay 0.1 on matrices, 0 on norms), \
                     global gradient norm clipped at 1.0"
                        .to_string(),
                ),
                (
                    "learning rate",
                    format!(
                        "linear warm-up to {:.1e} over {} steps, then cosine to {:.1e} over {}",
                        schedule.peak,
                        schedule.warmup,
                        schedule.floor,
                        match args.steps {
                            Some(n) => format!("steps {}..{n}", schedule.warmup),
                            None => "the rest of the time budget (wall clock)".to_string(),
                        }
                    ),
                ),
                (
                    "batch",
                    format!(
                        "{} windows × {context} tokens = {} tokens/step",
                        args.batch,
                        args.batch * context
                    ),
                ),
                (
                    "sampling",
                    "random windows; language drawn in proportion to its training bytes"
                        .to_string(),
                ),
                (
                    "steps",
                    format!(
                        "{}{}",
                        log.steps,
                        if log.time_capped {
                            " (stopped by the time budget)"
                        } else {
                            ""
                        }
                    ),
                ),
                (
                    "tokens seen",
                    (log.steps * args.batch * context).to_string(),
                ),
                (
                    "training wall time",
                    format!(
                        "{:.0} s ({:.0} s of it on validation points)",
                        log.train_secs, log.eval_secs
                    ),
                ),
                ("tokenizer training", format!("{:.1} s", t.tokenizer)),
                (
                    "held-out scoring (reference forward pass)",
                    format!("{:.0} s", t.scoring),
                ),
                ("whole run", format!("{:.0} s", t.run)),
                (
                    "final train loss (mean of last 50 steps)",
                    format!("{:.4} nats/token", log.recent_loss(50)),
                ),
                ("machine", self.machine.clone()),
            ],
        );
    }

    fn corpus(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n### Corpus\n\n| file | pages | bytes | tokens | bytes/token |\n|---|---|---|---|---|"
        );
        let (corpus, streams) = (self.corpus, self.streams);
        for (split, slices, streams) in [
            ("train", &corpus.train, &streams.train),
            ("valid", &corpus.valid, &streams.valid),
        ] {
            for (s, stream) in slices.iter().zip(streams) {
                let _ = writeln!(
                    md,
                    "| {split}.{}.txt | {} | {} | {} | {:.3} |",
                    s.language,
                    s.pages.len(),
                    s.bytes(),
                    stream.len(),
                    s.bytes() as f64 / stream.len() as f64
                );
            }
        }
    }

    fn bits_per_byte(&self, md: &mut String) {
        let _ = writeln!(md, "\n## Held-out bits per byte\n");
        let _ = writeln!(
            md,
            "Computed with the reference forward pass (`model::Transformer`, the code the lab \
             runs) on the validation pages: each slice's token stream (`<|endoftext|>` before \
             every page) is cut into non-overlapping windows of {} inputs, every text token is \
             predicted once from the tokens before it in its window, and bpb = Σ NLL (nats) / \
             ln 2 / Σ UTF-8 bytes of the pages (the `<|endoftext|>` targets carry no bytes and \
             are left out).\n",
            self.config.context_len
        );
        let _ = writeln!(
            md,
            "| slice | bytes | tokens | f32 bpb | int8 bpb | f32 nats/token |\n\
             |---|---|---|---|---|---|"
        );
        for HeldOutScore {
            language,
            f32: f,
            int8: q,
        } in self.scores
        {
            let _ = writeln!(
                md,
                "| valid.{language} | {} | {} | {:.4} | {:.4} | {:.4} |",
                f.bytes,
                f.tokens,
                f.bits_per_byte(),
                q.bits_per_byte(),
                f.nats_per_token()
            );
        }
    }

    fn loss_curve(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Loss curve\n\n![Training and held-out loss](loss.svg)\n"
        );
        let _ = writeln!(
            md,
            "The solid line is the training loss (mean of each {CURVE_CHUNK} steps); the dashed \
             line with circles and the dotted line with squares are the held-out English and \
             Basque losses on {PROBE_WINDOWS} fixed validation windows each (candle graph, nats \
             per token, `<|endoftext|>` targets included).\n"
        );
        let _ = writeln!(md, "| step | held-out en | held-out eu |\n|---|---|---|");
        for p in &self.log.val_points {
            let _ = writeln!(
                md,
                "| {} | {:.4} | {:.4} |",
                p.step, p.losses[0], p.losses[1]
            );
        }
    }

    fn samples(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\n## Samples\n\n{SAMPLE_TOKENS} tokens after the prompt, reference forward pass, \
             `policy` steps.\n"
        );
        for sample in self.samples {
            let _ = writeln!(
                md,
                "### {}, prompt {:?}\n\n```text\n{}\n```\n",
                sample.label(self.args.seed),
                sample.prompt,
                sample.text.replace("```", "'''")
            );
        }
    }
}

/// Rows of a two-column settings table whose header is already written.
fn settings_table<const N: usize>(md: &mut String, rows: [(&str, String); N]) {
    for (k, v) in rows {
        let _ = writeln!(md, "| {k} | {v} |");
    }
}

/// The loss curve of the model `name`: the training loss (mean of each [`CURVE_CHUNK`]
/// steps) and the held-out English and Basque losses.
pub fn loss_chart(name: &str, log: &TrainLog) -> String {
    let train_curve: Vec<(f64, f64)> = log
        .losses
        .chunks(CURVE_CHUNK)
        .enumerate()
        .map(|(i, c)| {
            let x = (i * CURVE_CHUNK + c.len()) as f64;
            (x, f64::from(c.iter().sum::<f32>()) / c.len() as f64)
        })
        .collect();
    let held_out = |language: usize| -> Vec<(f64, f64)> {
        log.val_points
            .iter()
            .map(|p| (p.step as f64, p.losses[language]))
            .collect()
    };
    let series = vec![
        Series {
            label: format!("train (mean of {CURVE_CHUNK} steps)"),
            points: train_curve,
            mark: Mark::Solid,
        },
        Series {
            label: "held-out English".into(),
            points: held_out(0),
            mark: Mark::DashedCircles,
        },
        Series {
            label: "held-out Basque".into(),
            points: held_out(1),
            mark: Mark::DottedSquares,
        },
    ];
    line_chart(
        &format!("{name}: cross-entropy during training"),
        "optimizer step",
        "loss (nats per token)",
        &series,
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::data::Slice;
    use crate::eval::SliceScore;
    use crate::training::ValPoint;
    use crate::{Init, Net, Rng};

    #[test]
    fn the_report_has_its_sections_in_order_and_the_run_s_command() {
        let args = TrainArgs::try_parse_from(["train", "--steps", "20", "--seed", "9"]).unwrap();
        let config = args.model_config(300);
        let tiny = ModelConfig {
            d_model: 16,
            n_layers: 1,
            d_ff: 24,
            context_len: 16,
            ..config.clone()
        };
        let net = Net::new(&tiny, &Init::testing(&tiny), &mut Rng::new(1)).unwrap();
        let release = Release::of(&net).unwrap();
        let slice = |language: &str| Slice {
            language: language.into(),
            pages: vec!["abc\n".into()],
        };
        let corpus = Corpus {
            train: vec![slice("en"), slice("eu")],
            valid: vec![slice("en"), slice("eu")],
        };
        let streams = Streams {
            train: vec![vec![1, 2], vec![3, 4]],
            valid: vec![vec![5], vec![6]],
        };
        let log = TrainLog {
            losses: vec![3.0; 20],
            val_points: vec![ValPoint {
                step: 20,
                losses: vec![2.5, 2.75],
            }],
            steps: 20,
            ..TrainLog::default()
        };
        let score = SliceScore {
            slice: "en".into(),
            tokens: 2,
            bytes: 4,
            nll_nats: 1.0,
        };
        let scores = [HeldOutScore {
            language: "en".into(),
            f32: score.clone(),
            int8: score,
        }];
        let samples = [Sample {
            how: "f32, temperature 0.7, seed",
            prompt: "The ",
            text: "The end".into(),
        }];
        let md = Report {
            args: &args,
            config: &config,
            corpus: &corpus,
            streams: &streams,
            log: &log,
            release: &release,
            scores: &scores,
            samples: &samples,
            timings: Timings::default(),
            machine: "test machine".into(),
        }
        .to_markdown();

        let headings: Vec<&str> = md.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(
            headings,
            [
                "# decode-lab-tiny-v1: training report",
                "## Reproduce",
                "## Model",
                "## Training",
                "### Corpus",
                "## Held-out bits per byte",
                "## Loss curve",
                "## Samples",
                "### f32, temperature 0.7, seed 9, prompt \"The \"",
            ]
        );
        assert!(md.contains(&format!("```sh\n{}\n```", args.command_line())));
        assert!(md.contains("fixed schedule of 20 steps"));
        assert!(md.contains("| 20 | 2.5000 | 2.7500 |"));
        assert!(md.contains("| final train loss (mean of last 50 steps) | 3.0000 nats/token |"));
    }
}
