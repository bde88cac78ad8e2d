//! `decode-lab`: the policy crate on the command line.
//!
//! `decode-lab choose` is the chapter's `decode.py`; `decode-lab pipeline` runs one step of
//! the full policy and prints every stage as JSON, the same numbers the browser lab shows;
//! `generate`, `replay` and `eval` run the shipped tiny model: `generate` and `replay` on the
//! CPU or, with `--backend gpu`, on WebGPU (falling back to `cpu-reference`); `eval` on the
//! CPU; `capacity` plans serving capacity (the `capacity` crate); `ngram train` builds the
//! n-gram draft and `speculate` measures how often speculative decoding accepts its tokens;
//! `lengths` measures stop points per slice; `langid train` builds the language identifier;
//! `compare` runs two policies on the same draws; `traffic` makes a demo's telemetry; `observe` joins run records to outcomes by exact
//! version; `export --parquet` writes them as Parquet tables.
//!
//! Bad input is one `error:` line on standard error naming the value, and exit code 2;
//! `replay` exits with 1 when a run differs from its record or the record was altered.
//! `--seed fresh` draws a seed from the operating system and prints it, so a "random" run
//! can be repeated.

#![forbid(unsafe_code)]

mod alternatives;
mod capacity_plan;
mod compare;
mod continuation;
mod draft;
mod error;
mod eval;
mod export;
mod files;
mod langid;
mod lengths;
mod model_dir;
mod named;
mod observe;
mod otlp;
mod output;
mod paths;
mod policy_args;
mod run;
mod speculate;
mod traffic;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use error::CliError;
use gpu::BackendChoice;
use model::Precision;
use policy::chapter::{self, Argpartition};
use policy::compare_report::{comparison_parts, tree_part};
use policy::formats::{self, Format};
use policy::{NumpyRng, Policy, RunConfig, SeedSource, Snapshots, StepContext, StopConfig};
use policy_args::PolicyArgs;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "decode-lab",
    version,
    about = "The decoding-policy lab on the command line"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The chapter's choose(logits, temperature, top_k, seed), exactly as decode.py prints it.
    Choose(ChooseArgs),
    /// One step of the full policy pipeline, with the distribution after every stage.
    Pipeline(PipelineArgs),
    /// Generate with the shipped model: streams text, or prints the run record (--json).
    Generate(GenerateArgs),
    /// Regenerate a run record and say `identical` or name the first differing step.
    Replay(ReplayArgs),
    /// Two policies on the same model, prompt and seeded stream: the tokens aligned with the
    /// first divergence, per-step KL(a‖b) and total variation along a's path, and
    /// distinct-n, repetition and stop reason of each.
    Compare(CompareArgs),
    /// One policy over many seeds: the tree of the first tokens' paths, each with its
    /// empirical frequency beside its analytic probability under the policy.
    Paths(PathsArgs),
    /// Held-out bits per byte and accuracy per language slice, and policy diversity; with
    /// `--alternatives`, the transformer against a rule, an n-gram and retrieval.
    Eval(EvalArgs),
    /// An inference capacity plan: sweep serving policies over a trace, gate them on SLOs
    /// and per-slice quality, and release one or degrade to a named baseline.
    Capacity(Box<capacity_plan::CapacityArgs>),
    /// Speculative decoding's acceptance rate α and tokens per verification E, per language
    /// slice, teacher-forced on the held-out pages under a decoding policy.
    Speculate(SpeculateArgs),
    /// Where answers stop under a decoding policy, per language slice: generated from the
    /// titles of held-out pages until end-of-text or the budget.
    Lengths(LengthsArgs),
    /// The n-gram draft model.
    #[command(subcommand)]
    Ngram(NgramCommand),
    /// The language identifier that names a run's slice when it has no `slice` tag.
    #[command(subcommand)]
    Langid(LangidCommand),
    /// Run records and mature outcomes joined by exact version, per slice: service health,
    /// input quality, prediction distributions and outcomes, with drift against a baseline.
    Observe(ObserveArgs),
    /// Telemetry to observe without a service: runs of two or more versions from held-out
    /// prompts of both slices, with arrival times, and outcomes labelled by chrF against
    /// the page's true continuation, delivered after a delay.
    Traffic(TrafficArgs),
    /// Run records and outcomes as Parquet tables (runs, steps, outcomes) for DuckDB, Spark
    /// or Trino; `observe` reads them back.
    Export(ExportArgs),
    /// A policy from flags or another form (--policy-from), written as decode-lab's flags,
    /// or with --to as a Hugging Face generation config, an OpenAI or vLLM request body, or
    /// a llama.cpp command line; what the form cannot express is refused by name.
    Policy(PolicyCommandArgs),
}

#[derive(Args)]
struct PolicyCommandArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The form to write: hf, openai, vllm or llama.cpp [default: decode-lab's flags].
    #[arg(long = "to", visible_alias = "policy-to", value_name = "FORM", value_parser = named::<Format>(Format::ALL.map(Format::name)))]
    to: Option<Format>,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("form").required(true).multiple(true).args(["parquet", "otlp", "otlp_endpoint"])))]
