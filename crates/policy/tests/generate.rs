//! The generation loop over a small deterministic model: every stop reason, stop strings
//! across token boundaries, accounting, JSON round trips and replay.

use policy::generate::{GenerateError, Observer, StepRecord, Unobserved};
use policy::{
    generate, replay, LanguageModel, Policy, PolicyError, ReplayReport, RunRecord, StopConfig,
    StopReason,
};

mod support;

use support::{config, run, sampled, Bytes, Ticks, Toy, EOS, TOKENS};

#[test]
fn accounts_for_every_step() {
    let record = run(
        &mut Toy::new(64),
        &config(sampled(), 5, StopConfig::default()),
    );
    assert_eq!(record.rendered_prompt, "a b");
    assert_eq!(record.prompt_tokens, [1, 4, 2]);
    assert!(!record.steps.is_empty());
    for (i, s) in record.steps.iter().enumerate() {
        assert_eq!(s.step, i);
        assert!(s.prob > 0.0 && (s.logprob - s.prob.ln()).abs() < 1e-12);
        assert!(s.top.len() <= 5 && s.top[0].prob >= s.prob);
        assert!(s.survivors <= 6 && s.draw.is_some());
        assert_eq!((s.model_us, s.policy_us), (10.0, 10.0));
    }
    assert_eq!(record.token_latencies_us.len(), record.steps.len());
    assert_eq!(record.ttft_us, 30.0);
}

#[test]
fn stops_at_max_tokens() {
    let policy = Policy {
        eos_token: None,
        ..sampled()
    };
    let record = run(&mut Toy::new(64), &config(policy, 4, StopConfig::default()));
    assert_eq!(
        (record.stop_reason, record.steps.len()),
        (StopReason::MaxTokens, 4)
    );
}

#[test]
fn stops_when_the_context_is_full() {
    let policy = Policy {
        eos_token: None,
        ..sampled()
    };
    let record = run(
        &mut Toy::new(5),
        &config(policy, 100, StopConfig::default()),
    );
    assert_eq!(
        (record.stop_reason, record.steps.len()),
        (StopReason::ContextFull, 2)
    );
}

#[test]
fn stops_at_end_of_sequence_only_after_min_new_tokens() {
    let mut model = Toy::new(64);
    model.bias = Some((EOS, 50.0));
    let policy = Policy {
        min_new_tokens: 3,
        ..sampled()
    };
    let record = run(&mut model, &config(policy, 10, StopConfig::default()));
    assert_eq!(
        (record.stop_reason, record.steps.len()),
        (StopReason::Eos, 4)
    );
    assert_eq!(record.steps[3].token, EOS);
}

#[test]
fn stops_at_a_stop_token() {
    let mut model = Toy::new(64);
    model.bias = Some((7, 50.0));
    let stop = StopConfig {
        strings: vec![],
        tokens: vec![7],
    };
    let record = run(&mut model, &config(sampled(), 10, stop));
    assert_eq!(
        (record.stop_reason, record.steps.len()),
        (StopReason::StopToken, 1)
    );
    assert_eq!(record.output_text, "");
}

#[test]
fn stop_strings_match_across_token_boundaries_and_are_trimmed() {
    // Only the two halves of "é" and the space can be chosen, so "é" keeps arriving as two
    // tokens and a stop string "é" always spans a token boundary.
    let policy = Policy {
        forbidden: vec![1, 2, 3, 7],
        eos_token: None,
        ..sampled()
    };
    let free = run(
        &mut Toy::new(64),
        &config(policy.clone(), 12, StopConfig::default()),
    );
    let at = free
        .output_text
        .find('é')
        .expect("the free run writes an é");
    let stop = StopConfig {
        strings: vec!["é".into()],
        tokens: vec![],
    };
    let record = run(&mut Toy::new(64), &config(policy, 12, stop));
    assert_eq!(record.stop_reason, StopReason::StopSequence);
    assert_eq!(record.output_text, free.output_text[..at]);
    assert_eq!(
        record.steps.last().unwrap().token,
        6,
        "the second half completes the match"
    );
}

