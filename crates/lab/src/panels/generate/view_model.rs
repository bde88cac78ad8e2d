//! The Generate panel's data: the form (and the URL) in, a checked [`GenerateRequest`] out
//! for the worker; the backend and tokens in words.
//! The run itself happens in the model worker ([`crate::worker::generation`]).

use policy::{Backend, BackendChoice, BackendKind, Precision, RunConfig, SeedSource, StopConfig};

use crate::importer::protocol::ImportedPolicy;
use crate::widgets::form::{Form, Problems};
use crate::widgets::knobs::{
    escape, knob_defaults, knob_from_url, knob_ids, knob_keys, knob_pairs, read_knobs, unescape,
    KnobTexts,
};
use crate::widgets::number::{whole, whole_in, FieldError};
use crate::worker::protocol::GenerateRequest;

/// The Generate form, as the learner typed it (or as the URL gave it).
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateForm {
    pub prompt: String,
    pub max_tokens: String,
    /// Every knob of the policy ([`policy::KNOBS`]), as typed.
    pub policy: KnobTexts,
    /// Stop strings, one per line, `\n` for a line break.
    pub stop: String,
    /// Stop token ids, comma-separated.
    pub stop_tokens: String,
    pub seed: String,
    pub precision: Precision,
    pub backend: BackendChoice,
    /// Faults to inject (`gpu::Faults::parse` names, and `panic`); empty for none. Only the
    /// URL sets it.
    pub fault: String,
}

impl Default for GenerateForm {
    fn default() -> GenerateForm {
        GenerateForm {
            prompt: "The model".into(),
            max_tokens: "32".into(),
            policy: defaults(),
            stop: String::new(),
            stop_tokens: String::new(),
            seed: "7".into(),
            precision: Precision::F32,
            backend: BackendChoice::Auto,
            fault: String::new(),
        }
    }
}

/// The knobs the panel shows before "More controls", in order.
pub const SHOWN: [&str; 5] = [
    "temperature",
    "top-k",
    "top-p",
    "min-p",
    "repetition-penalty",
];

/// Each knob's field id: `gen-top-k`.
pub fn ids() -> &'static [&'static str; policy::KNOB_COUNT] {
    knob_ids("gen")
}

/// The policy the panel starts from: the table's, but top-k 40.
pub fn defaults() -> KnobTexts {
    knob_defaults(&[("top-k", "40")])
}

/// The knobs the URL always holds, so that a link states the run's sampling.
const ALWAYS: [&str; 3] = ["temperature", "top_k", "top_p"];

impl Form for GenerateForm {
    type Checked = GenerateRequest;

