//! The Capacity panel's side of the planner worker: [`PlanRun`] holds the jobs out at the
//! worker (a check of each new form, then a plan) and says what the worker's news means for
//! the status line, the result and the fields' problems ([`shown_problems`]). The form and
//! its URL keys are [`crate::planner::form`].

use std::sync::Arc;

use crate::planner::form::{field_named, CapacityForm};
use crate::planner::protocol::{PlanDisplay, PlannerEvent, PlannerJob, PlannerTask};
use crate::widgets::form::{Form, Problems};

/// What the last press of Plan gave, with the form it planned: the plan's own problems
/// hold only while the form is that one.
pub type Outcome = (CapacityForm, Result<Arc<PlanDisplay>, Problems>);

/// The planner worker's jobs from this panel: the check of each new form, then what the
/// worker's answers mean for the fields' problems; and the Plan button's state: the plan out,
/// what its news means for the status line and the result, and the configuration a later
/// plan may degrade to. The worker runs jobs one at a time in the order sent, so a check sent
/// while a plan runs is answered after the plan, and an answer about an older form than the
/// last one sent is stale.
#[derive(Debug, Default)]
pub struct PlanRun {
    /// Jobs sent so far (checks and plans); the next one's id is one more.
    sent: u64,
    /// The plan out: its id, its form, and the page's clock when Plan was pressed.
    pending: Option<(u64, CapacityForm, f64)>,
    /// The last check sent: its id and form (kept once answered, so a form is checked once).
    checking: Option<(u64, CapacityForm)>,
    /// The last check answered: its form and that form's problems (none: it reads).
    checked: Option<(CapacityForm, Problems)>,
    /// The last configuration this session released, as the worker wrote it (the JSON of a
    /// known-good plan).
    last_released: Option<String>,
}

/// What a piece of the worker's news changes on the page.
#[derive(Clone, Debug, PartialEq)]
pub struct News {
    /// The status line's new text; `None` leaves it as it is (a check's answer).
    pub status: Option<String>,
    /// The plan's result, once it is over.
    pub outcome: Option<Outcome>,
    /// The fields' problems, as the latest check found them (none: the form reads).
    pub checked: Option<Problems>,
    /// The worker panicked and is gone: drop it, and the next job starts another.
    pub discard_worker: bool,
}

impl News {
    fn status(status: String) -> News {
        News {
            status: Some(status),
            outcome: None,
            checked: None,
            discard_worker: false,
        }
    }
}

impl PlanRun {
    /// Whether a plan is out (the Plan button waits).
    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    fn next_id(&mut self) -> u64 {
        self.sent += 1;
        self.sent
    }

    /// The job that checks `form`, the fields as they now are; `None` when the last check
    /// sent was of this form already.
    pub fn check(&mut self, form: CapacityForm) -> Option<PlannerJob> {
        if self.checking.as_ref().is_some_and(|(_, f)| *f == form) {
            return None;
        }
        let id = self.next_id();
        let job = PlannerJob {
            id,
            form: job_pairs(&form),
            task: PlannerTask::Check,
        };
        self.checking = Some((id, form));
        Some(job)
    }

    /// Whether Plan is refused for `form`: the worker has checked this very form and found
    /// problems. A form whose check is still out is planned, and the plan checks it again.
    pub fn refuses(&self, form: &CapacityForm) -> bool {
        self.checked
            .as_ref()
            .is_some_and(|(f, problems)| f == form && !problems.is_empty())
    }

    /// The job for a press of Plan at `now_ms` on `form`, degrading to this session's last
    /// released configuration when `use_known_good`; `None` while one is out.
    pub fn start(
        &mut self,
        form: CapacityForm,
        use_known_good: bool,
        now_ms: f64,
    ) -> Option<PlannerJob> {
        if self.busy() {
            return None;
        }
        let id = self.next_id();
        let job = PlannerJob {
            id,
            form: job_pairs(&form),
            task: PlannerTask::Plan {
                known_good: use_known_good.then(|| self.last_released.clone()).flatten(),
            },
        };
        self.pending = Some((id, form, now_ms));
        Some(job)
    }

