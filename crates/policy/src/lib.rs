//! The decoding policy: how a language model's final-position logits become one token.
//!
//! A step applies, in a declared order, constraints (forbidden ids, logit bias, repetition,
//! frequency and presence penalties, no-repeat n-grams, minimum new tokens), temperature,
//! top-k, top-p and min-p, a numerically stable softmax, then takes the argmax or draws
//! with NumPy's `default_rng` stream. [`chapter`] reproduces the course's `decode.py`
//! exactly; [`generate`] runs the loop over any model and accounts for every token;
//! [`speculative`] is the accept/reject rule of speculative decoding over two final
//! distributions.
//!
//! This crate is pure: no I/O, no clocks, no globals, and no randomness but the seeded
//! generator handed in. It builds for native targets and `wasm32-unknown-unknown`.
//!
//! ```
//! use policy::{step, NumpyRng, Policy, Snapshots, StepContext};
//!
//! let policy = Policy { temperature: 0.7, top_k: 3, ..Policy::default() };
//! let mut rng = NumpyRng::new(7);
//! let logits = [1.2f32, 0.1, 2.4, 1.7];
//! let outcome = step(&policy, &logits, StepContext::default(), &mut rng, Snapshots::Skip)?;
//! assert_eq!(outcome.survivors, 3);
//! assert!(outcome.prob > 0.0);
//! # Ok::<(), policy::PolicyError>(())
//! ```

// The one exception is `math`'s call of its vector kernels, each after the run-time
// check of the instruction set it was compiled for.
#![deny(unsafe_code)]

#[macro_use]
mod names;

mod canonical;

pub mod chain;
pub mod chapter;
pub mod compare;
pub mod compare_report;
pub mod engine;
mod error;
mod excerpt;
mod figure;
pub mod formats;
pub mod generate;
mod knobs;
mod logit_bias;
mod math;
mod model_view;
pub mod modern;
pub mod paths;
mod pipeline;
mod rank;
pub mod record;
mod request;
pub mod rng;
mod sequences;
mod shortest;
pub mod speculative;
pub mod step_report;
pub mod version;

pub use chain::{parse_samplers, Sampler};
pub use engine::{conformance, Conformance, Engine, EngineResult};
pub use error::{Constraint, PolicyError};
pub use excerpt::{Excerpt, EXCERPT_CHARS};
pub use figure::{figure, figure_short};
pub use generate::{
    generate, Clock, Generation, LanguageModel, ModelCall, Observer, StopReason, Vocabulary,
};
pub use knobs::{
    knob_index, knob_words, Knob, KnobError, KnobGroup, KnobKind, KnobProblem, PolicyRequest,
    KNOBS, KNOB_COUNT,
};
pub use logit_bias::parse_logit_bias;
pub use model_view::{model_view, ModelView, MODEL_TOP};
pub use pipeline::{
    check_logits, step, ConstraintTable, Logit, MirostatMu, Policy, Snapshots, Stage, StageOrder,
    StageSnapshot, StepContext, StepOutcome, Stepper, TokenProb, DEVICE_CONSTRAINT_LIMIT,
    DRY_ALLOWED_LENGTH, DRY_BASE, LAB_TEMPERATURE, LAB_TEMPERATURE_TEXT, MIROSTAT_ETA,
    MIROSTAT_TAU, POLICY_VERSION, XTC_THRESHOLD,
};
pub use rank::nearest_rank;
pub use record::{
    hex, parse_records, replay, sha256_hex, ArtifactId, Audit, Backend, BackendKind, RecordError,
    ReplayReport, RunConfig, RunRecord, SeedSource, Segment, StopConfig, MAX_TIMING_US,
};
pub use request::{BackendChoice, Precision};
pub use rng::{NumpyRng, SplitMix64};
pub use sequences::{parse_bad_words, parse_sequence_bias};
pub use shortest::Shortest;
pub use version::{parse_tags, TagError, VersionKey};
