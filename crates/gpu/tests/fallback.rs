//! The canary and every way to fall back to `cpu-reference`: no WebGPU, no adapter, a
//! failed device request, a canary mismatch, and a device lost mid-run; and the move the
//! other way, from the CPU to the GPU when a start beside the run passes. Each fault is
//! injected and goes through the real failure path where one exists; after a fallback the
//! run goes on from the same step and its greedy tokens equal the CPU reference's.

mod common;

use common::{argmax, cpu_model, gpu};
use gpu::{
    BackendChoice, Faults, Promotion, Race, Runtime, CANARY_PASSED, CANARY_RUNNING,
    CANARY_TOLERANCE,
};
use policy::{BackendKind, Segment};

const PROMPT: &[u8] = b"Choose Format - Cells and";
const STEPS: usize = 12;

/// Greedy tokens of the CPU reference (f32).
fn cpu_tokens() -> Vec<u32> {
    let mut cpu = cpu_model("f32");
    let ids: Vec<u32> = PROMPT.iter().map(|&b| u32::from(b)).collect();
    let mut tokens = vec![argmax(cpu.prefill(&ids).unwrap())];
    while tokens.len() < STEPS {
        tokens.push(argmax(cpu.decode_step(*tokens.last().unwrap()).unwrap()));
    }
    tokens
}

fn runtime_tokens(runtime: &mut Runtime) -> Vec<u32> {
    let ids: Vec<u32> = PROMPT.iter().map(|&b| u32::from(b)).collect();
    let mut tokens = vec![argmax(pollster::block_on(runtime.prefill(&ids)).unwrap())];
    while tokens.len() < STEPS {
        let last = *tokens.last().unwrap();
        tokens.push(argmax(
            pollster::block_on(runtime.decode_step(last)).unwrap(),
        ));
    }
    tokens
}

fn start(faults: Faults) -> Runtime {
    pollster::block_on(Runtime::start(
        BackendChoice::Gpu,
        cpu_model("f32"),
        None,
        faults,
    ))
}

#[test]
fn a_healthy_gpu_passes_the_canary_and_runs_the_model() {
    if gpu("healthy_runtime").is_none() {
        return;
    }
    let mut runtime = start(Faults::default());
    let backend = runtime.backend().clone();
    assert_eq!(backend.name, BackendKind::WebGpu, "{backend:?}");
    assert!(backend.adapter.as_deref().is_some_and(|a| !a.is_empty()));
    assert_eq!(backend.degraded_reason, None);
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    // The canary's calls plus this run's, one read-back each.
    assert_eq!(runtime.readbacks(), 5 + STEPS as u64);
    assert_eq!(runtime.backend().name, BackendKind::WebGpu);
}

#[test]
fn int8_on_the_gpu_falls_back_to_the_f32_baseline() {
    if gpu("int8_runtime").is_none() {
        return;
    }
    let faults = Faults {
        lose_device_after: Some(2),
        ..Faults::default()
    };
    let mut runtime = pollster::block_on(Runtime::start(
        BackendChoice::Gpu,
        cpu_model("int8"),
        Some(cpu_model("f32")),
        faults,
    ));
    let int8_id = runtime.id();
    assert_eq!(runtime.backend().name, BackendKind::WebGpu);
    runtime_tokens(&mut runtime);
    assert_eq!(runtime.backend().name, BackendKind::CpuReference);
    assert_ne!(
        runtime.id(),
        int8_id,
        "after the fallback the f32 weights run"
    );
    assert_eq!(runtime.id(), policy::LanguageModel::id(&cpu_model("f32")));
}

fn assert_falls_back(faults: Faults, reason_mentions: &str, at_step: Option<usize>) {
    let mut runtime = start(faults);
    let tokens = runtime_tokens(&mut runtime);
    let backend = runtime.backend().clone();
    assert_eq!(
        backend.name,
        BackendKind::CpuReference,
        "{faults:?}: {backend:?}"
    );
    let reason = backend.degraded_reason.clone().expect("a reason");
    assert!(
        reason.contains(reason_mentions),
        "{faults:?}: reason {reason:?} should mention {reason_mentions:?}"
    );
    assert_eq!(backend.degraded_at_step, at_step, "{faults:?}");
    assert_eq!(tokens, cpu_tokens(), "{faults:?}: no token lost or changed");
}