#[test]
fn a_character_split_over_two_tokens_decodes_whole() {
    let mut model = Toy::new(64);
    let policy = Policy {
        forbidden: vec![1, 2, 3, 4, 7],
        eos_token: None,
        ..sampled()
    };
    let record = run(&mut model, &config(policy, 6, StopConfig::default()));
    let bytes: Vec<u8> = record
        .steps
        .iter()
        .flat_map(|s| TOKENS[s.token as usize].to_vec())
        .collect();
    assert_eq!(record.output_text, String::from_utf8_lossy(&bytes));
}

#[test]
fn cancelling_stops_between_steps() {
    struct CancelAfter(usize, usize);
    impl Observer for CancelAfter {
        fn on_step(&mut self, _: &StepRecord) {
            self.1 += 1;
        }
        fn cancelled(&mut self) -> bool {
            self.1 >= self.0
        }
    }
    let policy = Policy {
        eos_token: None,
        ..sampled()
    };
    let record = generate(
        &mut Toy::new(64),
        &Bytes,
        &config(policy, 20, StopConfig::default()),
        &mut Ticks(0.0),
        &mut CancelAfter(3, 0),
    )
    .unwrap();
    assert_eq!(
        (record.stop_reason, record.steps.len()),
        (StopReason::Cancelled, 3)
    );
}

#[test]
fn records_round_trip_through_json_and_replay_identically() {
    let record = run(
        &mut Toy::new(64),
        &config(sampled(), 8, StopConfig::default()),
    );
    let line = serde_json::to_string(&record).unwrap();
    assert!(!line.contains('\n'), "one record is one JSONL line");
    let back: RunRecord = serde_json::from_str(&line).unwrap();
    assert_eq!(back, record);
    let report = replay(&back, &mut Toy::new(64), &Bytes, &mut Ticks(0.0)).unwrap();
    assert_eq!(
        report,
        ReplayReport::Identical {
            steps: record.steps.len()
        }
    );
}

#[test]
fn replay_names_the_first_differing_step() {
    let mut record = run(
        &mut Toy::new(64),
        &config(sampled(), 8, StopConfig::default()),
    );
    let original = record.steps[2].token;
    record.steps[2].token = (original + 1) % 8;
    // As a record made before digests and ids existed: the replay itself finds the difference.
    record.record_digest = None;
    record.run_id = None;
    record.version_id = None;
    match replay(&record, &mut Toy::new(64), &Bytes, &mut Ticks(0.0)).unwrap() {
        ReplayReport::Differs {
            step,
            recorded,
            replayed,
            ..
        } => {
            assert_eq!(
                (step, recorded, replayed),
                (2, Some((original + 1) % 8), Some(original))
            );
        }
        other => panic!("expected a difference, got {other:?}"),
    }
}

#[test]
fn replay_refuses_another_model() {
    let mut record = run(
        &mut Toy::new(64),
        &config(sampled(), 3, StopConfig::default()),
    );
    record.model.hash = "other".into();
    record.seal();
    let err = replay(&record, &mut Toy::new(64), &Bytes, &mut Ticks(0.0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "this record was made with model toy (other), but toy (0) is loaded"
    );
}

/// The toy model, taking filter-only steps "on its device" with the draw it is handed.
struct DeviceToy {
    toy: Toy,
    device_steps: usize,
}

impl LanguageModel for DeviceToy {
    /// The toy never fails; a step on its "device" can.
    type Error = PolicyError;

    support::toy_identity!();
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], PolicyError> {
        let Ok(logits) = self.toy.prefill(prompt);
        Ok(logits)
    }
    fn decode_step(&mut self, token: u32) -> Result<&[f32], PolicyError> {
        let Ok(logits) = self.toy.decode_step(token);
        Ok(logits)
    }
    fn choose_on_device(
        &mut self,
        call: policy::ModelCall<'_>,
        policy: &Policy,
        draw: Option<f64>,
    ) -> Option<Result<policy::StepOutcome, PolicyError>> {
        if !policy.is_filter_only() {
            return None;
        }
        let Ok(logits) = match call {
            policy::ModelCall::Prefill(prompt) => self.toy.prefill(prompt),
            policy::ModelCall::Decode(token) => self.toy.decode_step(token),
        };
        let logits = logits.to_vec();
        self.device_steps += 1;
        let outcome = policy::Stepper::default().step_with_draw(
            policy,
            &logits,
            policy::StepContext::default(),
            draw.unwrap_or(0.0),
            policy::Snapshots::Skip,
        );
        Some(outcome)
    }
}

