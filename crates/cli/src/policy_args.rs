//! The policy's flags, shared by `pipeline`, `generate`, `compare`, `paths`, `speculate`,
//! `lengths`, `traffic --version` and `policy`: one clap argument per knob of the policy's
//! table ([`policy::KNOBS`]), handed back as a [`PolicyRequest`] of what was typed, which
//! the policy crate reads; and `--policy-from FILE`, a policy in another form
//! ([`policy::formats`]), whose knobs the typed flags take the place of.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use clap::builder::PossibleValuesParser;
use clap::parser::ValueSource;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use policy::formats::{self, Imported, RunSettings};
use policy::{KnobKind, KnobProblem, Policy, PolicyRequest, KNOBS};

use crate::error::CliError;
use crate::files;
use crate::output;

/// The run's flags an imported policy's settings give way to, when typed.
const RUN_FLAGS: [&str; 4] = ["seed", "max_tokens", "stop", "stop_tokens"];

/// The policy flags as typed.
pub struct PolicyArgs {
    request: PolicyRequest,
    from: Option<PathBuf>,
    lenient: bool,
    /// Which of [`RUN_FLAGS`] were typed.
    typed: Vec<&'static str>,
    /// `--policy-from`'s policy, read once (a pipe can be read only once).
    imported: OnceCell<Imported>,
}

/// One argument per knob, taking what the knob's kind takes, so that clap names a value
/// that is not a number as it names any other flag's.
fn knob_arg(knob: &'static policy::Knob) -> Arg {
    let help = match (knob.flag, knob.default) {
        ("temperature", _) => format!(
            "{} [default: 1 for pipeline, {} for the commands that run the model]",
            knob.hint,
            policy::LAB_TEMPERATURE
        ),
        (_, "") => knob.hint.to_string(),
        (_, default) => format!("{} [default: {default}]", knob.hint),
    };
    // `--help` adds what each engine takes, where its rule says more than the kind.
    let ranges: Vec<String> = knob
        .ranges()
        .into_iter()
        .map(|(engine, words)| format!("{engine}: {words}"))
        .collect();
    let long_help = match ranges.is_empty() {
        true => help.clone(),
        false => format!("{help}\n[by engine: {}]", ranges.join("; ")),
    };
    let mut arg = Arg::new(knob.flag)
        .long(knob.flag)
        .help(help)
        .long_help(long_help)
        .allow_hyphen_values(true)
        .conflicts_with_all(knob.conflicts);
    if !knob.value_name.is_empty() {
        arg = arg.value_name(knob.value_name);
    }
    match knob.kind {
        KnobKind::Number | KnobKind::OptionalNumber => arg.value_parser(value_parser!(f64)),
        KnobKind::Whole => arg.value_parser(value_parser!(usize)),
        KnobKind::Small => arg.value_parser(value_parser!(u8)),
        KnobKind::Signed | KnobKind::OptionalSigned => arg.value_parser(value_parser!(i64)),
        KnobKind::Engine | KnobKind::Order => {
            arg.value_parser(PossibleValuesParser::new(knob.choices()))
        }
        KnobKind::Texts => arg.action(ArgAction::Append),
        KnobKind::Ids
        | KnobKind::Bias
        | KnobKind::Sequences
        | KnobKind::SequenceBias
        | KnobKind::Chain => arg,
    }
}

impl clap::Args for PolicyArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(KNOBS.iter().map(knob_arg)).args([
            Arg::new("policy-from")
                .long("policy-from")
                .value_name("FILE")
                .value_parser(value_parser!(PathBuf))
                .help(
                    "A policy in another form: a Hugging Face generation_config.json, an OpenAI \
                     or vLLM request body, or a llama.cpp command line; the flags typed here \
                     take the place of its settings. Every field read is listed on stderr",
                ),
            Arg::new("lenient")
                .long("lenient")
                .action(ArgAction::SetTrue)
                .requires("policy-from")
                .help("Read --policy-from's fields that are understood, and warn of the rest"),
        ])
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        PolicyArgs::augment_args(cmd)
    }
}