#[test]
fn no_webgpu_falls_back() {
    assert_falls_back(
        Faults {
            no_webgpu: true,
            ..Faults::default()
        },
        "WebGPU is not available",
        None,
    );
}

#[test]
fn no_adapter_falls_back() {
    assert_falls_back(
        Faults {
            no_adapter: true,
            ..Faults::default()
        },
        "no GPU adapter",
        None,
    );
}

#[test]
fn a_failed_device_request_falls_back() {
    if gpu("device_request").is_none() {
        return;
    }
    assert_falls_back(
        Faults {
            device_request: true,
            ..Faults::default()
        },
        "device request failed",
        None,
    );
}

#[test]
fn a_canary_mismatch_falls_back() {
    if gpu("canary").is_none() {
        return;
    }
    assert_falls_back(
        Faults {
            canary: true,
            ..Faults::default()
        },
        "canary",
        None,
    );
}

#[test]
fn a_device_lost_mid_run_continues_on_the_cpu_from_the_same_step() {
    if gpu("device_lost").is_none() {
        return;
    }
    // The device is destroyed before the run's 4th call (the canary's calls do not count).
    assert_falls_back(
        Faults {
            lose_device_after: Some(3),
            ..Faults::default()
        },
        "lost",
        Some(3),
    );
}

#[test]
fn the_cpu_backend_is_the_named_baseline() {
    let mut runtime = pollster::block_on(Runtime::start(
        BackendChoice::Cpu,
        cpu_model("f32"),
        None,
        Faults::default(),
    ));
    assert_eq!(runtime.backend(), &policy::Backend::cpu_reference());
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    assert_eq!(runtime.readbacks(), 0);
}

#[test]
fn fault_names_parse_and_unknown_ones_are_named() {
    let faults = Faults::parse("canary, device-lost@7").unwrap();
    assert!(faults.canary);
    assert_eq!(faults.lose_device_after, Some(7));
    let error = Faults::parse("gremlins").unwrap_err().to_string();
    assert!(error.contains("gremlins"), "{error}");
}

/// The CPU reference's logits at every step of `cpu_tokens`' run.
fn cpu_logits() -> Vec<Vec<f32>> {
    let mut cpu = cpu_model("f32");
    let ids: Vec<u32> = PROMPT.iter().map(|&b| u32::from(b)).collect();
    let mut logits = vec![cpu.prefill(&ids).unwrap().to_vec()];
    for token in &cpu_tokens()[..STEPS - 1] {
        logits.push(cpu.decode_step(*token).unwrap().to_vec());
    }
    logits
}

/// Greedy tokens, through the device's policy step where the runtime takes it (`sampled`)
/// or through the logits, with every step's logits when they come back.
fn run_with_logits(runtime: &mut Runtime, sampled: bool) -> (Vec<u32>, Vec<Option<Vec<f32>>>) {
    let ids: Vec<u32> = PROMPT.iter().map(|&b| u32::from(b)).collect();
    let greedy = policy::Policy {
        temperature: 0.0,
        ..policy::Policy::default()
    };
    let (mut tokens, mut logits) = (Vec::new(), Vec::new());
    while tokens.len() < STEPS {
        let last = tokens.last().copied();
        let prompt = last.is_none().then_some(ids.as_slice());
        if sampled {
            let token = last.unwrap_or(0);
            if let Some(outcome) = pollster::block_on(runtime.choose(prompt, token, &greedy, None))
            {
                tokens.push(outcome.unwrap().token);
                logits.push(None);
                continue;
            }
        }
        let step = match last {
            None => pollster::block_on(runtime.prefill(&ids)).unwrap(),
            Some(last) => pollster::block_on(runtime.decode_step(last)).unwrap(),
        };
        tokens.push(argmax(step));
        logits.push(Some(step.to_vec()));
    }
    (tokens, logits)
}

