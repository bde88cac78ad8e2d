//! The policy step on the device (`sample.wgsl`) against the CPU policy on the same logits
//! and draw: the same token, survivors and top five, probabilities and entropy to f32
//! precision, and the model's own distribution (the step record's `model_*` fields) against
//! `policy::model_view`; and a whole run sampled on the GPU against the same run stepped on the host,
//! with one small read-back per token.

mod common;

use common::{cpu_model, gpu, Random};
use gpu::ops::Ops;
use gpu::{BackendChoice, Faults, Runtime, CHECK_EVERY};
use policy::{BackendKind, NumpyRng, Policy, Snapshots, StepContext, StepOutcome, Stepper};

fn policies() -> Vec<Policy> {
    let p = |temperature, top_k, top_p, min_p| Policy {
        temperature,
        top_k,
        top_p,
        min_p,
        ..Policy::default()
    };
    vec![
        p(0.0, 0, 1.0, 0.0),
        p(1.0, 0, 1.0, 0.0),
        p(0.7, 0, 1.0, 0.0),
        p(0.7, 40, 1.0, 0.0),
        p(1.0, 0, 0.9, 0.0),
        p(0.8, 0, 1.0, 0.05),
        p(0.9, 50, 0.95, 0.02),
        p(1.3, 1, 1.0, 0.0),
        p(0.5, 5000, 0.5, 0.0),
    ]
}

fn host(policy: &Policy, logits: &[f32], draw: Option<f64>) -> StepOutcome {
    host_in(policy, logits, draw, StepContext::default())
}

fn host_in(
    policy: &Policy,
    logits: &[f32],
    draw: Option<f64>,
    context: StepContext<'_>,
) -> StepOutcome {
    Stepper::default()
        .step_with_draw(
            policy,
            logits,
            context,
            draw.unwrap_or(0.0),
            Snapshots::Skip,
        )
        .unwrap()
}

fn assert_same_step(label: &str, device: &StepOutcome, host: &StepOutcome) {
    assert_eq!(device.token, host.token, "{label}: token");
    assert_eq!(device.survivors, host.survivors, "{label}: survivors");
    assert_eq!(device.draw, host.draw, "{label}: draw");
    let close = |a: f64, b: f64, what: &str| {
        assert!(
            (a - b).abs() <= 2e-5 * b.abs().max(1e-3),
            "{label}: {what} device {a}, host {b}"
        )
    };
    close(device.prob, host.prob, "prob");
    close(device.entropy, host.entropy, "entropy");
    let ids = |o: &StepOutcome| o.top.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(device), ids(host), "{label}: top five");
    for (d, h) in device.top.iter().zip(&host.top) {
        close(d.prob, h.prob, "top prob");
        close(d.logit, h.logit, "top logit");
    }
}

/// The model's own distribution the sampler wrote, against the host's f64 computation on
/// the same logits: the same five ids (ties to the lower id), log-probabilities within f32
/// rounding of the normaliser.
fn assert_same_model(label: &str, logits: &[f32], device: &StepOutcome) {
    let host = policy::model_view(logits, device.token).unwrap();
    let model = device
        .model
        .as_ref()
        .expect("the sampler writes the model's view");
    let close = |a: f64, b: f64, what: &str| {
        assert!(
            (a - b).abs() <= 2e-5,
            "{label}: model {what} device {a}, host {b}"
        )
    };
    close(model.logprob, host.logprob, "logprob");
    close(model.prob, host.prob, "prob");
    let ids = |v: &policy::ModelView| v.top.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(model), ids(&host), "{label}: model top five");
    for (d, h) in model.top.iter().zip(&host.top) {
        close(d.prob, h.prob, "top prob");
        assert_eq!(d.logit, h.logit, "{label}: model top logit");
    }
}

#[test]
fn the_device_step_matches_the_cpu_policy() {
    let Some(device) = gpu("sampler") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(11);
    let mut rng = NumpyRng::new(5);
    for vocab in [768, 50, 1000, 1] {
        for case in 0..4 {
            let mut logits = random.f32s(vocab, 6.0);
            if case == 3 {
                // Ties everywhere: the filters keep ties, the top five order them by id.
                for l in logits.iter_mut() {
                    *l = (*l * 2.0).round() / 2.0;
                }
            }
            for policy in policies() {
                let draw = (!policy.is_greedy()).then(|| rng.random());
                let got = pollster::block_on(ops.sample(&logits, &policy, draw, None)).unwrap();
                let label = format!("vocab {vocab} case {case} {policy:?}");
                assert_same_step(&label, &got, &host(&policy, &logits, draw));
                assert_same_model(&label, &logits, &got);
            }
        }
    }
}