struct ExportArgs {
    /// Write Parquet: runs.parquet, steps.parquet and outcomes.parquet in --out.
    #[arg(long, requires = "out", conflicts_with_all = ["otlp", "otlp_endpoint"])]
    parquet: bool,
    /// Write OpenTelemetry spans (OTLP/JSON, GenAI semantic conventions 1.41.0) to
    /// DIR/traces.json: a span per run, an evaluation event per outcome.
    #[arg(long, value_name = "DIR")]
    otlp: Option<PathBuf>,
    /// Post the spans to an OTLP/HTTP collector, http://HOST[:PORT][/PATH] (port 4318 and
    /// /v1/traces when not given), in requests of 512 spans.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Run records, one JSON object a line (or an export's runs.parquet).
    #[arg(required = true, value_name = "RUNS.jsonl")]
    runs: Vec<PathBuf>,
    /// Outcome rows: {"run_id": …, "outcome": "accepted"|"rejected", "at_s": …}.
    #[arg(long, value_name = "OUTCOMES.jsonl")]
    outcomes: Option<PathBuf>,
    /// The directory the three Parquet tables are written to (made if missing).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: Option<PathBuf>,
    /// The language identifier that slices untagged runs, as `observe` does [default:
    /// langid.bin in the model directory].
    #[arg(long, value_name = "PATH")]
    langid: Option<PathBuf>,
    #[arg(long)]
    model: Option<PathBuf>,
}

/// The model and the held-out text a measurement reads.
#[derive(Args)]
struct HeldOut {
    #[arg(long)]
    model: Option<PathBuf>,
    /// The corpus directory with valid.en.txt and valid.eu.txt.
    #[arg(long, default_value = "corpus")]
    corpus: PathBuf,
}

impl HeldOut {
    /// `--model`, or the lab's model directory.
    fn model_dir(&self) -> PathBuf {
        self.model.clone().unwrap_or_else(model_dir::default_dir)
    }
}

#[derive(Args)]
struct TrafficArgs {
    /// Runs to generate in all (1 to 100000).
    #[arg(long, default_value_t = 400, allow_hyphen_values = true)]
    runs: usize,
    /// A version, `NAME=FLAGS`: `generate`'s policy flags, `--weights` and `--max-tokens`
    /// (default 32), e.g. `--version "b=--temperature 1.2 --weights int8"`. Repeatable: the
    /// first is the baseline, the others share the canary.
    #[arg(
        long = "version",
        value_name = "NAME=FLAGS",
        required = true,
        allow_hyphen_values = true
    )]
    versions: Vec<String>,
    /// The share of runs the versions after the first take.
    #[arg(long, default_value_t = 0.5, allow_hyphen_values = true)]
    canary_share: f64,
    /// The share of runs drawn from the Basque slice.
    #[arg(long, default_value_t = 0.2, allow_hyphen_values = true)]
    eu_share: f64,
    /// Mean arrivals per second (Poisson).
    #[arg(long, default_value_t = 2.0, allow_hyphen_values = true)]
    rate: f64,
    /// Mean seconds until a run's outcome is known (exponential).
    #[arg(long, default_value_t = 600.0, allow_hyphen_values = true)]
    outcome_delay: f64,
    /// A prompt is a held-out page's opening, cut at a space at or before this many bytes.
    #[arg(long, default_value_t = 64, allow_hyphen_values = true)]
    prompt_bytes: usize,
    /// The outcome rule: accepted when chrF against the true continuation is at least this.
    /// The tiny model's continuations score about 17 on average, so 20 accepts roughly the
    /// better fifth.
    #[arg(long, default_value_t = continuation::THRESHOLD, allow_hyphen_values = true)]
    threshold: f64,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Where to write the run records (JSONL).
    #[arg(long, value_name = "RUNS.jsonl")]
    out: PathBuf,
    /// Where to write the outcomes (JSONL, in the order they become known).
    #[arg(long, value_name = "OUTCOMES.jsonl")]
    outcomes: PathBuf,
    #[command(flatten)]
    held_out: HeldOut,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CompareArgs {
    #[arg(long)]
    prompt: String,
    /// The prompt template; `{prompt}` marks where the prompt goes.
    #[arg(long, default_value = "{prompt}")]
    template: String,
    /// A whole number, or `fresh`; both policies draw from this one stream.
    #[arg(long, default_value = "7", value_parser = parse_seed, allow_hyphen_values = true)]
    seed: SeedArg,
    /// Policy a: `generate`'s policy flags in one argument, e.g. `--a "--temperature 0.7"`
    /// (empty: the defaults, temperature 0.7).
    #[arg(long = "a", value_name = "POLICY FLAGS", allow_hyphen_values = true)]
    a: String,
    /// Policy b, as `--a`.
    #[arg(long = "b", value_name = "POLICY FLAGS", allow_hyphen_values = true)]
    b: String,
    #[arg(long, default_value_t = 32, allow_hyphen_values = true)]
    max_tokens: usize,
    #[arg(long, default_value_t = Precision::F32, value_parser = named::<Precision>(Precision::ALL.map(Precision::name)))]
    weights: Precision,
    #[arg(long)]
    model: Option<PathBuf>,
    /// Print both run records and the comparison as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PathsArgs {
    #[arg(long)]
    prompt: String,
    /// The prompt template; `{prompt}` marks where the prompt goes.
    #[arg(long, default_value = "{prompt}")]
    template: String,
    #[command(flatten)]
    policy: PolicyArgs,
    /// How many runs, with consecutive seeds (1 to 10000).
    #[arg(long, default_value_t = 100, allow_hyphen_values = true)]
    seeds: usize,
    /// The first run's seed.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    first_seed: u64,
    /// How many tokens deep the tree goes (1 to 8).
    #[arg(long, default_value_t = 3, allow_hyphen_values = true)]
    depth: usize,
    #[arg(long, default_value_t = Precision::F32, value_parser = named::<Precision>(Precision::ALL.map(Precision::name)))]
    weights: Precision,
    #[arg(long)]
    model: Option<PathBuf>,
    /// Print the tree as one JSON object.
    #[arg(long)]
    json: bool,
}

