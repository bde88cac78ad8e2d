//! The policy's flags, shared by `pipeline`, `generate`, `compare`, `paths`, `speculate`,
//! `lengths` and `traffic --version`: one clap argument per knob of the policy's table
//! ([`policy::KNOBS`]), handed back as a [`PolicyRequest`] of what was typed, which the
//! policy crate reads.

use clap::builder::PossibleValuesParser;
use clap::parser::ValueSource;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use policy::{KnobKind, KnobProblem, Policy, PolicyRequest, KNOBS};

use crate::error::CliError;

/// The policy flags as typed.
pub struct PolicyArgs {
    request: PolicyRequest,
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
        cmd.args(KNOBS.iter().map(knob_arg))
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
        Ok(PolicyArgs {
            request: PolicyRequest::new(pairs),
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
        if self.request.given("temperature") || *policy != untouched {
            return Err(CliError::PlannerWithPolicy);
        }
        Ok(())
    }

    /// The policy, at `default_temperature` when `--temperature` is not given. DRY's
    /// sequence breakers are the command's to read ([`breakers`](Self::breakers),
    /// [`breaker_ids`](Self::breaker_ids)).
    pub fn policy(&self, default_temperature: f64) -> Result<Policy, CliError> {
        self.request
            .policy(default_temperature)
            .map_err(|e| match e.problem {
                KnobProblem::BreakersWithoutDry => CliError::BreakerWithoutDry,
                _ => CliError::Knob(e),
            })
    }

    /// `--dry-sequence-breaker` as typed, for a command that finds them in its vocabulary.
    pub fn breakers(&self) -> Vec<String> {
        self.request.texts(BREAKER).map(str::to_string).collect()
    }

    /// Refuses `--dry-sequence-breaker` for a command that does not read it.
    pub fn no_breakers(&self) -> Result<(), CliError> {
        if self.request.given(BREAKER) {
            return Err(CliError::BreakerElsewhere);
        }
        Ok(())
    }

    /// `--dry-sequence-breaker` as `pipeline` reads it: each a list of token ids.
    pub fn breaker_ids(&self) -> Result<Vec<Vec<u32>>, CliError> {
        self.request
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
