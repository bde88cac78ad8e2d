//! `train`: trains the tokenizer and the tiny transformer on the corpus and writes the
//! released files.
//!
//! ```text
//! cargo run --release -p trainer --bin train -- --corpus corpus \
//!     --out models/decode-lab-tiny-v1 --minutes 15 --seed 1234
//! ```
//!
//! Writes `model.f32.safetensors`, `model.int8.safetensors` (the project's per-row int8
//! copy of the f32 weights), `tokenizer.json`, `config.json` (with the files' SHA-256),
//! `loss.svg` and `report.md`. After a linear warm-up the learning rate decays along a cosine
//! that follows wall-clock time, ending when the `--minutes` budget does; `--steps N`
//! makes it a fixed schedule of N steps instead (step-for-step reproducible). `--probe N`
//! times N steps and exits without writing anything. `--help` lists every flag
//! ([`trainer::args::TrainArgs`]).
//!
//! A run is a sequence of steps, each a function below: load the corpus, build the
//! tokenizer, initialise the model, train, write the released files, score them on the
//! held-out pages, draw samples, write the report. Progress goes to stdout.

use std::path::Path;
use std::time::Instant;

use clap::Parser;
use model::ModelConfig;
use tokenizer::Tokenizer;
use trainer::args::{TrainArgs, CONTEXT_LEN, MODEL_NAME};
use trainer::data::{Corpus, Sampler, Streams};
use trainer::eval::{release_samples, HeldOutScore, Sample};
use trainer::net::parameter_count;
use trainer::optim::StepStats;
use trainer::release::{write_file, Release};
use trainer::report::{loss_chart, Report, Timings};
use trainer::training::{train_step, HeldOut, Pacing, TrainLog, ValPoint};
use trainer::{Init, Net, Optim, Rng, TrainError};

fn main() {
    tune_allocator();
    // Bad flags and values end here, with clap's usage message and exit status 2.
    let args = TrainArgs::parse();
    // candle's CPU kernels (gemm, rayon) size their pools from this variable.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    }
    if let Err(e) = run(&args) {
        eprintln!("train: {e}");
        std::process::exit(1);
    }
}

/// One run, step by step; a probe stops after training, since it only times steps.
fn run(args: &TrainArgs) -> Result<(), TrainError> {
    let started = Instant::now();
    let corpus = load_corpus(&args.corpus)?;
    let (tokenizer, tokenizer_secs) = build_tokenizer(&corpus, args.vocab);
    let streams = encode_corpus(&corpus, &tokenizer);
    let (config, net) = init_model(args, tokenizer.vocab_size())?;
    let Some(log) = train(args, &net, &corpus, &streams)? else {
        return Ok(());
    };
    let release = Release::of(&net)?;
    release.write(&args.out, &config, &tokenizer.to_json())?;
    let (scores, scoring_secs) =
        score_held_out(args, &config, &release, &tokenizer, &corpus, &streams)?;
    let samples = draw_samples(args, &config, &release, &tokenizer)?;
    write_report(&Report {
        args,
        config: &config,
        corpus: &corpus,
        streams: &streams,
        log: &log,
        release: &release,
        scores: &scores,
        samples: &samples,
        timings: Timings {
            tokenizer: tokenizer_secs,
            scoring: scoring_secs,
            run: started.elapsed().as_secs_f64(),
        },
        machine: machine(),
    })
}

/// Both splits of the corpus, each slice's size printed.
fn load_corpus(dir: &Path) -> Result<Corpus, TrainError> {
    let corpus = Corpus::read(dir)?;
    for s in corpus.train.iter().chain(&corpus.valid) {
        println!(
            "{}: {} pages, {} bytes",
            s.language,
            s.pages.len(),
            s.bytes()
        );
    }
    Ok(corpus)
}

/// The tokenizer, trained on every training page of both languages, and the seconds
/// that took.
fn build_tokenizer(corpus: &Corpus, vocab: usize) -> (Tokenizer, f64) {
    let t = Instant::now();
    let tokenizer = tokenizer::train(&corpus.training_pages(), vocab).with_name(MODEL_NAME);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "tokenizer: {} ids ({} merges) in {secs:.1} s",
        tokenizer.vocab_size(),
        tokenizer.merge_count()
    );
    (tokenizer, secs)
}

/// Every slice as a token stream, with the training slices' compression.
fn encode_corpus(corpus: &Corpus, tokenizer: &Tokenizer) -> Streams {
    let streams = corpus.token_streams(|text| tokenizer.encode(text), tokenizer.end_of_text());
    for (s, stream) in corpus.train.iter().zip(&streams.train) {
        println!(
            "train.{}: {} tokens, {:.3} bytes/token",
            s.language,
            stream.len(),
            s.bytes() as f64 / stream.len() as f64
        );
    }
    streams
}

/// The model the flags describe, initialised from the seed's first stream.
fn init_model(args: &TrainArgs, vocab_size: usize) -> Result<(ModelConfig, Net), TrainError> {
    let config = args.model_config(vocab_size);
    config.validate()?;
    println!("model: {} parameters", parameter_count(&config));
    let mut init_rng = Rng::derive(args.seed, 1);
    let net = Net::new(&config, &Init::training(&config), &mut init_rng)?;
    Ok((config, net))
}