fn run_paths(args: &PathsArgs) -> Result<String, CliError> {
    args.policy.no_breakers()?;
    args.policy.run_settings_used("paths", &[])?;
    let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
    let request = paths::Request {
        dir: &dir,
        precision: args.weights,
        config: RunConfig {
            app_version: env!("CARGO_PKG_VERSION").into(),
            prompt_template: args.template.clone(),
            prompt: args.prompt.clone(),
            policy: args.policy.policy(policy::LAB_TEMPERATURE)?,
            seed: args.first_seed,
            seed_source: SeedSource::User,
            max_tokens: args.depth,
            stop: StopConfig::default(),
        },
        first_seed: args.first_seed,
        seeds: args.seeds,
        depth: args.depth,
    };
    let tree = paths::run(&request)?;
    if args.json {
        Ok(serde_json::to_string(&tree)?)
    } else {
        let part = tree_part("", &policy::knob_words(&request.config.policy), &tree);
        Ok(report::markdown(&[part]).trim_end().to_string())
    }
}

/// The policy flags of `compare --a`/`--b`, read as `generate` reads them.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct PolicyFlags {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// `--{name} FLAGS` as a policy, with errors that name the flag and its value.
fn policy_flags(name: &'static str, flags: &str) -> Result<Policy, CliError> {
    let read = || -> Result<Policy, CliError> {
        let parsed =
            PolicyFlags::try_parse_from(flags.split_whitespace()).map_err(CliError::Flags)?;
        parsed.policy.no_breakers()?;
        let policy = parsed.policy.policy(policy::LAB_TEMPERATURE)?;
        parsed.policy.run_settings_used("compare", &[])?;
        // Every range but the token ids', which the model's vocabulary bounds when it runs.
        policy.validate(usize::MAX)?;
        Ok(policy)
    };
    read().map_err(|e| CliError::PolicyFlags {
        name,
        flags: flags.to_string(),
        source: Box::new(e),
    })
}

fn run_compare(args: &CompareArgs) -> Result<String, CliError> {
    let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
    let request = compare::Request {
        dir: &dir,
        precision: args.weights,
        prompt: &args.prompt,
        template: &args.template,
        seed: args.seed.resolve()?,
        seed_source: match args.seed {
            SeedArg::Fixed(_) => SeedSource::User,
            SeedArg::Fresh => SeedSource::Fresh,
        },
        max_tokens: args.max_tokens,
        a: (&args.a, policy_flags("a", &args.a)?),
        b: (&args.b, policy_flags("b", &args.b)?),
    };
    let comparison = compare::run(&request)?;
    if args.json {
        Ok(serde_json::to_string(&comparison)?)
    } else {
        let words = [&comparison.a, &comparison.b].map(|r| policy::knob_words(&r.config.policy));
        Ok(
            report::markdown(&comparison_parts(&comparison, [&words[0], &words[1]]))
                .trim_end()
                .to_string(),
        )
    }
}

/// What a `--version` sets, read as `generate` reads its flags.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct VersionFlags {
    #[command(flatten)]
    policy: PolicyArgs,
    #[arg(long, default_value_t = Precision::F32, value_parser = named::<Precision>(Precision::ALL.map(Precision::name)))]
    weights: Precision,
    #[arg(long, default_value_t = 32, allow_hyphen_values = true)]
    max_tokens: usize,
}

#[derive(Subcommand)]
enum LangidCommand {
    /// Train the character n-gram language identifier on the training corpus, write it, and
    /// print its held-out accuracy per slice on whole pages and prompt-sized prefixes.
    Train(LangidTrainArgs),
}

