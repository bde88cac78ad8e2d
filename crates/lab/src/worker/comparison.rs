//! The model worker's run of the Compare panel's request: the two policies on one seeded
//! stream, compared by [`policy::compare::comparison`] as `decode-lab compare` compares
//! them (the logits along a's path come from the runtime, asynchronously), then each policy
//! over many seeds through the Generate panel's loop, merged into a [`PathTree`] as
//! `decode-lab paths` builds it, and the report's parts ([`policy::compare_report`])
//! written as the panel's HTML.

use gpu::Runtime;
use policy::compare::Comparison;
use policy::compare_report::{comparison_parts, divergence_words, tree_part};
use policy::paths::{tree_run, PathTree};
use policy::{Clock, RunConfig, RunRecord, StopReason};
use tokenizer::Tokenizer;

use crate::widgets::markup::html;
use crate::worker::error::WorkerError;
use crate::worker::generation::{generate, with_breakers, with_eos};
use crate::worker::protocol::{CompareReport, CompareRequest};

/// Both policies' runs, each with the end of text and its DRY breakers found in the
/// vocabulary, as a run of the Generate panel has them.
fn configs(request: &CompareRequest, tokenizer: &Tokenizer) -> [RunConfig; 2] {
    let [a, b] = &request.breakers;
    [(&request.a, a), (&request.b, b)].map(|(config, breakers)| {
        with_eos(
            with_breakers(config.clone(), breakers, tokenizer),
            tokenizer,
        )
    })
}

/// The report of `request`, or `None` when it was cancelled. `progress` hears how far each
/// tree has got; `cancelled` is asked before every run and model call; `pause` is awaited
/// after every step.
pub async fn run_compare(
    runtime: &mut Runtime,
    tokenizer: &Tokenizer,
    request: &CompareRequest,
    clock: &mut dyn Clock,
    cancelled: &dyn Fn() -> bool,
    progress: &mut impl FnMut(String),
    pause: &impl AsyncFn(),
) -> Result<Option<CompareReport>, WorkerError> {
    let [a, b] = configs(request, tokenizer);
    progress("Running both policies on the same draws…".to_string());
    let mut runs = Vec::with_capacity(2);
    for config in [&a, &b] {
        let Some(record) = whole_run(runtime, tokenizer, config, clock, cancelled, pause).await?
        else {
            return Ok(None);
        };
        runs.push(record);
    }
    let (run_b, run_a) = (runs.pop(), runs.pop());
    let (Some(run_a), Some(run_b)) = (run_a, run_b) else {
        return Err(WorkerError::RunsUnfinished);
    };
    // The model's logits along a's path, for both policies to read.
    let mut logits = Vec::with_capacity(run_a.steps.len());
    for t in 0..run_a.steps.len() {
        let row = if t == 0 {
            runtime.prefill(&run_a.prompt_tokens).await
        } else {
            runtime.decode_step(run_a.steps[t - 1].token).await
        };
        logits.push(row.map_err(WorkerError::Model)?.to_vec());
    }
    let comparison = policy::compare::comparison(&a, &b, run_a, run_b, &logits)?;
    let mut trees = Vec::with_capacity(2);
    for (name, config) in [("a", &a), ("b", &b)] {
        let mut records = Vec::with_capacity(request.seeds);
        for i in 0..request.seeds {
            if cancelled() {
                return Ok(None);
            }
            if i % 25 == 0 {
                progress(format!(
                    "Policy {name}'s tree: run {} of {}…",
                    i + 1,
                    request.seeds
                ));
            }
            let run = tree_run(config, config.seed.wrapping_add(i as u64), request.depth);
            let Some(record) = whole_run(runtime, tokenizer, &run, clock, cancelled, pause).await?
            else {
                return Ok(None);
            };
            records.push(record);
        }
        trees.push(PathTree::from_records(&records, request.depth).map_err(WorkerError::Paths)?);
    }
    Ok(Some(report(
        &comparison,
        &request.words,
        [&trees[0], &trees[1]],
    )))
}

