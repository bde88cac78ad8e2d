//! The one typed protocol between the Capacity panel and the planner worker: a
//! [`PlannerJob`] from the page (check the form, or plan it), [`PlannerEvent`]s back, each
//! crossing as its JSON text ([`crate::link::message::to_js`]). What a plan shows crosses as a [`PlanDisplay`]:
//! the decision in words and the markup of the sweep chart and of the report's parts,
//! which the worker has already written, so the page deserialises text, never a
//! `capacity::PlanReport` (which measured +28,800 bytes of page wasm), and draws no chart
//! or table of a plan itself.

use report::{ChartPoint, Frame, Part, Table};
use serde::{Deserialize, Serialize};

/// A job for the planner: check or plan the form these URL pairs describe
/// (`CapacityForm::to_pairs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerJob {
    /// Echoed by every event about this job, so the page can drop news of an older one.
    pub id: u64,
    pub form: Vec<(String, String)>,
    pub task: PlannerTask,
}

/// What the planner does with a job's form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PlannerTask {
    /// Check the fields only, answered by [`PlannerEvent::Checked`] or
    /// [`PlannerEvent::Problems`]: the page asks as the fields change, so that it links
    /// none of the check's rules (`capacity`'s presets and bounds).
    Check,
    /// Check, then plan.
    Plan {
        /// The configuration this session last released, as the JSON text of a known-good
        /// plan ([`PlanDisplay::released`]): the plan degrades to it before the named
        /// baseline.
        known_good: Option<String>,
    },
}

/// What the planner tells the page, in the order it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PlannerEvent {
    /// The worker's wasm is running and listening; jobs sent before this are held by the page.
    Ready,
    /// `done` of the sweep's `total` configurations are simulated (a few times per plan).
    Progress {
        id: u64,
        done: usize,
        total: usize,
    },
    Planned {
        id: u64,
        display: Box<PlanDisplay>,
    },
    /// The form of a [`PlannerTask::Check`] reads: no field has a problem.
    Checked {
        id: u64,
    },
    /// The form has problems, so a plan did not run: each problem as (field id, sentence),
    /// in the form's order.
    Problems {
        id: u64,
        problems: Vec<(String, String)>,
    },
    Failed(String),
    /// The worker's Rust code panicked; the worker is gone and the next plan starts another.
    Panicked(String),
}

crate::link::protocol! {
    /// The planner's protocol, for the page's [`crate::link::WorkerLink`].
    Planner: PlannerJob => PlannerEvent, "planner_loader.js", "capacity planner",
    ready: PlannerEvent::Ready, failed: PlannerEvent::Failed
}

/// Everything the page shows of a plan, formatted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanDisplay {
    /// Configurations simulated (the sweep's rows), for the status line.
    pub configurations: usize,
    /// `release`, `degrade-to-last-known-good` or `degrade-to-baseline`.
    pub kind: String,
    /// "Release: …." or "Degrade to …".
    pub verdict: String,
    pub reason: String,
    /// The best candidate's failed gates, each with how far it is over (when it degrades).
    pub failed_gates: Vec<String>,
    /// The sweep chart and its table, which stay in the worker (its tests read them); the
    /// page gets their markup, `sweep_html`.
    #[serde(skip)]
    pub chart: SweepChart,
    /// The chart's table mirror: one row per point.
    #[serde(skip)]
    pub sweep_table: Table,
    pub sweep_html: String,
    /// The report's parts after the sweep, in order; the page gets their markup,
    /// `parts_html`.
    #[serde(skip)]
    pub parts: Vec<Part>,
    pub parts_html: String,
    pub markdown: ReportFile,
    pub json: ReportFile,
    /// The released configuration as the JSON of a known-good plan; `None` when it degraded.
    pub released: Option<String>,
}

/// The sweep as a scatter: positions in the chart's viewBox units, labels in words.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepChart {
    pub frame: Frame,
    /// The picture in a sentence: its `aria-label`.
    pub summary: String,
    /// x positions and labels of the decade ticks of p99 TTFT.
    pub x_ticks: Vec<(f64, String)>,
    /// y positions and labels of the ticks of tokens/s.
    pub y_ticks: Vec<(f64, String)>,
    /// x of the TTFT SLO, and its label.
    pub slo_x: f64,
    pub slo_label: String,
    /// Every configuration that ran.
    pub points: Vec<ChartPoint>,
    /// The released configuration at every load, in load order (empty when it degraded).
    pub curve: Vec<(f64, f64)>,
}

/// A download of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportFile {
    pub name: String,
    pub mime: String,
    pub text: String,
}
