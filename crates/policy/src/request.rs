//! What a run asks of the model, by name: which forward pass ([`BackendChoice`]) and which
//! weights ([`Precision`]). The policy core runs neither; it owns their names so that the
//! CLI, the lab's page and its model worker, and the run record read and write the same
//! ones, and so that the page can name them without linking the model or the GPU runtime.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{BackendKind, PolicyError};

/// How the matrices are stored. Named `f32` and `int8` on the command line (`--weights`),
/// in the lab's `precision=` key and in the worker's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    /// Symmetric per-output-row int8: `w[r][c] ≈ scale[r] · q[r][c]`, q in −127..=127.
    Int8,
}

impl Precision {
    /// Every precision the model ships in, f32 first.
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::Int8];

    /// The precision's name: `f32` or `int8`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Int8 => "int8",
        }
    }

    /// The role of its weights file in the model's `config.json` (`weights-f32`,
    /// `weights-int8`).
    pub fn role(self) -> &'static str {
        match self {
            Precision::F32 => "weights-f32",
            Precision::Int8 => "weights-int8",
        }
    }
}

by_name!(Precision, UnknownPrecision);

/// Which forward pass a run asks for: `auto`, `gpu` or `cpu` on the command line
/// (`--backend`), in the lab's `backend=` key and in the worker's messages. Reading also
/// takes the name of the backend `gpu` and `cpu` run (`webgpu`, `cpu-reference`), as a run
/// record writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The faster of the two on this machine: the GPU's decode step is timed against the
    /// CPU reference's once the GPU passed its canary, and the faster one runs.
    Auto,
    /// WebGPU (natively: whatever adapter wgpu finds), falling back to `cpu-reference`.
    #[serde(alias = "webgpu")]
    Gpu,
    /// The CPU reference pass.
    #[serde(alias = "cpu-reference")]
    Cpu,
}

impl BackendChoice {
    /// Every choice, `auto` first.
    pub const ALL: [BackendChoice; 3] =
        [BackendChoice::Auto, BackendChoice::Gpu, BackendChoice::Cpu];

    /// The choice's name: `auto`, `gpu` or `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Gpu => "gpu",
            BackendChoice::Cpu => "cpu",
        }
    }

    /// The backend this choice runs when nothing falls back; `None` for `auto`, which
    /// measures first.
    pub fn runs(self) -> Option<BackendKind> {
        match self {
            BackendChoice::Auto => None,
            BackendChoice::Gpu => Some(BackendKind::WebGpu),
            BackendChoice::Cpu => Some(BackendKind::CpuReference),
        }
    }

    /// Whether a run with this choice starts the GPU (`gpu` and `auto`).
    pub fn tries_gpu(self) -> bool {
        self != BackendChoice::Cpu
    }
}

by_name!(BackendChoice);

impl FromStr for BackendChoice {
    type Err = PolicyError;

    /// Reads a choice by its [`name`](BackendChoice::name) or by the name of the backend it
    /// [`runs`](BackendChoice::runs).
    fn from_str(name: &str) -> Result<BackendChoice, PolicyError> {
        BackendChoice::ALL
            .into_iter()
            .find(|choice| {
                choice.name() == name || choice.runs().is_some_and(|kind| kind.name() == name)
            })
            .ok_or_else(|| PolicyError::UnknownBackend {
                name: name.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::tests::reads_back;

    #[test]
    fn a_precision_reads_back_from_its_name_in_text_and_in_json() {
        for precision in Precision::ALL {
            reads_back(precision);
            assert_eq!(precision.role(), format!("weights-{precision}"));
        }
        assert_eq!(
            "fp16".parse::<Precision>().unwrap_err().to_string(),
            "precision \"fp16\" is not known: expected f32 or int8"
        );
    }

    #[test]
    fn a_choice_reads_back_from_its_name_and_from_the_backend_it_runs() {
        for choice in BackendChoice::ALL {
            reads_back(choice);
            let Some(runs) = choice.runs() else {
                assert_eq!(choice, BackendChoice::Auto);
                continue;
            };
            assert_eq!(runs.name().parse::<BackendChoice>(), Ok(choice));
            let read: BackendChoice = serde_json::from_str(&format!("\"{runs}\""))
                .expect("serde reads the backend's name too");
            assert_eq!(read, choice);
        }
        assert_eq!(
            "tpu".parse::<BackendChoice>().unwrap_err().to_string(),
            "backend \"tpu\" is not known: expected auto or gpu or cpu"
        );
    }
}
