//! The Generate panel's run as a state machine: the page's actions (start a run or a replay,
//! or fail to) and the worker's [`Event`]s move a [`RunState`], and the panel draws what it
//! holds. It knows no signals and reads no clock (the caller hands the time in), so every
//! transition is tested natively.

use policy::generate::StepRecord;
use policy::{Backend, BackendChoice, RunRecord};

use crate::worker::protocol::{Event, GenerateRequest, Job, RunFigures};

/// How often progress is announced to screen readers while tokens stream in.
pub const ANNOUNCE_EVERY_MS: f64 = 2000.0;

/// One generated token as the output shows it: its step and the text it completed (empty
/// while the bytes of a character are still arriving).
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub step: StepRecord,
    pub text: String,
}

/// What the panel is doing.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Phase {
    #[default]
    Idle,
    /// Loading files or starting the backend; the words say which.
    Working(String),
    Generating,
    Done(String),
    Failed(String),
    /// The model worker panicked; the words say what happened.
    Panicked(String),
}

impl Phase {
    /// The panel's `data-state`, which the browser tests wait on.
    pub fn key(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Working(_) => "working",
            Phase::Generating => "generating",
            Phase::Done(_) => "done",
            Phase::Failed(_) | Phase::Panicked(_) => "failed",
        }
    }

    /// A run is in progress: no other may start.
    pub fn busy(&self) -> bool {
        matches!(self, Phase::Working(_) | Phase::Generating)
    }

    /// Only a run that is generating can be cancelled (the worker then finishes it early,
    /// before its next model call).
    pub fn cancellable(&self) -> bool {
        *self == Phase::Generating
    }
}

/// Figures of the last run, for the timings line and the benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    /// `performance.now()` when the first token reached the page: from navigation start.
    pub first_token_ms: Option<f64>,
    /// The worker's figures: loading, starting, time to first token, decode speed, GPU.
    pub run: RunFigures,
}

/// The model file being downloaded: its name, the bytes so far and the announced total.
#[derive(Clone, Debug, PartialEq)]
pub struct Download {
    pub file: String,
    pub got: f64,
    pub total: Option<f64>,
}

/// Everything the panel draws about its runs. The view reads the fields; the methods are
/// what change them.
#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    pub phase: Phase,
    /// How many times a phase was entered, counting a phase entered again with the same
    /// words: the view redraws the phase line each time, so that a second failed start is
    /// announced again, as the first was.
    pub phase_entered: u64,
    /// The backend of the run in progress or last finished; `None` before its first event.
    pub backend: Option<Backend>,
    /// What the browser itself says about its adapter, kept from run to run.
    pub browser_adapter: Option<String>,
    /// The prompt the output continues.
    pub shown_prompt: String,
    pub shown: Vec<Shown>,
    /// The record shown, exported and replayed: the last fresh run's, or the one imported.
    pub record: Option<RunRecord>,
    /// Every record of this visit, one JSON line each, for the JSONL export.
    pub all_runs: Vec<String>,
    /// A finished replay's verdict: identical or not, in words.
    pub verdict: Option<(bool, String)>,
    /// The live region's words: progress while tokens stream in, then the outcome.
    pub announcement: String,
    pub downloading: Option<Download>,
    pub figures: Figures,
    /// Whether the run in progress replays [`RunState::record`].
    replaying: bool,
    /// When progress was last announced, so that it is announced at most every
    /// [`ANNOUNCE_EVERY_MS`].
    announced_ms: f64,
}

impl Default for RunState {
    fn default() -> RunState {
        RunState {
            phase: Phase::Idle,
            phase_entered: 0,
            backend: None,
            browser_adapter: None,
            shown_prompt: String::new(),
            shown: Vec::new(),
            record: None,
            all_runs: Vec::new(),
            verdict: None,
            announcement: String::new(),
            downloading: None,
            figures: Figures::default(),
            replaying: false,
            announced_ms: f64::NEG_INFINITY,
        }
    }
}

impl RunState {
    /// Starts a fresh run of `request`: the job to send, or `None` while a run is in progress.
    pub fn start_run(&mut self, request: GenerateRequest, now_ms: f64) -> Option<Job> {
        if self.phase.busy() {
            return None;
        }
        self.record = None;
        self.start(request.config.prompt.clone(), false, now_ms);
        Some(Job::Generate(Box::new(request)))
    }

