//! `decode-lab capacity`: the inference capacity plan (the `capacity` crate) on the command
//! line. The plan's flags are the crate's knob table ([`capacity::KNOBS`]), built into
//! clap's arguments here and handed back as a [`PlanRequest`]'s pairs, which the crate
//! parses; this module reads the files the request names, runs the plan and writes the
//! known-good file. The planner itself is pure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::CliError;
use crate::files;
use crate::named::Named;
use capacity::{KnobKind, NamedPolicy, Plan, PlanRequest, TraceFormat, TraceSource, KNOBS};
use clap::parser::ValueSource;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command, ValueEnum};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Md,
    Json,
}

/// The plan's request, where to save a released plan, and how to print the report.
pub struct CapacityArgs {
    request: PlanRequest,
    save_known_good: Option<PathBuf>,
    report: ReportFormat,
}

/// One argument per knob of the table, taking what the knob's kind takes.
fn knob_arg(knob: &capacity::Knob) -> Arg {
    let mut arg = Arg::new(knob.name).long(knob.name).help(knob.hint);
    arg = match knob.kind {
        KnobKind::Switch => return arg.action(ArgAction::SetTrue),
        KnobKind::Repeated => arg.action(ArgAction::Append),
        KnobKind::Whole64 => arg.value_parser(value_parser!(u64)),
        KnobKind::Whole32 => arg.value_parser(value_parser!(u32)),
        KnobKind::Number => arg.value_parser(value_parser!(f64)),
        KnobKind::File => arg.value_parser(value_parser!(PathBuf)),
        KnobKind::Text => arg,
    };
    // Numbers and lists may start with a minus sign, so that the plan names the bad value.
    let hyphens = matches!(
        knob.kind,
        KnobKind::Repeated | KnobKind::Whole64 | KnobKind::Whole32 | KnobKind::Number
    ) || matches!(knob.value_name, "LIST" | "P:D");
    arg = arg.value_name(knob.value_name).allow_hyphen_values(hyphens);
    match knob.default {
        Some(default) => arg.default_value(default),
        None => arg,
    }
}

impl clap::Args for CapacityArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(KNOBS.iter().map(knob_arg))
            .arg(
                Arg::new("save-known-good")
                    .long("save-known-good")
                    .value_name("FILE")
                    .value_parser(value_parser!(PathBuf))
                    .help("When the plan releases, write its configuration here as the next known-good plan."),
            )
            .arg(
                Arg::new("json")
                    .long("json")
                    .action(ArgAction::SetTrue)
                    .conflicts_with("report")
                    .help("Print the report as JSON (the same as `--report json`)."),
            )
            .arg(
                Arg::new("report")
                    .long("report")
                    .value_parser(value_parser!(ReportFormat))
                    .default_value("md"),
            )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        CapacityArgs::augment_args(cmd)
    }
}