#[derive(Args)]
struct LangidTrainArgs {
    /// The corpus directory with train.{en,eu}.txt and valid.{en,eu}.txt.
    #[arg(long, default_value = "corpus")]
    corpus: PathBuf,
    /// Where to write the identifier [default: langid.bin in the model directory].
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ObserveArgs {
    /// Run records, one JSON object a line (`generate --json`, the lab's export, `traffic`),
    /// or Parquet: an export's runs.parquet or the directory `export --parquet` wrote.
    #[arg(required = true, value_name = "RUNS.jsonl")]
    runs: Vec<PathBuf>,
    /// Outcome rows: {"run_id": …, "outcome": "accepted"|"rejected", "at_s": …}, one a line,
    /// or an export's outcomes.parquet (or its directory).
    #[arg(long, value_name = "OUTCOMES.jsonl")]
    outcomes: Option<PathBuf>,
    /// Compare every other version with this one, slice by slice, and give the verdict.
    #[arg(long, value_name = "VERSION_ID")]
    baseline: Option<String>,
    /// Only outcomes known by this time (seconds, the runs' `at_s` clock) are joined.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    as_of: Option<f64>,
    /// The language identifier that slices untagged runs [default: langid.bin in the model
    /// directory].
    #[arg(long, value_name = "PATH")]
    langid: Option<PathBuf>,
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum NgramCommand {
    /// Train the interpolated Kneser-Ney draft on the training corpus with the model's
    /// tokenizer, write it, and print its held-out bits per byte per slice.
    Train(NgramTrainArgs),
}

#[derive(Args)]
struct NgramTrainArgs {
    /// The model directory whose tokenizer the draft uses [default: models/decode-lab-tiny-v1].
    #[arg(long)]
    model: Option<PathBuf>,
    /// The corpus directory with train.{en,eu}.txt and valid.{en,eu}.txt.
    #[arg(long, default_value = "corpus")]
    corpus: PathBuf,
    /// The n-gram order, 1 to 4.
    #[arg(long, default_value_t = 3, allow_hyphen_values = true)]
    order: usize,
    /// Where to write the model [default: draft.ngram in the model directory].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Score at most this many held-out tokens per slice.
    #[arg(long, default_value_t = usize::MAX, allow_hyphen_values = true)]
    max_tokens: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SpeculateArgs {
    /// The draft model.
    #[arg(long, default_value_t = speculate::DraftKind::Ngram, value_parser = named::<speculate::DraftKind>(speculate::DraftKind::ALL.map(speculate::DraftKind::name)))]
    draft: speculate::DraftKind,
    /// The draft's file [default: draft.ngram in the model directory].
    #[arg(long, value_name = "PATH")]
    draft_file: Option<PathBuf>,
    /// Tokens drafted per verification (E depends on it; α does not).
    #[arg(long, allow_hyphen_values = true)]
    k: usize,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Measure the three policies the capacity planner compares (greedy, temperature 0.7,
    /// temperature 1.5) and print its file (models/decode-lab-tiny-v1/speculate.json);
    /// takes no policy flags.
    #[arg(long)]
    planner: bool,
    #[command(flatten)]
    held_out: HeldOut,
    /// Score at most this many held-out tokens per slice.
    #[arg(long, default_value_t = usize::MAX, allow_hyphen_values = true)]
    max_tokens: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LengthsArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Measure the three policies the capacity planner compares (greedy, temperature 0.7,
    /// temperature 1.5) and print its file (models/decode-lab-tiny-v1/lengths.json); takes
    /// no policy flags.
    #[arg(long)]
    planner: bool,
    #[command(flatten)]
    held_out: HeldOut,
    /// Held-out pages per slice: one run from each page's title.
    #[arg(long, default_value_t = 64, allow_hyphen_values = true)]
    pages: usize,
    /// The most tokens a run generates.
    #[arg(long, default_value_t = 192, allow_hyphen_values = true)]
    max_new_tokens: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LogitsSource {
    /// Comma-separated logits, for example `--logits 1.2,0.1,2.4,1.7` (negatives parse).
    #[arg(
        long,
        allow_hyphen_values = true,
        value_name = "LIST",
        required_unless_present = "logits_file"
    )]
    logits: Option<String>,
    /// A file holding one JSON array of logits; `-` reads standard input.
    #[arg(long, value_name = "PATH", conflicts_with = "logits")]
    logits_file: Option<String>,
}

impl LogitsSource {
    fn read(&self) -> Result<Vec<f64>, CliError> {
        match (&self.logits, &self.logits_file) {
            (Some(list), _) => parse_list(list, "logit"),
            (None, Some(path)) => {
                let text = if path == "-" {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .map_err(CliError::Stdin)?;
                    text
                } else {
                    std::fs::read_to_string(path).map_err(|source| CliError::ReadInput {
                        input: named::Named::new("--logits-file", path),
                        source,
                    })?
                };
                let input = if path == "-" { "standard input" } else { path };
                serde_json::from_str(&text).map_err(|source| CliError::LogitsJson {
                    input: input.to_string(),
                    source,
                })
            }
            (None, None) => Err(CliError::NoLogits),
        }
    }
}

/// A seed, or `fresh` for one drawn from the operating system (and then printed).
#[derive(Clone, Copy)]
enum SeedArg {
    Fixed(u64),
    Fresh,
}

impl SeedArg {
    fn resolve(self) -> Result<u64, CliError> {
        match self {
            SeedArg::Fixed(seed) => Ok(seed),
            SeedArg::Fresh => getrandom::u64().map_err(CliError::FreshSeed),
        }
    }
}

fn parse_seed(text: &str) -> Result<SeedArg, CliError> {
    if text == "fresh" {
        return Ok(SeedArg::Fresh);
    }
    text.parse()
        .map(SeedArg::Fixed)
        .map_err(|_| CliError::Seed {
            value: text.to_string(),
        })
}

#[derive(Args)]
struct ChooseArgs {
    #[command(flatten)]
    logits: LogitsSource,
    #[arg(long, default_value_t = policy::LAB_TEMPERATURE, allow_hyphen_values = true)]
    temperature: f64,
    #[arg(long, default_value_t = 3, allow_hyphen_values = true)]
    top_k: usize,
    /// A whole number, or `fresh`.
    #[arg(long, default_value = "7", value_parser = parse_seed, allow_hyphen_values = true)]
    seed: SeedArg,
    /// Which NumPy argpartition to reproduce (the kept order, and so the token, depend on it).
    #[arg(long, value_enum, default_value_t = PathArg::X86Avx2)]
    argpartition: PathArg,
    /// Print {"token", "kept", "probs"} as JSON instead of decode.py's line.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum PathArg {
    /// NumPy on x86-64 CPUs with AVX2 (x86-simd-sort); the chapter's own output.
    X86Avx2,
    /// NumPy's portable introselect (ARM, older x86, SIMD dispatch disabled).
    Portable,
}

impl From<PathArg> for Argpartition {
    fn from(path: PathArg) -> Argpartition {
        match path {
            PathArg::X86Avx2 => Argpartition::X86Avx2,
            PathArg::Portable => Argpartition::Portable,
        }
    }
}

#[derive(Args)]
struct PipelineArgs {
    #[command(flatten)]
    logits: LogitsSource,
    /// Token ids the step conditions on (prompt first, then generated tokens).
    #[arg(long, value_name = "IDS", allow_hyphen_values = true)]
    context: Option<String>,
    /// How many of the context ids are the prompt; frequency and presence penalties and
    /// min-new-tokens count only the rest.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    prompt_len: usize,
    #[command(flatten)]
    policy: PolicyArgs,
    /// A whole number, or `fresh`.
    #[arg(long, default_value = "7", value_parser = parse_seed, allow_hyphen_values = true)]
    seed: SeedArg,
    /// Print JSON (the default; accepted for symmetry with `choose`).
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the step as Markdown instead: a section per stage (what it does, its takeaway,
    /// its cut-off, a table of the tokens it holds or removed), then the draw.
    #[arg(long)]
    markdown: bool,
}

/// Which forward pass runs the model, shared by `generate` and `replay`.
#[derive(Args)]
struct BackendArgs {
    #[arg(long, default_value_t = BackendChoice::Cpu, value_parser = named::<BackendChoice>(BackendChoice::ALL.map(backend_help)))]
    backend: BackendChoice,
    /// For testing the fallback: faults to inject into the GPU path, comma-separated, from
    /// no-webgpu, no-adapter, device-request, canary, device-lost (after the prefill) and
    /// device-lost@N (before model call N; 0 is the prefill). Needs --backend gpu or auto.
    #[arg(long, value_name = "NAMES", value_parser = gpu::Faults::parse)]
    inject_fault: Option<gpu::Faults>,
    /// With --backend gpu: read the logits back every token and take the policy step on
    /// the host, instead of on the GPU (the default for the filters with bias, forbidden
    /// ids and the three penalties; other constraints always step on the host).
    #[arg(long)]
    host_sampling: bool,
}

/// A backend's line in `--help`.
fn backend_help(choice: BackendChoice) -> PossibleValue {
    PossibleValue::new(choice.name()).help(match choice {
        BackendChoice::Auto => {
            "Whichever is faster here: once the GPU passed its canary, its decode step is \
             timed against the CPU reference's and the faster one runs (stderr says why)"
        }
        BackendChoice::Gpu => {
            "WebGPU on whatever adapter wgpu finds (natively Vulkan: a GPU, or lavapipe), \
             checked against the CPU with a canary; falls back to cpu-reference"
        }
        BackendChoice::Cpu => "The CPU reference forward pass",
    })
}

impl BackendArgs {
    fn choice(&self) -> Result<run::BackendRequest, CliError> {
        let choice = self.backend;
        let faults = self.inject_fault.unwrap_or_default();
        if choice == BackendChoice::Cpu && faults != gpu::Faults::default() {
            return Err(CliError::FaultWithoutGpu);
        }
        Ok(run::BackendRequest {
            choice,
            faults,
            device_sampling: !self.host_sampling,
        })
    }
}

#[derive(Args)]
struct GenerateArgs {
    #[arg(long)]
    prompt: String,
    /// The prompt template; `{prompt}` marks where the prompt goes.
    #[arg(long, default_value = "{prompt}")]
    template: String,
    #[command(flatten)]
    policy: PolicyArgs,
    /// A whole number, or `fresh`.
    #[arg(long, default_value = "7", value_parser = parse_seed, allow_hyphen_values = true)]
    seed: SeedArg,
    #[arg(long, default_value_t = 64, allow_hyphen_values = true)]
    max_tokens: usize,
    /// A stop string (repeat the flag for several); matched across token boundaries.
    #[arg(long = "stop", value_name = "TEXT")]
    stop: Vec<String>,
    /// A stop token id (repeat the flag for several).
    #[arg(long = "stop-token", value_name = "ID", allow_hyphen_values = true)]
    stop_tokens: Vec<u32>,
    #[arg(long, default_value_t = Precision::F32, value_parser = named::<Precision>(Precision::ALL.map(Precision::name)))]
    weights: Precision,
    /// Metadata for the run record, `key=value` (repeatable): `--tag slice=eu --tag
    /// tenant=course-a`. `decode-lab observe` groups by the `slice` tag.
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    tags: Vec<String>,
    /// The model directory [default: models/decode-lab-tiny-v1].
    #[arg(long)]
    model: Option<PathBuf>,
    #[command(flatten)]
    backend: BackendArgs,
    /// Print the run record as one JSON line instead of streaming the text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ReplayArgs {
    /// A run record (JSON), or several (JSONL).
    record: PathBuf,
    #[arg(long)]
    model: Option<PathBuf>,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Args)]
struct EvalArgs {
    #[command(flatten)]
    held_out: HeldOut,
    /// Evaluate at most this many held-out tokens per slice.
    #[arg(long, default_value_t = usize::MAX, conflicts_with = "alternatives", allow_hyphen_values = true)]
    max_tokens: usize,
    /// Tokens each policy generates per prompt and seed [default: 48]; with
    /// `--alternatives`, every system's budget per passage [default: 32, as `traffic`'s].
    #[arg(long, allow_hyphen_values = true)]
    new_tokens: Option<usize>,
    /// Compare the transformer with a rule, the n-gram baseline and retrieval, per slice, on
    /// the continuation task whose outcomes `traffic` labels.
    #[arg(long)]
    alternatives: bool,
    /// Held-out pages per slice, evenly spaced through the file (the shipped corpus has
    /// 150 English pages long enough for 64-byte prompts, and 151 Basque).
    #[arg(
        long,
        default_value_t = 150,
        requires = "alternatives",
        allow_hyphen_values = true
    )]
    pages: usize,
    /// A prompt is a held-out page's opening, cut at a space at or before this many bytes.
    #[arg(
        long,
        default_value_t = 64,
        requires = "alternatives",
        allow_hyphen_values = true
    )]
    prompt_bytes: usize,
    /// The outcome rule: accepted when chrF against the true continuation is at least this.
    #[arg(long, default_value_t = continuation::THRESHOLD, requires = "alternatives", allow_hyphen_values = true)]
    threshold: f64,
    /// The sampling policy's seed for the first passage (the i-th gets seed + i).
    #[arg(long, default_value_t = 7, requires = "alternatives")]
    seed: u64,
    /// Also write the table and its conclusions in words, as JSON, for the lab's Observe
    /// panel (the shipped `alternatives.json` beside the model).
    #[arg(long, value_name = "FILE", requires = "alternatives")]
    lab_table: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// The parser of a flag that takes one of a domain type's names: clap lists `names` in
/// `--help` and in its errors, and the type's own `FromStr` reads the one given.
fn named<T>(
    names: impl IntoIterator<Item = impl Into<PossibleValue>>,
) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

fn parse_list<T: FromStr>(text: &str, what: &'static str) -> Result<Vec<T>, CliError> {
    text.split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse().map_err(|_| CliError::Number {
                what,
                value: s.to_string(),
            })
        })
        .collect()
}