fn segment(backend: BackendKind, first_step: usize, last_step: usize, reason: &str) -> Segment {
    Segment {
        backend,
        first_step,
        last_step,
        reason: reason.to_string(),
    }
}

/// The "no token lost or duplicated at a backend switch": a run started beside the
/// GPU's start moves to the GPU at the step it is told, with the CPU's tokens, and every
/// step's logits after the switch within the canary's tolerance of the CPU's on the same
/// context (a token lost or doubled at the switch would change the context, and the
/// logits by far more). Through the logits and through the device's policy step.
#[test]
fn a_run_moves_to_the_gpu_at_a_step_boundary_without_losing_a_token() {
    if gpu("promotion").is_none() {
        return;
    }
    let expected = cpu_logits();
    for sampled in [false, true] {
        for at in [1, 4, STEPS - 1] {
            let label = format!("sampled {sampled}, at {at}");
            let mut runtime = Runtime::start_beside(
                BackendChoice::Gpu,
                cpu_model("f32"),
                None,
                Faults::default(),
            );
            runtime.set_promotion(Promotion::AtStep(at));
            let (tokens, logits) = run_with_logits(&mut runtime, sampled);
            assert_eq!(tokens, cpu_tokens(), "{label}");
            for (step, (got, want)) in logits.iter().zip(&expected).enumerate() {
                let Some(got) = got else { continue };
                let worst = got
                    .iter()
                    .zip(want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                let bound = if step < at { 0.0 } else { CANARY_TOLERANCE };
                assert!(worst <= bound, "{label}: step {step} differs by {worst}");
            }
            let backend = runtime.backend().clone();
            assert_eq!(backend.name, BackendKind::WebGpu, "{label}");
            assert_eq!(
                backend.segments,
                [
                    segment(BackendKind::CpuReference, 0, at - 1, CANARY_RUNNING),
                    segment(BackendKind::WebGpu, at, STEPS - 1, CANARY_PASSED),
                ],
                "{label}"
            );
            if sampled {
                assert!(runtime.sampling().device_steps > 0, "{label}");
            }
            // A replay of that run begins on the CPU again, on a runtime already on the GPU.
            let (again, _) = run_with_logits(&mut runtime, sampled);
            assert_eq!(again, tokens, "{label}: again");
            assert_eq!(runtime.backend().segments, backend.segments, "{label}");
            // A new run takes the GPU from its first step.
            runtime.set_promotion(Promotion::WhenPassed);
            run_with_logits(&mut runtime, sampled);
            assert_eq!(
                runtime.backend().segments,
                [segment(BackendKind::WebGpu, 0, STEPS - 1, CANARY_PASSED)],
                "{label}"
            );
        }
    }
}

/// Started beside, the first run does not wait: wherever it moved, its segments cover
/// every step in order and its tokens are the CPU's; once the start has settled, the next
/// run is on the GPU from its first step.
#[test]
fn a_run_started_beside_the_canary_does_not_wait_for_it() {
    if gpu("beside").is_none() {
        return;
    }
    let mut runtime = Runtime::start_beside(
        BackendChoice::Gpu,
        cpu_model("f32"),
        None,
        Faults::default(),
    );
    assert_eq!(runtime.backend().name, BackendKind::CpuReference);
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    let segments = runtime.backend().segments.clone();
    assert_eq!(segments[0].first_step, 0, "{segments:?}");
    assert_eq!(
        segments[0].backend,
        BackendKind::CpuReference,
        "{segments:?}"
    );
    assert_eq!(
        segments.last().unwrap().last_step,
        STEPS - 1,
        "{segments:?}"
    );
    for pair in segments.windows(2) {
        assert_eq!(pair[0].last_step + 1, pair[1].first_step, "{segments:?}");
    }
    // Between runs the finished start is taken in without waiting for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    runtime.poll_start();
    while runtime.starting() {
        assert!(
            std::time::Instant::now() < deadline,
            "the GPU start never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
        runtime.poll_start();
    }
    assert_eq!(runtime.backend().name, BackendKind::WebGpu);
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    assert_eq!(
        runtime.backend().segments,
        [segment(BackendKind::WebGpu, 0, STEPS - 1, CANARY_PASSED)]
    );
}

/// A canary that fails while the run is on the CPU leaves the run where it is, with the
/// failure in the record from the step it arrived.
#[test]
fn a_canary_failing_beside_the_run_keeps_it_on_the_cpu() {
    if gpu("canary_beside").is_none() {
        return;
    }
    let faults = Faults {
        canary: true,
        ..Faults::default()
    };
    let mut runtime = Runtime::start_beside(BackendChoice::Gpu, cpu_model("f32"), None, faults);
    runtime.set_promotion(Promotion::AtStep(3));
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    let backend = runtime.backend().clone();
    assert_eq!(backend.name, BackendKind::CpuReference);
    let reason = backend.degraded_reason.clone().unwrap();
    assert!(reason.contains("canary"), "{reason}");
    assert_eq!(
        backend.degraded_at_step, None,
        "the run never ran on the GPU"
    );
    assert_eq!(
        backend.segments,
        [
            segment(BackendKind::CpuReference, 0, 2, CANARY_RUNNING),
            segment(BackendKind::CpuReference, 3, STEPS - 1, &reason),
        ]
    );
}

/// `auto` times the canary's decode steps on both paths and keeps the faster, saying so in
/// the record; its tokens are the CPU's either way.
#[test]
fn auto_keeps_the_faster_backend_and_says_why() {
    if gpu("auto").is_none() {
        return;
    }
    let mut runtime = pollster::block_on(Runtime::start(
        BackendChoice::Auto,
        cpu_model("f32"),
        None,
        Faults::default(),
    ));
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    let backend = runtime.backend().clone();
    let auto = backend.auto.clone().expect("auto's verdict");
    assert_eq!(backend.degraded_reason, None, "auto does not degrade");
    let expected = match backend.name {
        BackendKind::WebGpu => "auto chose WebGPU: a decode step took ",
        BackendKind::CpuReference => "auto chose the CPU reference: a decode step took ",
    };
    assert!(auto.starts_with(expected), "{auto}");
    assert_eq!(
        backend.segments,
        [segment(backend.name, 0, STEPS - 1, &auto)]
    );
}

/// Without a GPU, `auto` runs the CPU without calling it a fallback, and says why.
#[test]
fn auto_without_a_gpu_runs_the_cpu_and_says_why() {
    let faults = Faults {
        no_webgpu: true,
        ..Faults::default()
    };
    let mut runtime = pollster::block_on(Runtime::start(
        BackendChoice::Auto,
        cpu_model("f32"),
        None,
        faults,
    ));
    assert_eq!(runtime_tokens(&mut runtime), cpu_tokens());
    let backend = runtime.backend();
    assert_eq!(backend.name, BackendKind::CpuReference);
    assert_eq!(backend.degraded_reason, None);
    assert_eq!(
        backend.auto.as_deref(),
        Some(
            "auto chose the CPU reference: the GPU could not be used: WebGPU is not available here"
        )
    );
}

#[test]
fn the_race_is_won_by_the_faster_decode_step() {
    let (gpu_wins, words) = Race {
        cpu_ms: 0.31,
        gpu_ms: 5.9,
    }
    .verdict("");
    assert!(!gpu_wins);
    assert_eq!(
        words,
        "auto chose the CPU reference: a decode step took 0.31 ms there against 5.90 ms on this \
         adapter, 19.0x faster; for a model this small, dispatch and read-back dominate the \
         GPU's step"
    );
    let (gpu_wins, words) = Race {
        cpu_ms: 2.0,
        gpu_ms: 0.5,
    }
    .verdict("NVIDIA H200");
    assert!(gpu_wins);
    assert_eq!(
        words,
        "auto chose WebGPU: a decode step took 0.50 ms on NVIDIA H200 against 2.00 ms on the \
         CPU reference, 4.0x faster"
    );
}