    /// A job could not be sent: nothing is out (a check is sent again with the next form),
    /// and the status says why.
    pub fn could_not_send(&mut self, message: String) -> News {
        self.drop_jobs();
        News::status(message)
    }

    /// Forgets the jobs out, whose answers will not come.
    fn drop_jobs(&mut self) {
        self.pending = None;
        self.checking = None;
    }

    /// What `event`, arriving at `now_ms`, changes; `None` for news of an older job.
    pub fn apply(&mut self, event: PlannerEvent, now_ms: f64) -> Option<News> {
        let planning = |id: u64| self.pending.as_ref().is_some_and(|p| p.0 == id);
        let checking = |id: u64| self.checking.as_ref().is_some_and(|c| c.0 == id);
        match event {
            PlannerEvent::Progress { id, done, total } if planning(id) => Some(News::status(
                format!("Planning… {done} of {total} configurations simulated."),
            )),
            PlannerEvent::Planned { id, display } if planning(id) => {
                let (_, planned, started) = self.pending.take()?;
                if let Some(released) = &display.released {
                    self.last_released = Some(released.clone());
                }
                // The page's own time: the worker's round trip is part of the wait.
                let status = format!(
                    "Planned {} configurations in {:.0} ms. {}",
                    display.configurations,
                    now_ms - started,
                    display.verdict
                );
                Some(News {
                    outcome: Some((planned, Ok(Arc::new(*display)))),
                    ..News::status(status)
                })
            }
            PlannerEvent::Problems { id, problems } if planning(id) => {
                let (_, planned, _) = self.pending.take()?;
                Some(News {
                    outcome: Some((planned, Err(problems_named(problems)))),
                    ..News::status("The plan did not run; the reason is listed above.".into())
                })
            }
            PlannerEvent::Checked { id } if checking(id) => Some(self.answer(Problems::default())),
            PlannerEvent::Problems { id, problems } if checking(id) => {
                Some(self.answer(problems_named(problems)))
            }
            PlannerEvent::Failed(message) => Some(self.could_not_send(message)),
            PlannerEvent::Panicked(message) => {
                self.drop_jobs();
                Some(News {
                    discard_worker: true,
                    ..News::status(format!(
                        "The capacity planner hit an internal error and stopped: {message}. Press Plan to start a new one."
                    ))
                })
            }
            // Ready is the link's, and news of an older job is stale.
            _ => None,
        }
    }

    /// The answer to the last check sent: its form's problems.
    fn answer(&mut self, problems: Problems) -> News {
        if let Some((_, form)) = &self.checking {
            self.checked = Some((form.clone(), problems.clone()));
        }
        News {
            status: None,
            outcome: None,
            checked: Some(problems),
            discard_worker: false,
        }
    }
}

/// The problems a panel shows: the URL's (while the learner has not changed their fields),
/// then the latest check's (kept while the next one is out, so a field's mark does not
/// flicker as it is typed), then, when the check found none, those of the last plan if it
/// was of `form`. A plan checks its form first, so the problems of a plan whose form has
/// problems are the check's own, and are listed once.
pub fn shown_problems(
    url: Problems,
    checked: &Problems,
    outcome: Option<&Outcome>,
    form: &CapacityForm,
) -> Problems {
    let mut all = url;
    all.extend(checked.clone());
    if let (true, Some((planned, Err(found)))) = (checked.is_empty(), outcome) {
        if planned == form {
            all.extend(found.clone());
        }
    }
    all
}

