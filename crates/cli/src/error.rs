//! Why a command did not finish: one enum, [`CliError`], for the whole command line. Each
//! variant names what is wrong (the flag, the file, the run) and carries the value, and the
//! domain crates' own errors are wrapped whole, so `?` carries them here unchanged. `main`
//! prints it as one `error:` line and picks the exit code: 1 when standard output could not
//! be written ([`CliError::Stdout`]), 2 for everything else, which is bad input.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

use capacity::CapacityError;
use langid::LangIdError;
use model::ModelError;
use ngram::NgramError;
use observe::{ObserveError, OutcomeError};
use policy::formats::{ImportError, WriteError};
use policy::generate::{GenerateError, StopReason};
use policy::paths::PathsError;
use policy::{KnobError, PolicyError, RecordError, TagError};
use runs_parquet::RunsParquetError;
use tokenizer::TokenizerError;

use crate::named::Named;

/// Why a command did not finish.
#[derive(Debug)]
pub enum CliError {
    /// A flag's value refused, and why: `--as-of inf: expected a finite number of seconds`.
    Flag {
        flag: &'static str,
        value: String,
        why: String,
    },
    /// A count too small for the command to mean anything: `--pages 0 measures nothing:
    /// give at least 1`.
    TooSmall {
        flag: &'static str,
        value: usize,
        why: String,
    },
    /// An entry of a comma-separated list of numbers (logits, token ids) that is not one.
    Number { what: &'static str, value: String },
    /// Neither `--logits` nor `--logits-file`.
    NoLogits,
    /// A `--seed` that is neither a whole number nor `fresh`.
    Seed { value: String },
    /// The operating system gave no seed for `--seed fresh`.
    FreshSeed(getrandom::Error),
    /// `--dry-sequence-breaker` without the `--dry-multiplier` that switches DRY on.
    BreakerWithoutDry,
    /// A `pipeline` `--dry-sequence-breaker` that lists no token id.
    EmptyBreaker { value: String },
    /// `--dry-sequence-breaker` given to a command that does not read it.
    BreakerElsewhere,
    /// Policy flags beside `--planner`, which measures its own policies.
    PlannerWithPolicy,
    /// `--inject-fault` on the CPU backend, which has no GPU path to fault.
    FaultWithoutGpu,
    /// A `--tag` that cannot be attached.
    Tag(TagError),
    /// Flags given inside one argument (`compare --a`, `traffic --version`) that clap
    /// refused; the first line of its message names the flag.
    Flags(clap::Error),
    /// `compare`'s `--a` or `--b` (`name`), its `flags`, and what is wrong with them.
    PolicyFlags {
        name: &'static str,
        flags: String,
        source: Box<CliError>,
    },
    /// A `traffic` `--version NAME=FLAGS`, and what is wrong with its flags.
    Version { text: String, source: Box<CliError> },
    /// A `--version` without `NAME=`.
    VersionUnnamed { text: String },
    /// Two `--version`s of one name.
    VersionTwice { name: String },
    /// Fewer than two `--version`s: nothing to compare.
    TooFewVersions,
    /// Standard input could not be read.
    Stdin(io::Error),
    /// A file could not be read.
    Read { path: PathBuf, source: io::Error },
    /// A line of a file could not be read.
    ReadLine {
        path: PathBuf,
        line: usize,
        source: io::Error,
    },
    /// A file a flag names could not be read (`--logits-file`).
    ReadInput { input: Named, source: io::Error },
    /// The logits read from `input` (a file, or standard input) are not a JSON array.
    LogitsJson {
        input: String,
        source: serde_json::Error,
    },
    /// A file that must be text is not UTF-8.
    NotUtf8 { path: PathBuf },
    /// What the file at `path` holds is refused, for the reason `source` gives.
    InFile {
        path: PathBuf,
        source: Box<CliError>,
    },
    /// An outcome row of `path` that is not one, and why (the `observe` crate's reason).
    OutcomeLine {
        path: PathBuf,
        line: usize,
        reason: OutcomeError,
    },
    /// A run record names weights by a SHA-256 that the model directory does not hold.
    NoWeightsWithHash { dir: PathBuf, hash: String },
    /// A weights file whose role no precision has.
    UnknownWeightsRole { dir: PathBuf, role: String },
    /// The weights file at `path`, of `role`, refused by the model crate.
    Weights {
        path: PathBuf,
        role: &'static str,
        source: Box<ModelError>,
    },
    /// The n-gram draft at `path`, refused by the ngram crate.
    Draft { path: PathBuf, source: NgramError },
    /// An n-gram draft of another vocabulary than the model's.
    DraftVocabulary {
        path: PathBuf,
        draft: u32,
        model: usize,
    },
    /// A held-out file with fewer predicted tokens than a bits-per-byte figure needs.
    TooShortToEvaluate {
        path: PathBuf,
        bytes: usize,
        predicted: usize,
        needed: usize,
    },
    /// A held-out file with fewer scored positions than an acceptance rate needs.
    TooShortToMeasure {
        path: PathBuf,
        positions: usize,
        needed: usize,
    },
    /// A held-out file that leaves the n-gram draft no token to score (`max_tokens`: the
    /// `--max-tokens` that cut it, if one did).
    NothingToScore {
        path: PathBuf,
        tokens: usize,
        max_tokens: Option<usize>,
    },
    /// A held-out file with no page long enough for a prompt of `prompt_bytes`.
    NoPassage { path: PathBuf, prompt_bytes: usize },
    /// A held-out file with fewer pages long enough for a prompt than `--pages` asks for.
    TooFewPassages {
        pages: usize,
        path: PathBuf,
        found: usize,
        prompt_bytes: usize,
    },
    /// A held-out file with fewer pages than `--pages` asks for.
    TooFewPages {
        path: PathBuf,
        found: usize,
        pages: usize,
    },
    /// The run from a page's title could not be generated.
    Page {
        page: usize,
        path: PathBuf,
        source: GenerateError,
    },
    /// The run from a page's title stopped for a reason no length measurement asks for.
    PageStopped {
        page: usize,
        path: PathBuf,
        reason: StopReason,
    },
    /// A page's title that fills the model's context.
    TitleFillsContext { page: usize, path: PathBuf },
    /// A `traffic` run of a version could not be generated.
    TrafficRun {
        run: usize,
        version: String,
        source: GenerateError,
    },
    /// A system of `eval --alternatives` could not answer a passage of a slice.
    Passage {
        system: &'static str,
        slice: &'static str,
        passage: usize,
        source: Box<CliError>,
    },
    /// An `eval` policy that never generated two tokens in a row.
    NoBigrams {
        policy: &'static str,
        new_tokens: usize,
    },
    /// A token of the training text outside the tokenizer's vocabulary.
    TrainingToken { token: u32, vocab: usize },
    /// A replay whose GPU path is unavailable, and whose fallback cannot run the recorded
    /// weights (`role`).
    FallbackWeights { reason: String, role: &'static str },
    /// An output that is one of the command's inputs.
    OutputIsInput { output: Named, input: Named },
    /// An output directory that holds one of the command's inputs (where it resolves to, and
    /// the flag that named it).
    OutputHoldsInput {
        output: Named,
        input: PathBuf,
        flag: String,
    },
    /// Two outputs that are one file.
    SameOutput { first: Named, second: Named },
    /// A file output that is a directory.
    OutputIsDirectory { output: Named },
    /// A directory output that is a file.
    OutputIsFile { output: Named },
    /// A file output whose directory does not exist.
    NoOutputDirectory { output: Named, directory: PathBuf },
    /// An output that could not be put in place.
    Output {
        output: Named,
        action: OutputAction,
        source: io::Error,
    },
    /// Standard output could not be written: exit code 1 (none when the reader has gone).
    Stdout(io::Error),
    /// A capacity plan of more simulated requests than the planner takes.
    PlanTooLarge(CapacityError),
    /// What the trace given by `--trace` (`trace`) holds, refused by the planner.
    Trace {
        trace: String,
        source: CapacityError,
    },
    /// `ngram train --order`, refused by the ngram crate.
    NgramOrder { order: usize, source: NgramError },
    /// A policy refused by the policy crate (a knob, a list, a step).
    Policy(PolicyError),
    /// A policy flag's value the policy crate cannot read.
    Knob(KnobError),
    /// `--policy-from`'s text, refused by the policy crate's reader.
    Import(ImportError),
    /// A policy that `policy --to` cannot write in the form asked.
    Write(WriteError),
    /// An imported setting that needs what the command lacks (a vocabulary, a tokenizer).
    ImportedElsewhere {
        field: &'static str,
        command: String,
    },
    /// An OTLP/HTTP collector that did not take the spans.
    Otlp { endpoint: String, why: String },
    /// A file larger than the command reads.
    FileTooLarge { path: PathBuf, limit: u64 },
    /// A run that could not be generated, replayed or compared.
    Generate(GenerateError),
    /// A run record that could not be read.
    Record(RecordError),
    /// A path tree that could not be built.
    Paths(PathsError),
    /// A capacity plan refused by the capacity crate.
    Capacity(CapacityError),
    /// A model config or weights refused by the model crate.
    Model(ModelError),
    /// A tokenizer refused by the tokenizer crate.
    Tokenizer(TokenizerError),
    /// An n-gram model refused by the ngram crate.
    Ngram(NgramError),
    /// A language identifier refused by the langid crate.
    LangId(LangIdError),
    /// Runs and outcomes refused by the observe crate.
    Observe(ObserveError),
    /// A Parquet table that could not be read or written.
    RunsParquet(RunsParquetError),
    /// A report or a record that could not be written as JSON.
    Serialize(serde_json::Error),
}

/// What could not be done to an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputAction {
    Write,
    MakeParent,
    MakeStage,
    MoveIntoPlace,
}

impl fmt::Display for OutputAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputAction::Write => "cannot write it",
            OutputAction::MakeParent => "cannot make its parent directory",
            OutputAction::MakeStage => "cannot make a staging directory there",
            OutputAction::MoveIntoPlace => "cannot move the new files into place",
        })
    }
}