    /// Unless a run is in progress, starts regenerating the record whose JSON text is `record`
    /// on `backend` to compare: the job to send, or `None`. The worker reads the record
    /// ([`Event::Replaying`]), which is then shown, and judges the replay ([`Event::Verdict`]).
    pub fn start_replay(
        &mut self,
        record: String,
        backend: BackendChoice,
        now_ms: f64,
    ) -> Option<Job> {
        if self.phase.busy() {
            return None;
        }
        self.start(String::new(), true, now_ms);
        Some(Job::Replay { record, backend })
    }

    /// What every run starts from: nothing shown, no verdict, no figures, and the live region
    /// quiet for [`ANNOUNCE_EVERY_MS`].
    fn start(&mut self, prompt: String, replaying: bool, now_ms: f64) {
        self.backend = None;
        self.shown = Vec::new();
        self.shown_prompt = prompt;
        self.verdict = None;
        self.figures = Figures::default();
        self.downloading = None;
        self.announcement = String::new();
        self.announced_ms = now_ms;
        self.replaying = replaying;
        self.enter(Phase::Working("Starting the model worker…".to_string()));
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.phase_entered += 1;
    }

    /// A run could not start (the form does not read, or the worker took no job): why.
    pub fn could_not_start(&mut self, message: String) {
        self.enter(Phase::Failed(message));
    }

    /// The worker's `event`, arrived at `now_ms` (`performance.now()`).
    pub fn apply(&mut self, event: Event, now_ms: f64) {
        match event {
            // The worker link holds jobs until then; nothing to show.
            Event::Ready => {}
            Event::Working(what) => self.enter(Phase::Working(what)),
            Event::Download { file, got, total } => {
                self.downloading = Some(Download { file, got, total })
            }
            Event::Backend { backend, adapter } => {
                self.backend = Some(backend);
                if adapter.is_some() {
                    self.browser_adapter = adapter;
                }
            }
            Event::Generating => {
                self.downloading = None;
                self.enter(Phase::Generating);
            }
            Event::Step { step, text } => self.step(*step, text, now_ms),
            Event::Finished { record, figures } => self.finish(*record, figures),
            Event::Replaying(record) => {
                self.shown_prompt = record.config.prompt.clone();
                self.record = Some(*record);
            }
            Event::Verdict { identical, words } => {
                let done = format!("{} {words}", self.announcement);
                self.verdict = Some((identical, words));
                self.announcement = done.clone();
                self.enter(Phase::Done(done));
            }
            Event::Failed(message) => {
                self.downloading = None;
                self.announcement = message.clone();
                self.enter(Phase::Failed(message));
            }
            Event::Panicked(message) => {
                self.downloading = None;
                let message = format!(
                    "The model worker hit an internal error and stopped: {message}. The page is unaffected; the next run starts a new worker."
                );
                self.announcement = message.clone();
                self.enter(Phase::Panicked(message));
            }
            // Answers to jobs this panel never sends.
            Event::Logits(_)
            | Event::ExerciseRun(_)
            | Event::ExerciseDone(_)
            | Event::Compared(_)
            | Event::Stepped { .. } => {}
        }
    }

    fn step(&mut self, step: StepRecord, text: String, now_ms: f64) {
        self.figures.first_token_ms.get_or_insert(now_ms);
        let n = step.step + 1;
        match self.shown.last_mut() {
            // The end of a character that arrived with no token of its own.
            Some(last) if last.step.step == step.step => last.text.push_str(&text),
            _ => self.shown.push(Shown { step, text }),
        }
        if now_ms - self.announced_ms >= ANNOUNCE_EVERY_MS {
            self.announced_ms = now_ms;
            self.announcement = format!("{n} tokens generated…");
        }
    }

    fn finish(&mut self, made: RunRecord, figures: RunFigures) {
        self.figures.run = figures;
        self.backend = Some(made.backend.clone());
        let reason = made.stop_reason.describe();
        let n = made.steps.len();
        let tokens = if n == 1 { "token" } else { "tokens" };
        let done = format!("Generated {n} {tokens}; stopped because {reason}.");
        if let Ok(line) = serde_json::to_string(&made) {
            self.all_runs.push(line);
        }
        // A replay keeps the record it reproduces shown; the verdict follows.
        if !self.replaying {
            self.record = Some(made);
        }
        self.announcement = done.clone();
        self.enter(Phase::Done(done));
    }
}

#[cfg(test)]
mod tests {
    use policy::generate::Alternative;
    use policy::{ArtifactId, BackendKind, StopReason};

    use super::*;
    use crate::panels::generate::view_model::GenerateForm;
    use crate::widgets::form::Form;

    fn request() -> GenerateRequest {
        GenerateForm::default().check().unwrap()
    }