    /// The form a URL's query asks for: `backend=gpu|cpu`, `fault=…`, `prompt`, `max`,
    /// every policy knob by its key (`temperature`, `top_k`, `dry_multiplier`, ...),
    /// `stop`, `stop_tokens`, `seed`, `precision=f32|int8` (and `run=1`, which the panel
    /// reads to start a run as soon as the page loads). Missing keys keep the defaults.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (GenerateForm, Problems) {
        let mut form = GenerateForm::default();
        let mut problems = Problems::default();
        for (key, value) in pairs {
            match key {
                "prompt" => form.prompt = value.to_string(),
                "max" | "max_tokens" => form.max_tokens = value.to_string(),
                "stop" => form.stop = value.to_string(),
                "stop_tokens" => form.stop_tokens = value.to_string(),
                "seed" => form.seed = value.to_string(),
                "precision" => match value.trim().parse() {
                    Ok(p) => form.precision = p,
                    Err(_) => problems.add("gen-precision", format!(
                        "The URL asks for precision \"{value}\", which is not one of f32 or int8; using f32."
                    )),
                },
                "backend" => match value.trim().parse() {
                    Ok(b) => form.backend = b,
                    Err(_) => problems.add("gen-backend", format!(
                        "The URL asks for backend \"{value}\", which is not one of auto, gpu or cpu; using auto."
                    )),
                },
                "fault" => form.fault = value.to_string(),
                key => {
                    knob_from_url(&mut form.policy, knob_keys(""), key, value);
                }
            }
        }
        (form, problems)
    }

    /// The query that reproduces this form (the inverse of [`from_pairs`](Form::from_pairs)).
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("backend", self.backend.to_string()),
            ("precision", self.precision.to_string()),
            ("prompt", self.prompt.clone()),
            ("max", self.max_tokens.trim().to_string()),
            ("seed", self.seed.trim().to_string()),
        ];
        let defaults = defaults();
        for key in ALWAYS {
            if let Some(i) = policy::KNOBS.iter().position(|k| k.key == key) {
                pairs.push((key, self.policy[i].trim().to_string()));
            }
        }
        pairs.extend(
            knob_pairs(&self.policy, &defaults, knob_keys(""))
                .into_iter()
                .filter(|(key, _)| !ALWAYS.contains(key)),
        );
        if !self.stop_tokens.trim().is_empty() {
            pairs.push(("stop_tokens", self.stop_tokens.trim().to_string()));
        }
        if !self.stop.is_empty() {
            pairs.push(("stop", self.stop.clone()));
        }
        if !self.fault.trim().is_empty() {
            pairs.push(("fault", self.fault.trim().to_string()));
        }
        pairs
    }

    /// Reads every field, so that every bad one is named at once.
    fn check(&self) -> Result<GenerateRequest, Problems> {
        let mut problems = Problems::default();
        problems.prompt("gen-prompt", &self.prompt);
        let max_tokens = problems.field(
            "gen-max",
            whole_in(&self.max_tokens, "Max new tokens", 1, u64::MAX),
        );
        let read = read_knobs(&self.policy, ids(), &mut problems, &|e| e);
        let seed = problems.field("gen-seed", whole(&self.seed, "Seed"));
        let stop_tokens = problems.field("gen-stop-tokens", stop_tokens(&self.stop_tokens));
        let (panics, gpu_faults): (Vec<&str>, Vec<&str>) = self
            .fault
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .partition(|f| *f == "panic");
        problems.or(|| {
            let (policy, dry_breakers) = read?;
            Some(GenerateRequest {
                config: RunConfig {
                    app_version: env!("CARGO_PKG_VERSION").into(),
                    prompt_template: "{prompt}".into(),
                    prompt: self.prompt.clone(),
                    policy,
                    seed: seed?,
                    seed_source: SeedSource::User,
                    max_tokens: max_tokens? as usize,
                    stop: StopConfig {
                        strings: self
                            .stop
                            .lines()
                            .filter(|line| !line.is_empty())
                            .map(unescape)
                            .collect(),
                        tokens: stop_tokens?,
                    },
                },
                precision: self.precision,
                backend: self.backend,
                dry_breakers,
                faults: gpu_faults.join(","),
                inject_panic: !panics.is_empty(),
            })
        })
    }
}

impl GenerateForm {
    /// Takes an imported policy ([`crate::importer`]):
    /// its knobs replace every knob of the form (the policy is the imported one, each knob
    /// it is silent on at the engine's default), and the seed, length, stop strings and stop
    /// tokens it gives replace the form's; those it is silent on stay as typed.
    pub fn take_import(&mut self, imported: &ImportedPolicy) {
        for ((knob, text), new) in policy::KNOBS
            .iter()
            .zip(self.policy.iter_mut())
            .zip(&imported.knobs)
        {
            *text = match knob.kind {
                policy::KnobKind::Texts => lines(&imported.breakers),
                _ => new.clone(),
            };
        }
        if let Some(max) = imported.max_tokens {
            self.max_tokens = max.to_string();
        }
        if let Some(seed) = imported.seed {
            self.seed = seed.to_string();
        }
        if !imported.stop.is_empty() {
            self.stop = lines(&imported.stop);
        }
        if !imported.stop_tokens.is_empty() {
            self.stop_tokens = imported
                .stop_tokens
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
        }
    }
}

/// Texts as a field's lines, one each, escaped.
fn lines(texts: &[String]) -> String {
    texts
        .iter()
        .map(|t| escape(t))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Stop token ids, `5, 17`; whether they exist is checked against the vocabulary when the
/// run starts.
fn stop_tokens(text: &str) -> Result<Vec<u32>, FieldError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>().map_err(|_| FieldError::TokenId {
                label: "Stop token".to_string(),
                text: s.to_string(),
            })
        })
        .collect()
}

