//! The plan's report as data: [`PlanReport::parts`] is the chapter's parts (the benchmark
//! contract, the profiler and bottleneck report, the quality gates, the capacity and cost
//! recommendation with every point of the sweep, the failure playbook and the canary) as
//! [`report::Part`]s, one function per part. Every reader renders these same parts: the
//! CLI's Markdown ([`PlanReport::to_markdown`]) and the lab's planner worker's HTML, which
//! draws the sweep table and the canary's windows as charts too. The JSON form is the serde
//! of [`PlanReport`], with every figure in full.
//!
//! A number in a table is written to four significant figures and given in full in its
//! cell's value; a time is given in seconds.

use report::{sentence, Block, Cell, Part, Row, Table};

use crate::cost::{CalibrationFit, Phase};
use crate::figures::{figure, pct, percent, seconds};
use crate::fleet::Fleet;
use crate::metrics::KvReport;
use crate::plan::{DecisionKind, PlanReport, SweepRow};
use crate::profile::GIB;
use crate::rollout::{RolloutReport, RolloutWindow};

/// The id of the sweep's table, which the lab draws as the sweep chart's mirror.
pub const SWEEP_TABLE_ID: &str = "cap-sweep-table";
/// The id of the canary's windows' table, which the lab draws as the canary's timeline.
pub const ROLLOUT_TABLE_ID: &str = "cap-rollout-table";

impl PlanReport {
    /// The whole report as Markdown: the title and the decision, then [`PlanReport::parts`].
    pub fn to_markdown(&self) -> String {
        let c = &self.contract;
        format!(
            "# Capacity plan: {} on {}\n\n**Decision: {}** {}\n\n{}",
            c.model.name,
            c.hardware.name,
            self.verdict(),
            sentence(&self.decision.reason),
            report::markdown(&self.parts())
        )
    }

    /// The report as JSON (what `decode-lab capacity --json` prints).
    pub fn to_json(&self) -> String {
        // Every field is a plain number, string, bool or list; this cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The decision in words: "Release: chunked:128 ….", or the plan it degrades to and its
    /// policy.
    pub fn verdict(&self) -> String {
        let d = &self.decision;
        match d.kind {
            DecisionKind::Release => format!("Release: {}.", d.name),
            DecisionKind::DegradeToLastKnownGood => format!(
                "Degrade to the last known-good plan: {} ({}).",
                d.name,
                d.policy.label()
            ),
            DecisionKind::DegradeToBaseline => format!(
                "Degrade to the named baseline: {} ({}).",
                d.name,
                d.policy.label()
            ),
        }
    }

    /// Whether `row` of the sweep is the configuration released (never when the plan
    /// degrades).
    pub fn is_released(&self, row: &SweepRow) -> bool {
        let d = &self.decision;
        d.kind == DecisionKind::Release
            && row.error.is_none()
            && row.policy == d.policy
            && row.load_scale == d.load_scale
    }

    /// The chapter's parts, each a heading and its blocks: the contract (with the
    /// calibration when there is one), the speculation's acceptance rates and the output
    /// lengths when the plan has them, the profile, the quality gates, the recommendation
    /// with the sweep, and the playbook with the canary.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts = vec![contract_part(self)];
        parts.extend(speculation_part(self));
        parts.extend(lengths_part(self));
        parts.extend([
            profile_part(self),
            quality_part(self),
            recommendation_part(self),
            operations_part(self),
        ]);
        parts
    }
}

impl SweepRow {
    /// Its gates in words: "all gates pass", "fails: …", or why it could not run.
    pub fn gates_text(&self) -> String {
        match &self.error {
            Some(e) => format!("cannot run: {e}"),
            None if self.passes_gates => "all gates pass".into(),
            None => format!("fails: {}", self.failed_gates),
        }
    }
}

