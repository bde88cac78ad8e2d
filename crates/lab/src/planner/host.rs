//! The planner worker's global scope: it takes a [`PlannerJob`], and on its own thread either
//! checks its form (the page asks as the fields change) and posts whether it reads, or plans
//! it with [`crate::planner::display::plan_display`] and posts a few progress
//! reports ([`progress_due`]), then the display or the problems. One job runs at a time, to
//! its end, in the order sent: the page's Plan button waits for a plan, and a check sent
//! meanwhile is answered after it. A panic is posted as [`PlannerEvent::Panicked`] before
//! the worker dies.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::message::from_js;
use crate::link::scope::{post, report_panics, scope};
use crate::planner::display::plan_display;
use crate::planner::form::CapacityForm;
use crate::planner::protocol::{PlannerEvent, PlannerJob, PlannerTask};
use crate::widgets::form::{Form, Problems};

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
            let event = match job.task {
                PlannerTask::Check => checked(id, &job.form),
                PlannerTask::Plan { known_good } => {
                    let mut progress = |done, total| {
                        if progress_due(done, total) {
                            post(&PlannerEvent::Progress { id, done, total });
                        }
                    };
                    match plan_display(&job.form, known_good.as_deref(), &mut progress) {
                        Ok(display) => PlannerEvent::Planned {
                            id,
                            display: Box::new(display),
                        },
                        Err(found) => problems(id, &found),
                    }
                }
            };
            post(&event);
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&PlannerEvent::Ready);
}

/// The answer to a check of the form `pairs` describe: whether it reads.
fn checked(id: u64, pairs: &[(String, String)]) -> PlannerEvent {
    match CapacityForm::from_job(pairs).and_then(|form| form.check()) {
        Ok(_) => PlannerEvent::Checked { id },
        Err(found) => problems(id, &found),
    }
}

/// `found` as the page reads it: each problem as (field id, sentence).
fn problems(id: u64, found: &Problems) -> PlannerEvent {
    PlannerEvent::Problems {
        id,
        problems: found
            .iter()
            .map(|p| (p.field.to_string(), p.message.clone()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A check answers what the form's own check finds, at the same fields.
    #[test]
    fn a_check_answers_the_forms_problems_or_that_it_reads() {
        let pairs = |form: &CapacityForm| -> Vec<(String, String)> {
            form.to_pairs()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
        };
        let form = CapacityForm::default();
        assert_eq!(checked(4, &pairs(&form)), PlannerEvent::Checked { id: 4 });
        let bad = CapacityForm {
            requests: "abc".into(),
            loads: "1, 0".into(),
            ..form
        };
        let expected: Vec<(String, String)> = bad
            .check()
            .unwrap_err()
            .iter()
            .map(|p| (p.field.to_string(), p.message.clone()))
            .collect();
        assert_eq!(expected.len(), 2);
        assert_eq!(
            checked(5, &pairs(&bad)),
            PlannerEvent::Problems {
                id: 5,
                problems: expected
            }
        );
        // A name the page's selects would not offer is still named at its field.
        let unknown = [("cap_hw".to_string(), "tpu".to_string())];
        let PlannerEvent::Problems { problems, .. } = checked(6, &unknown) else {
            panic!("an unknown preset reads");
        };
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "cap-hw");
    }

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