/// Policies with every constraint the device applies: bias (one id twice), forbidden ids,
/// the repetition penalty either way, frequency and presence, with the filters.
fn constrained_policies(vocab: u32) -> Vec<Policy> {
    let ids = |k: u32| k % vocab;
    let base = Policy {
        temperature: 0.8,
        logit_bias: vec![(ids(3), 2.5), (ids(7), -1.0), (ids(3), 0.75)],
        forbidden: vec![ids(11), ids(5)],
        ..Policy::default()
    };
    vec![
        base.clone(),
        Policy {
            repetition_penalty: 1.3,
            top_k: 20,
            ..base.clone()
        },
        Policy {
            repetition_penalty: 0.8,
            top_p: 0.9,
            ..base.clone()
        },
        Policy {
            frequency_penalty: 0.5,
            presence_penalty: 0.7,
            min_p: 0.02,
            ..base.clone()
        },
        Policy {
            repetition_penalty: 1.2,
            frequency_penalty: -0.3,
            presence_penalty: 1.5,
            temperature: 0.0,
            ..base.clone()
        },
        Policy {
            repetition_penalty: 1.5,
            frequency_penalty: 0.4,
            logit_bias: Vec::new(),
            forbidden: Vec::new(),
            temperature: 1.2,
            top_k: 50,
            top_p: 0.95,
            ..Policy::default()
        },
    ]
}

/// The "penalties, bias and bans on the device": the constraint table the runtime
/// builds from the policy and the context, applied by `sample.wgsl`, against the CPU
/// policy's step in the same context: the same token, survivors and top five, and
/// probabilities to f32 precision; the model's own view still from the raw logits.
#[test]
fn the_device_applies_the_constraints_as_the_cpu_policy_does() {
    let Some(device) = gpu("sampler_constraints") else {
        return;
    };
    let ops = Ops::new(&device);
    let mut random = Random::new(23);
    let mut rng = NumpyRng::new(9);
    for vocab in [768usize, 50] {
        for case in 0..4 {
            let logits = random.f32s(vocab, 6.0);
            // A context whose tokens repeat, some in the prompt only.
            let tokens: Vec<u32> = (0..40)
                .map(|i| ((i * 7 + case * 3) % (vocab / 2).max(1)) as u32)
                .collect();
            let context = StepContext::new(&tokens, 15);
            for policy in constrained_policies(vocab as u32) {
                assert!(policy.is_device_step(), "{policy:?}");
                assert!(!policy.is_filter_only(), "{policy:?}");
                let draw = (!policy.is_greedy()).then(|| rng.random());
                let table = policy.constraint_table(context, vocab);
                let got =
                    pollster::block_on(ops.sample(&logits, &policy, draw, Some(&table))).unwrap();
                let label = format!("vocab {vocab} case {case} {policy:?}");
                assert_same_step(&label, &got, &host_in(&policy, &logits, draw, context));
                assert_same_model(&label, &logits, &got);
            }
        }
    }
}

/// Greedy tokens... and sampled ones: a run of `steps` on `runtime`, each step on the
/// device when it can (else logits and the host policy), with draws from the run's stream.
fn run(runtime: &mut Runtime, policy: &Policy, steps: usize, seed: u64) -> Vec<u32> {
    let prompt: Vec<u32> = b"Select the cell and"
        .iter()
        .map(|&b| u32::from(b))
        .collect();
    let mut rng = NumpyRng::new(seed);
    let mut tokens: Vec<u32> = Vec::new();
    let mut stepper = Stepper::default();
    for i in 0..steps {
        let draw = (!policy.is_greedy()).then(|| rng.clone().random());
        let outcome = match pollster::block_on(runtime.choose(
            (i == 0).then_some(&prompt[..]),
            tokens.last().copied().unwrap_or(0),
            policy,
            draw,
        )) {
            Some(outcome) => {
                if outcome.as_ref().unwrap().draw.is_some() {
                    rng.random();
                }
                outcome.unwrap()
            }
            None => {
                let logits = if i == 0 {
                    pollster::block_on(runtime.prefill(&prompt))
                        .unwrap()
                        .to_vec()
                } else {
                    pollster::block_on(runtime.decode_step(*tokens.last().unwrap()))
                        .unwrap()
                        .to_vec()
                };
                let mut context = prompt.clone();
                context.extend(&tokens);
                stepper
                    .step(
                        &policy.clone(),
                        &logits,
                        StepContext::new(&context, prompt.len()),
                        &mut rng,
                        Snapshots::Skip,
                    )
                    .unwrap()
            }
        };
        tokens.push(outcome.token);
    }
    tokens
}