    fn step(step: usize, token: u32, text: &str) -> StepRecord {
        StepRecord {
            step,
            token,
            text: text.to_string(),
            prob: 0.5,
            logprob: 0.5f64.ln(),
            top: vec![Alternative {
                id: token,
                text: text.to_string(),
                prob: 0.5,
            }],
            entropy: 1.0,
            survivors: 3,
            draw: Some(0.25),
            model_prob: Some(0.25),
            model_logprob: Some(0.25f64.ln()),
            model_top: Vec::new(),
            mirostat_mu: None,
            model_us: 100.0,
            policy_us: 10.0,
        }
    }

    /// A record of `tokens`, as the worker makes for the default form on the CPU reference.
    fn record(tokens: &[u32], stop_reason: StopReason) -> RunRecord {
        let artifact = |name: &str| ArtifactId {
            name: name.to_string(),
            hash: "0".to_string(),
        };
        let steps: Vec<StepRecord> = tokens
            .iter()
            .enumerate()
            .map(|(i, &t)| step(i, t, &format!("t{t}")))
            .collect();
        RunRecord {
            app_version: "test".to_string(),
            policy_version: "policy-1".to_string(),
            model: artifact("tiny"),
            tokenizer: artifact("bytes"),
            config: request().config,
            rendered_prompt: "Once".to_string(),
            prompt_tokens: vec![1, 2],
            output_text: steps.iter().map(|s| s.text.as_str()).collect(),
            token_latencies_us: vec![110.0; steps.len()],
            steps,
            stop_reason,
            stop_string: None,
            stop_token: None,
            stop_step: None,
            ttft_us: 500.0,
            backend: Backend::cpu_reference(),
            degraded_reason: None,
            record_digest: None,
            precision: None,
            tags: Default::default(),
            run_id: None,
            version_id: None,
        }
    }

    fn figures() -> RunFigures {
        RunFigures {
            load_ms: 40.0,
            start_ms: 5.0,
            ttft_ms: 0.5,
            decode_tok_s: Some(900.0),
            gpu: None,
            readbacks: 0,
            gpu_start: None,
        }
    }

    fn finished(record: &RunRecord) -> Event {
        Event::Finished {
            record: Box::new(record.clone()),
            figures: figures(),
        }
    }

    /// Every step of `record`, one event each, `gap_ms` apart from `from_ms`.
    fn steps(state: &mut RunState, record: &RunRecord, from_ms: f64, gap_ms: f64) {
        for (i, s) in record.steps.iter().enumerate() {
            let event = Event::Step {
                step: Box::new(s.clone()),
                text: s.text.clone(),
            };
            state.apply(event, from_ms + i as f64 * gap_ms);
        }
    }

    /// A state that has run `made` to its end, from a fresh run started at 0 ms.
    fn after_run(made: &RunRecord) -> RunState {
        let mut state = RunState::default();
        state.start_run(request(), 0.0).unwrap();
        let backend = Event::Backend {
            backend: Backend::cpu_reference(),
            adapter: Some("browser's name".into()),
        };
        state.apply(backend, 5.0);
        state.apply(Event::Generating, 10.0);
        steps(&mut state, made, 20.0, 1.0);
        state.apply(finished(made), 100.0);
        state
    }