impl clap::FromArgMatches for PolicyArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<PolicyArgs, clap::Error> {
        let mut pairs = Vec::new();
        for knob in &KNOBS {
            if m.value_source(knob.flag) != Some(ValueSource::CommandLine) {
                continue;
            }
            for raw in m.get_raw(knob.flag).into_iter().flatten() {
                pairs.push((knob, raw.to_string_lossy().into_owned()));
            }
        }
        // The run's flags beside these, where the command has them.
        let typed = RUN_FLAGS
            .into_iter()
            .filter(|id| {
                m.try_get_raw(id).is_ok() && m.value_source(id) == Some(ValueSource::CommandLine)
            })
            .collect();
        Ok(PolicyArgs {
            request: PolicyRequest::new(pairs),
            from: m.get_one::<PathBuf>("policy-from").cloned(),
            lenient: m.get_flag("lenient"),
            typed,
            imported: OnceCell::new(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = PolicyArgs::from_arg_matches(m)?;
        Ok(())
    }
}

const BREAKER: &str = "dry-sequence-breaker";

impl PolicyArgs {
    /// `--planner` measures its own three policies: `policy` (read at the default
    /// temperature 0.7) must be what no policy flag gives.
    pub fn untouched(&self, policy: &Policy) -> Result<(), CliError> {
        let untouched = Policy {
            temperature: policy::LAB_TEMPERATURE,
            ..Policy::default()
        };
        if self.request.given("temperature") || self.from.is_some() || *policy != untouched {
            return Err(CliError::PlannerWithPolicy);
        }
        Ok(())
    }

    /// `--policy-from`'s policy, read (the error names the file).
    pub fn imported(&self) -> Result<Option<(&Path, &Imported)>, CliError> {
        let Some(path) = &self.from else {
            return Ok(None);
        };
        if let Some(imported) = self.imported.get() {
            return Ok(Some((path, imported)));
        }
        let text = files::read_bounded(path, formats::MAX_BYTES as u64)?;
        let imported = formats::import(&text, self.lenient)
            .map_err(|e| CliError::in_file(path, CliError::Import(e)))?;
        Ok(Some((path, self.imported.get_or_init(|| imported))))
    }

    /// The knobs: those typed, and `--policy-from`'s where none typed takes their place.
    fn request(&self) -> Result<PolicyRequest, CliError> {
        Ok(match self.imported()? {
            Some((_, imported)) => imported.request(&self.request),
            None => self.request.clone(),
        })
    }

    /// The policy, at `default_temperature` when `--temperature` is not given (an imported
    /// policy always gives it). What `--policy-from` read is listed on standard error, each
    /// field with what it became. DRY's sequence breakers are the command's to read
    /// ([`breakers`](Self::breakers), [`breaker_ids`](Self::breaker_ids)).
    pub fn policy(&self, default_temperature: f64) -> Result<Policy, CliError> {
        if let Some((path, imported)) = self.imported()? {
            output::note(&format!(
                "{}: {}, read under the {} engine's rules:",
                path.display(),
                imported.format.title(),
                imported.format.engine().name()
            ));
            for reading in &imported.readings {
                output::note(&format!("  {reading}"));
            }
        }
        self.request()?
            .policy(default_temperature)
            .map_err(|e| match e.problem {
                KnobProblem::BreakersWithoutDry => CliError::BreakerWithoutDry,
                _ => CliError::Knob(e),
            })
    }

    /// `--policy-from`'s run settings (seed, length, stops), less those whose flag was
    /// typed.
    pub fn run_settings(&self) -> Result<RunSettings, CliError> {
        let Some((_, imported)) = self.imported()? else {
            return Ok(RunSettings::default());
        };
        let mut run = imported.run.clone();
        let typed = |flag| self.typed.contains(&flag);
        if typed("seed") {
            run.seed = None;
        }
        if typed("max_tokens") {
            run.max_tokens = None;
        }
        if typed("stop") {
            run.stop.clear();
        }
        if typed("stop_tokens") {
            run.stop_tokens.clear();
        }
        Ok(run)
    }

    /// For a command that takes none of `--policy-from`'s run settings but those named in
    /// `used`: the others are named on standard error, and those that change the
    /// distribution (allowed ids, bad words as text) are refused.
    pub fn run_settings_used(&self, command: &str, used: &[&str]) -> Result<RunSettings, CliError> {
        let run = self.run_settings()?;
        let mut unused = Vec::new();
        for (name, given) in [
            ("seed", run.seed.is_some()),
            ("max_tokens", run.max_tokens.is_some()),
            ("stop", !run.stop.is_empty()),
            ("stop_tokens", !run.stop_tokens.is_empty()),
            ("allowed_token_ids", run.allowed_tokens.is_some()),
            ("bad_words", !run.bad_word_texts.is_empty()),
        ] {
            if given && !used.contains(&name) {
                if matches!(name, "allowed_token_ids" | "bad_words") {
                    return Err(CliError::ImportedElsewhere {
                        field: name,
                        command: command.to_string(),
                    });
                }
                unused.push(name);
            }
        }
        if !unused.is_empty() {
            output::note(&format!(
                "decode-lab {command} does not use the imported {}",
                unused.join(", ")
            ));
        }
        Ok(run)
    }

    /// `--dry-sequence-breaker` as typed or imported, for a command that finds them in its
    /// vocabulary.
    pub fn breakers(&self) -> Result<Vec<String>, CliError> {
        Ok(self.request()?.texts(BREAKER).map(str::to_string).collect())
    }

    /// Refuses `--dry-sequence-breaker` for a command that does not read it.
    pub fn no_breakers(&self) -> Result<(), CliError> {
        if self.request()?.given(BREAKER) {
            return Err(CliError::BreakerElsewhere);
        }
        Ok(())
    }

    /// `--dry-sequence-breaker` as `pipeline` reads it: each a list of token ids.
    pub fn breaker_ids(&self) -> Result<Vec<Vec<u32>>, CliError> {
        self.request()?
            .texts(BREAKER)
            .map(|text| {
                let ids = text
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        s.parse().map_err(|_| CliError::Number {
                            what: "DRY sequence breaker token id",
                            value: s.to_string(),
                        })
                    })
                    .collect::<Result<Vec<u32>, CliError>>()?;
                if ids.is_empty() {
                    return Err(CliError::EmptyBreaker {
                        value: text.to_string(),
                    });
                }
                Ok(ids)
            })
            .collect()
    }
}