/// The panel's report: the comparison's parts and both trees' as HTML, and where the runs
/// part in a sentence for the live region.
fn report(comparison: &Comparison, words: &[String; 2], [a, b]: [&PathTree; 2]) -> CompareReport {
    let mut parts = comparison_parts(comparison, [&words[0], &words[1]]);
    parts.push(tree_part("a", &words[0], a));
    parts.push(tree_part("b", &words[1], b));
    CompareReport {
        html: html(&parts),
        summary: divergence_words(comparison),
    }
}

/// One run of `config` with no one watching its steps, or `None` when it was cancelled.
async fn whole_run(
    runtime: &mut Runtime,
    tokenizer: &Tokenizer,
    config: &RunConfig,
    clock: &mut dyn Clock,
    cancelled: &dyn Fn() -> bool,
    pause: &impl AsyncFn(),
) -> Result<Option<RunRecord>, WorkerError> {
    let record = generate(
        runtime,
        tokenizer,
        config,
        clock,
        cancelled,
        &mut |_, _| {},
        pause,
    )
    .await?;
    Ok((record.stop_reason != StopReason::Cancelled).then_some(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panels::compare::view_model::CompareForm;
    use crate::test_support::{cpu_runtime, read, Ticks};
    use crate::widgets::form::Form;
    use model::Transformer;
    use policy::paths::path_tree;

    /// The worker's report holds the numbers `policy::compare` and `policy::paths` give
    /// over the reference transformer, run apart from the worker's runtime.
    #[test]
    fn the_report_holds_what_the_clis_functions_compute() {
        pollster::block_on(async {
            let (files, mut runtime) = cpu_runtime().await;
            let tokenizer = &files.tokenizer;
            let mut form = CompareForm::default();
            form.run[3] = "30".into();
            form.run[4] = "2".into();
            let request = form.check().unwrap();
            let done = run_compare(
                &mut runtime,
                tokenizer,
                &request,
                &mut Ticks(0.0),
                &|| false,
                &mut |_| {},
                &async || {},
            )
            .await
            .unwrap()
            .unwrap();

            let weights = read("model.f32.safetensors").await.unwrap();
            let mut reference =
                Transformer::from_safetensors(files.config.clone(), &weights).unwrap();
            let [a, b] = configs(&request, tokenizer);
            let c = policy::compare::compare(&mut reference, tokenizer, &a, &b, &mut Ticks(0.0))
                .unwrap();
            // Each step's KL and TV, in full, in its table cell.
            for s in &c.steps {
                let kl = if s.divergence.kl.is_finite() {
                    s.divergence.kl.to_string()
                } else {
                    "inf".to_string()
                };
                assert!(done.html.contains(&format!("data-value=\"{kl}\"")), "{kl}");
                assert!(done
                    .html
                    .contains(&format!("data-value=\"{}\"", s.divergence.tv)));
            }
            let tree = path_tree(&mut reference, tokenizer, &b, 7, 30, 2, &mut Ticks(0.0)).unwrap();
            for n in &tree.nodes {
                assert!(done
                    .html
                    .contains(&format!("data-value=\"{}\"", n.analytic)));
            }
            assert!(done.html.contains("id=\"cmp-tree-b-table\""));
            assert!(
                done.summary.starts_with("The runs part at step")
                    || done.summary.starts_with("Both policies chose")
            );
        });
    }

    #[test]
    fn cancel_stops_between_runs() {
        pollster::block_on(async {
            let (files, mut runtime) = cpu_runtime().await;
            let request = CompareForm::default().check().unwrap();
            let calls = std::cell::Cell::new(0);
            let done = run_compare(
                &mut runtime,
                &files.tokenizer,
                &request,
                &mut Ticks(0.0),
                &|| {
                    calls.set(calls.get() + 1);
                    calls.get() > 40
                },
                &mut |_| {},
                &async || {},
            )
            .await
            .unwrap();
            assert_eq!(done, None);
        });
    }
}