impl clap::FromArgMatches for CapacityArgs {
    /// The request holds each knob given on the command line as typed (a default is the
    /// crate's to apply), a switch given as an empty value.
    fn from_arg_matches(m: &ArgMatches) -> Result<CapacityArgs, clap::Error> {
        let mut pairs = Vec::new();
        for knob in &KNOBS {
            if m.value_source(knob.name) != Some(ValueSource::CommandLine) {
                continue;
            }
            if knob.kind == KnobKind::Switch {
                pairs.push((knob.name, String::new()));
                continue;
            }
            for raw in m.get_raw(knob.name).into_iter().flatten() {
                pairs.push((knob.name, raw.to_string_lossy().into_owned()));
            }
        }
        let json = m.get_flag("json");
        Ok(CapacityArgs {
            request: PlanRequest::new(pairs),
            save_known_good: m.get_one::<PathBuf>("save-known-good").cloned(),
            report: match m.get_one::<ReportFormat>("report") {
                _ if json => ReportFormat::Json,
                Some(format) => *format,
                None => ReportFormat::Md,
            },
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = CapacityArgs::from_arg_matches(m)?;
        Ok(())
    }
}

/// Reads a file a knob names; the message names the flag and the path.
fn read(knob: &'static str, path: &str) -> Result<String, capacity::CapacityError> {
    let why = if Path::new(path).is_dir() {
        "is a directory, not a file".to_string()
    } else {
        match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            Err(e) => format!("cannot read it: {e}"),
        }
    };
    Err(capacity::CapacityError::Knob {
        knob,
        value: path.into(),
        why,
    })
}

/// The files this run reads, with their flags: every file knob given, and a trace that is
/// a file.
fn files_read(request: &PlanRequest) -> Vec<Named> {
    KNOBS
        .iter()
        .filter_map(|knob| {
            let path = request.get(knob.name)?;
            let is_file = match knob.name {
                "trace" | "rollout-trace" => TraceFormat::from_path(path).is_some(),
                _ => knob.kind == KnobKind::File,
            };
            is_file.then(|| Named::new(format!("--{}", knob.name), path))
        })
        .collect()
}

/// `--save-known-good` must name a file that can be written and that the run does not
/// read ([`files::check`]): checked before any work, so no input is overwritten by a plan
/// made from it.
fn check_save_path(args: &CapacityArgs) -> Result<(), CliError> {
    let Some(save) = &args.save_known_good else {
        return Ok(());
    };
    let output = Named::new("--save-known-good", save);
    files::check(std::slice::from_ref(&output), &files_read(&args.request))?;
    files::writable(&output).map(|_| ())
}

/// Sweeps of more simulated requests than this announce themselves on standard error
/// (about 5 s at 1 µs each); progress lines follow every 2 s once a sweep has run 2 s.
const ANNOUNCE_WORK: u64 = 5_000_000;
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// One line on standard error, beside the plan.
fn note(line: &str) {
    crate::output::note(&format!("capacity: {line}"));
}

pub fn run(args: &CapacityArgs) -> Result<String, CliError> {
    check_save_path(args)?;
    let inputs = args.request.inputs(&mut read)?;
    let requests = match &inputs.trace {
        TraceSource::Generated { spec } => spec.requests,
        TraceSource::Recorded { trace, .. } => trace.requests.len() as u64,
    };
    let s = &inputs.sweep;
    let points = (s.load_scales.len()
        * s.batchings.len()
        * s.max_sequences.len()
        * s.weights.len()
        * s.fleet.fleets().len()) as u64;
    let work = points.saturating_mul(requests);
    if work > ANNOUNCE_WORK && work <= capacity::MAX_PLAN_WORK {
        note(&format!(
            "simulating {points} configurations of {requests} requests, {work} simulated requests: about {} s in a release build at about 1 µs each",
            work.div_ceil(1_000_000)
        ));
    }
    let start = Instant::now();
    let mut last_note = start;
    let mut progress = |done: usize, total: usize| {
        let now = Instant::now();
        if now.duration_since(last_note) < PROGRESS_EVERY {
            return;
        }
        last_note = now;
        let elapsed = now.duration_since(start).as_secs_f64();
        let left = elapsed / done.max(1) as f64 * total.saturating_sub(done) as f64;
        note(&format!(
            "{done} of {total} configurations simulated in {elapsed:.0} s, about {left:.0} s left"
        ));
    };
    let report = Plan::run_with_progress(&inputs, &mut progress).map_err(|e| {
        use capacity::CapacityError::*;
        match e {
            TooMuchWork { .. } => CliError::PlanTooLarge(e),
            // What the trace itself holds: named by the flag that gave it.
            BadRequest { .. }
            | RequestTooLong { .. }
            | NoArrivalRate { .. }
            | RateTooHigh { .. }
            | UngatedSlice { .. } => CliError::Trace {
                trace: args.request.get("trace").unwrap_or("poisson").to_string(),
                source: e,
            },
            e => e.into(),
        }
    })?;
    if let Some(path) = &args.save_known_good {
        if report.decision.kind == capacity::DecisionKind::Release {
            let known = NamedPolicy {
                name: format!("known-good: {}", report.decision.name),
                policy: report.decision.policy.clone(),
                fleet: report.decision.fleet,
            };
            let text = serde_json::to_string_pretty(&known)?;
            files::write(
                &Named::new("--save-known-good", path),
                (text + "\n").as_bytes(),
            )?;
        }
    }
    Ok(if args.report == ReportFormat::Json {
        report.to_json()
    } else {
        report.to_markdown()
    })
}
