//! The pieces of the training loop: one optimiser step on a sampled batch, the learning
//! rate over a run (by step, or by the clock under a time budget), the held-out points of
//! the loss curve, and the log the report is written from.

use candle_core::Tensor;

use crate::data::{spread_windows, Sampler};
use crate::optim::StepStats;
use crate::{Net, Optim, Schedule, TrainError};

/// Held-out windows per language for the validation points of the loss curve.
pub const PROBE_WINDOWS: usize = 16;

/// The loss curve's fixed held-out windows: [`PROBE_WINDOWS`] per validation stream,
/// evenly spread, as input and target tensors `[n, len]`.
pub struct HeldOut {
    probes: Vec<(Tensor, Tensor)>,
}

impl HeldOut {
    pub fn new(streams: &[Vec<u32>], len: usize, net: &Net) -> Result<HeldOut, TrainError> {
        let probes = streams
            .iter()
            .map(|stream| {
                let pick = spread_windows(stream, len, PROBE_WINDOWS);
                let n = pick.len();
                let x: Vec<u32> = pick.iter().flat_map(|(i, _)| i.iter().copied()).collect();
                let y: Vec<u32> = pick.iter().flat_map(|(_, t)| t.iter().copied()).collect();
                Ok((
                    Tensor::from_vec(x, (n, len), net.device())?,
                    Tensor::from_vec(y, (n, len), net.device())?,
                ))
            })
            .collect::<Result<_, TrainError>>()?;
        Ok(HeldOut { probes })
    }

    /// The held-out loss of each stream (nats/token, the candle graph).
    pub fn losses(&self, net: &Net) -> Result<Vec<f64>, TrainError> {
        self.probes
            .iter()
            .map(|(x, y)| Ok(f64::from(net.loss(x, y)?.to_scalar::<f32>()?)))
            .collect()
    }
}

/// A validation point of the loss curve: held-out loss per language (nats/token, candle).
#[derive(Clone, Debug, PartialEq)]
pub struct ValPoint {
    pub step: usize,
    pub losses: Vec<f64>,
}

/// What the training loop did, for the chart and the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainLog {
    /// The training loss of every step.
    pub losses: Vec<f32>,
    pub val_points: Vec<ValPoint>,
    /// Optimiser steps taken.
    pub steps: usize,
    /// The time budget ran out before `--steps` did.
    pub time_capped: bool,
    pub train_secs: f64,
    /// Of `train_secs`, the time spent on validation points.
    pub eval_secs: f64,
}

impl TrainLog {
    /// The mean training loss of the last `n` steps (0 before any step).
    pub fn recent_loss(&self, n: usize) -> f32 {
        let recent = &self.losses[self.losses.len().saturating_sub(n)..];
        recent.iter().sum::<f32>() / recent.len().max(1) as f32
    }
}

/// The learning rate over a run. With a fixed step count it is the schedule's, by step.
/// Under a time budget the warm-up still counts steps, and the cosine then follows the
/// fraction of the time left after warm-up, so it ends when the budget does.
#[derive(Clone, Debug)]
pub struct Pacing {
    schedule: Schedule,
    fixed_steps: bool,
    budget_secs: f64,
    /// When the first step after warm-up began (seconds into training).
    warmup_end: Option<f64>,
}

impl Pacing {
    pub fn new(schedule: Schedule, steps: Option<usize>, budget_secs: f64) -> Pacing {
        Pacing {
            schedule,
            fixed_steps: steps.is_some(),
            budget_secs,
            warmup_end: None,
        }
    }

    /// The rate for step `step`, which begins `now` seconds into training.
    pub fn lr(&mut self, step: usize, now: f64) -> f64 {
        if self.fixed_steps || step < self.schedule.warmup {
            return self.schedule.lr(step);
        }
        let start = *self.warmup_end.get_or_insert(now);
        self.schedule
            .decayed((now - start) / (self.budget_secs - start).max(1.0))
    }
}

/// One optimiser step at rate `lr` on `batch` windows of `len` tokens from `sampler`.
pub fn train_step(
    net: &Net,
    optim: &mut Optim,
    sampler: &mut Sampler,
    batch: usize,
    len: usize,
    lr: f64,
) -> Result<StepStats, TrainError> {
    let (x, y) = sampler.batch(batch, len)?;
    let x = Tensor::from_vec(x, (batch, len), net.device())?;
    let y = Tensor::from_vec(y, (batch, len), net.device())?;
    let loss = net.loss(&x, &y)?;
    optim.step_at(&loss, lr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        Schedule {
            peak: 1.0,
            floor: 0.1,
            warmup: 2,
            total: 10,
        }
    }

    #[test]
    fn fixed_steps_follow_the_schedule_whatever_the_clock() {
        let mut pacing = Pacing::new(schedule(), Some(10), 60.0);
        for (step, now) in [(0, 0.0), (1, 59.0), (5, 1.0), (9, 500.0)] {
            assert_eq!(pacing.lr(step, now), schedule().lr(step));
        }
    }

    #[test]
    fn a_time_budget_decays_over_the_time_left_after_warm_up() {
        let mut pacing = Pacing::new(schedule(), None, 100.0);
        assert_eq!(pacing.lr(0, 0.0), 0.5);
        assert_eq!(pacing.lr(1, 1.0), 1.0);
        // Warm-up ends at 20 s: the peak there, half-way at 60 s, the floor at the budget.
        assert_eq!(pacing.lr(2, 20.0), 1.0);
        assert!((pacing.lr(3, 60.0) - 0.55).abs() < 1e-12);
        assert!((pacing.lr(4, 100.0) - 0.1).abs() < 1e-12);
        assert!((pacing.lr(5, 130.0) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn recent_loss_is_the_mean_of_the_last_steps() {
        let mut log = TrainLog::default();
        assert_eq!(log.recent_loss(10), 0.0);
        log.losses = vec![9.0, 1.0, 2.0, 3.0];
        assert_eq!(log.recent_loss(3), 2.0);
        assert_eq!(log.recent_loss(50), 3.75);
    }
}
