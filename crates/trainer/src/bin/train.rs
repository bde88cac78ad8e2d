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

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use candle_core::Tensor;
use clap::Parser;
use model::{sha256_hex, ModelConfig, ModelFile, Transformer};
use policy::Policy;
use trainer::args::{TrainArgs, CONTEXT_LEN, MODEL_NAME};
use trainer::data::{read_split, token_stream, windows, Sampler, Slice};
use trainer::eval::{sample, score_stream, SliceScore};
use trainer::net::parameter_count;
use trainer::svg::{line_chart, Mark, Series};
use trainer::{Init, Net, Optim, Rng, TrainError};

/// Held-out windows per language for the validation points of the loss curve.
const PROBE_WINDOWS: usize = 16;

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

/// A validation point of the loss curve: held-out loss per language (nats/token, candle).
struct ValPoint {
    step: usize,
    losses: Vec<f64>,
}

fn run(args: &TrainArgs) -> Result<(), TrainError> {
    let started = Instant::now();
    let train = read_split(&args.corpus, "train")?;
    let valid = read_split(&args.corpus, "valid")?;
    for s in train.iter().chain(&valid) {
        println!(
            "{}: {} pages, {} bytes",
            s.language,
            s.pages.len(),
            s.bytes()
        );
    }

    // Tokenizer: trained on every training page of both languages.
    let t = Instant::now();
    let texts: Vec<&str> = train
        .iter()
        .flat_map(|s| s.pages.iter().map(String::as_str))
        .collect();
    let tokenizer = tokenizer::train(&texts, args.vocab).with_name(MODEL_NAME);
    let tokenizer_json = tokenizer.to_json();
    let tokenizer_secs = t.elapsed().as_secs_f64();
    let eot = tokenizer.end_of_text();
    println!(
        "tokenizer: {} ids ({} merges) in {tokenizer_secs:.1} s",
        tokenizer.vocab_size(),
        tokenizer.merge_count()
    );
    let encode = |s: &Slice| token_stream(s, |text| tokenizer.encode(text), eot);
    let train_streams: Vec<Vec<u32>> = train.iter().map(encode).collect();
    let valid_streams: Vec<Vec<u32>> = valid.iter().map(encode).collect();
    for (s, stream) in train.iter().zip(&train_streams) {
        println!(
            "train.{}: {} tokens, {:.3} bytes/token",
            s.language,
            stream.len(),
            s.bytes() as f64 / stream.len() as f64
        );
    }

    let config = args.model_config(tokenizer.vocab_size());
    config.validate()?;
    let params = parameter_count(&config);
    println!("model: {params} parameters");

    let mut init_rng = Rng::derive(args.seed, 1);
    let net = Net::new(&config, &Init::training(&config), &mut init_rng)?;
    let weights_by_bytes: Vec<f64> = train.iter().map(|s| s.bytes() as f64).collect();
    let mut sampler = Sampler::new(
        train_streams.clone(),
        &weights_by_bytes,
        Rng::derive(args.seed, 2),
    )?;
    // With `--steps` the cosine runs over steps; otherwise over the time left after warm-up.
    let schedule = args.schedule();
    let mut optim = Optim::new(&net, args.optim_config())?;

    // Fixed held-out windows for the curve's validation points, evenly spread.
    let probes: Vec<(Tensor, Tensor)> = valid_streams
        .iter()
        .map(|stream| {
            let all = windows(stream, CONTEXT_LEN);
            let full: Vec<_> = all.iter().filter(|(i, _)| i.len() == CONTEXT_LEN).collect();
            let n = PROBE_WINDOWS.min(full.len());
            let pick: Vec<&(&[u32], &[u32])> = (0..n).map(|k| full[k * full.len() / n]).collect();
            let x: Vec<u32> = pick.iter().flat_map(|(i, _)| i.iter().copied()).collect();
            let y: Vec<u32> = pick.iter().flat_map(|(_, t)| t.iter().copied()).collect();
            Ok((
                Tensor::from_vec(x, (n, CONTEXT_LEN), net.device())?,
                Tensor::from_vec(y, (n, CONTEXT_LEN), net.device())?,
            ))
        })
        .collect::<Result<_, TrainError>>()?;
    let validate = |net: &Net| -> Result<Vec<f64>, TrainError> {
        probes
            .iter()
            .map(|(x, y)| Ok(f64::from(net.loss(x, y)?.to_scalar::<f32>()?)))
            .collect()
    };

    // Training.
    let budget = args.minutes * 60.0;
    let train_start = Instant::now();
    let mut losses: Vec<f32> = Vec::new();
    let mut val_points: Vec<ValPoint> = Vec::new();
    let total = args.steps;
    let mut time_capped = false;
    let mut eval_secs = 0.0;
    let mut warmup_end: Option<f64> = None;
    let probe_steps = args.probe;
    loop {
        let step = optim.steps();
        if total.is_some_and(|t| step >= t) || probe_steps.is_some_and(|p| step >= p) {
            break;
        }
        let now = train_start.elapsed().as_secs_f64();
        if now >= budget {
            time_capped = total.is_some();
            break;
        }
        if probe_steps.is_none() && step.is_multiple_of(args.eval_every) {
            let t = Instant::now();
            let v = validate(&net)?;
            eval_secs += t.elapsed().as_secs_f64();
            println!(
                "step {step:5}  held-out loss en {:.4}  eu {:.4}",
                v[0], v[1]
            );
            val_points.push(ValPoint { step, losses: v });
        }
        let lr = match total {
            Some(_) => schedule.lr(step),
            None if step < schedule.warmup => schedule.lr(step),
            None => {
                let start = *warmup_end.get_or_insert(now);
                schedule.decayed((now - start) / (budget - start).max(1.0))
            }
        };
        let (x, y) = sampler.batch(args.batch, CONTEXT_LEN)?;
        let x = Tensor::from_vec(x, (args.batch, CONTEXT_LEN), net.device())?;
        let y = Tensor::from_vec(y, (args.batch, CONTEXT_LEN), net.device())?;
        let loss = net.loss(&x, &y)?;
        let stats = optim.step_at(&loss, lr)?;
        losses.push(stats.loss);
        let done = optim.steps();
        let elapsed = train_start.elapsed().as_secs_f64();
        if done.is_multiple_of(10) || probe_steps.is_some() {
            let recent = &losses[losses.len().saturating_sub(10)..];
            let mean = recent.iter().sum::<f32>() / recent.len() as f32;
            println!(
                "step {done:5}  loss {mean:.4}  lr {:.2e}  |g| {:.3}  {:.2} s/step  {:.0} s",
                stats.lr,
                stats.grad_norm,
                elapsed / done as f64,
                elapsed
            );
        }
    }
    let steps = optim.steps();
    let train_secs = train_start.elapsed().as_secs_f64();
    if let Some(p) = probe_steps {
        println!(
            "probe: {p} steps of batch {} in {train_secs:.1} s: {:.3} s/step, {:.0} tokens/s",
            args.batch,
            train_secs / p as f64,
            (p * args.batch * CONTEXT_LEN) as f64 / train_secs
        );
        return Ok(());
    }
    let final_val = validate(&net)?;
    val_points.push(ValPoint {
        step: steps,
        losses: final_val,
    });

    // Export.
    std::fs::create_dir_all(&args.out).map_err(|e| TrainError::io("create", &args.out, e))?;
    let weights = net.to_weights()?;
    let int8 = weights.quantized();
    let f32_bytes = weights.to_safetensors()?;
    let int8_bytes = int8.to_safetensors()?;
    let files = [
        ("weights-f32", "model.f32.safetensors", f32_bytes.as_slice()),
        (
            "weights-int8",
            "model.int8.safetensors",
            int8_bytes.as_slice(),
        ),
        ("tokenizer", "tokenizer.json", tokenizer_json.as_bytes()),
    ];
    let mut released = config.clone();
    for (role, path, bytes) in files {
        write(&args.out.join(path), bytes)?;
        released.files.push(ModelFile {
            role: role.to_string(),
            path: path.to_string(),
            sha256: sha256_hex(bytes),
        });
    }
    let config_json = serde_json::to_string_pretty(&released)
        .map_err(|e| TrainError::State(format!("config JSON: {e}")))?
        + "\n";
    write(&args.out.join("config.json"), config_json.as_bytes())?;
    // The files read back as the lab reads them.
    let reread = ModelConfig::from_json(&config_json)?;
    reread.verify("weights-f32", &f32_bytes)?;

    // Held-out bits per byte with the reference forward pass.
    let t = Instant::now();
    let mut scores: Vec<(String, SliceScore, SliceScore)> = Vec::new();
    for (s, stream) in valid.iter().zip(&valid_streams) {
        let f = score_stream(
            &s.language,
            &config,
            &weights,
            &tokenizer,
            stream,
            args.threads,
        )?;
        let q = score_stream(
            &s.language,
            &config,
            &int8,
            &tokenizer,
            stream,
            args.threads,
        )?;
        if f.bytes != s.bytes() {
            return Err(TrainError::State(format!(
                "valid.{}: scored {} bytes of {}",
                s.language,
                f.bytes,
                s.bytes()
            )));
        }
        println!(
            "valid.{}: {:.4} bpb (f32), {:.4} bpb (int8), {} tokens, {} bytes",
            s.language,
            f.bits_per_byte(),
            q.bits_per_byte(),
            f.tokens,
            f.bytes
        );
        scores.push((s.language.clone(), f, q));
    }
    let bpb_secs = t.elapsed().as_secs_f64();

    // Samples.
    let mut reference = Transformer::from_safetensors(config.clone(), &f32_bytes)?;
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let warm = Policy {
        temperature: 0.7,
        ..Policy::default()
    };
    let mut int8_model = Transformer::from_safetensors(config.clone(), &int8_bytes)?;
    let samples = vec![
        (
            "f32, greedy",
            "The ",
            sample(&mut reference, &tokenizer, "The ", 200, &greedy, args.seed)?,
        ),
        (
            "f32, temperature 0.7, seed",
            "The ",
            sample(&mut reference, &tokenizer, "The ", 200, &warm, args.seed)?,
        ),
        (
            "int8, temperature 0.7, seed",
            "The ",
            sample(&mut int8_model, &tokenizer, "The ", 200, &warm, args.seed)?,
        ),
        (
            "f32, temperature 0.7, seed",
            "Hautatu ",
            sample(
                &mut reference,
                &tokenizer,
                "Hautatu ",
                200,
                &warm,
                args.seed,
            )?,
        ),
    ];
    for (how, _, text) in &samples {
        println!("--- sample ({how}) ---\n{text}\n");
    }

    // Loss curve.
    let chunk = 10usize;
    let train_curve: Vec<(f64, f64)> = losses
        .chunks(chunk)
        .enumerate()
        .map(|(i, c)| {
            let x = (i * chunk + c.len()) as f64;
            (x, f64::from(c.iter().sum::<f32>()) / c.len() as f64)
        })
        .collect();
    let series = vec![
        Series {
            label: format!("train (mean of {chunk} steps)"),
            points: train_curve,
            mark: Mark::Solid,
        },
        Series {
            label: "held-out English".into(),
            points: val_points
                .iter()
                .map(|p| (p.step as f64, p.losses[0]))
                .collect(),
            mark: Mark::DashedCircles,
        },
        Series {
            label: "held-out Basque".into(),
            points: val_points
                .iter()
                .map(|p| (p.step as f64, p.losses[1]))
                .collect(),
            mark: Mark::DottedSquares,
        },
    ];
    let svg = line_chart(
        &format!("{MODEL_NAME}: cross-entropy during training"),
        "optimizer step",
        "loss (nats per token)",
        &series,
    );
    write(&args.out.join("loss.svg"), svg.as_bytes())?;

    // Report.
    let tokens_seen = steps * args.batch * CONTEXT_LEN;
    let final_train = {
        let recent = &losses[losses.len().saturating_sub(50)..];
        recent.iter().sum::<f32>() / recent.len().max(1) as f32
    };
    let mut md = String::new();
    let _ = writeln!(md, "# {MODEL_NAME}: training report\n");
    let _ = writeln!(
        md,
        "A {params}-parameter decoder-only transformer (the `model` crate's architecture) and a \
         {}-id byte-level BPE tokenizer, trained from scratch on the LibreOffice help corpus \
         (English and Basque) with candle on the CPU by `crates/trainer`.\n",
        tokenizer.vocab_size()
    );
    let _ = writeln!(md, "## Reproduce\n\n```sh");
    let _ = writeln!(md, "{}", args.command_line());
    let _ = writeln!(md, "```\n");
    let _ = writeln!(
        md,
        "{}\n",
        match args.steps {
            Some(n) => format!(
                "The learning rate followed a fixed schedule of {n} steps, so the same command \
                 on the same thread count repeats the run step for step."
            ),
            None => format!(
                "Weights are initialised and batches drawn from the seed alone, but the \
                 learning rate's cosine decay followed wall-clock time (it ends when the \
                 {}-minute budget does), so a rerun on a differently loaded machine takes a \
                 different number of steps and ends near, not exactly at, these numbers. \
                 Add `--steps {steps}` to decay over this run's step count instead.",
                args.minutes
            ),
        }
    );
    let _ = writeln!(md, "## Model\n\n| setting | value |\n|---|---|");
    for (k, v) in [
        ("vocab_size", config.vocab_size.to_string()),
        ("d_model", config.d_model.to_string()),
        ("n_layers", config.n_layers.to_string()),
        (
            "n_heads / n_kv_heads",
            format!("{} / {}", config.n_heads, config.n_kv_heads),
        ),
        ("head_dim", config.head_dim().to_string()),
        ("d_ff (SwiGLU)", config.d_ff.to_string()),
        ("context_len", config.context_len.to_string()),
        ("rope_theta", config.rope_theta.to_string()),
        ("norm_eps", format!("{:e}", config.norm_eps)),
        (
            "parameters (embedding tied, counted once)",
            params.to_string(),
        ),
        (
            "model.f32.safetensors",
            format!("{} bytes", f32_bytes.len()),
        ),
        (
            "model.int8.safetensors",
            format!("{} bytes", int8_bytes.len()),
        ),
    ] {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(md, "\n## Training\n\n| setting | value |\n|---|---|");
    let machine = machine();
    for (k, v) in [
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
                "{} windows × {CONTEXT_LEN} tokens = {} tokens/step",
                args.batch,
                args.batch * CONTEXT_LEN
            ),
        ),
        (
            "sampling",
            "random windows; language drawn in proportion to its training bytes".to_string(),
        ),
        (
            "steps",
            format!(
                "{steps}{}",
                if time_capped {
                    " (stopped by the time budget)"
                } else {
                    ""
                }
            ),
        ),
        ("tokens seen", tokens_seen.to_string()),
        (
            "training wall time",
            format!("{train_secs:.0} s ({eval_secs:.0} s of it on validation points)"),
        ),
        ("tokenizer training", format!("{tokenizer_secs:.1} s")),
        (
            "held-out scoring (reference forward pass)",
            format!("{bpb_secs:.0} s"),
        ),
        (
            "whole run",
            format!("{:.0} s", started.elapsed().as_secs_f64()),
        ),
        (
            "final train loss (mean of last 50 steps)",
            format!("{final_train:.4} nats/token"),
        ),
        ("machine", machine),
    ] {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(
        md,
        "\n### Corpus\n\n| file | pages | bytes | tokens | bytes/token |\n|---|---|---|---|---|"
    );
    for (split, slices, streams) in [
        ("train", &train, &train_streams),
        ("valid", &valid, &valid_streams),
    ] {
        for (s, stream) in slices.iter().zip(streams.iter()) {
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
    let _ = writeln!(md, "\n## Held-out bits per byte\n");
    let _ = writeln!(
        md,
        "Computed with the reference forward pass (`model::Transformer`, the code the lab runs) \
         on the validation pages: each slice's token stream (`<|endoftext|>` before every page) \
         is cut into non-overlapping windows of {CONTEXT_LEN} inputs, every text token is predicted \
         once from the tokens before it in its window, and bpb = Σ NLL (nats) / ln 2 / Σ UTF-8 \
         bytes of the pages (the `<|endoftext|>` targets carry no bytes and are left out).\n"
    );
    let _ = writeln!(md, "| slice | bytes | tokens | f32 bpb | int8 bpb | f32 nats/token |\n|---|---|---|---|---|---|");
    for (lang, f, q) in &scores {
        let _ = writeln!(
            md,
            "| valid.{lang} | {} | {} | {:.4} | {:.4} | {:.4} |",
            f.bytes,
            f.tokens,
            f.bits_per_byte(),
            q.bits_per_byte(),
            f.nats_per_token()
        );
    }
    let _ = writeln!(
        md,
        "\n## Loss curve\n\n![Training and held-out loss](loss.svg)\n"
    );
    let _ = writeln!(
        md,
        "The solid line is the training loss (mean of each {chunk} steps); the dashed line with \
         circles and the dotted line with squares are the held-out English and Basque losses \
         on {PROBE_WINDOWS} fixed validation windows each (candle graph, nats per token, \
         `<|endoftext|>` targets included).\n"
    );
    let _ = writeln!(md, "| step | held-out en | held-out eu |\n|---|---|---|");
    for p in &val_points {
        let _ = writeln!(
            md,
            "| {} | {:.4} | {:.4} |",
            p.step, p.losses[0], p.losses[1]
        );
    }
    let _ = writeln!(
        md,
        "\n## Samples\n\n200 tokens after the prompt, reference forward pass, `policy` steps.\n"
    );
    for (how, prompt, text) in &samples {
        let how = if how.ends_with("seed") {
            format!("{how} {}", args.seed)
        } else {
            how.to_string()
        };
        let _ = writeln!(
            md,
            "### {how}, prompt {prompt:?}\n\n```text\n{}\n```\n",
            text.replace("```", "'''")
        );
    }
    write(&args.out.join("report.md"), md.as_bytes())?;
    println!("wrote {}", args.out.display());
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    std::fs::write(path, bytes).map_err(|e| TrainError::io("write", path, e))
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
