//! The planner worker's global scope: it takes a [`PlannerJob`], plans it with
//! [`crate::panels::capacity::display::plan_display`] on its own thread, and posts
//! [`PlannerEvent`]s back: a few progress reports ([`progress_due`]), then the display or the
//! problems. One plan runs at a time, to its end (the page's Plan button waits for it). A
//! panic is posted as [`PlannerEvent::Panicked`] before the worker dies.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::panels::capacity::display::plan_display;
use crate::planner::protocol::{PlannerEvent, PlannerJob};
use crate::worker::protocol::from_js;
use crate::worker::scope::{post, report_panics, scope};

/// At most about this many progress reports per plan: enough for a bar that moves, few
/// enough that a sweep of thousands of configurations does not flood the page.
const PROGRESS_REPORTS: usize = 20;

/// Whether to report progress after `done` of `total` configurations: every
/// `total / PROGRESS_REPORTS`-th (rounded up), and the last.
pub fn progress_due(done: usize, total: usize) -> bool {
    let every = total.div_ceil(PROGRESS_REPORTS).max(1);
    done == total || done.is_multiple_of(every)
}

/// Installs the panic report and the message handler; the worker then waits for jobs.
pub fn start() {
    report_panics(PlannerEvent::Panicked);
    let Some(scope) = scope() else {
        return;
    };
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |message: web_sys::MessageEvent| {
            let job: PlannerJob = match from_js(&message.data()) {
                Ok(job) => job,
                Err(e) => {
                    post(&PlannerEvent::Failed(format!(
                        "The capacity planner could not read a message: {e}."
                    )));
                    return;
                }
            };
            let id = job.id;
            let mut progress = |done, total| {
                if progress_due(done, total) {
                    post(&PlannerEvent::Progress { id, done, total });
                }
            };
            let event = match plan_display(&job.form, job.known_good.as_deref(), &mut progress) {
                Ok(display) => PlannerEvent::Planned {
                    id,
                    display: Box::new(display),
                },
                Err(problems) => PlannerEvent::Problems {
                    id,
                    problems: problems
                        .iter()
                        .map(|p| (p.field.to_string(), p.message.clone()))
                        .collect(),
                },
            };
            post(&event);
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&PlannerEvent::Ready);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counted directly: the reports a plan of `total` configurations makes, and that the
    /// last configuration is always one.
    #[test]
    fn progress_is_reported_a_few_times_and_at_the_end() {
        for total in 1..=2_000 {
            let due: Vec<usize> = (1..=total).filter(|&d| progress_due(d, total)).collect();
            assert_eq!(due.last(), Some(&total), "{total}");
            assert!(due.len() <= PROGRESS_REPORTS + 1, "{total}: {}", due.len());
            assert!(
                due.len() >= PROGRESS_REPORTS.min(total) / 2,
                "{total}: {}",
                due.len()
            );
        }
        let due: Vec<usize> = (1..=120).filter(|&d| progress_due(d, 120)).collect();
        assert_eq!(due, (1..=20).map(|i| 6 * i).collect::<Vec<_>>());
    }
}