fn run_choose(args: &ChooseArgs) -> Result<String, CliError> {
    let logits = args.logits.read()?;
    let seed = args.seed.resolve()?;
    let choice = chapter::choose(
        &logits,
        args.temperature,
        args.top_k,
        seed,
        args.argpartition.into(),
    )?;
    if matches!(args.seed, SeedArg::Fresh) {
        output::note(&format!("seed: {seed}"));
    }
    Ok(if args.json {
        // Field order as the chapter's `return token, probs` reads: token, kept, probs.
        #[derive(serde::Serialize)]
        struct Printed<'a> {
            token: usize,
            kept: &'a [usize],
            probs: &'a [f64],
        }
        let printed = Printed {
            token: choice.token,
            kept: &choice.kept,
            probs: &choice.probs,
        };
        serde_json::to_string(&printed)?
    } else {
        choice.to_string()
    })
}

fn run_pipeline(args: &PipelineArgs) -> Result<String, CliError> {
    let logits = args.logits.read()?;
    let context: Vec<u32> = match &args.context {
        Some(ids) => parse_list(ids, "context token id")?,
        None => Vec::new(),
    };
    let mut policy = Policy {
        dry_sequence_breakers: args.policy.breaker_ids()?,
        ..args.policy.policy(1.0)?
    };
    // The logits' length is the vocabulary; there is no tokenizer for bad words as text.
    let run = args
        .policy
        .run_settings_used("pipeline", &["seed", "allowed_token_ids", "bad_words"])?;
    run.apply_to(&mut policy, logits.len(), None)
        .map_err(CliError::Import)?;
    let seed = run.seed.map_or(args.seed, SeedArg::Fixed).resolve()?;
    let mut rng = NumpyRng::new(seed);
    let outcome = policy::step(
        &policy,
        &logits,
        StepContext::new(&context, args.prompt_len),
        &mut rng,
        Snapshots::Record,
    )?;
    let stages = outcome.stages.clone().unwrap_or_default();
    if args.markdown {
        let views = policy::step_report::spread(&stages, logits.len());
        let parts = policy::step_report::step_parts(&views, &outcome, seed);
        return Ok(report::markdown(&parts).trim_end().to_string());
    }
    let model = policy::model_view(&logits, outcome.token)?;
    let last = stages
        .last()
        .map(|s| s.tokens.as_slice())
        .unwrap_or_default();
    let fin: Vec<_> = last
        .iter()
        .map(|t| json!({ "id": t.id, "prob": t.prob }))
        .collect();
    let mut printed = json!({
        "policy_version": policy::POLICY_VERSION,
        "policy": policy,
        "seed": seed,
        "stages": stages,
        "final": fin,
        "token": outcome.token,
        "prob": outcome.prob,
        "draw": outcome.draw,
        "survivors": outcome.survivors,
        "entropy": outcome.entropy,
        "model_prob": model.prob,
        "model_logprob": model.logprob,
        "model_top": model.top,
    });
    // A greedy step draws nothing: the field is absent, never null.
    if outcome.draw.is_none() {
        if let Some(fields) = printed.as_object_mut() {
            fields.remove("draw");
        }
    }
    Ok(printed.to_string())
}

