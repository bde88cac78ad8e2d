//! The plan as Markdown, in the chapter's four parts, one function per part (and one for
//! each table a part holds); the JSON form is the serde of [`PlanReport`].
//!
//! `write!` to a String cannot fail, so every result here is discarded on purpose.

use std::fmt::Write;

use crate::cost::{CalibrationFit, Phase};
use crate::figures::{figure, pct};
use crate::fleet::Fleet;
use crate::metrics::{KvReport, Metrics, Percentiles, SliceMetrics};
use crate::plan::{ConfigReport, Contract, Decision, DecisionKind, PlanReport, SweepRow};
use crate::profile::GIB;

fn ms(x: f64) -> String {
    figure(x * 1e3)
}

fn pct0(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

fn triple(p: &Percentiles) -> String {
    format!("{} / {} / {}", ms(p.p50), ms(p.p90), ms(p.p99))
}

impl PlanReport {
    /// The whole report as Markdown (tables for every figure the lab plots).
    pub fn to_markdown(&self) -> String {
        [
            title(self),
            contract(&self.contract),
            profile(&self.chosen),
            quality_gates(self),
            recommendation(&self.decision, &self.sweep),
            operations(self),
        ]
        .concat()
    }

    /// The report as JSON (what `decode-lab capacity --json` prints).
    pub fn to_json(&self) -> String {
        // Every field is a plain number, string, bool or list; this cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The decision as the title line and part 4 state it.
fn verdict(kind: &DecisionKind) -> &'static str {
    match kind {
        DecisionKind::Release => "RELEASE",
        DecisionKind::DegradeToLastKnownGood => "DEGRADE to the last known-good plan",
        DecisionKind::DegradeToBaseline => "DEGRADE to the named baseline",
    }
}

/// What was planned, and the decision in one line.
fn title(report: &PlanReport) -> String {
    let (c, d) = (&report.contract, &report.decision);
    format!(
        "# Capacity plan: {} on {}\n\n**Decision: {}: {}.** {}.\n\n",
        c.model.name,
        c.hardware.name,
        verdict(&d.kind),
        d.name,
        d.reason
    )
}

/// Part 1: every input of the plan, then the calibration's fit.
fn contract(c: &Contract) -> String {
    let mut out = String::from("## 1. Benchmark contract\n\n");
    let h = &c.hardware;
    let _ = writeln!(out, "| input | value |\n|---|---|");
    let _ = writeln!(
        out,
        "| hardware | {}: {} GiB, {} GB/s × {} efficiency, {} TFLOP/s × {} efficiency, {} ms per-iteration overhead, {} memory reserve, {} per hour |",
        h.name,
        figure(h.memory_bytes / GIB),
        figure(h.bandwidth_bytes_per_s / 1e9),
        figure(h.bandwidth_efficiency),
        figure(h.peak_flops / 1e12),
        figure(h.flops_efficiency),
        figure(h.iteration_overhead_s * 1e3),
        pct0(h.memory_reserve),
        figure(h.cost_per_hour)
    );
    let m = &c.model;
    let _ = writeln!(
        out,
        "| model | {}: {} parameters, {} layers, {} heads, {} KV heads, head dimension {}, context {}; {} bytes/weight ({}), {} (int8); KV {} bytes/scalar |",
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
    );
    let seed = c
        .trace_seed
        .map_or("file".to_string(), |s| format!("seed {s}"));
    let _ = writeln!(
        out,
        "| trace | {} ({seed}): {} requests at {} requests/s, mean prompt {} tokens, mean output {} tokens |",
        c.trace_name,
        c.requests,
        figure(c.offered_rate_per_s),
        figure(c.mean_prompt_tokens),
        figure(c.mean_output_tokens)
    );
    for s in &c.slices {
        let _ = writeln!(
            out,
            "| slice {} | {} requests ({}), mean prompt {} tokens |",
            s.slice,
            s.requests,
            pct0(s.requests as f64 / c.requests.max(1) as f64),
            figure(s.mean_prompt_tokens)
        );
    }
    let _ = writeln!(
        out,
        "| SLOs | p99 TTFT ≤ {} ms, p99 time per output token ≤ {} ms, on all traffic and on every slice |",
        ms(c.slo.ttft_p99_s),
        ms(c.slo.tpot_p99_s)
    );
    for f in &c.quality_floors {
        let _ = writeln!(
            out,
            "| quality floor {} | ≤ {} bits/byte |",
            f.slice,
            figure(f.max_bits_per_byte)
        );
    }
    let _ = writeln!(out, "| sweep | {} |", c.sweep.configurations());
    if let Some(spec) = &c.speculation {
        let _ = writeln!(
            out,
            "| speculative decoding | {} drafted tokens per step by {} ({} µs per token), α measured under {} |",
            spec.k,
            spec.draft,
            figure(spec.draft_s_per_token * 1e6),
            spec.decoding
        );
        for a in &spec.acceptance {
            let _ = writeln!(
                out,
                "| α {}, {} | {} (E = {} tokens per step at k = {}) |",
                a.policy,
                a.slice,
                figure(a.acceptance_rate),
                figure(a.expected_tokens_per_step),
                spec.k
            );
        }
    }
    if let Some(l) = &c.lengths {
        for sl in &l.slices {
            let _ = writeln!(
                out,
                "| output lengths {}, {} | where {} stopped ({} measured runs of at most {} tokens; {} chose end-of-text, the rest ran to their budget): {} of each budget on average, so {} tokens where the trace asked for {} |",
                sl.slice,
                l.decoding,
                l.decoding,
                sl.runs,
                l.max_new_tokens,
                pct0(sl.eos_share),
                pct0(sl.mean_budget_share),
                figure(sl.mean_output_tokens),
                figure(sl.mean_budget_tokens)
            );
        }
    }
    out.push('\n');
    if let Some(fit) = &c.calibration {
        out.push_str(&calibration(fit));
    }
    out
}

/// The calibration's effective rates per weight path, and each timing's residual.
fn calibration(fit: &CalibrationFit) -> String {
    let mut out = format!("Calibration to {}:\n\n", fit.source);
    for path in &fit.paths {
        let _ = writeln!(
            out,
            "- {} weights: effective {} GFLOP/s, {} GB/s, {} µs per iteration; RMS relative error {}.",
            path.weights.name(),
            figure(path.flops_per_s / 1e9),
            figure(path.bytes_per_s / 1e9),
            figure(path.overhead_s * 1e6),
            pct0(path.rms_relative_error)
        );
    }
    let _ = writeln!(
        out,
        "\n| timed | weights | measured (µs) | roofline (µs) | residual | bound |\n|---|---|---:|---:|---:|---|"
    );
    for r in fit.paths.iter().flat_map(|p| &p.residuals) {
        let what = match r.phase {
            Phase::Prefill { tokens } => format!("prefill {tokens} tokens"),
            Phase::Decode { position } => format!("decode at {position}"),
        };
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} | {} | {} |",
            r.weights.name(),
            figure(r.measured_s * 1e6),
            figure(r.predicted_s * 1e6),
            pct(r.relative_error),
            r.bound
        );
    }
    out.push('\n');
    out
}