/// The backend in words, for the status line. `browser_adapter` is what the browser itself
/// says about its adapter, which names it better than wgpu does on the web.
pub fn backend_status(backend: &Backend, browser_adapter: Option<&str>) -> String {
    if let (Some(auto), None) = (&backend.auto, &backend.degraded_reason) {
        let on = match backend.name {
            BackendKind::WebGpu => "WebGPU",
            BackendKind::CpuReference => "the CPU reference",
        };
        // "auto chose X: why" -> "Running on X (auto): why."
        let why = auto.split_once(": ").map_or(auto.as_str(), |(_, why)| why);
        return format!("Running on {on} (auto): {why}.");
    }
    if backend.name == BackendKind::WebGpu {
        let adapter = browser_adapter
            .or(backend.adapter.as_deref())
            .unwrap_or("unnamed");
        match backend.segments.iter().find(|s| s.backend == BackendKind::WebGpu) {
            Some(gpu) if gpu.first_step > 0 => format!(
                "Running on WebGPU (adapter: {adapter}) from step {}; the steps before ran on the CPU reference while the GPU's canary ran.",
                gpu.first_step
            ),
            _ => format!("Running on WebGPU (adapter: {adapter})."),
        }
    } else if let Some(reason) = &backend.degraded_reason {
        let from = match backend.degraded_at_step {
            Some(step) if step > 0 => format!(" from model call {step} on"),
            _ => String::new(),
        };
        format!(
            "WebGPU unavailable — fell back to cpu-reference{from}: {}.",
            reason.trim_end().trim_end_matches('.')
        )
    } else if !backend.segments.is_empty() {
        "Running on the CPU reference while WebGPU checks its canary; the run moves to the GPU when it passes.".to_string()
    } else {
        "Running on the CPU reference (cpu-reference).".to_string()
    }
}
/// A token's text for a table cell: whitespace and control characters made visible.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            ' ' => "␣".to_string(),
            '\n' => "\\n".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::form::the_only_problem;
    use policy::PolicyRequest;

    /// Sets the knob `flag` of a form's policy.
    fn knob(form: &mut GenerateForm, flag: &str, text: &str) {
        form.policy[crate::widgets::knobs::at(flag).unwrap()] = text.into();
    }

    #[test]
    fn the_default_form_checks() {
        let request = GenerateForm::default().check().unwrap();
        assert_eq!(request.config.prompt, "The model");
        assert_eq!(request.config.max_tokens, 32);
        assert_eq!(request.config.policy.temperature, 0.7);
        assert_eq!(request.config.policy.top_k, 40);
        assert_eq!(request.config.seed, 7);
        assert_eq!(request.backend, BackendChoice::Auto);
        assert_eq!(request.faults, "");
        assert!(!request.inject_panic);
    }

    #[test]
    fn bad_input_becomes_a_sentence_at_its_field() {
        let problem = |f: fn(&mut GenerateForm), field| the_only_problem(f, field);
        assert_eq!(
            problem(|f| f.prompt = "  ".into(), "gen-prompt"),
            "Type a prompt: the model needs at least one token to start from."
        );
        assert_eq!(
            problem(|f| f.max_tokens = "many".into(), "gen-max"),
            "Max new tokens must be a whole number of at least 1, but it is \"many\"."
        );
        assert_eq!(
            problem(|f| f.max_tokens = "0".into(), "gen-max"),
            "Max new tokens must be a whole number of at least 1, but it is \"0\"."
        );
        assert_eq!(
            problem(|f| knob(f, "temperature", "-1"), "gen-temperature"),
            "Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy)."
        );
        assert_eq!(
            problem(|f| knob(f, "top-p", "1.5"), "gen-top-p"),
            "Top-p 1.5 is invalid: it must be greater than 0 and at most 1."
        );
        assert_eq!(
            problem(|f| f.seed = "x".into(), "gen-seed"),
            "Seed must be a whole number of at least 0, but it is \"x\"."
        );
        assert_eq!(
            problem(|f| f.stop_tokens = "5, five".into(), "gen-stop-tokens"),
            "Stop token \"five\" is not a token id (a whole number)."
        );
        assert_eq!(
            problem(
                |f| knob(f, "repetition-penalty", "strong"),
                "gen-repetition-penalty"
            ),
            "Repetition penalty must be a number, but it is \"strong\"."
        );
        // Fault names are the GPU runtime's: the worker reads them (see worker::generation).
        let request = GenerateForm {
            fault: "panic, gremlins".into(),
            ..GenerateForm::default()
        }
        .check()
        .unwrap();
        assert_eq!(request.faults, "gremlins");
        assert!(request.inject_panic);
    }

    #[test]
    fn every_bad_field_is_named() {
        let (form, url) = GenerateForm::from_pairs([
            ("temperature", "hot"),
            ("top_k", "-1"),
            ("max", "0"),
            ("backend", "tpu"),
        ]);
        let problems = form.check().unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["gen-max", "gen-temperature", "gen-top-k"]);
        assert_eq!(
            url.iter().map(|p| p.field).collect::<Vec<_>>(),
            ["gen-backend"]
        );
    }

    #[test]
    fn the_url_round_trips() {
        let form = GenerateForm {
            prompt: "Once upon".into(),
            max_tokens: "16".into(),
            backend: BackendChoice::Cpu,
            precision: Precision::Int8,
            fault: "device-lost@3".into(),
            stop: "\n\nThe end".into(),
            stop_tokens: "3".into(),
            ..GenerateForm::default()
        };
        let mut form = form;
        for (flag, text) in [
            ("temperature", "0"),
            ("min-p", "0.1"),
            ("repetition-penalty", "1.3"),
            ("engine", "llama.cpp"),
            ("dry-multiplier", "0.8"),
            ("dry-sequence-breaker", "\\n\n:"),
            ("eos", "3,5"),
        ] {
            knob(&mut form, flag, text);
        }
        let pairs = form.to_pairs();
        let (back, problems) =
            GenerateForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        assert!(problems.is_empty());

        let (form, problems) =
            GenerateForm::from_pairs([("backend", "tpu"), ("precision", "f16"), ("unknown", "1")]);
        assert_eq!(form.backend, BackendChoice::Auto);
        assert_eq!(form.precision, Precision::F32);
        assert_eq!(problems.len(), 2);
        assert!(problems.of("gen-backend").unwrap().contains("\"tpu\""));
    }

    #[test]
    fn every_knob_goes_from_the_url_to_the_form_the_job_and_the_record() {
        for (knob, &(flag, text, beside)) in
            policy::KNOBS.iter().zip(&crate::widgets::knobs::SAMPLES)
        {
            assert_eq!(knob.flag, flag, "the samples follow the table");
            let key = |flag| policy::Knob::named(flag).unwrap().key;
            let mut url = vec![(knob.key, text)];
            url.extend(beside.iter().map(|(flag, text)| (key(flag), *text)));
            let (form, problems) = GenerateForm::from_pairs(url.iter().copied());
            assert!(problems.is_empty(), "{flag}: {problems:?}");
            assert_eq!(form.policy[crate::widgets::knobs::at(flag).unwrap()], text);
            let back = form.to_pairs();
            assert!(
                back.contains(&(knob.key, text.to_string())),
                "{flag}: {back:?}"
            );
            let request = form.check().unwrap_or_else(|e| panic!("{flag}: {e:?}"));
            let mut given = vec![("top-k", "40")];
            given.extend(beside.iter().copied());
            given.push((flag, text));
            let expected = PolicyRequest::new(
                given
                    .iter()
                    .filter(|(f, _)| *f != "dry-sequence-breaker")
                    .map(|(flag, text)| (policy::Knob::named(flag).unwrap(), text.to_string())),
            )
            .policy(policy::LAB_TEMPERATURE)
            .unwrap();
            assert_eq!(request.config.policy, expected, "{flag}");
            if flag == "dry-sequence-breaker" {
                assert_eq!(request.dry_breakers, ["\n"]);
            }
            // The run record holds the configuration as JSON, and reads it back the same.
            let json = serde_json::to_string(&request.config).unwrap();
            let recorded: RunConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(recorded.policy, request.config.policy, "{flag}");
        }
    }

    #[test]
    fn the_status_names_the_backend() {
        assert_eq!(
            backend_status(&Backend::cpu_reference(), None),
            "Running on the CPU reference (cpu-reference)."
        );
        let gpu = Backend {
            name: BackendKind::WebGpu,
            adapter: Some("swiftshader".into()),
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&gpu, None),
            "Running on WebGPU (adapter: swiftshader)."
        );
        assert_eq!(
            backend_status(&gpu, Some("google swiftshader, fallback adapter")),
            "Running on WebGPU (adapter: google swiftshader, fallback adapter)."
        );
        let degraded = Backend {
            degraded_reason: Some("WebGPU is not available here".into()),
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&degraded, None),
            "WebGPU unavailable — fell back to cpu-reference: WebGPU is not available here."
        );
        let lost = Backend {
            degraded_reason: Some("the GPU device was lost: destroyed.\n".into()),
            degraded_at_step: Some(3),
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&lost, None),
            "WebGPU unavailable — fell back to cpu-reference from model call 3 on: the GPU device was lost: destroyed."
        );
        let segment = |backend, first_step, last_step| policy::Segment {
            backend,
            first_step,
            last_step,
            reason: String::new(),
        };
        let waiting = Backend {
            segments: vec![segment(BackendKind::CpuReference, 0, 6)],
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&waiting, None),
            "Running on the CPU reference while WebGPU checks its canary; the run moves to the GPU when it passes."
        );
        let promoted = Backend {
            segments: vec![
                segment(BackendKind::CpuReference, 0, 4),
                segment(BackendKind::WebGpu, 5, 9),
            ],
            ..gpu
        };
        let auto = Backend {
            auto: Some("auto chose the CPU reference: a decode step took 0.31 ms there against 5.90 ms on this adapter, 19.0x faster".into()),
            ..waiting.clone()
        };
        assert_eq!(
            backend_status(&auto, None),
            "Running on the CPU reference (auto): a decode step took 0.31 ms there against 5.90 ms on this adapter, 19.0x faster."
        );
        assert_eq!(
            backend_status(&promoted, None),
            "Running on WebGPU (adapter: swiftshader) from step 5; the steps before ran on the CPU reference while the GPU's canary ran."
        );
    }

    #[test]
    fn visible_shows_whitespace() {
        assert_eq!(visible(" the\n"), "␣the\\n");
    }

    /// An import replaces every knob and the run settings it gives, keeps the others, and
    /// writes its stops and breakers as the fields read them back.
    #[test]
    fn an_imported_policy_replaces_the_knobs_and_the_settings_it_gives() {
        let mut knobs: Vec<String> = policy::KNOBS
            .iter()
            .map(|k| k.default.to_string())
            .collect();
        let at = |flag| policy::KNOBS.iter().position(|k| k.flag == flag).unwrap();
        knobs[at("engine")] = "llama.cpp".into();
        knobs[at("temperature")] = "0.8".into();
        knobs[at("dry-multiplier")] = "0.8".into();
        let imported = ImportedPolicy {
            knobs,
            breakers: vec!["\n".into(), "a\\b".into()],
            max_tokens: Some(20),
            seed: None,
            stop: vec!["\n\nEND".into()],
            stop_tokens: vec![7, 9],
            summary: String::new(),
            html: String::new(),
        };
        let mut form = GenerateForm {
            seed: "99".into(),
            ..GenerateForm::default()
        };
        form.take_import(&imported);
        assert_eq!(
            form.policy[at("top-k")],
            "0",
            "Generate's top-k 40 gives way to the import's"
        );
        assert_eq!(form.policy[at("engine")], "llama.cpp");
        assert_eq!(form.max_tokens, "20");
        assert_eq!(form.seed, "99", "a seed the import is silent on stays");
        assert_eq!(form.stop_tokens, "7, 9");
        let request = form.check().unwrap();
        assert_eq!(request.config.stop.strings, ["\n\nEND"]);
        assert_eq!(request.dry_breakers, ["\n", "a\\b"]);
        assert_eq!(request.config.policy.engine, policy::Engine::LlamaCpp);
        assert_eq!(request.config.policy.temperature, 0.8);
    }
}