#[test]
fn a_run_sampled_on_the_gpu_equals_the_run_stepped_on_the_host() {
    if gpu("device_sampling_run").is_none() {
        return;
    }
    let start = || {
        pollster::block_on(Runtime::start(
            BackendChoice::Gpu,
            cpu_model("f32"),
            None,
            Faults::default(),
        ))
    };
    let steps = 40;
    let sampled = Policy {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        ..Policy::default()
    };
    let penalised = Policy {
        temperature: 0.9,
        repetition_penalty: 1.3,
        frequency_penalty: 0.4,
        presence_penalty: 0.2,
        logit_bias: vec![(32, -2.0)],
        forbidden: vec![101],
        ..Policy::default()
    };
    for policy in [
        Policy {
            temperature: 0.0,
            ..Policy::default()
        },
        sampled,
        penalised,
    ] {
        let mut on_device = start();
        assert_eq!(on_device.backend().name, BackendKind::WebGpu);
        let before = on_device.readbacks();
        let device_tokens = run(&mut on_device, &policy, steps, 3);
        let report = on_device.sampling();
        assert_eq!(report.device_steps, steps, "{policy:?}: {report:?}");
        assert_eq!(report.checked, steps.div_ceil(CHECK_EVERY));
        assert_eq!(report.mismatches, 0, "{policy:?}");
        assert_eq!(
            on_device.readbacks() - before,
            steps as u64,
            "one read-back per token"
        );

        let mut on_host = start();
        on_host.set_device_sampling(false);
        let host_tokens = run(&mut on_host, &policy, steps, 3);
        assert_eq!(on_host.sampling().device_steps, 0);
        assert_eq!(device_tokens, host_tokens, "{policy:?}");
    }
}

#[test]
fn a_policy_the_device_cannot_take_steps_on_the_host() {
    if gpu("device_sampling_context").is_none() {
        return;
    }
    let mut runtime = pollster::block_on(Runtime::start(
        BackendChoice::Gpu,
        cpu_model("f32"),
        None,
        Faults::default(),
    ));
    // No-repeat n-grams, and a bias beyond what f32 arithmetic takes safely.
    for host_only in [
        Policy {
            no_repeat_ngram: 2,
            ..Policy::default()
        },
        Policy {
            logit_bias: vec![(3, 2e6)],
            ..Policy::default()
        },
    ] {
        assert!(!host_only.is_device_step());
        assert!(
            pollster::block_on(runtime.choose(Some(&[65, 66]), 0, &host_only, Some(0.5))).is_none()
        );
    }
    // And the CPU backend never steps on a device.
    let mut cpu = pollster::block_on(Runtime::start(
        BackendChoice::Cpu,
        cpu_model("f32"),
        None,
        Faults::default(),
    ));
    assert!(
        pollster::block_on(cpu.choose(Some(&[65, 66]), 0, &Policy::default(), Some(0.5))).is_none()
    );
}

#[test]
fn a_device_lost_while_sampling_finishes_the_step_on_the_cpu() {
    if gpu("device_sampling_lost").is_none() {
        return;
    }
    let policy = Policy {
        temperature: 0.7,
        ..Policy::default()
    };
    let start = |faults| {
        pollster::block_on(Runtime::start(
            BackendChoice::Gpu,
            cpu_model("f32"),
            None,
            faults,
        ))
    };
    let mut lost = start(Faults {
        lose_device_after: Some(5),
        ..Faults::default()
    });
    let tokens = run(&mut lost, &policy, 12, 9);
    assert_eq!(lost.backend().name, BackendKind::CpuReference);
    assert_eq!(lost.backend().degraded_at_step, Some(5));
    let mut healthy = start(Faults::default());
    // Same draws, so the same tokens before the loss; after it the CPU's logits decide,
    // which differ from the GPU's only in their last bits.
    let reference = run(&mut healthy, &policy, 12, 9);
    assert_eq!(tokens[..5], reference[..5]);
    assert_eq!(tokens.len(), 12);
}