fn run_generate(args: &GenerateArgs) -> Result<String, CliError> {
    let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
    let policy = args.policy.policy(policy::LAB_TEMPERATURE)?;
    // `--policy-from`'s seed, length and stops, where no flag is typed in their place.
    let run = args.policy.run_settings_used(
        "generate",
        &[
            "seed",
            "max_tokens",
            "stop",
            "stop_tokens",
            "allowed_token_ids",
            "bad_words",
        ],
    )?;
    let seed_arg = run.seed.map_or(args.seed, SeedArg::Fixed);
    let seed = seed_arg.resolve()?;
    let mut stop = StopConfig {
        strings: args.stop.clone(),
        tokens: args.stop_tokens.clone(),
    };
    stop.strings.extend(run.stop.iter().cloned());
    stop.tokens.extend(run.stop_tokens.iter().copied());
    let config = RunConfig {
        app_version: env!("CARGO_PKG_VERSION").into(),
        prompt_template: args.template.clone(),
        prompt: args.prompt.clone(),
        policy,
        seed,
        seed_source: match seed_arg {
            SeedArg::Fixed(_) => SeedSource::User,
            SeedArg::Fresh => SeedSource::Fresh,
        },
        max_tokens: run.max_tokens.unwrap_or(args.max_tokens),
        stop,
    };
    let tags = policy::parse_tags(&args.tags)?;
    let backend = args.backend.choice()?;
    let breakers = &args.policy.breakers()?;
    run::generate(
        &dir,
        args.weights,
        backend,
        config,
        run::FoundInVocabulary {
            breakers,
            run: &run,
        },
        tags,
        args.json,
    )
}

