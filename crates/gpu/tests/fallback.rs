//! The canary and every way to fall back to `cpu-reference`: no WebGPU, no adapter, a
//! failed device request, a canary mismatch, and a device lost mid-run. Each fault is
//! injected and goes through the real failure path where one exists; after a fallback the
//! run goes on from the same step and its greedy tokens equal the CPU reference's.

mod common;

use common::{argmax, cpu_model, gpu};
use gpu::{BackendChoice, Faults, Runtime};
use policy::BackendKind;

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
    let error = Faults::parse("gremlins").unwrap_err();
    assert!(error.contains("gremlins"), "{error}");
}
