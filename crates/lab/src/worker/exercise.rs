//! The model worker's run of the "Your turn" exercise: every planned run through the
//! Generate loop on one runtime, each summarised as a [`Sample`].

use gpu::Runtime;
use policy::{Clock, Policy, RunConfig, RunRecord, SeedSource, StopConfig, StopReason};
use tokenizer::Tokenizer;

use crate::worker::error::WorkerError;
use crate::worker::generation::{generate, with_breakers, with_eos};
use crate::worker::protocol::{Exercise, Finished, RunProgress, Sample, TEMPERATURES};

/// One of the exercise's runs: which setting (an index into [`TEMPERATURES`]) and what to run.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRun {
    pub setting: usize,
    pub config: RunConfig,
}

/// The exercise's runs, planned where they run.
impl Exercise {
    pub fn seed_list(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.seeds as u64).map(|i| self.first_seed + i)
    }

    /// What one setting runs with one seed: the exercise's policy (the chapter's top-k,
    /// nothing else filtered, unless the learner added knobs) at the setting's temperature.
    pub fn config(&self, temperature: f64, seed: u64) -> RunConfig {
        RunConfig {
            app_version: env!("CARGO_PKG_VERSION").into(),
            prompt_template: "{prompt}".into(),
            prompt: self.prompt.clone(),
            policy: Policy {
                temperature,
                ..self.policy.clone()
            },
            seed,
            seed_source: SeedSource::User,
            max_tokens: self.max_tokens,
            stop: StopConfig::default(),
        }
    }

    /// Every run, seed by seed with both settings in turn, so that a run stopped early has
    /// as many samples of one setting as of the other (give or take one).
    pub fn plan(&self) -> Vec<PlannedRun> {
        self.seed_list()
            .flat_map(|seed| {
                TEMPERATURES
                    .iter()
                    .enumerate()
                    .map(move |(setting, &t)| PlannedRun {
                        setting,
                        config: self.config(t, seed),
                    })
            })
            .collect()
    }
}

impl Sample {
    pub fn from_record(record: &RunRecord) -> Sample {
        Sample {
            seed: record.config.seed,
            text: record.output_text.clone(),
            tokens: record.steps.iter().map(|s| s.token).collect(),
            entropies: record.steps.iter().map(|s| s.entropy).collect(),
            probs: record.steps.iter().map(|s| s.prob).collect(),
        }
    }
}