/// Trains `net` on batches drawn from the seed's second stream, the language in
/// proportion to its training bytes, and ends with a last held-out point. A probe
/// (`--probe`) prints its speed and gives no log, since it writes nothing.
fn train(
    args: &TrainArgs,
    net: &Net,
    corpus: &Corpus,
    streams: &Streams,
) -> Result<Option<TrainLog>, TrainError> {
    let weights_by_bytes: Vec<f64> = corpus.train.iter().map(|s| s.bytes() as f64).collect();
    let mut sampler = Sampler::new(
        streams.train.clone(),
        &weights_by_bytes,
        Rng::derive(args.seed, 2),
    )?;
    let mut optim = Optim::new(net, args.optim_config())?;
    let held_out = HeldOut::new(&streams.valid, CONTEXT_LEN, net)?;
    let mut log = train_loop(args, net, &mut optim, &mut sampler, &held_out)?;
    if let Some(p) = args.probe {
        let secs = log.train_secs;
        println!(
            "probe: {p} steps of batch {} in {secs:.1} s: {:.3} s/step, {:.0} tokens/s",
            args.batch,
            secs / p as f64,
            (p * args.batch * CONTEXT_LEN) as f64 / secs
        );
        return Ok(None);
    }
    log.val_points.push(ValPoint {
        step: log.steps,
        losses: held_out.losses(net)?,
    });
    Ok(Some(log))
}

/// The training loop: steps until `--steps`, `--probe` or the time budget runs out, with a
/// held-out point every `--eval-every` steps (none in a probe).
fn train_loop(
    args: &TrainArgs,
    net: &Net,
    optim: &mut Optim,
    sampler: &mut Sampler,
    held_out: &HeldOut,
) -> Result<TrainLog, TrainError> {
    let budget = args.minutes * 60.0;
    let mut pacing = Pacing::new(args.schedule(), args.steps, budget);
    let mut log = TrainLog::default();
    let clock = Instant::now();
    loop {
        let step = optim.steps();
        if args.steps.is_some_and(|t| step >= t) || args.probe.is_some_and(|p| step >= p) {
            break;
        }
        let now = clock.elapsed().as_secs_f64();
        if now >= budget {
            log.time_capped = args.steps.is_some();
            break;
        }
        if args.probe.is_none() && step.is_multiple_of(args.eval_every) {
            let t = Instant::now();
            let losses = held_out.losses(net)?;
            log.eval_secs += t.elapsed().as_secs_f64();
            println!(
                "step {step:5}  held-out loss en {:.4}  eu {:.4}",
                losses[0], losses[1]
            );
            log.val_points.push(ValPoint { step, losses });
        }
        let lr = pacing.lr(step, now);
        let stats = train_step(net, optim, sampler, args.batch, CONTEXT_LEN, lr)?;
        log.losses.push(stats.loss);
        let done = optim.steps();
        if done.is_multiple_of(10) || args.probe.is_some() {
            print_progress(done, &log, &stats, clock.elapsed().as_secs_f64());
        }
    }
    log.steps = optim.steps();
    log.train_secs = clock.elapsed().as_secs_f64();
    Ok(log)
}

/// One progress line: the mean loss of the last ten steps, the step's rate and gradient
/// norm, and the pace so far.
fn print_progress(done: usize, log: &TrainLog, stats: &StepStats, elapsed: f64) {
    println!(
        "step {done:5}  loss {:.4}  lr {:.2e}  |g| {:.3}  {:.2} s/step  {:.0} s",
        log.recent_loss(10),
        stats.lr,
        stats.grad_norm,
        elapsed / done as f64,
        elapsed
    );
}

/// Held-out bits per byte of both weight files with the reference forward pass, and
/// the seconds that took.
fn score_held_out(
    args: &TrainArgs,
    config: &ModelConfig,
    release: &Release,
    tokenizer: &Tokenizer,
    corpus: &Corpus,
    streams: &Streams,
) -> Result<(Vec<HeldOutScore>, f64), TrainError> {
    let t = Instant::now();
    let mut scores = Vec::new();
    for (s, stream) in corpus.valid.iter().zip(&streams.valid) {
        let score = HeldOutScore::of(s, stream, config, release, tokenizer, args.threads)?;
        println!(
            "valid.{}: {:.4} bpb (f32), {:.4} bpb (int8), {} tokens, {} bytes",
            score.language,
            score.f32.bits_per_byte(),
            score.int8.bits_per_byte(),
            score.f32.tokens,
            score.f32.bytes
        );
        scores.push(score);
    }
    Ok((scores, t.elapsed().as_secs_f64()))
}

/// The report's samples, then printed.
fn draw_samples(
    args: &TrainArgs,
    config: &ModelConfig,
    release: &Release,
    tokenizer: &Tokenizer,
) -> Result<Vec<Sample>, TrainError> {
    let samples = release_samples(config, release, tokenizer, args.seed)?;
    for s in &samples {
        println!("--- sample ({}) ---\n{}\n", s.how, s.text);
    }
    Ok(samples)
}

/// `loss.svg` and `report.md`, beside the released files.
fn write_report(report: &Report) -> Result<(), TrainError> {
    let out = &report.args.out;
    let chart = loss_chart(&report.config.name, report.log);
    write_file(&out.join("loss.svg"), chart.as_bytes())?;
    write_file(&out.join("report.md"), report.to_markdown().as_bytes())?;
    println!("wrote {}", out.display());
    Ok(())
}

/// glibc returns freed blocks of more than 128 KiB to the kernel at once, so every step's
/// activations are page-faulted in afresh (three times slower on this machine): keep blocks
/// up to 32 MiB in the heap and never trim it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    use std::os::raw::c_int;
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_TOP_PAD: c_int = -2;
    const M_MMAP_THRESHOLD: c_int = -3;
    // SAFETY: mallopt only changes allocator parameters; it is called before any thread
    // exists and before the large allocations it tunes.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, c_int::MAX);
        mallopt(M_TOP_PAD, 64 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

/// CPU model and thread count, for the report.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_default();
    format!(
        "{cpu}, {cores} cores available, {threads} compute threads, {}",
        std::env::consts::OS
    )
}
