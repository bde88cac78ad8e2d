//! The Observe panel's plain data: its URL keys, and what the observation worker's news
//! means for the status line, the result and the worker ([`ObserveRun`]).

use std::sync::Arc;

use crate::observer::protocol::{Input, ObserveDisplay, ObserveJob, ObserverEvent};

/// `obs-demo=1`: the panel opens with the shipped demo observed.
pub const DEMO_KEY: &str = "obs-demo";
/// The baseline version the others are compared with.
pub const BASELINE_KEY: &str = "obs-baseline";

/// The observation out at the worker, and the last one asked for.
#[derive(Default)]
pub struct ObserveRun {
    sent: u64,
    pending: Option<u64>,
    /// What the last job observed, so a new baseline observes it again.
    pub last: Option<Input>,
}

/// What an event changes on the page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct News {
    pub status: String,
    /// The result, once an observation is over.
    pub display: Option<Arc<ObserveDisplay>>,
    /// Why it could not be made.
    pub error: Option<String>,
    /// The worker panicked and is gone; the next job starts another.
    pub discard_worker: bool,
}

impl ObserveRun {
    /// The job that observes `input` against `baseline`; news of any earlier job is dropped.
    pub fn start(&mut self, input: Input, baseline: Option<String>) -> ObserveJob {
        self.sent += 1;
        self.pending = Some(self.sent);
        self.last = Some(input.clone());
        ObserveJob {
            id: self.sent,
            input,
            baseline,
        }
    }

    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// The job could not be sent.
    pub fn could_not_start(&mut self, message: String) -> News {
        self.pending = None;
        News {
            status: "The observation did not run.".into(),
            error: Some(message),
            ..News::default()
        }
    }

    /// What `event` means, or `None` when it is about an earlier job (or says nothing).
    pub fn apply(&mut self, event: ObserverEvent) -> Option<News> {
        let current = |id: u64| self.pending == Some(id);
        match event {
            ObserverEvent::Ready => None,
            ObserverEvent::Progress { id, source, lines } => current(id).then(|| News {
                status: format!("Observing: {lines} lines of {source} read…"),
                ..News::default()
            }),
            ObserverEvent::Observed { id, display } => current(id).then(|| {
                self.pending = None;
                News {
                    status: display.summary.clone(),
                    display: Some(Arc::from(display)),
                    ..News::default()
                }
            }),
            ObserverEvent::Failed { id, message } => {
                if id.is_some_and(|id| !current(id)) || !self.busy() {
                    return None;
                }
                Some(self.could_not_start(message))
            }
            ObserverEvent::Panicked(message) => {
                let was_busy = self.pending.take().is_some();
                Some(News {
                    status: "The observation did not run.".into(),
                    error: was_busy.then(|| format!("The observation worker stopped: {message}")),
                    discard_worker: true,
                    ..News::default()
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn display(summary: &str) -> Box<ObserveDisplay> {
        Box::new(ObserveDisplay {
            summary: summary.into(),
            versions: Vec::new(),
            baseline: None,
            verdicts: Vec::new(),
            decision: String::new(),
            parts_html: String::new(),
        })
    }

    #[test]
    fn news_of_an_earlier_job_is_dropped_and_the_latest_shows() {
        let mut run = ObserveRun::default();
        let first = run.start(Input::Demo, None);
        let second = run.start(Input::Demo, Some("abc".into()));
        assert_eq!(second.baseline.as_deref(), Some("abc"));
        let old = ObserverEvent::Observed {
            id: first.id,
            display: display("old"),
        };
        assert_eq!(run.apply(old), None);
        let progress = ObserverEvent::Progress {
            id: second.id,
            source: "runs.jsonl".into(),
            lines: 2_000,
        };
        assert_eq!(
            run.apply(progress).unwrap().status,
            "Observing: 2000 lines of runs.jsonl read…"
        );
        let news = run
            .apply(ObserverEvent::Observed {
                id: second.id,
                display: display("400 runs"),
            })
            .unwrap();
        assert_eq!(news.status, "400 runs");
        assert!(news.display.is_some() && !run.busy());
        assert_eq!(run.last, Some(Input::Demo));
    }

    #[test]
    fn a_failure_is_shown_once_and_a_panic_discards_the_worker() {
        let mut run = ObserveRun::default();
        let job = run.start(Input::Demo, None);
        let failed = |id| ObserverEvent::Failed {
            id,
            message: "outcomes.jsonl line 3: duplicate".into(),
        };
        assert_eq!(run.apply(failed(Some(job.id + 1))), None);
        let news = run.apply(failed(Some(job.id))).unwrap();
        assert_eq!(
            news.error.as_deref(),
            Some("outcomes.jsonl line 3: duplicate")
        );
        assert_eq!(run.apply(failed(None)), None, "nothing is out any more");
        run.start(Input::Demo, None);
        let news = run.apply(ObserverEvent::Panicked("boom".into())).unwrap();
        assert!(news.discard_worker && !run.busy());
        assert!(news.error.unwrap().contains("boom"));
    }
}