    #[test]
    fn a_fresh_run_moves_through_its_phases_to_its_record() {
        let mut state = RunState::default();
        assert_eq!(state.phase.key(), "idle");
        let job = state.start_run(request(), 1000.0);
        assert_eq!(job, Some(Job::Generate(Box::new(request()))));
        assert_eq!(
            state.phase,
            Phase::Working("Starting the model worker…".into())
        );
        assert!(state.phase.busy());
        assert_eq!(state.shown_prompt, request().config.prompt);

        state.apply(Event::Ready, 1001.0);
        state.apply(Event::Working("Loading the model…".into()), 1002.0);
        assert_eq!(state.phase, Phase::Working("Loading the model…".into()));
        let download = Event::Download {
            file: "model.safetensors".into(),
            got: 1e6,
            total: Some(4e6),
        };
        state.apply(download, 1003.0);
        assert_eq!(
            state.downloading,
            Some(Download {
                file: "model.safetensors".into(),
                got: 1e6,
                total: Some(4e6)
            })
        );
        let on_gpu = Backend {
            name: BackendKind::WebGpu,
            adapter: Some("wgpu's name".into()),
            ..Backend::cpu_reference()
        };
        let backend = Event::Backend {
            backend: on_gpu.clone(),
            adapter: Some("browser's name".into()),
        };
        state.apply(backend, 1004.0);
        assert_eq!(state.backend, Some(on_gpu));
        assert_eq!(state.browser_adapter.as_deref(), Some("browser's name"));
        state.apply(Event::Generating, 1005.0);
        assert_eq!(
            (state.phase.key(), &state.downloading),
            ("generating", &None)
        );
        assert!(state.phase.cancellable());

        let made = record(&[5, 6, 7], StopReason::MaxTokens);
        steps(&mut state, &made, 1010.0, 5.0);
        let tokens: Vec<u32> = state.shown.iter().map(|s| s.step.token).collect();
        assert_eq!(tokens, [5, 6, 7]);
        assert_eq!(state.shown[2].text, "t7");
        assert_eq!(state.figures.first_token_ms, Some(1010.0));
        assert_eq!(
            state.record, None,
            "the record comes with the end of the run"
        );

        state.apply(finished(&made), 1030.0);
        let done = "Generated 3 tokens; stopped because reached the maximum number of new tokens.";
        assert_eq!(state.phase, Phase::Done(done.into()));
        assert_eq!(state.announcement, done);
        assert!(!state.phase.busy() && !state.phase.cancellable());
        assert_eq!(state.record.as_ref(), Some(&made));
        assert_eq!(state.backend, Some(Backend::cpu_reference()));
        assert_eq!(state.figures.run, figures());
        assert_eq!(state.figures.first_token_ms, Some(1010.0));
        assert_eq!(state.verdict, None);
        assert_eq!(state.all_runs, [serde_json::to_string(&made).unwrap()]);
    }

    #[test]
    fn the_bytes_of_one_character_join_the_token_they_complete() {
        let mut state = RunState::default();
        state.start_run(request(), 0.0);
        let pieces = [(0, ""), (1, "é"), (1, "!"), (2, "a")];
        for (n, (at, text)) in pieces.into_iter().enumerate() {
            let event = Event::Step {
                step: Box::new(step(at, 9, text)),
                text: text.into(),
            };
            state.apply(event, n as f64);
        }
        let shown: Vec<(usize, &str)> = state
            .shown
            .iter()
            .map(|s| (s.step.step, s.text.as_str()))
            .collect();
        assert_eq!(shown, [(0, ""), (1, "é!"), (2, "a")]);
    }

    #[test]
    fn a_new_run_clears_the_last_one_and_keeps_the_browser_adapter() {
        let made = record(&[5, 6], StopReason::Eos);
        let mut state = after_run(&made);
        state.start_run(request(), 200.0).unwrap();
        assert_eq!(state.phase.key(), "working");
        assert_eq!(
            (&state.backend, &state.record, &state.verdict),
            (&None, &None, &None)
        );
        assert!(state.shown.is_empty() && state.announcement.is_empty());
        assert_eq!(state.figures, Figures::default());
        assert_eq!(state.browser_adapter.as_deref(), Some("browser's name"));
        assert_eq!(
            state.all_runs.len(),
            1,
            "the visit's runs stay for the export"
        );
    }

    #[test]
    fn nothing_starts_while_a_run_is_in_progress() {
        let mut state = RunState::default();
        state.start_run(request(), 0.0).unwrap();
        state.apply(Event::Generating, 1.0);
        let before = state.clone();
        assert_eq!(state.start_run(request(), 2.0), None);
        assert_eq!(state, before);
        assert_eq!(
            state.start_replay("{}".to_string(), BackendChoice::Cpu, 3.0),
            None
        );
        assert_eq!(state, before);
    }

    #[test]
    fn a_replay_shows_the_record_the_worker_read_and_takes_its_verdict() {
        let made = record(&[5, 6, 7], StopReason::MaxTokens);
        let mut state = after_run(&made);
        let text = serde_json::to_string(&made).unwrap();
        let job = state.start_replay(text.clone(), BackendChoice::Gpu, 200.0);
        assert_eq!(
            job,
            Some(Job::Replay {
                record: text,
                backend: BackendChoice::Gpu
            })
        );
        let recorded = record(&[5, 4, 7], StopReason::MaxTokens);
        state.apply(Event::Replaying(Box::new(recorded.clone())), 205.0);
        assert_eq!(state.record.as_ref(), Some(&recorded));
        assert_eq!(state.shown_prompt, recorded.config.prompt);
        state.apply(Event::Generating, 210.0);
        steps(&mut state, &made, 220.0, 1.0);
        state.apply(finished(&made), 300.0);
        assert_eq!(
            state.record.as_ref(),
            Some(&recorded),
            "the record replayed stays shown"
        );
        assert_eq!(state.verdict, None);
        let words = "Replay differs first at step 1: token 4 was recorded, 6 replayed.";
        state.apply(
            Event::Verdict {
                identical: false,
                words: words.to_string(),
            },
            301.0,
        );
        assert_eq!(state.verdict, Some((false, words.to_string())));
        let Phase::Done(done) = &state.phase else {
            panic!("{:?}", state.phase)
        };
        assert!(done.starts_with("Generated 3 tokens;"), "{done}");
        assert!(done.ends_with(words), "{done}");
        assert_eq!(state.announcement, *done);
        assert_eq!(state.all_runs.len(), 2);
    }

