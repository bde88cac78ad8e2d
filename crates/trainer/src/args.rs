//! The `train` command line: every flag with its default and its check, the settings the
//! flags imply (model shape, learning-rate schedule, optimiser), and the command that repeats
//! a run, which the report prints, so flags, settings and report cannot drift apart.
//!
//! ```
//! use clap::Parser;
//! use trainer::args::TrainArgs;
//!
//! let args = TrainArgs::try_parse_from(["train", "--steps", "300", "--seed", "7"]).unwrap();
//! assert_eq!((args.steps, args.seed, args.batch), (Some(300), 7, 8));
//! assert!(TrainArgs::try_parse_from(["train", "--batch", "0"]).is_err());
//! ```

use std::path::PathBuf;

use clap::Parser;
use model::ModelConfig;

use crate::{OptimConfig, Schedule, TrainError};

/// The released model's name: in its config, its tokenizer, its chart and its report.
pub const MODEL_NAME: &str = "decode-lab-tiny-v1";

/// The model's context in tokens; training windows are this long.
pub const CONTEXT_LEN: usize = 256;

/// Trains the tokenizer and the tiny transformer on the corpus and writes the released files.
///
/// A flag given twice takes its last value; numbers may be negative where the flag's check
/// allows it (`--lr`).
#[derive(Clone, Debug, PartialEq, Parser)]
#[command(
    name = "train",
    args_override_self = true,
    allow_negative_numbers = true
)]
pub struct TrainArgs {
    /// Directory holding train.{en,eu}.txt and valid.{en,eu}.txt.
    #[arg(long, value_name = "DIR", default_value = "corpus")]
    pub corpus: PathBuf,
    /// Directory the released files are written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "models/decode-lab-tiny-v1")]
    pub out: PathBuf,
    /// Wall-clock budget of the training loop; without --steps the cosine decay follows it.
    #[arg(long, default_value_t = 15.0, value_parser = positive_minutes)]
    pub minutes: f64,
    /// The only randomness: initialisation, batches and samples are drawn from it.
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// A fixed schedule of N steps (step-for-step reproducible) instead of the time budget.
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// Times N steps and exits without writing anything.
    #[arg(long, value_name = "N")]
    pub probe: Option<usize>,
    /// Windows per step.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = positive_count)]
    pub batch: usize,
    /// Peak learning rate (the cosine ends at a tenth of it).
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Steps of linear warm-up.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub warmup: usize,
    /// Width of the residual stream.
    #[arg(long = "d-model", value_name = "N", default_value_t = 128)]
    pub d_model: usize,
    /// Transformer blocks.
    #[arg(long = "layers", value_name = "N", default_value_t = 4)]
    pub n_layers: usize,
    /// Query heads per block.
    #[arg(long = "heads", value_name = "N", default_value_t = 4)]
    pub n_heads: usize,
    /// Key/value heads per block (grouped-query attention when fewer than --heads).
    #[arg(long = "kv-heads", value_name = "N", default_value_t = 2)]
    pub n_kv_heads: usize,
    /// Hidden width of the SwiGLU feed-forward block.
    #[arg(long = "d-ff", value_name = "N", default_value_t = 352)]
    pub d_ff: usize,
    /// Tokenizer vocabulary size: 256 bytes, the learned merges and `<|endoftext|>`.
    #[arg(long, value_name = "N", default_value_t = 768)]
    pub vocab: usize,
    /// Steps between the loss curve's held-out points.
    #[arg(
        long = "eval-every",
        value_name = "N",
        default_value_t = 100,
        value_parser = positive_count
    )]
    pub eval_every: usize,
    /// Compute threads (candle's pool, unless RAYON_NUM_THREADS is set, and held-out scoring).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = positive_count)]
    pub threads: usize,
}

impl TrainArgs {
    /// The model the flags describe, over a vocabulary of `vocab_size` ids (the trained
    /// tokenizer's, which may fall short of `--vocab`).
    pub fn model_config(&self, vocab_size: usize) -> ModelConfig {
        ModelConfig {
            name: MODEL_NAME.to_string(),
            vocab_size,
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            d_ff: self.d_ff,
            context_len: CONTEXT_LEN,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            files: Vec::new(),
        }
    }