/// A table of the report (`cap-keyed`: its first columns are keys, left-aligned).
fn table(class: &str, id: &str, caption: String, headers: &[&str], rows: Vec<Row>) -> Table {
    Table {
        class: class.to_string(),
        id: Some(id.to_string()),
        caption,
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// A duration in milliseconds, shown to four figures and given in seconds in full.
fn ms_cell(t: f64) -> Cell {
    Cell::number(figure(t * 1e3), t)
}

/// A share as a percentage with one decimal, given in full.
fn share_cell(share: f64) -> Cell {
    Cell::number(percent(share), share)
}

fn part(id: &str, title: impl Into<String>, blocks: Vec<Block>) -> Part {
    Part {
        id: id.to_string(),
        title: title.into(),
        blocks,
    }
}

/// Part 1: every input of the plan, then the calibration's fit.
fn contract_part(report: &PlanReport) -> Part {
    let c = &report.contract;
    let h = &c.hardware;
    let m = &c.model;
    let mut rows = vec![
        Row::new(
            "hardware",
            vec![Cell::text(format!(
                "{}: {} GiB, {} GB/s × {} efficiency, {} TFLOP/s × {} efficiency, {} ms per-iteration overhead, {} memory reserve, {} per hour{}",
                h.name,
                figure(h.memory_bytes / GIB),
                figure(h.bandwidth_bytes_per_s / 1e9),
                figure(h.bandwidth_efficiency),
                figure(h.peak_flops / 1e12),
                figure(h.flops_efficiency),
                figure(h.iteration_overhead_s * 1e3),
                percent(h.memory_reserve),
                figure(h.cost_per_hour),
                if c.calibration.is_some() {
                    " (calibrated to the lab CPU's measured forward pass)"
                } else {
                    ""
                }
            ))],
        ),
        Row::new(
            "model",
            vec![Cell::text(format!(
                "{}: {} parameters, {} layers, {} heads, {} KV heads, head dimension {}, context {}; {} bytes/weight ({}), {} (int8); KV {} bytes/scalar",
                m.name,
                figure(m.parameters),
                m.layers,
                m.heads,
                m.kv_heads,
                m.head_dim,
                m.context_len,
                figure(m.full_bytes_per_weight),
                m.full_precision,
                figure(m.int8_bytes_per_weight),
                figure(m.kv_bytes_per_scalar)
            ))],
        ),
        Row::new(
            "trace",
            vec![Cell::text(format!(
                "{} ({}): {} requests at {} requests/s, mean prompt {} tokens, mean output {} tokens; swept at load scales {}",
                c.trace_name,
                c.trace_seed.map_or("file".to_string(), |s| format!("seed {s}")),
                c.requests,
                figure(c.offered_rate_per_s),
                figure(c.mean_prompt_tokens),
                figure(c.mean_output_tokens),
                c.sweep
                    .load_scales
                    .iter()
                    .map(|s| format!("{s}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))],
        ),
    ];
    for s in &c.slices {
        rows.push(Row::new(
            format!("slice {}", s.slice),
            vec![Cell::text(format!(
                "{} requests ({}), mean prompt {} tokens",
                s.requests,
                percent(s.requests as f64 / c.requests.max(1) as f64),
                figure(s.mean_prompt_tokens)
            ))],
        ));
    }
    rows.push(Row::new(
        "SLOs",
        vec![Cell::text(format!(
            "p99 TTFT ≤ {}, p99 time per output token ≤ {}, on all traffic and on every slice",
            seconds(c.slo.ttft_p99_s),
            seconds(c.slo.tpot_p99_s)
        ))],
    ));
    for f in &c.quality_floors {
        rows.push(Row::new(
            format!("quality floor {}", f.slice),
            vec![Cell::text(format!(
                "≤ {} bits/byte",
                figure(f.max_bits_per_byte)
            ))],
        ));
    }
    rows.push(Row::new(
        "sweep",
        vec![Cell::text(c.sweep.configurations())],
    ));
    if let Some(spec) = &c.speculation {
        rows.push(Row::new(
            "speculative decoding",
            vec![Cell::text(format!(
                "{} drafted tokens per step by {} ({} µs per token), α measured under {}",
                spec.k,
                spec.draft,
                figure(spec.draft_s_per_token * 1e6),
                spec.decoding
            ))],
        ));
    }
    let mut blocks = vec![Block::Table(table(
        "mirror cap-keyed",
        "cap-contract-table",
        "What was simulated, under which assumptions".into(),
        &["Input", "Value"],
        rows,
    ))];
    if let Some(fit) = &c.calibration {
        blocks.extend(calibration(fit));
    }
    part("cap-contract-title", "1. Benchmark contract", blocks)
}

/// The calibration's effective rates per weight path, and each timing against the
/// roofline.
fn calibration(fit: &CalibrationFit) -> [Block; 3] {
    let paths = fit
        .paths
        .iter()
        .map(|p| {
            format!(
                "{} weights: effective {} GFLOP/s, {} GB/s, {} µs per iteration; RMS relative error {}.",
                p.weights.name(),
                figure(p.flops_per_s / 1e9),
                figure(p.bytes_per_s / 1e9),
                figure(p.overhead_s * 1e6),
                percent(p.rms_relative_error)
            )
        })
        .collect();
    let rows = fit
        .paths
        .iter()
        .flat_map(|p| &p.residuals)
        .map(|r| {
            let what = match r.phase {
                Phase::Prefill { tokens } => format!("prefill {tokens} tokens"),
                Phase::Decode { position } => format!("decode at {position}"),
            };
            Row::new(
                what,
                vec![
                    Cell::text(r.weights.name()),
                    Cell::number(figure(r.measured_s * 1e6), r.measured_s),
                    Cell::number(figure(r.predicted_s * 1e6), r.predicted_s),
                    Cell::number(pct(r.relative_error), r.relative_error),
                    Cell::text(r.bound.clone()),
                ],
            )
        })
        .collect();
    [
        Block::Text(format!("Calibration to {}:", fit.source)),
        Block::List {
            class: "cap-calibration-list".into(),
            items: paths,
        },
        Block::Table(table(
            "mirror",
            "cap-calibration-table",
            "Each timing of the forward pass against the calibrated roofline".into(),
            &[
                "Timed",
                "Weights",
                "Measured (µs)",
                "Roofline (µs)",
                "Residual",
                "Bound",
            ],
            rows,
        )),
    ]
}

/// When the sweep speculates: α and E per decoding policy and slice, the plan's policy
/// first, as the crate measured them.
fn speculation_part(report: &PlanReport) -> Option<Part> {
    let s = report.contract.speculation.as_ref()?;
    let rows = s
        .acceptance
        .iter()
        .map(|a| Row {
            class: (a.policy == s.decoding).then(|| "cap-chosen-row".to_string()),
            header: a.policy.clone(),
            cells: vec![
                Cell::text(a.slice.clone()),
                Cell::number(figure(a.acceptance_rate), a.acceptance_rate),
                Cell::number(
                    figure(a.expected_tokens_per_step),
                    a.expected_tokens_per_step,
                ),
            ],
        })
        .collect();
    Some(part(
        "cap-speculation-title",
        "Speculative decoding",
        vec![Block::Table(table(
            "mirror",
            "cap-speculation-table",
            format!(
                "Acceptance rate α of the {} draft, measured per decoding policy and slice, and the expected tokens per verification step E = (1 − α^(k+1)) / (1 − α) at k = {}; the plan serves {} ({} µs per drafted token)",
                s.draft,
                s.k,
                s.decoding,
                figure(s.draft_s_per_token * 1e6)
            ),
            &["Decoding policy", "Slice", "α", "E (tokens per step)"],
            rows,
        ))],
    ))
}

/// When output lengths come from the decoding policy: per slice, how often the measured
/// runs chose end-of-text, the share of its budget a request keeps, and the mean output
/// the trace asked for against the one served.
fn lengths_part(report: &PlanReport) -> Option<Part> {
    let l = report.contract.lengths.as_ref()?;
    let rows = l
        .slices
        .iter()
        .map(|sl| {
            Row::new(
                sl.slice.clone(),
                vec![
                    Cell::number(sl.runs.to_string(), sl.runs as f64),
                    share_cell(sl.eos_share),
                    share_cell(sl.mean_budget_share),
                    Cell::number(figure(sl.mean_budget_tokens), sl.mean_budget_tokens),
                    Cell::number(figure(sl.mean_output_tokens), sl.mean_output_tokens),
                ],
            )
        })
        .collect();
    Some(part(
        "cap-lengths-title",
        "Output lengths from the decoding policy",
        vec![Block::Table(table(
            "mirror",
            "cap-lengths-table",
            format!(
                "Where {} stopped in the tiny model's measured runs (at most {} tokens each), and the output each slice's requests were served with: a request keeps the share of its trace length that one measured run used",
                l.decoding, l.max_new_tokens
            ),
            &[
                "Slice",
                "Measured runs",
                "Chose end-of-text",
                "Mean share of budget",
                "Trace's mean output (tokens)",
                "Served mean output (tokens)",
            ],
            rows,
        ))],
    ))
}

/// Part 2: the shipped configuration's throughput, latencies per slice, where its time
/// went, and its KV cache.
fn profile_part(report: &PlanReport) -> Part {
    let chosen = &report.chosen;
    let m = &chosen.metrics;
    let latency = std::iter::once(&m.all)
        .chain(&m.by_slice)
        .map(|s| {
            Row::new(
                s.slice.clone(),
                vec![
                    Cell::number(s.requests.to_string(), s.requests),
                    ms_cell(s.ttft.p50),
                    ms_cell(s.ttft.p99),
                    ms_cell(s.tpot.p50),
                    ms_cell(s.tpot.p99),
                    ms_cell(s.e2e.p99),
                    Cell::number(figure(s.goodput_per_s), s.goodput_per_s),
                    share_cell(s.slo_attainment),
                ],
            )
        })
        .collect();
    let b = &m.bottleneck;
    let shares = [
        ("compute-bound iterations", b.compute_share),
        ("memory-bound iterations", b.memory_share),
        ("per-iteration overhead", b.overhead_share),
        ("idle", b.idle_share),
        ("queueing, of request latency", b.queueing_share_of_latency),
    ]
    .into_iter()
    .map(|(what, share)| Row::new(what, vec![share_cell(share)]))
    .collect();
    let mut blocks = vec![
        Block::Text(format!(
            "{} output tokens/s ({} with prompts), p99 time between tokens {}, {} per million output tokens, over {} of simulated time.",
            figure(m.output_tokens_per_s),
            figure(m.total_tokens_per_s),
            seconds(m.tbt.p99),
            figure(m.cost_per_million_output_tokens),
            seconds(m.duration_s)
        )),
        Block::Table(table(
            "mirror",
            "cap-latency-table",
            "Latency and goodput of the shipped configuration, on all traffic and per slice"
                .into(),
            &[
                "Slice",
                "Requests",
                "TTFT p50 (ms)",
                "TTFT p99 (ms)",
                "Time per token p50 (ms)",
                "Time per token p99 (ms)",
                "End to end p99 (ms)",
                "Goodput (requests/s)",
                "SLO attainment",
            ],
            latency,
        )),
        Block::Table(table(
            "mirror cap-keyed",
            "cap-bottleneck-table",
            "Where the time went (shares of the simulated wall time; queueing as a share of request latency)".into(),
            &["Time spent in", "Share"],
            shares,
        )),
        Block::Text(format!(
            "Bottleneck: {}. {} iterations of {} tokens on average, {} preemptions.",
            b.dominant,
            b.iterations,
            figure(b.mean_tokens_per_iteration),
            b.preemptions,
        )),
    ];
    blocks.extend(kv_cache(&m.kv));
    part(
        "cap-profile-title",
        format!("2. Profiler and bottleneck report: {}", chosen.name),
        blocks,
    )
}

/// The KV cache's size, and its use over time (every tenth window and the drain keep the
/// table short; the JSON has all of them).
fn kv_cache(kv: &KvReport) -> [Block; 2] {
    let last = kv.timeline.len().saturating_sub(1);
    let rows = kv
        .timeline
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 == 0 || *i == last)
        .map(|(_, w)| {
            Row::new(
                format!("{} – {}", elapsed(w.start_s), elapsed(w.end_s)),
                vec![
                    Cell::number(w.peak_used_blocks.to_string(), w.peak_used_blocks),
                    share_cell(w.headroom),
                ],
            )
        })
        .collect();
    [
        Block::Text(format!(
            "KV cache: {} blocks of {} tokens ({} bytes each; {} GiB after {} GiB of weights); peak use {} blocks, minimum headroom {}.",
            kv.blocks,
            kv.block_size,
            figure(kv.bytes_per_block),
            figure(kv.kv_bytes / GIB),
            figure(kv.weight_bytes / GIB),
            kv.peak_used_blocks,
            percent(kv.min_headroom)
        )),
        Block::Table(table(
            "mirror",
            "cap-kv-table",
            "The KV cache's use over the simulated time".into(),
            &["Window", "Peak blocks used", "Headroom"],
            rows,
        )),
    ]
}

/// Part 3: measured quality per slice and weight path against the floors, then every gate
/// of the shipped configuration.
fn quality_part(report: &PlanReport) -> Part {
    let quality = report
        .quality
        .iter()
        .map(|q| Row {
            class: (!q.passed).then(|| "over".to_string()),
            header: format!("{} ({})", q.slice, q.name),
            cells: vec![
                Cell::text(q.weights.clone()),
                Cell::number(format!("{:.5}", q.bits_per_byte), q.bits_per_byte),
                Cell::number(format!("{:.5}", q.max_bits_per_byte), q.max_bits_per_byte),
                Cell::text(if q.passed { "pass" } else { "fail" }),
            ],
        })
        .collect();
    let chosen = &report.chosen;
    let gates = chosen
        .gates
        .iter()
        .map(|g| format!("{}{g}", if g.passed { "pass: " } else { "fail: " }))
        .collect();
    part(
        "cap-quality-title",
        "3. Quality gates",
        vec![
            Block::Table(table(
                "mirror",
                "cap-quality-table",
                "Held-out bits per byte of the tiny model per slice and weight path (lower is better; measured by decode-lab eval), against each slice's floor; eu is the rare slice".into(),
                &["Slice", "Weights", "Bits/byte", "Floor", "Verdict"],
                quality,
            )),
            Block::Text(format!("Gates of {}:", chosen.name)),
            Block::List {
                class: "cap-gates-list".into(),
                items: gates,
            },
        ],
    )
}

/// Part 4: the decision and why, what it ships and costs, what maximising tokens/s alone
/// would pick, and every point of the sweep.
fn recommendation_part(report: &PlanReport) -> Part {
    let d = &report.decision;
    let m = &report.chosen.metrics;
    let mut blocks = vec![Block::Text(format!(
        "{} {}",
        report.verdict(),
        sentence(&d.reason)
    ))];
    if !d.failed_gates.is_empty() {
        blocks.push(Block::Text("Failed gates of the best candidate:".into()));
        blocks.push(Block::List {
            class: "cap-failed-list".into(),
            items: d.failed_gates.iter().map(ToString::to_string).collect(),
        });
    }
    let cost = vec![
        Row::new("configuration", vec![Cell::text(d.policy.label())]),
        Row::new(
            "sustained load per replica (requests/s)",
            vec![Cell::number(
                figure(d.sustained_rate_per_s),
                d.sustained_rate_per_s,
            )],
        ),
        Row::new(
            "load scale per replica",
            vec![Cell::number(format!("{}x", d.load_scale), d.load_scale)],
        ),
        Row::new(
            "replicas for the trace",
            vec![Cell::number(d.replicas.to_string(), d.replicas)],
        ),
        Row::new(
            "cost per hour",
            vec![Cell::number(figure(d.cost_per_hour), d.cost_per_hour)],
        ),
        Row::new(
            "cost per million output tokens",
            vec![Cell::number(
                figure(m.cost_per_million_output_tokens),
                m.cost_per_million_output_tokens,
            )],
        ),
        Row::new(
            "output tokens/s",
            vec![Cell::number(
                figure(m.output_tokens_per_s),
                m.output_tokens_per_s,
            )],
        ),
    ];
    blocks.push(Block::Table(table(
        "mirror cap-keyed",
        "cap-cost-table",
        format!("What the decision ships: {}", d.name),
        &["Figure", "Value"],
        cost,
    )));
    if let Some(t) = &d.max_throughput {
        let verdict = if t.passes_gates {
            "it passes every gate.".to_string()
        } else {
            format!("it fails: {}.", t.failed_gates)
        };
        blocks.push(Block::Text(format!(
            "Maximising tokens/s alone would pick {} ({} tokens/s, p99 TTFT {}, goodput {} requests/s): {verdict}",
            t.label,
            figure(t.output_tokens_per_s),
            seconds(t.ttft_p99_s),
            figure(t.goodput_per_s)
        )));
    }
    blocks.push(Block::Table(sweep_table(report)));
    part(
        "cap-cost-title",
        "4. Capacity and cost recommendation",
        blocks,
    )
}

/// The sweep table's columns after the configuration and its fleet.
const SWEEP_HEADERS: [&str; 11] = [
    "Policy",
    "Batch limit",
    "Weights",
    "Load",
    "Offered (requests/s)",
    "Tokens/s",
    "p99 TTFT (ms)",
    "p99 time per token (ms)",
    "Goodput (requests/s)",
    "Cost per M tokens",
    "Gates",
];

/// Every configuration of the sweep, one row each, in the sweep's order; with fleets
/// (replicas, prefix caches, a queue cap), also each row's replicas, router, prefix-cache
/// hit rate and rejected requests.
pub fn sweep_table(report: &PlanReport) -> Table {
    let passing = report.sweep.iter().filter(|r| r.passes_gates).count();
    let fleets = report.sweep.iter().any(|r| r.fleet != Fleet::single());
    let rows = report
        .sweep
        .iter()
        .map(|r| sweep_row(r, report.is_released(r), fleets))
        .collect();
    let fleet_headers: &[&str] = if fleets {
        &["Replicas", "Router", "Prefix hits", "Rejected"]
    } else {
        &[]
    };
    let headers: Vec<&str> = std::iter::once("Configuration")
        .chain(fleet_headers.iter().copied())
        .chain(SWEEP_HEADERS)
        .collect();
    table(
        "mirror",
        SWEEP_TABLE_ID,
        format!(
            "Every configuration of the sweep ({} rows; {passing} pass every gate)",
            report.sweep.len()
        ),
        &headers,
        rows,
    )
}

fn sweep_row(r: &SweepRow, released: bool, fleets: bool) -> Row {
    // A configuration that could not run has no figures to show, only its value (zero).
    let number = |x: f64, scale: f64| {
        let shown = if r.error.is_some() {
            "—".to_string()
        } else {
            figure(x * scale)
        };
        Cell::number(shown, x)
    };
    let class = match (released, r.passes_gates) {
        (true, _) => "cap-chosen-row",
        (false, true) => "cap-pass-row",
        (false, false) => "cap-fail-row",
    };
    let header = if released {
        format!("{} (released)", r.label)
    } else {
        r.label.clone()
    };
    let fleet = [
        Cell::number(r.replicas.to_string(), r.replicas),
        Cell::text(r.router.clone()),
        share_cell(r.prefix_cache_hit_rate),
        Cell::number(r.rejected.to_string(), r.rejected),
    ];
    let fleet = if fleets { &fleet[..] } else { &[] };
    Row {
        class: Some(class.to_string()),
        header,
        cells: fleet
            .iter()
            .cloned()
            .chain([
                Cell::text(r.batching.clone()),
                Cell::number(r.max_sequences.to_string(), r.max_sequences),
                Cell::text(r.weights.clone()),
                Cell::number(format!("{}x", r.load_scale), r.load_scale),
                number(r.offered_rate_per_s, 1.0),
                number(r.output_tokens_per_s, 1.0),
                number(r.ttft_p99_s, 1e3),
                number(r.tpot_p99_s, 1e3),
                number(r.goodput_per_s, 1.0),
                number(r.cost_per_million_output_tokens, 1.0),
                Cell::text(r.gates_text()),
            ])
            .collect(),
    }
}

/// Part 5: a detector, owner, mitigation and stop condition for every gate of what ships,
/// and the canary when one was simulated: its outcome in words and its windows.
fn operations_part(report: &PlanReport) -> Part {
    let rows = report
        .playbook
        .iter()
        .map(|p| {
            Row::new(
                p.detector.clone(),
                vec![
                    Cell::text(p.owner.clone()),
                    Cell::text(p.mitigation.clone()),
                    Cell::text(p.stop_condition.clone()),
                ],
            )
        })
        .collect();
    let mut blocks = vec![Block::Table(table(
        "mirror cap-keyed",
        "cap-playbook-table",
        "The failure playbook: a detector for every gate of the shipped configuration".into(),
        &["Detector", "Owner", "Mitigation", "Stop condition"],
        rows,
    ))];
    if let Some(r) = &report.rollout {
        blocks.push(Block::Text(rollout_words(r)));
        blocks.push(Block::Table(rollout_table(r)));
    }
    part(
        "cap-playbook-title",
        "5. Failure playbook and rollout",
        blocks,
    )
}

/// The canary in a paragraph: whether it stopped, when the detector fired and on what,
/// and the requests that missed the SLO, overall and per slice.
pub fn rollout_words(r: &RolloutReport) -> String {
    let after = |t: f64| seconds(t - r.start_s);
    let opening = format!(
        "Canary: {} took {} of the requests from t0 = {}, judged over {} windows; the fallback is {}.",
        r.candidate,
        percent(r.fraction),
        seconds(r.start_s),
        seconds(r.window_s),
        r.fallback
    );
    let per_slice = r
        .missed_by_slice
        .iter()
        .map(|(slice, missed, of)| format!("{slice} {missed} of {of}"))
        .collect::<Vec<_>>()
        .join(", ");
    let outcome = match (&r.detector, r.detected_at_s, r.stopped_at_s) {
        (Some(d), Some(detected), Some(stopped)) => format!(
            "Stopped: the detector fired {} after t0 ({d}); the canary's traffic returned to {} {} after t0. {} of its {} requests missed the SLO ({per_slice}); after the stop the fallback served {} of its share and missed {}.",
            after(detected),
            r.fallback,
            after(stopped),
            r.missed_slo,
            r.canary_requests,
            r.after_stop_requests,
            r.after_stop_missed
        ),
        _ => format!(
            "Completed: no detector fired; {} of the canary's {} requests missed the SLO ({per_slice}).",
            r.missed_slo, r.canary_requests
        ),
    };
    format!("{opening} {outcome}")
}

/// The detection window: the first that breached a gate.
pub fn detection_window(r: &RolloutReport) -> Option<usize> {
    r.timeline.iter().position(|w| !w.breached.is_empty())
}

/// The canary's detector windows, one row each: its requests, their p99 TTFT and the gates
/// it breached; the detection window is marked (`cap-detected-row`).
pub fn rollout_table(r: &RolloutReport) -> Table {
    let detected = detection_window(r);
    let rows = r
        .timeline
        .iter()
        .enumerate()
        .map(|(i, w)| Row {
            class: if Some(i) == detected {
                Some("cap-detected-row".to_string())
            } else {
                (!w.breached.is_empty()).then(|| "over".to_string())
            },
            header: window_name(r, w),
            cells: vec![
                Cell::number(w.canary_requests.to_string(), w.canary_requests),
                if w.canary_requests == 0 {
                    Cell::text("—")
                } else {
                    ms_cell(w.canary_ttft_p99_s)
                },
                Cell::text(if w.breached.is_empty() {
                    "none".to_string()
                } else {
                    w.breached.join("; ")
                }),
            ],
        })
        .collect();
    table(
        "mirror",
        ROLLOUT_TABLE_ID,
        format!("The canary's detector windows ({} rows)", r.timeline.len()),
        &[
            "Window (after t0)",
            "Canary requests",
            "p99 TTFT (ms)",
            "Breached gates",
        ],
        rows,
    )
}

/// A window as its span after t0: "0 s – 150 ms".
pub fn window_name(r: &RolloutReport, w: &RolloutWindow) -> String {
    format!(
        "{} – {}",
        elapsed(w.start_s - r.start_s),
        elapsed(w.end_s - r.start_s)
    )
}

/// A time after t0: [`seconds`], whose "0 µs" reads better as t0 itself, "0 s".
pub fn elapsed(t: f64) -> String {
    if t <= 0.0 {
        "0 s".into()
    } else {
        seconds(t)
    }
}