/// Runs every planned run on `runtime` through the Generate panel's loop. `on_run` hears
/// each run before it starts; `cancelled` is asked before each run and each model call;
/// `pause` is awaited after every step so the page can draw.
pub async fn run_exercise(
    runtime: &mut Runtime,
    tokenizer: &Tokenizer,
    exercise: &Exercise,
    clock: &mut dyn Clock,
    cancelled: &dyn Fn() -> bool,
    on_run: &mut impl FnMut(RunProgress),
    pause: &impl AsyncFn(),
) -> Result<Finished, WorkerError> {
    let plan = exercise.plan();
    let total = plan.len();
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    for (index, run) in plan.into_iter().enumerate() {
        if cancelled() {
            return Ok(Finished::Cancelled { done: index, total });
        }
        on_run(RunProgress {
            index,
            total,
            temperature: run.config.policy.temperature,
            seed: run.config.seed,
        });
        let config = with_eos(
            with_breakers(run.config, &exercise.dry_breakers, tokenizer),
            tokenizer,
        );
        let record = generate(
            runtime,
            tokenizer,
            &config,
            clock,
            cancelled,
            &mut |_, _| {},
            pause,
        )
        .await?;
        if record.stop_reason == StopReason::Cancelled {
            return Ok(Finished::Cancelled { done: index, total });
        }
        samples[run.setting].push(Sample::from_record(&record));
    }
    Ok(Finished::Complete {
        exercise: Box::new(exercise.clone()),
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use crate::panels::your_turn::view_model::{ExerciseForm, Prediction, Results};
    use crate::test_support::{cpu_runtime, read, Ticks};
    use crate::widgets::form::Form;
    use model::Transformer;

    async fn run(runtime: &mut Runtime, tokenizer: &Tokenizer, exercise: &Exercise) -> Results {
        match run_exercise(
            runtime,
            tokenizer,
            exercise,
            &mut Ticks(0.0),
            &|| false,
            &mut |_| {},
            &async || {},
        )
        .await
        .unwrap()
        {
            Finished::Complete { exercise, samples } => Results::new(*exercise, samples),
            other => panic!("not complete: {other:?}"),
        }
    }

    /// The exercise on the real model (CPU backend) at the default settings: the summaries
    /// match a recount from the samples, each step's entropy matches the one recomputed
    /// from its top five (top-k 3 keeps at most three, so they are all there), one output
    /// matches `policy::generate` over the reference transformer, the same seeds give the
    #[test]
    fn the_plan_pairs_the_seeds_across_the_settings() {
        let exercise = ExerciseForm {
            seeds: "3".into(),
            first_seed: "10".into(),
            ..ExerciseForm::default()
        }
        .check()
        .unwrap();
        let plan = exercise.plan();
        assert_eq!(plan.len(), exercise.total_runs());
        let shape: Vec<(usize, f64, u64)> = plan
            .iter()
            .map(|r| (r.setting, r.config.policy.temperature, r.config.seed))
            .collect();
        assert_eq!(
            shape,
            [
                (0, 0.2, 10),
                (1, 1.5, 10),
                (0, 0.2, 11),
                (1, 1.5, 11),
                (0, 0.2, 12),
                (1, 1.5, 12)
            ]
        );
        for run in &plan {
            assert_eq!(run.config.policy.top_k, 3);
            assert_eq!(run.config.policy.top_p, 1.0);
            assert_eq!(run.config.max_tokens, 8);
            run.config.policy.validate(768).unwrap();
        }
    }

    #[test]
    fn the_exercise_on_the_model_matches_independent_counts() {
        pollster::block_on(async {
            let (files, mut runtime) = cpu_runtime().await;
            let tokenizer = &files.tokenizer;
            let exercise = ExerciseForm::default().check().unwrap();
            let mut progress = Vec::new();
            let finished = run_exercise(
                &mut runtime,
                tokenizer,
                &exercise,
                &mut Ticks(0.0),
                &|| false,
                &mut |p| progress.push((p.index, p.total, p.temperature, p.seed)),
                &async || {},
            )
            .await
            .unwrap();
            let Finished::Complete {
                exercise: ran,
                samples,
            } = finished
            else {
                panic!("not complete: {finished:?}");
            };
            assert_eq!(*ran, exercise);
            let results = Results::new(*ran, samples);
            assert_eq!(progress.len(), 16);
            assert_eq!(progress[3], (3, 16, 1.5, 8));

            for (setting, summary) in results.summaries.iter().enumerate() {
                let samples = &results.samples[setting];
                assert_eq!(summary.runs, 8);
                let seeds: Vec<u64> = samples.iter().map(|s| s.seed).collect();
                assert_eq!(seeds, (7..15).collect::<Vec<_>>());
                let texts: BTreeSet<&str> = samples.iter().map(|s| s.text.as_str()).collect();
                assert_eq!(summary.distinct, texts.len());
                let grouped: usize = summary.groups.iter().map(|g| g.seeds.len()).sum();
                assert_eq!(grouped, 8);
                let firsts: BTreeSet<u32> = samples.iter().map(|s| s.tokens[0]).collect();
                assert_eq!(summary.distinct_first, firsts.len());
            }

            // Entropy and chosen probabilities, recomputed from each step's top five.
            for (setting, &temperature) in TEMPERATURES.iter().enumerate() {
                let mut entropy = Vec::new();
                let mut chosen = Vec::new();
                for seed in exercise.seed_list() {
                    let config = with_eos(exercise.config(temperature, seed), tokenizer);
                    let record = generate(
                        &mut runtime,
                        tokenizer,
                        &config,
                        &mut Ticks(0.0),
                        &|| false,
                        &mut |_, _| {},
                        &async || {},
                    )
                    .await
                    .unwrap();
                    for step in &record.steps {
                        assert!(step.survivors <= step.top.len(), "{step:?}");
                        let h: f64 = step
                            .top
                            .iter()
                            .filter(|a| a.prob > 0.0)
                            .map(|a| -a.prob * a.prob.ln())
                            .sum();
                        assert!((h - step.entropy).abs() < 1e-9, "{h} vs {}", step.entropy);
                        entropy.push(h);
                        let p = step.top.iter().find(|a| a.id == step.token).unwrap();
                        chosen.push(p.prob);
                    }
                }
                let summary = &results.summaries[setting];
                let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
                assert_eq!(summary.steps, entropy.len());
                assert!((summary.mean_entropy_nats - mean(&entropy)).abs() < 1e-9);
                assert!((summary.mean_chosen_prob - mean(&chosen)).abs() < 1e-9);
            }

            // One output through the CLI's path: `policy::generate` over the reference.
            let weights = read("model.f32.safetensors").await.unwrap();
            let mut reference =
                Transformer::from_safetensors(files.config.clone(), &weights).unwrap();
            let config = with_eos(exercise.config(1.5, 9), tokenizer);
            let expected = policy::generate(
                &mut reference,
                tokenizer,
                &config,
                &mut Ticks(0.0),
                &mut policy::generate::Unobserved,
            )
            .unwrap();
            assert_eq!(results.samples[1][2].seed, 9);
            assert_eq!(results.samples[1][2].text, expected.output_text);

            let again = run(&mut runtime, tokenizer, &exercise).await;
            assert_eq!(again, results);

            let [low, high] = &results.summaries;
            eprintln!(
                "default exercise: 0.2 → {} distinct, {:.4} bits, p̄ {:.4}, {} first tokens; 1.5 → {} distinct, {:.4} bits, p̄ {:.4}, {} first tokens",
                low.distinct,
                low.mean_entropy_bits(),
                low.mean_chosen_prob,
                low.distinct_first,
                high.distinct,
                high.mean_entropy_bits(),
                high.mean_chosen_prob,
                high.distinct_first
            );
            assert!(low.mean_entropy_nats < high.mean_entropy_nats);
            assert!(low.distinct <= high.distinct);
            assert_eq!(results.observed(), Prediction::High);
        });
    }

    #[test]
    fn cancel_stops_between_runs() {
        pollster::block_on(async {
            let (files, mut runtime) = cpu_runtime().await;
            let exercise = ExerciseForm {
                max_tokens: "4".into(),
                ..ExerciseForm::default()
            }
            .check()
            .unwrap();
            let started = std::cell::Cell::new(0);
            let finished = run_exercise(
                &mut runtime,
                &files.tokenizer,
                &exercise,
                &mut Ticks(0.0),
                &|| started.get() > 3,
                &mut |_| started.set(started.get() + 1),
                &async || {},
            )
            .await
            .unwrap();
            assert_eq!(finished, Finished::Cancelled { done: 3, total: 16 });
        });
    }
}