fn run_policy(args: &PolicyCommandArgs) -> Result<String, CliError> {
    let policy = args.policy.policy(policy::LAB_TEMPERATURE)?;
    let run = args.policy.run_settings()?;
    let breakers = args.policy.breakers()?;
    let (written, title) = match args.to {
        Some(format) => (
            formats::write(&policy, &run, &breakers, format)?,
            format.title(),
        ),
        None => (
            formats::flags(&policy, &run, &breakers),
            "decode-lab's flags",
        ),
    };
    if !written.left_out.is_empty() {
        output::note(&format!(
            "{title}: no place for the {}, left out",
            written.left_out.join(", ")
        ));
    }
    Ok(written.text.trim_end().to_string())
}

fn run_eval(args: &EvalArgs) -> Result<String, CliError> {
    let dir = args.held_out.model_dir();
    if args.alternatives {
        let lab_table = args
            .lab_table
            .as_ref()
            .map(|path| named::Named::new("--lab-table", path));
        if let Some(output) = &lab_table {
            let mut inputs = model_dir::inputs(&dir);
            inputs.push(named::Named::new(
                "--model",
                dir.join(model_dir::DRAFT_FILE),
            ));
            inputs.extend(files::files_in("--corpus", &args.held_out.corpus));
            files::check(std::slice::from_ref(output), &inputs)?;
            // Before the evaluation, not after it.
            files::writable(output)?;
        }
        let report = alternatives::evaluate(&alternatives::Settings {
            dir: &dir,
            corpus: &args.held_out.corpus,
            pages: args.pages,
            prompt_bytes: args.prompt_bytes,
            max_tokens: args.new_tokens.unwrap_or(32),
            threshold: args.threshold,
            seed: args.seed,
        })?;
        if let Some(output) = &lab_table {
            let text = serde_json::to_string_pretty(&alternatives::lab_table(&report))?;
            files::write(output, (text + "\n").as_bytes())?;
        }
        return if args.json {
            Ok(serde_json::to_string(&report)?)
        } else {
            Ok(alternatives::table(&report))
        };
    }
    let new_tokens = args.new_tokens.unwrap_or(48);
    let report = eval::evaluate(&dir, &args.held_out.corpus, args.max_tokens, new_tokens)?;
    if args.json {
        Ok(serde_json::to_string(&report)?)
    } else {
        Ok(eval::table(&report))
    }
}

fn run_ngram(command: &NgramCommand) -> Result<String, CliError> {
    match command {
        NgramCommand::Train(args) => {
            let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| dir.join(model_dir::DRAFT_FILE));
            let report = draft::train(
                &dir,
                &args.corpus,
                args.order,
                &named::Named::new("--out", out),
                args.max_tokens,
            )?;
            if args.json {
                Ok(serde_json::to_string(&report)?)
            } else {
                Ok(draft::table(&report))
            }
        }
    }
}

fn run_speculate(args: &SpeculateArgs) -> Result<String, CliError> {
    let dir = args.held_out.model_dir();
    let draft_file = match args.draft {
        speculate::DraftKind::Ngram => args
            .draft_file
            .clone()
            .unwrap_or_else(|| dir.join(model_dir::DRAFT_FILE)),
    };
    let policy = args.policy.policy(policy::LAB_TEMPERATURE)?;
    args.policy.run_settings_used("speculate", &[])?;
    if args.planner {
        args.policy.untouched(&policy)?;
        let policies = speculate::planner_policies();
        let measured = speculate::measure(
            &dir,
            &args.held_out.corpus,
            &draft_file,
            &policies,
            args.k,
            args.max_tokens,
        )?;
        let file = speculate::PlannerFile {
            model: measured.model,
            draft: measured.draft,
            k: u32::try_from(args.k).map_err(|_| CliError::Flag {
                flag: "--k",
                value: args.k.to_string(),
                why: "too large".into(),
            })?,
            policies: policies
                .iter()
                .zip(measured.by_policy)
                .map(|(policy, slices)| speculate::PolicyAcceptance {
                    policy: speculate::policy_name(policy),
                    slices,
                })
                .collect(),
        };
        return Ok(serde_json::to_string_pretty(&file)?);
    }
    let mut measured = speculate::measure(
        &dir,
        &args.held_out.corpus,
        &draft_file,
        std::slice::from_ref(&policy),
        args.k,
        args.max_tokens,
    )?;
    let report = speculate::Report {
        model: measured.model,
        draft: measured.draft,
        k: args.k,
        policy: speculate::policy_name(&policy),
        slices: measured.by_policy.pop().unwrap_or_default(),
    };
    if args.json {
        Ok(serde_json::to_string(&report)?)
    } else {
        Ok(speculate::table(&report))
    }
}

fn run_lengths(args: &LengthsArgs) -> Result<String, CliError> {
    let dir = args.held_out.model_dir();
    let policy = args.policy.policy(policy::LAB_TEMPERATURE)?;
    args.policy.run_settings_used("lengths", &[])?;
    let policies: Vec<(String, Policy)> = if args.planner {
        args.policy.untouched(&policy)?;
        speculate::planner_policies()
            .into_iter()
            .map(|p| (speculate::policy_name(&p), p))
            .collect()
    } else {
        vec![(speculate::policy_name(&policy), policy)]
    };
    let mut file = lengths::measure(
        &dir,
        &args.held_out.corpus,
        &policies,
        args.pages,
        args.max_new_tokens,
    )?;
    if args.planner {
        return Ok(serde_json::to_string_pretty(&file)?);
    }
    let measured = file
        .policies
        .pop()
        .unwrap_or_else(|| lengths::PolicyLengths {
            policy: String::new(),
            slices: Vec::new(),
        });
    let report = lengths::Report {
        model: file.model,
        max_new_tokens: file.max_new_tokens,
        policy: measured.policy,
        slices: measured
            .slices
            .iter()
            .map(lengths::SliceSummary::of)
            .collect(),
    };
    if args.json {
        Ok(serde_json::to_string(&report)?)
    } else {
        Ok(lengths::table(&report))
    }
}

