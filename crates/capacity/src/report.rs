//! The plan as Markdown, in the chapter's four parts; the JSON form is the serde of
//! [`PlanReport`].

use std::fmt::Write;

use crate::figures::{figure, pct};
use crate::metrics::{Percentiles, SliceMetrics};
use crate::plan::{DecisionKind, PlanReport};

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
        let mut out = String::new();
        // `write!` to a String cannot fail; the results are discarded on purpose.
        let c = &self.contract;
        let d = &self.decision;
        let _ = writeln!(
            out,
            "# Capacity plan: {} on {}\n",
            c.model.name, c.hardware.name
        );
        let verdict = match d.kind {
            DecisionKind::Release => "RELEASE",
            DecisionKind::DegradeToLastKnownGood => "DEGRADE to the last known-good plan",
            DecisionKind::DegradeToBaseline => "DEGRADE to the named baseline",
        };
        let _ = writeln!(out, "**Decision: {verdict}: {}.** {}.\n", d.name, d.reason);

        let _ = writeln!(out, "## 1. Benchmark contract\n");
        let h = &c.hardware;
        let _ = writeln!(out, "| input | value |\n|---|---|");
        let _ = writeln!(
            out,
            "| hardware | {}: {} GiB, {} GB/s × {} efficiency, {} TFLOP/s × {} efficiency, {} ms per-iteration overhead, {} memory reserve, {} per hour |",
            h.name,
            figure(h.memory_bytes / crate::profile::GIB),
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
        let _ = writeln!(out, "| sweep | {} |\n", c.sweep.configurations());
        if let Some(fit) = &c.calibration {
            let _ = writeln!(out, "Calibration to {}:\n", fit.source);
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
                    crate::cost::Phase::Prefill { tokens } => format!("prefill {tokens} tokens"),
                    crate::cost::Phase::Decode { position } => format!("decode at {position}"),
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
        }

        let chosen = &self.chosen;
        let mt = &chosen.metrics;
        let _ = writeln!(
            out,
            "## 2. Profiler and bottleneck report: {}\n",
            chosen.name
        );
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
        let b = &mt.bottleneck;
        let _ = writeln!(
            out,
            "\n| where the time went | share |\n|---|---:|\n| compute-bound iterations | {} |\n| memory-bound iterations | {} |\n| per-iteration overhead | {} |\n| idle | {} |\n| queueing, of request latency | {} |\n",
            pct0(b.compute_share),
            pct0(b.memory_share),
            pct0(b.overhead_share),
            pct0(b.idle_share),
            pct0(b.queueing_share_of_latency)
        );
        let _ = writeln!(
            out,
            "Bottleneck: **{}**. {} iterations, {} tokens each on average, {} preemptions.\n",
            b.dominant,
            b.iterations,
            figure(b.mean_tokens_per_iteration),
            b.preemptions
        );
        let kv = &mt.kv;
        let _ = writeln!(
            out,
            "KV cache: {} blocks of {} tokens ({} bytes each; {} GiB after {} GiB of weights); peak use {} blocks, minimum headroom {}.\n",
            kv.blocks,
            kv.block_size,
            figure(kv.bytes_per_block),
            figure(kv.kv_bytes / crate::profile::GIB),
            figure(kv.weight_bytes / crate::profile::GIB),
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

        let _ = writeln!(out, "## 3. Quality gates\n");
        let _ = writeln!(
            out,
            "Measured by `decode-lab eval --json` on the tiny model (held-out bits per byte, lower is better).\n"
        );
        let _ = writeln!(
            out,
            "| slice | weights | bits/byte | floor | verdict |\n|---|---|---:|---:|---|"
        );
        for q in &self.quality {
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
        let _ = writeln!(out, "\nGates of {}:\n", chosen.name);
        for g in &chosen.gates {
            let _ = writeln!(out, "- {} {}", if g.passed { "pass:" } else { "FAIL:" }, g);
        }
        out.push('\n');

        let _ = writeln!(out, "## 4. Capacity and cost recommendation\n");
        let _ = writeln!(out, "**{verdict}: {}.**\n\n{}.\n", d.name, d.reason);
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
        let _ = writeln!(
            out,
            "| configuration | tokens/s | p99 TTFT (ms) | p99 time per token (ms) | p99 time between tokens (ms) | goodput (requests/s) | cost per M tokens | KV headroom | gates |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for r in &self.sweep {
            if let Some(e) = &r.error {
                let _ = writeln!(out, "| {} | | | | | | | | cannot run: {e} |", r.label);
                continue;
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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

    /// The report as JSON (what `decode-lab capacity --json` prints).
    pub fn to_json(&self) -> String {
        // Every field is a plain number, string, bool or list; this cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