/// Part 2: the shipped configuration's throughput, latencies per slice, where its time
/// went, and its KV cache.
fn profile(chosen: &ConfigReport) -> String {
    let mt = &chosen.metrics;
    let mut out = format!("## 2. Profiler and bottleneck report: {}\n\n", chosen.name);
    let _ = writeln!(
        out,
        "{} output tokens/s ({} with prompts), p99 time between tokens {} ms, {} per million output tokens, over {} s.\n",
        figure(mt.output_tokens_per_s),
        figure(mt.total_tokens_per_s),
        ms(mt.tbt.p99),
        figure(mt.cost_per_million_output_tokens),
        figure(mt.duration_s)
    );
    let _ = writeln!(
        out,
        "| slice | requests | TTFT p50 / p90 / p99 (ms) | time per output token p50 / p90 / p99 (ms) | end to end p50 / p90 / p99 (ms) | goodput (requests/s) | SLO attainment |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    let row = |s: &SliceMetrics| {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.slice,
            s.requests,
            triple(&s.ttft),
            triple(&s.tpot),
            triple(&s.e2e),
            figure(s.goodput_per_s),
            pct0(s.slo_attainment)
        )
    };
    let _ = writeln!(out, "{}", row(&mt.all));
    for s in &mt.by_slice {
        let _ = writeln!(out, "{}", row(s));
    }
    out.push_str(&bottleneck(mt));
    out.push_str(&kv_cache(&mt.kv));
    out
}