#[test]
fn steps_taken_on_a_device_with_the_peeked_draw_match_host_steps() {
    let filter_only = Policy {
        temperature: 0.8,
        top_k: 5,
        top_p: 0.9,
        min_p: 0.05,
        ..Policy::default()
    };
    for policy in [
        filter_only,
        Policy {
            temperature: 0.0,
            ..Policy::default()
        },
    ] {
        let config = config(policy, 12, StopConfig::default());
        let on_host = run(&mut Toy::new(64), &config);
        let mut device = DeviceToy {
            toy: Toy::new(64),
            device_steps: 0,
        };
        let on_device = generate(
            &mut device,
            &Bytes,
            &config,
            &mut Ticks(0.0),
            &mut Unobserved,
        )
        .unwrap();
        assert_eq!(
            device.device_steps, 12,
            "every step was taken on the device"
        );
        let strip = |r: &RunRecord| -> Vec<_> {
            r.steps
                .iter()
                .map(|s| (s.token, s.prob, s.draw, s.survivors))
                .collect()
        };
        assert_eq!(strip(&on_device), strip(&on_host));
    }
    // A policy that reads the context stays on the host.
    let mut device = DeviceToy {
        toy: Toy::new(64),
        device_steps: 0,
    };
    generate(
        &mut device,
        &Bytes,
        &config(sampled(), 4, StopConfig::default()),
        &mut Ticks(0.0),
        &mut Unobserved,
    )
    .unwrap();
    assert_eq!(device.device_steps, 0);
}

#[test]
fn a_run_refuses_a_template_without_one_slot_an_empty_stop_string_and_no_new_tokens() {
    let refused = |config: &policy::RunConfig| {
        generate(
            &mut Toy::new(64),
            &Bytes,
            config,
            &mut Ticks(0.0),
            &mut Unobserved,
        )
        .unwrap_err()
        .to_string()
    };
    let ok = config(sampled(), 4, StopConfig::default());
    for (template, slots) in [("no slot", 0), ("{prompt} and {prompt}", 2)] {
        let message = refused(&policy::RunConfig {
            prompt_template: template.into(),
            ..ok.clone()
        });
        assert!(
            message.contains(&format!("template holds {{prompt}} {slots} times")),
            "{message}"
        );
    }
    let stop = StopConfig {
        strings: vec!["x".into(), String::new()],
        tokens: vec![],
    };
    let message = refused(&config(sampled(), 4, stop));
    assert!(message.contains("stop string 1 is empty"), "{message}");
    let message = refused(&config(sampled(), 0, StopConfig::default()));
    assert!(message.contains("max tokens is 0"), "{message}");
}

/// The toy model, failing at its `fail_at`-th call (0 is the prefill).
struct Breaking {
    toy: Toy,
    calls: usize,
    fail_at: usize,
}

#[derive(Debug, thiserror::Error)]
#[error("the toy broke at call {0}")]
struct Broke(usize);

impl Breaking {
    fn call(&mut self) -> Result<(), Broke> {
        self.calls += 1;
        if self.calls > self.fail_at {
            return Err(Broke(self.calls - 1));
        }
        Ok(())
    }
}

impl LanguageModel for Breaking {
    type Error = Broke;

    support::toy_identity!();
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], Broke> {
        self.call()?;
        let Ok(logits) = self.toy.prefill(prompt);
        Ok(logits)
    }
    fn decode_step(&mut self, token: u32) -> Result<&[f32], Broke> {
        self.call()?;
        let Ok(logits) = self.toy.decode_step(token);
        Ok(logits)
    }
}