    /// Warm-up to `--lr`, then a cosine to a tenth of it: over `--steps` when given,
    /// otherwise (`total` unbounded) over the time left, which the loop measures itself.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            peak: self.lr,
            floor: self.lr / 10.0,
            warmup: self.warmup,
            total: self.steps.unwrap_or(usize::MAX),
        }
    }

    /// AdamW as the report describes it: weight decay 0.1, β 0.9 and 0.95, clipping at 1.0.
    pub fn optim_config(&self) -> OptimConfig {
        OptimConfig {
            schedule: self.schedule(),
            weight_decay: 0.1,
            beta1: 0.9,
            beta2: 0.95,
            clip_norm: 1.0,
        }
    }

    /// The command that repeats this run, every setting spelled out (`--probe` left out: a
    /// probe writes no report).
    pub fn command_line(&self) -> String {
        format!(
            "cargo run --release -p trainer --bin train -- --corpus {} --out {} --minutes {} --seed {}{} --batch {} --lr {} --warmup {} --d-model {} --layers {} --heads {} --kv-heads {} --d-ff {} --vocab {} --eval-every {} --threads {}",
            self.corpus.display(),
            self.out.display(),
            self.minutes,
            self.seed,
            self.steps.map_or(String::new(), |n| format!(" --steps {n}")),
            self.batch,
            self.lr,
            self.warmup,
            self.d_model,
            self.n_layers,
            self.n_heads,
            self.n_kv_heads,
            self.d_ff,
            self.vocab,
            self.eval_every,
            self.threads
        )
    }
}

/// A count that must be at least 1 (`--batch`, `--eval-every`, `--threads`).
pub fn positive_count(text: &str) -> Result<usize, TrainError> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(TrainError::BadValue {
            value: text.to_string(),
            expected: "a whole number of at least 1",
        }),
    }
}

/// A time budget in minutes: more than 0 (infinity allowed, for `--steps` alone to end the
/// run; NaN refused, since no time would ever reach it).
pub fn positive_minutes(text: &str) -> Result<f64, TrainError> {
    match text.parse::<f64>() {
        Ok(m) if m > 0.0 => Ok(m),
        _ => Err(TrainError::BadValue {
            value: text.to_string(),
            expected: "a number of minutes above 0",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Result<TrainArgs, clap::Error> {
        TrainArgs::try_parse_from(std::iter::once("train").chain(flags.iter().copied()))
    }

    #[test]
    fn defaults_are_the_released_run() {
        let args = parse(&[]).unwrap();
        assert_eq!(
            args.command_line(),
            "cargo run --release -p trainer --bin train -- --corpus corpus --out \
             models/decode-lab-tiny-v1 --minutes 15 --seed 1234 --batch 8 --lr 0.003 --warmup \
             50 --d-model 128 --layers 4 --heads 4 --kv-heads 2 --d-ff 352 --vocab 768 \
             --eval-every 100 --threads 2"
        );
        assert_eq!((args.steps, args.probe), (None, None));
    }

    #[test]
    fn the_command_line_parses_back_to_the_same_settings() {
        let args = parse(&[
            "--steps",
            "40",
            "--lr",
            "1e-3",
            "--minutes",
            "2.5",
            "--layers",
            "2",
            "--out",
            "/tmp/x",
        ])
        .unwrap();
        let line = args.command_line();
        let flags: Vec<&str> = line.split_once(" -- ").unwrap().1.split(' ').collect();
        assert_eq!(parse(&flags).unwrap(), args);
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        assert_eq!(parse(&["--seed", "1", "--seed", "2"]).unwrap().seed, 2);
    }

    #[test]
    fn counts_must_be_at_least_one() {
        for flag in ["--batch", "--eval-every", "--threads"] {
            for bad in ["0", "-3", "two"] {
                let err = parse(&[flag, bad]).unwrap_err().to_string();
                assert!(err.contains(flag), "{err}");
                assert!(
                    err.contains(&format!("{bad:?} is not a whole number")),
                    "{err}"
                );
            }
        }
        assert_eq!(positive_count("3").unwrap(), 3);
    }

    #[test]
    fn minutes_must_be_above_zero() {
        for bad in ["0", "-1", "NaN", "soon"] {
            let err = parse(&["--minutes", bad]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{bad:?} is not a number of minutes")),
                "{err}"
            );
        }
        assert_eq!(positive_minutes("0.5").unwrap(), 0.5);
        assert_eq!(positive_minutes("inf").unwrap(), f64::INFINITY);
    }

    #[test]
    fn a_negative_learning_rate_is_read_as_a_number() {
        assert_eq!(parse(&["--lr", "-0.5"]).unwrap().lr, -0.5);
    }

    #[test]
    fn unknown_flags_are_refused() {
        let err = parse(&["--epochs", "3"]).unwrap_err().to_string();
        assert!(err.contains("--epochs"), "{err}");
    }

    #[test]
    fn the_schedule_follows_steps_when_given() {
        let timed = parse(&["--lr", "0.002"]).unwrap().schedule();
        assert_eq!(
            (timed.peak, timed.floor, timed.warmup),
            (0.002, 0.002 / 10.0, 50)
        );
        assert_eq!(timed.total, usize::MAX);
        assert_eq!(parse(&["--steps", "300"]).unwrap().schedule().total, 300);
    }
}
