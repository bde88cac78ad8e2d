//! One optimisation step: AdamW (weight decay on matrices only), a linear warm-up then
//! cosine decay of the learning rate, and clipping of the global gradient norm.

use candle_core::Var;
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

use crate::{Net, TrainError};

/// The learning rate as a function of the step: linear warm-up from 0 to `peak` over
/// `warmup` steps, then a cosine from `peak` down to `floor` at step `total`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    pub peak: f64,
    pub floor: f64,
    pub warmup: usize,
    pub total: usize,
}

impl Schedule {
    /// The rate for step `step` (0-based).
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.peak * (step + 1) as f64 / self.warmup as f64;
        }
        let span = self.total.saturating_sub(self.warmup).max(1);
        self.decayed((step - self.warmup) as f64 / span as f64)
    }

    /// The cosine part at `progress` through the decay (0 = peak, 1 and beyond = floor): what
    /// a run with a time budget uses after its warm-up, measuring progress in seconds.
    pub fn decayed(&self, progress: f64) -> f64 {
        let progress = progress.clamp(0.0, 1.0);
        self.floor
            + 0.5 * (self.peak - self.floor) * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// Optimiser settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimConfig {
    pub schedule: Schedule,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    /// Gradients are scaled down so that their global L2 norm is at most this (0: off).
    pub clip_norm: f64,
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    pub loss: f32,
    pub grad_norm: f32,
    pub lr: f64,
}

/// The optimiser state of a [`Net`]: one AdamW over the matrices (decayed) and one over the
/// norm weights (not decayed).
pub struct Optim {
    config: OptimConfig,
    decayed: AdamW,
    plain: AdamW,
    vars: Vec<Var>,
    step: usize,
}

impl Optim {
    pub fn new(net: &Net, config: OptimConfig) -> Result<Optim, TrainError> {
        let data = net
            .varmap()
            .data()
            .lock()
            .map_err(|_| TrainError::State("the VarMap lock is poisoned".into()))?;
        // Sorted by name, so the order of updates never depends on a hash map.
        let mut named: Vec<(&String, &Var)> = data.iter().collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let (mut matrices, mut vectors) = (Vec::new(), Vec::new());
        for (_, var) in &named {
            if var.as_tensor().rank() >= 2 {
                matrices.push((*var).clone());
            } else {
                vectors.push((*var).clone());
            }
        }
        let params = |weight_decay| ParamsAdamW {
            lr: config.schedule.lr(0),
            beta1: config.beta1,
            beta2: config.beta2,
            eps: 1e-8,
            weight_decay,
        };
        let vars = named.iter().map(|(_, v)| (*v).clone()).collect();
        Ok(Optim {
            decayed: AdamW::new(matrices, params(config.weight_decay))?,
            plain: AdamW::new(vectors, params(0.0))?,
            config,
            vars,
            step: 0,
        })
    }

    /// Replaces the schedule (the rate of later steps follows the new one).
    pub fn set_schedule(&mut self, schedule: Schedule) {
        self.config.schedule = schedule;
    }

    pub fn schedule(&self) -> Schedule {
        self.config.schedule
    }

    /// Steps taken so far.
    pub fn steps(&self) -> usize {
        self.step
    }

    /// Backpropagates `loss` and updates the weights at the schedule's rate for this step.
    pub fn step(&mut self, loss: &candle_core::Tensor) -> Result<StepStats, TrainError> {
        let lr = self.config.schedule.lr(self.step);
        self.step_at(loss, lr)
    }

    /// Backpropagates `loss` and updates the weights at learning rate `lr`.
    pub fn step_at(
        &mut self,
        loss: &candle_core::Tensor,
        lr: f64,
    ) -> Result<StepStats, TrainError> {
        let mut grads = loss.backward()?;
        let mut squares = 0.0f64;
        for var in &self.vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                squares += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
            }
        }
        let grad_norm = squares.sqrt();
        if !grad_norm.is_finite() {
            return Err(TrainError::State(format!(
                "the gradient norm is {grad_norm} at step {}",
                self.step
            )));
        }
        if self.config.clip_norm > 0.0 && grad_norm > self.config.clip_norm {
            let factor = self.config.clip_norm / grad_norm;
            for var in &self.vars {
                if let Some(g) = grads.remove(var.as_tensor()) {
                    grads.insert(var.as_tensor(), (g * factor)?);
                }
            }
        }
        self.decayed.set_learning_rate(lr);
        self.plain.set_learning_rate(lr);
        self.decayed.step(&grads)?;
        self.plain.step(&grads)?;
        self.step += 1;
        Ok(StepStats {
            loss: loss.to_scalar::<f32>()?,
            grad_norm: grad_norm as f32,
            lr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_the_floor() {
        let s = Schedule {
            peak: 1e-2,
            floor: 1e-3,
            warmup: 10,
            total: 110,
        };
        assert!((s.lr(0) - 1e-3).abs() < 1e-12);
        assert!((s.lr(9) - 1e-2).abs() < 1e-12);
        assert!((s.lr(10) - 1e-2).abs() < 1e-12);
        assert!((s.lr(60) - 5.5e-3).abs() < 1e-9);
        assert!((s.lr(110) - 1e-3).abs() < 1e-12);
        assert!((s.lr(500) - 1e-3).abs() < 1e-12);
    }
}