impl CliError {
    /// `source`, refused in the file at `path`.
    pub fn in_file(path: impl Into<PathBuf>, source: impl Into<CliError>) -> CliError {
        CliError::InFile {
            path: path.into(),
            source: Box::new(source.into()),
        }
    }

    /// The file at `path` could not be read.
    pub fn read(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CliError {
        let path = path.into();
        move |source| CliError::Read { path, source }
    }
}

/// The first line of clap's message, without its `error: ` (the caller names the argument).
fn first_line(error: &clap::Error) -> String {
    let text = error.to_string();
    let line = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ");
    policy::Excerpt(line).to_string()
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CliError::*;
        match self {
            Flag { flag, value, why } => write!(f, "{flag} {value}: {why}"),
            TooSmall { flag, value, why } => write!(f, "{flag} {value} {why}"),
            Number { what, value } => write!(f, "{what} {value:?} is not a valid number"),
            NoLogits => f.write_str("no logits given: use --logits or --logits-file"),
            Seed { value } => write!(
                f,
                "seed {value:?} is not a whole number from 0 to 2^64-1, nor `fresh`"
            ),
            FreshSeed(e) => write!(f, "cannot draw a fresh seed: {e}"),
            BreakerWithoutDry => {
                f.write_str("--dry-sequence-breaker needs --dry-multiplier: without it DRY is off")
            }
            EmptyBreaker { value } => write!(
                f,
                "--dry-sequence-breaker {value:?} names no token: give comma-separated ids"
            ),
            BreakerElsewhere => {
                f.write_str("--dry-sequence-breaker is read by pipeline and generate only")
            }
            PlannerWithPolicy => f.write_str(
                "--planner measures its own three policies (greedy, temperature 0.7 and 1.5): \
                 drop the policy flags",
            ),
            FaultWithoutGpu => f.write_str(
                "--inject-fault injects faults into the GPU path: add --backend gpu or auto",
            ),
            Tag(e) => write!(f, "--tag: {e}"),
            Flags(e) => f.write_str(&first_line(e)),
            PolicyFlags {
                name,
                flags,
                source,
            } => write!(f, "--{name} {:?}: {source}", policy::Excerpt(flags)),
            Version { text, source } => write!(f, "--version {text:?}: {source}"),
            VersionUnnamed { text } => write!(
                f,
                "--version {text:?}: expected NAME=FLAGS, e.g. b=--temperature 1.2"
            ),
            VersionTwice { name } => write!(f, "--version: the name {name:?} is given twice"),
            TooFewVersions => f.write_str(
                "--version must be given at least twice (name=FLAGS): there is nothing to compare",
            ),
            Stdin(e) => write!(f, "cannot read standard input: {e}"),
            Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            ReadLine { path, line, source } => {
                write!(f, "cannot read {} at line {line}: {source}", path.display())
            }
            ReadInput { input, source } => write!(f, "cannot read {input}: {source}"),
            LogitsJson { input, source } => {
                write!(f, "{input} is not one JSON array of numbers: {source}")
            }
            NotUtf8 { path } => write!(f, "{} is not UTF-8", path.display()),
            InFile { path, source } => write!(f, "{}: {source}", path.display()),
            OutcomeLine { path, line, reason } => {
                write!(f, "{}: outcomes line {line}: {reason}", path.display())
            }
            NoWeightsWithHash { dir, hash } => {
                write!(f, "{} holds no weights with SHA-256 {hash}", dir.display())
            }
            UnknownWeightsRole { dir, role } => {
                write!(f, "{}: unknown weights role {role:?}", dir.display())
            }
            Weights { path, role, source } => {
                write!(f, "{} ({role}): {source}", path.display())
            }
            Draft { path, source } => write!(f, "the n-gram draft {}: {source}", path.display()),
            DraftVocabulary { path, draft, model } => write!(
                f,
                "the n-gram draft {} has a vocabulary of {draft} tokens, but the model's has \
                 {model}",
                path.display()
            ),
            TooShortToEvaluate {
                path,
                bytes,
                predicted,
                needed,
            } => write!(
                f,
                "{} is too short to evaluate: {bytes} bytes give {predicted} predicted tokens, \
                 and a slice needs at least {needed}",
                path.display()
            ),
            TooShortToMeasure {
                path,
                positions,
                needed,
            } => write!(
                f,
                "{} is too short to measure: it gives {positions} scored positions, and a \
                 slice needs at least {needed}",
                path.display()
            ),
            NothingToScore {
                path,
                tokens,
                max_tokens,
            } => {
                let cut = match max_tokens {
                    Some(max) => format!(", cut to --max-tokens {max}"),
                    None => String::new(),
                };
                write!(
                    f,
                    "{}: no held-out token to score (it has {tokens} tokens{cut}); the draft \
                     needs at least 2 to be measured, and nothing was written",
                    path.display()
                )
            }
            NoPassage { path, prompt_bytes } => write!(
                f,
                "{} has no page long enough for --prompt-bytes {prompt_bytes}",
                path.display()
            ),
            TooFewPassages {
                pages,
                path,
                found,
                prompt_bytes,
            } => write!(
                f,
                "--pages {pages}: {} has only {found} pages long enough for --prompt-bytes \
                 {prompt_bytes}",
                path.display()
            ),
            TooFewPages { path, found, pages } => write!(
                f,
                "{} has {found} pages, fewer than --pages {pages}",
                path.display()
            ),
            Page { page, path, source } => {
                write!(f, "page {page} of {}: {source}", path.display())
            }
            PageStopped { page, path, reason } => write!(
                f,
                "page {page} of {} stopped for {reason:?}, which no length measurement asks for",
                path.display()
            ),
            TitleFillsContext { page, path } => write!(
                f,
                "the title of page {page} of {} fills the model's context: no token was \
                 generated",
                path.display()
            ),
            TrafficRun {
                run,
                version,
                source,
            } => write!(f, "run {run} of version {version}: {source}"),
            Passage {
                system,
                slice,
                passage,
                source,
            } => write!(f, "{system} on {slice} passage {passage}: {source}"),
            NoBigrams { policy, new_tokens } => write!(
                f,
                "policy {policy} generated no two consecutive tokens for any prompt, so its \
                 distinct-2 is undefined: raise --new-tokens {new_tokens}"
            ),
            TrainingToken { token, vocab } => write!(
                f,
                "the training text: token {token} is outside the vocabulary of {vocab}"
            ),
            FallbackWeights { reason, role } => write!(
                f,
                "the GPU path is unavailable ({reason}) and its fallback cpu-reference runs \
                 the f32 weights, not the recorded {role}: replay with --backend cpu"
            ),
            OutputIsInput { output, input } => write!(
                f,
                "{output}: is the file that {input} reads; a command never writes over what it \
                 reads (write to another path)"
            ),
            OutputHoldsInput {
                output,
                input,
                flag,
            } => write!(
                f,
                "{output}: holds {}, which {flag} reads; a command never writes over what it \
                 reads (write to another directory)",
                input.display()
            ),
            SameOutput { first, second } => write!(
                f,
                "{first} and {second} are one file: each output needs its own path"
            ),
            OutputIsDirectory { output } => write!(f, "{output}: is a directory, not a file"),
            OutputIsFile { output } => write!(f, "{output}: is a file, not a directory"),
            NoOutputDirectory { output, directory } => write!(
                f,
                "{output}: its directory {} does not exist",
                directory.display()
            ),
            Output {
                output,
                action,
                source,
            } => write!(f, "{output}: {action}: {source}"),
            Stdout(e) => write!(f, "cannot write to standard output: {e}"),
            PlanTooLarge(e) => write!(
                f,
                "{e}; lower --requests, use a shorter trace, or sweep fewer --load-scales, \
                 --policy, --batch-limits, --weights, --replicas or --router"
            ),
            Trace { trace, source } => {
                write!(f, "{}: {source}", capacity::shown("trace", trace))
            }
            NgramOrder { order, source } => write!(f, "--order {order}: {source}"),
            Policy(e) => write!(f, "{e}"),
            Knob(e) => write!(f, "--{} {}: {e}", e.knob.flag, e.text),
            Import(e) => write!(f, "{e}"),
            Write(e) => write!(f, "{e}"),
            ImportedElsewhere { field, command } => write!(
                f,
                "--policy-from's {field} needs the model's vocabulary, which decode-lab {command} does not read; decode-lab generate does"
            ),
            Otlp { endpoint, why } => write!(f, "--otlp-endpoint {endpoint}: {why}"),
            FileTooLarge { path, limit } => write!(
                f,
                "{} is larger than the {limit} bytes this command reads",
                path.display()
            ),
            Generate(e) => write!(f, "{e}"),
            Record(e) => write!(f, "{e}"),
            Paths(e) => write!(f, "{e}"),
            Capacity(e) => write!(f, "{e}"),
            Model(e) => write!(f, "{e}"),
            Tokenizer(e) => write!(f, "{e}"),
            Ngram(e) => write!(f, "{e}"),
            LangId(e) => write!(f, "{e}"),
            Observe(e) => write!(f, "{e}"),
            RunsParquet(e) => write!(f, "{e}"),
            Serialize(e) => write!(f, "{e}"),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        use CliError::*;
        match self {
            Tag(e) => Some(e),
            Flags(e) => Some(e),
            PolicyFlags { source, .. }
            | Version { source, .. }
            | InFile { source, .. }
            | Passage { source, .. } => Some(&**source),
            Stdin(source)
            | Read { source, .. }
            | ReadLine { source, .. }
            | ReadInput { source, .. }
            | Output { source, .. }
            | Stdout(source) => Some(source),
            LogitsJson { source, .. } => Some(source),
            Weights { source, .. } => Some(&**source),
            Draft { source, .. } | NgramOrder { source, .. } => Some(source),
            Page { source, .. } | TrafficRun { source, .. } => Some(source),
            PlanTooLarge(e) => Some(e),
            Trace { source, .. } => Some(source),
            // The domain crates' errors are shown as they are: their causes are this one's.
            Policy(e) => e.source(),
            Knob(_) | Import(_) | Write(_) => None,
            Generate(e) => e.source(),
            Record(e) => e.source(),
            Paths(e) => e.source(),
            Capacity(e) => e.source(),
            Model(e) => e.source(),
            Tokenizer(e) => e.source(),
            Ngram(e) => e.source(),
            LangId(e) => e.source(),
            Observe(e) => e.source(),
            RunsParquet(e) => e.source(),
            Serialize(e) => e.source(),
            _ => None,
        }
    }
}

/// `?` carries a domain crate's error here whole, shown as that crate words it.
macro_rules! from_domain {
    ($($variant:ident($error:ty)),* $(,)?) => {
        $(impl From<$error> for CliError {
            fn from(e: $error) -> CliError {
                CliError::$variant(e)
            }
        })*
    };
}

from_domain!(
    Tag(TagError),
    Policy(PolicyError),
    Knob(KnobError),
    Import(ImportError),
    Write(WriteError),
    Generate(GenerateError),
    Record(RecordError),
    Paths(PathsError),
    Capacity(CapacityError),
    Model(ModelError),
    Tokenizer(TokenizerError),
    Ngram(NgramError),
    LangId(LangIdError),
    Observe(ObserveError),
    RunsParquet(RunsParquetError),
    Serialize(serde_json::Error),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_the_flag_and_the_value_and_keeps_its_cause() {
        let flag = CliError::Flag {
            flag: "--as-of",
            value: "inf".into(),
            why: "expected a finite number of seconds".into(),
        };
        assert_eq!(
            flag.to_string(),
            "--as-of inf: expected a finite number of seconds"
        );
        let wrapped = CliError::PolicyFlags {
            name: "b",
            flags: "--forbid x".into(),
            source: Box::new(CliError::Number {
                what: "forbidden token id",
                value: "x".into(),
            }),
        };
        assert_eq!(
            wrapped.to_string(),
            "--b \"--forbid x\": forbidden token id \"x\" is not a valid number"
        );
        assert!(wrapped.source().is_some());
        let read = CliError::read("corpus/valid.en.txt")(io::Error::from(io::ErrorKind::NotFound));
        assert!(read
            .to_string()
            .starts_with("cannot read corpus/valid.en.txt: "));
        assert!(read.source().is_some());
        // A domain crate's error is shown as that crate words it.
        let policy = PolicyError::InvalidTopP(2.0);
        assert_eq!(
            CliError::from(policy.clone()).to_string(),
            policy.to_string()
        );
    }
}