fn run_observe(args: &ObserveArgs) -> Result<String, CliError> {
    let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
    let identifier = args
        .langid
        .clone()
        .unwrap_or_else(|| dir.join(model_dir::LANGID_FILE));
    let report = observe::observe(&observe::Request {
        runs: &args.runs,
        outcomes: args.outcomes.as_deref(),
        baseline: args.baseline.as_deref(),
        as_of_s: args.as_of,
        identifier: &identifier,
    })?;
    if args.json {
        Ok(serde_json::to_string(&report)?)
    } else {
        Ok(observe::table(&report))
    }
}

/// A `--version NAME=FLAGS`.
fn version(text: &str) -> Result<traffic::Version, CliError> {
    let (name, flags) = text
        .split_once('=')
        .filter(|(name, _)| !name.trim().is_empty())
        .ok_or_else(|| CliError::VersionUnnamed {
            text: text.to_string(),
        })?;
    let in_version = |e: CliError| CliError::Version {
        text: text.to_string(),
        source: Box::new(e),
    };
    let parsed = VersionFlags::try_parse_from(flags.split_whitespace())
        .map_err(|e| in_version(CliError::Flags(e)))?;
    parsed
        .policy
        .run_settings_used("traffic", &[])
        .map_err(in_version)?;
    Ok(traffic::Version {
        name: name.trim().to_string(),
        policy: parsed
            .policy
            .policy(policy::LAB_TEMPERATURE)
            .map_err(in_version)?,
        precision: parsed.weights,
        max_tokens: parsed.max_tokens,
    })
}

fn run_traffic(args: &TrafficArgs) -> Result<String, CliError> {
    let dir = args.held_out.model_dir();
    let versions = args
        .versions
        .iter()
        .map(|v| version(v))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, v) in versions.iter().enumerate() {
        if versions[..i].iter().any(|w| w.name == v.name) {
            return Err(CliError::VersionTwice {
                name: v.name.clone(),
            });
        }
    }
    let outputs = [
        named::Named::new("--out", &args.out),
        named::Named::new("--outcomes", &args.outcomes),
    ];
    let mut inputs = model_dir::inputs(&dir);
    inputs.extend(files::files_in("--corpus", &args.held_out.corpus));
    files::check(&outputs, &inputs)?;
    // Before the traffic is generated, not after it.
    for output in &outputs {
        files::writable(output)?;
    }
    let generated = traffic::generate(&traffic::Traffic {
        dir: &dir,
        corpus: &args.held_out.corpus,
        versions: &versions,
        canary_share: args.canary_share,
        runs: args.runs,
        eu_share: args.eu_share,
        rate_per_s: args.rate,
        mean_outcome_delay_s: args.outcome_delay,
        prompt_bytes: args.prompt_bytes,
        threshold: args.threshold,
        seed: args.seed,
    })?;
    for (output, lines) in outputs.iter().zip([&generated.runs, &generated.outcomes]) {
        files::write(output, (lines.join("\n") + "\n").as_bytes())?;
    }
    if args.json {
        Ok(serde_json::to_string(&generated.summary)?)
    } else {
        Ok(traffic::table(&generated.summary, args.threshold))
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and the version go to standard output as clap prints them.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            output::note(output::bounded(&e.to_string()).trim_end());
            return ExitCode::from(2);
        }
    };
    match run_command(&cli.command) {
        Ok(code) => code,
        Err(CliError::Stdout(e)) if output::reader_gone(&e) => ExitCode::SUCCESS,
        Err(error) => {
            output::note(&output::bounded(&format!("error: {error}")));
            // Standard output that could not be written is 1; anything else is bad input.
            ExitCode::from(if matches!(error, CliError::Stdout(_)) {
                1
            } else {
                2
            })
        }
    }
}

/// Runs one subcommand and prints its output; the exit code is 1 when a replay differs.
fn run_command(command: &Command) -> Result<ExitCode, CliError> {
    let out = match command {
        Command::Choose(args) => run_choose(args)?,
        Command::Pipeline(args) => run_pipeline(args)?,
        Command::Generate(args) => run_generate(args)?,
        Command::Compare(args) => run_compare(args)?,
        Command::Paths(args) => run_paths(args)?,
        Command::Policy(args) => run_policy(args)?,
        Command::Eval(args) => run_eval(args)?,
        Command::Capacity(args) => capacity_plan::run(args)?,
        Command::Speculate(args) => run_speculate(args)?,
        Command::Lengths(args) => run_lengths(args)?,
        Command::Observe(args) => run_observe(args)?,
        Command::Traffic(args) => run_traffic(args)?,
        Command::Export(args) if args.parquet => return export::run(args),
        Command::Export(args) => return otlp::run(args),
        Command::Ngram(command) => run_ngram(command)?,
        Command::Langid(LangidCommand::Train(args)) => langid::run_train(args)?,
        Command::Replay(args) => {
            let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
            let backend = args.backend.choice()?;
            let (text, identical) = run::replay(&dir, backend, &args.record)?;
            output::print_line(&text)?;
            return Ok(if identical {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
    };
    if !out.is_empty() {
        output::print_line(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}