/// Where the time went, and the bottleneck it makes.
fn bottleneck(mt: &Metrics) -> String {
    let b = &mt.bottleneck;
    format!(
        "\n| where the time went | share |\n|---|---:|\n| compute-bound iterations | {} |\n| memory-bound iterations | {} |\n| per-iteration overhead | {} |\n| idle | {} |\n| queueing, of request latency | {} |\n\n\
         Bottleneck: **{}**. {} iterations, {} tokens each on average, {} preemptions.\n\n",
        pct0(b.compute_share),
        pct0(b.memory_share),
        pct0(b.overhead_share),
        pct0(b.idle_share),
        pct0(b.queueing_share_of_latency),
        b.dominant,
        b.iterations,
        figure(b.mean_tokens_per_iteration),
        b.preemptions
    )
}

/// The KV cache's size and its use over time.
fn kv_cache(kv: &KvReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "KV cache: {} blocks of {} tokens ({} bytes each; {} GiB after {} GiB of weights); peak use {} blocks, minimum headroom {}.\n",
        kv.blocks,
        kv.block_size,
        figure(kv.bytes_per_block),
        figure(kv.kv_bytes / GIB),
        figure(kv.weight_bytes / GIB),
        kv.peak_used_blocks,
        pct0(kv.min_headroom)
    );
    let _ = writeln!(
        out,
        "| window (s) | peak blocks used | headroom |\n|---|---:|---:|"
    );
    for (i, w) in kv.timeline.iter().enumerate() {
        // Every tenth window and the drain keep the table short; JSON has all of them.
        if i % 10 == 0 || i + 1 == kv.timeline.len() {
            let _ = writeln!(
                out,
                "| {} to {} | {} | {} |",
                figure(w.start_s),
                figure(w.end_s),
                w.peak_used_blocks,
                pct0(w.headroom)
            );
        }
    }
    out.push('\n');
    out
}

/// Part 3: measured quality per slice and weight path against the floors, then every gate
/// of the shipped configuration.
fn quality_gates(report: &PlanReport) -> String {
    let mut out = String::from(
        "## 3. Quality gates\n\n\
         Measured by `decode-lab eval --json` on the tiny model (held-out bits per byte, lower is better).\n\n",
    );
    let _ = writeln!(
        out,
        "| slice | weights | bits/byte | floor | verdict |\n|---|---|---:|---:|---|"
    );
    for q in &report.quality {
        let _ = writeln!(
            out,
            "| {} ({}) | {} | {:.5} | {:.5} | {} |",
            q.slice,
            q.name,
            q.weights,
            q.bits_per_byte,
            q.max_bits_per_byte,
            if q.passed { "pass" } else { "FAIL" }
        );
    }
    let chosen = &report.chosen;
    let _ = writeln!(out, "\nGates of {}:\n", chosen.name);
    for g in &chosen.gates {
        let _ = writeln!(out, "- {} {g}", if g.passed { "pass:" } else { "FAIL:" });
    }
    out.push('\n');
    out
}

/// Part 4: the decision and why, what maximising tokens/s alone would pick, and every
/// point of the sweep.
fn recommendation(d: &Decision, sweep: &[SweepRow]) -> String {
    let mut out = format!(
        "## 4. Capacity and cost recommendation\n\n**{}: {}.**\n\n{}.\n\n",
        verdict(&d.kind),
        d.name,
        d.reason
    );
    if !d.failed_gates.is_empty() {
        let _ = writeln!(out, "Failed gates of the best candidate:\n");
        for g in d.failed_gates.iter() {
            let _ = writeln!(out, "- {g}");
        }
        out.push('\n');
    }
    if let Some(m) = &d.max_throughput {
        let _ = writeln!(
            out,
            "Maximising tokens/s would pick {} ({} tokens/s, p99 TTFT {} ms, goodput {} requests/s): {}.\n",
            m.label,
            figure(m.output_tokens_per_s),
            ms(m.ttft_p99_s),
            figure(m.goodput_per_s),
            if m.passes_gates {
                "it passes every gate".to_string()
            } else {
                format!("it fails {}", m.failed_gates)
            }
        );
    }
    out.push_str(&sweep_table(sweep));
    out
}