#[test]
fn a_model_s_own_error_reaches_the_caller_whole() {
    let mut model = Breaking {
        toy: Toy::new(64),
        calls: 0,
        fail_at: 3,
    };
    let policy = Policy {
        temperature: 0.9,
        ..Policy::default()
    };
    let err = generate(
        &mut model,
        &Bytes,
        &config(policy, 8, StopConfig::default()),
        &mut Ticks(0.0),
        &mut Unobserved,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "the model failed: the toy broke at call 3");
    let GenerateError::Model(source) = &err else {
        panic!("not the model's error: {err:?}");
    };
    assert_eq!(source.downcast_ref::<Broke>().map(|b| b.0), Some(3));
}

/// The toy, keeping a copy of every row of logits it returns.
struct Logged {
    toy: Toy,
    rows: Vec<Vec<f32>>,
}

impl LanguageModel for Logged {
    type Error = std::convert::Infallible;

    support::toy_identity!();
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], Self::Error> {
        let Ok(logits) = self.toy.prefill(prompt);
        self.rows.push(logits.to_vec());
        Ok(logits)
    }
    fn decode_step(&mut self, token: u32) -> Result<&[f32], Self::Error> {
        let Ok(logits) = self.toy.decode_step(token);
        self.rows.push(logits.to_vec());
        Ok(logits)
    }
}

/// Each step records the model's own distribution, the plain softmax of the logits it was
/// given (written out here as e^l / Σ e^l), beside the policy's: a greedy step's policy
/// probability is 1, the model's is not.
#[test]
fn every_step_records_the_models_own_distribution_beside_the_policys() {
    for policy in [
        Policy {
            temperature: 0.0,
            ..Policy::default()
        },
        sampled(),
    ] {
        let mut model = Logged {
            toy: Toy::new(64),
            rows: Vec::new(),
        };
        let record = generate(
            &mut model,
            &Bytes,
            &config(policy.clone(), 6, StopConfig::default()),
            &mut Ticks(0.0),
            &mut Unobserved,
        )
        .unwrap();
        assert_eq!(model.rows.len(), record.steps.len());
        for (s, row) in record.steps.iter().zip(&model.rows) {
            let z: f64 = row.iter().map(|&l| f64::from(l).exp()).sum();
            let softmax = |id: u32| f64::from(row[id as usize]).exp() / z;
            let model_prob = s.model_prob.unwrap();
            assert!((model_prob - softmax(s.token)).abs() < 1e-12, "{s:?}");
            assert!((s.model_logprob.unwrap() - softmax(s.token).ln()).abs() < 1e-12);
            let mut ids: Vec<u32> = (0..row.len() as u32).collect();
            ids.sort_by(|&a, &b| softmax(b).total_cmp(&softmax(a)).then(a.cmp(&b)));
            let top: Vec<u32> = s.model_top.iter().map(|t| t.id).collect();
            assert_eq!(top, ids[..5], "{s:?}");
            for t in &s.model_top {
                assert!((t.prob - softmax(t.id)).abs() < 1e-12);
                assert_eq!(t.text, String::from_utf8_lossy(TOKENS[t.id as usize]));
            }
            if policy.is_greedy() {
                assert_eq!(s.prob, 1.0);
                assert!(model_prob < 1.0 && s.model_top[0].id == s.token);
            }
        }
    }
}

#[test]
fn replay_names_an_edited_model_probability() {
    let mut record = run(
        &mut Toy::new(64),
        &config(sampled(), 4, StopConfig::default()),
    );
    record.steps[1].model_prob = record.steps[1].model_prob.map(|p| p / 2.0);
    record.record_digest = None;
    record.run_id = None;
    record.version_id = None;
    match replay(&record, &mut Toy::new(64), &Bytes, &mut Ticks(0.0)).unwrap() {
        ReplayReport::Differs { step, field, .. } => {
            assert_eq!((step, field.as_str()), (1, "model_prob"));
        }
        other => panic!("expected a difference, got {other:?}"),
    }
}