/// The pairs a job carries: the form as the URL writes it.
fn job_pairs(form: &CapacityForm) -> Vec<(String, String)> {
    form.to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The problems the worker sent back, each at the field it names.
fn problems_named(problems: Vec<(String, String)>) -> Problems {
    let mut found = Problems::default();
    for (field, message) in problems {
        found.add(field_named(&field), message);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::form::tests::small;
    use crate::planner::form::PLAN_ID;
    use crate::planner::protocol::{ReportFile, SweepChart};
    use report::Table;

    /// A display with only what the status line and the known-good path read.
    fn shown(configurations: usize, verdict: &str, released: Option<&str>) -> PlanDisplay {
        let table = Table {
            class: "mirror".into(),
            id: None,
            caption: String::new(),
            headers: Vec::new(),
            rows: Vec::new(),
        };
        let file = ReportFile {
            name: "plan.md".into(),
            mime: "text/markdown".into(),
            text: String::new(),
        };
        PlanDisplay {
            configurations,
            kind: "release".into(),
            verdict: verdict.into(),
            reason: String::new(),
            failed_gates: Vec::new(),
            chart: SweepChart::default(),
            sweep_table: table,
            sweep_html: String::new(),
            parts: Vec::new(),
            parts_html: String::new(),
            markdown: file.clone(),
            json: file,
            released: released.map(str::to_string),
        }
    }

    /// The known-good configuration a plan's job carries.
    fn known_good(job: &PlannerJob) -> Option<&str> {
        match &job.task {
            PlannerTask::Plan { known_good } => known_good.as_deref(),
            PlannerTask::Check => panic!("a check: {job:?}"),
        }
    }

    #[test]
    fn a_plan_run_sends_the_form_shows_progress_and_times_the_round_trip() {
        let mut run = PlanRun::default();
        let job = run.start(small(), true, 1000.0).unwrap();
        assert_eq!(job.id, 1);
        assert_eq!(
            job.form,
            small()
                .to_pairs()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Vec<_>>()
        );
        assert_eq!(known_good(&job), None, "nothing released yet");
        assert!(run.busy() && run.start(small(), false, 1001.0).is_none());

        let progress = PlannerEvent::Progress {
            id: 1,
            done: 6,
            total: 120,
        };
        let news = run.apply(progress, 1100.0).unwrap();
        assert_eq!(
            news.status.as_deref(),
            Some("Planning… 6 of 120 configurations simulated.")
        );
        assert_eq!(news.outcome, None);
        let stale = PlannerEvent::Progress {
            id: 0,
            done: 1,
            total: 2,
        };
        assert_eq!(run.apply(stale, 1100.0), None);

        let display = shown(120, "Release: the fastest.", Some("{\"name\":\"x\"}"));
        let planned = PlannerEvent::Planned {
            id: 1,
            display: Box::new(display.clone()),
        };
        let news = run.apply(planned, 1250.4).unwrap();
        assert_eq!(
            news.status.as_deref(),
            Some("Planned 120 configurations in 250 ms. Release: the fastest.")
        );
        assert_eq!(news.outcome, Some((small(), Ok(Arc::new(display)))));
        assert!(!run.busy() && !news.discard_worker);

        // The next plan may degrade to what this one released; a degraded plan keeps it.
        let job = run.start(CapacityForm::default(), true, 2000.0).unwrap();
        assert_eq!(job.id, 2);
        assert_eq!(known_good(&job), Some("{\"name\":\"x\"}"));
        let degraded = PlannerEvent::Planned {
            id: 2,
            display: Box::new(shown(120, "Degrade to …", None)),
        };
        run.apply(degraded, 2100.0).unwrap();
        let job = run.start(CapacityForm::default(), false, 3000.0).unwrap();
        assert_eq!(known_good(&job), None, "unless the box is ticked");
        run.apply(PlannerEvent::Failed("x".into()), 3001.0);
        let job = run.start(CapacityForm::default(), true, 3002.0).unwrap();
        assert_eq!(known_good(&job), Some("{\"name\":\"x\"}"));
    }

    #[test]
    fn a_plan_runs_problems_land_at_their_fields_and_a_panic_drops_the_worker() {
        let mut run = PlanRun::default();
        run.start(small(), false, 0.0).unwrap();
        let problems = PlannerEvent::Problems {
            id: 1,
            problems: vec![
                ("cap-rate".into(), "Too fast.".into()),
                ("somewhere".into(), "Odd.".into()),
            ],
        };
        let news = run.apply(problems, 5.0).unwrap();
        let mut expected = Problems::one("cap-rate", "Too fast.");
        expected.add(PLAN_ID, "Odd.");
        assert_eq!(news.outcome, Some((small(), Err(expected))));
        assert!(!run.busy());

        run.start(small(), false, 10.0).unwrap();
        let news = run
            .apply(PlannerEvent::Panicked("index out of bounds".into()), 11.0)
            .unwrap();
        assert!(news.discard_worker && !run.busy());
        let status = news.status.unwrap_or_default();
        assert!(status.contains("index out of bounds"), "{status}");

        run.start(small(), false, 20.0).unwrap();
        let news = run.could_not_send("No worker.".into());
        assert_eq!(news.status.as_deref(), Some("No worker."));
        assert!(!run.busy());
        assert_eq!(run.apply(PlannerEvent::Ready, 21.0), None);
    }

    /// The (field, message) pairs the worker sends for `problems`.
    fn sent(problems: &[(&str, &str)]) -> Vec<(String, String)> {
        problems
            .iter()
            .map(|(f, m)| (f.to_string(), m.to_string()))
            .collect()
    }

    #[test]
    fn each_new_form_is_checked_once_and_a_stale_answer_is_dropped() {
        let mut run = PlanRun::default();
        let first = run.check(small()).unwrap();
        assert_eq!((first.id, &first.task), (1, &PlannerTask::Check));
        assert_eq!(first.form, job_pairs(&small()));
        assert_eq!(run.check(small()), None, "the same form is not asked again");

        let typed = CapacityForm {
            requests: "abc".into(),
            ..small()
        };
        let second = run.check(typed.clone()).unwrap();
        assert_eq!(second.id, 2);
        // The answer about the first form comes after the second was sent: it is stale.
        assert_eq!(run.apply(PlannerEvent::Checked { id: 1 }, 0.0), None);
        let stale = PlannerEvent::Problems {
            id: 1,
            problems: sent(&[("cap-n", "Old.")]),
        };
        assert_eq!(run.apply(stale, 0.0), None);
        assert!(!run.refuses(&small()) && !run.refuses(&typed));

        let answer = PlannerEvent::Problems {
            id: 2,
            problems: sent(&[("cap-n", "Requests are \"abc\"."), ("elsewhere", "Odd.")]),
        };
        let news = run.apply(answer, 0.0).unwrap();
        let mut expected = Problems::one("cap-n", "Requests are \"abc\".");
        expected.add(PLAN_ID, "Odd.");
        assert_eq!(news.checked, Some(expected));
        assert_eq!(
            (news.status, news.outcome),
            (None, None),
            "a check leaves the status"
        );
        assert!(!news.discard_worker && !run.busy());
    }

    #[test]
    fn a_checks_problems_refuse_plan_for_that_form_until_a_check_clears() {
        let mut run = PlanRun::default();
        let bad = CapacityForm {
            rate: "fast".into(),
            ..small()
        };
        let job = run.check(bad.clone()).unwrap();
        assert!(!run.refuses(&bad), "not while its check is out");
        let answer = PlannerEvent::Problems {
            id: job.id,
            problems: sent(&[("cap-rate", "Fast is not a number.")]),
        };
        run.apply(answer, 0.0).unwrap();
        assert!(run.refuses(&bad));
        assert!(!run.refuses(&small()), "only the form that was checked");

        let job = run.check(small()).unwrap();
        assert!(
            run.refuses(&bad),
            "the last answer holds until the next one comes"
        );
        let news = run
            .apply(PlannerEvent::Checked { id: job.id }, 0.0)
            .unwrap();
        assert_eq!(news.checked, Some(Problems::default()));
        assert!(!run.refuses(&small()) && !run.refuses(&bad));
        assert!(run.start(small(), false, 0.0).is_some());
    }

    /// The worker answers in the order sent: a check sent while a plan runs is answered after
    /// it, and each answer goes to its own job.
    #[test]
    fn a_check_sent_while_a_plan_runs_is_answered_after_it() {
        let mut run = PlanRun::default();
        run.check(small()).unwrap();
        run.apply(PlannerEvent::Checked { id: 1 }, 0.0).unwrap();
        let plan = run.start(small(), false, 10.0).unwrap();
        assert_eq!(plan.id, 2);
        assert_eq!(plan.task, PlannerTask::Plan { known_good: None });
        let typed = CapacityForm {
            loads: "1, 0".into(),
            ..small()
        };
        let check = run.check(typed.clone()).unwrap();
        assert_eq!(check.id, 3);

        let progress = PlannerEvent::Progress {
            id: 2,
            done: 6,
            total: 120,
        };
        assert!(run.apply(progress, 20.0).unwrap().status.is_some());
        let planned = PlannerEvent::Planned {
            id: 2,
            display: Box::new(shown(120, "Release: x.", None)),
        };
        let news = run.apply(planned, 30.0).unwrap();
        assert_eq!(news.checked, None);
        assert!(matches!(news.outcome, Some((ref f, Ok(_))) if *f == small()));
        assert!(!run.busy());

        let answer = PlannerEvent::Problems {
            id: 3,
            problems: sent(&[("cap-loads", "Zero.")]),
        };
        let news = run.apply(answer, 40.0).unwrap();
        assert_eq!(news.checked, Some(Problems::one("cap-loads", "Zero.")));
        assert_eq!(news.outcome, None, "the plan's result stays");
        assert!(run.refuses(&typed));

        // A plan's problems are the plan's, even with a check out.
        let mut run = PlanRun::default();
        run.start(small(), false, 0.0).unwrap();
        run.check(typed).unwrap();
        let problems = PlannerEvent::Problems {
            id: 1,
            problems: sent(&[(PLAN_ID, "The known-good plan does not read.")]),
        };
        let news = run.apply(problems, 1.0).unwrap();
        assert_eq!(news.checked, None);
        let expected = Problems::one(PLAN_ID, "The known-good plan does not read.");
        assert_eq!(news.outcome, Some((small(), Err(expected))));
    }

    #[test]
    fn a_lost_worker_forgets_its_jobs_so_the_form_is_checked_again() {
        let mut run = PlanRun::default();
        run.check(small()).unwrap();
        run.start(small(), false, 0.0).unwrap();
        let news = run
            .apply(PlannerEvent::Panicked("boom".into()), 1.0)
            .unwrap();
        assert!(news.discard_worker && !run.busy());
        assert_eq!(run.apply(PlannerEvent::Checked { id: 1 }, 2.0), None);
        assert_eq!(run.check(small()).map(|j| j.id), Some(3));

        let news = run.could_not_send("No worker.".into());
        assert_eq!(news.status.as_deref(), Some("No worker."));
        assert_eq!(run.check(small()).map(|j| j.id), Some(4));
    }

    #[test]
    fn the_url_then_the_check_then_a_plans_own_problems_are_shown_once() {
        let url = Problems::one("cap-hw", "No such hardware.");
        let check = Problems::one("cap-n", "Too many.");
        let plan = Problems::one(PLAN_ID, "Not known good.");
        let planned: Outcome = (small(), Err(plan.clone()));
        let released: Outcome = (small(), Ok(Arc::new(shown(1, "Release.", None))));

        let mut both = url.clone();
        both.extend(check.clone());
        assert_eq!(
            shown_problems(url.clone(), &check, Some(&planned), &small()),
            both,
            "a plan whose form has problems found the check's own"
        );
        let mut url_and_plan = url.clone();
        url_and_plan.extend(plan.clone());
        let none = Problems::default();
        assert_eq!(
            shown_problems(url.clone(), &none, Some(&planned), &small()),
            url_and_plan
        );
        let other = CapacityForm::default();
        assert_eq!(
            shown_problems(url.clone(), &none, Some(&planned), &other),
            url
        );
        assert_eq!(
            shown_problems(url.clone(), &none, Some(&released), &small()),
            url
        );
        assert_eq!(
            shown_problems(Problems::default(), &check, None, &small()),
            check
        );
    }
}