/// Every point of the sweep, one row each; with replicas, prefix caches or a queue cap,
/// also each row's replicas, router, prefix-cache hit rate and rejected requests.
fn sweep_table(sweep: &[SweepRow]) -> String {
    let fleets = sweep.iter().any(|r| r.fleet != Fleet::single());
    let mut out = String::from("| configuration |");
    if fleets {
        out.push_str(" replicas | router | prefix hits | rejected |");
    }
    out.push_str(
        " tokens/s | p99 TTFT (ms) | p99 time per token (ms) | p99 time between tokens (ms) | goodput (requests/s) | cost per M tokens | KV headroom | gates |\n|---|",
    );
    if fleets {
        out.push_str("---:|---|---:|---:|");
    }
    out.push_str("---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in sweep {
        let fleet = if fleets {
            format!(
                " {} | {} | {} | {} |",
                r.replicas,
                r.router,
                pct0(r.prefix_cache_hit_rate),
                r.rejected
            )
        } else {
            String::new()
        };
        if let Some(e) = &r.error {
            let _ = writeln!(
                out,
                "| {} |{fleet} | | | | | | | | cannot run: {e} |",
                r.label
            );
            continue;
        }
        let _ = writeln!(
            out,
            "| {} |{fleet} {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            figure(r.output_tokens_per_s),
            ms(r.ttft_p99_s),
            ms(r.tpot_p99_s),
            ms(r.tbt_p99_s),
            figure(r.goodput_per_s),
            figure(r.cost_per_million_output_tokens),
            pct0(r.kv_min_headroom),
            if r.passes_gates {
                "pass".to_string()
            } else {
                format!("fail ({} gates)", r.failed_gates.len())
            }
        );
    }
    out
}

/// Part 5: the failure playbook, and the canary when one was simulated.
fn operations(report: &PlanReport) -> String {
    let mut out = String::from(
        "## 5. Failure playbook and rollout\n\n| detector | owner | mitigation | stop condition |\n|---|---|---|---|\n",
    );
    for p in &report.playbook {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            p.detector, p.owner, p.mitigation, p.stop_condition
        );
    }
    out.push('\n');
    let Some(r) = &report.rollout else {
        return out;
    };
    let at = |t: f64| format!("{} s", figure(t - r.start_s));
    let _ = writeln!(
        out,
        "Canary: {} took {} of the requests from t0 = {} s, judged over {} s windows; the fallback is {}.\n",
        r.candidate,
        pct0(r.fraction),
        figure(r.start_s),
        figure(r.window_s),
        r.fallback
    );
    match (&r.detector, r.detected_at_s, r.stopped_at_s) {
        (Some(d), Some(detected), Some(stopped)) => {
            let _ = writeln!(
                out,
                "**Stopped.** The detector fired {} after t0 ({d}); the canary's traffic returned to {} {} after t0. {} of its {} requests missed the SLO; after the stop the fallback served {} of its share and missed {}.\n",
                at(detected),
                r.fallback,
                at(stopped),
                r.missed_slo,
                r.canary_requests,
                r.after_stop_requests,
                r.after_stop_missed
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "**Completed.** No detector fired; {} of the canary's {} requests missed the SLO.\n",
                r.missed_slo, r.canary_requests
            );
        }
    }
    let _ = writeln!(
        out,
        "| slice | canary requests | missed the SLO |\n|---|---:|---:|"
    );
    for (slice, missed, of) in &r.missed_by_slice {
        let _ = writeln!(out, "| {slice} | {of} | {missed} |");
    }
    out.push('\n');
    out
}