    #[test]
    fn a_failure_ends_the_run_and_is_announced() {
        let mut state = RunState::default();
        state.start_run(request(), 0.0).unwrap();
        state.apply(
            Event::Download {
                file: "model.safetensors".into(),
                got: 1.0,
                total: None,
            },
            1.0,
        );
        state.apply(Event::Failed("The model files did not load.".into()), 2.0);
        assert_eq!(
            state.phase,
            Phase::Failed("The model files did not load.".into())
        );
        assert_eq!(state.phase.key(), "failed");
        assert_eq!(state.announcement, "The model files did not load.");
        assert_eq!(state.downloading, None);
        assert!(
            state.start_run(request(), 3.0).is_some(),
            "the next run may start"
        );
    }

    #[test]
    fn a_run_that_could_not_start_says_why_without_announcing() {
        let mut state = RunState::default();
        state.could_not_start("Generate waits until every field reads.".into());
        assert_eq!(
            state.phase,
            Phase::Failed("Generate waits until every field reads.".into())
        );
        assert_eq!(state.announcement, "");
        let entered = state.phase_entered;
        state.could_not_start("Generate waits until every field reads.".into());
        assert_eq!(
            state.phase_entered,
            entered + 1,
            "the same words, drawn again"
        );
    }

    #[test]
    fn a_worker_panic_is_reported_as_such_and_the_next_run_may_start() {
        let mut state = RunState::default();
        state.start_run(request(), 0.0).unwrap();
        state.apply(Event::Generating, 1.0);
        state.apply(Event::Panicked("index out of bounds".into()), 2.0);
        let Phase::Panicked(message) = &state.phase else {
            panic!("{:?}", state.phase)
        };
        assert!(
            message.starts_with(
                "The model worker hit an internal error and stopped: index out of bounds."
            ),
            "{message}"
        );
        assert_eq!(state.phase.key(), "failed");
        assert_eq!(state.announcement, *message);
        assert!(!state.phase.busy());
        assert!(state.start_run(request(), 3.0).is_some());
    }

    #[test]
    fn a_cancelled_run_finishes_with_the_tokens_it_made() {
        let mut state = RunState::default();
        assert!(!state.phase.cancellable(), "nothing to cancel before a run");
        state.start_run(request(), 0.0).unwrap();
        assert!(!state.phase.cancellable(), "not while the model loads");
        state.apply(Event::Generating, 1.0);
        assert!(state.phase.cancellable());
        let made = record(&[5, 6], StopReason::Cancelled);
        steps(&mut state, &made, 2.0, 1.0);
        state.apply(finished(&made), 10.0);
        assert_eq!(
            state.phase,
            Phase::Done("Generated 2 tokens; stopped because cancelled.".into())
        );
        assert!(!state.phase.cancellable());
        assert_eq!(state.record, Some(made));
    }

    #[test]
    fn one_token_is_one_token() {
        let made = record(&[5], StopReason::Eos);
        let state = after_run(&made);
        assert_eq!(
            state.announcement,
            "Generated 1 token; stopped because the model chose the end-of-sequence token."
        );
    }

    #[test]
    fn progress_is_announced_at_most_every_two_seconds() {
        let mut state = RunState::default();
        state.start_run(request(), 0.0).unwrap();
        state.apply(Event::Generating, 10.0);
        let mut heard = Vec::new();
        // A token every 300 ms, from 300 ms after the start.
        for n in 0..16 {
            let event = Event::Step {
                step: Box::new(step(n, 1, "a")),
                text: "a".into(),
            };
            let at = 300.0 * (n + 1) as f64;
            state.apply(event, at);
            if !state.announcement.is_empty()
                && heard.last().map(|(_, a)| a) != Some(&state.announcement)
            {
                heard.push((at, state.announcement.clone()));
            }
        }
        // The first waits two seconds from the start; each next two seconds from the last.
        let expected = [
            (2100.0, "7 tokens generated…"),
            (4200.0, "14 tokens generated…"),
        ];
        assert_eq!(heard, expected.map(|(at, a)| (at, a.to_string())));
    }
}
