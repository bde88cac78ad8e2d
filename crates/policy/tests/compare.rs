//! Two policies on the same draws, for policies whose step has state or chance: mirostat's
//! μ and XTC's chance. Each teacher-forced distribution is checked against what the runs
//! themselves did: a's probability of its own token is the one its record kept, a policy
//! compared with itself is at distance 0, and XTC's mixed distribution matches the share of
//! thousands of seeded first tokens.

mod support;

use policy::compare::compare;
use policy::{generate, Policy, StopConfig};
use support::{config, Bytes, Ticks, Toy};

fn mirostat() -> Policy {
    Policy {
        temperature: 1.0,
        mirostat: 2,
        mirostat_tau: 2.0,
        mirostat_eta: 0.3,
        ..Policy::default()
    }
}

#[test]
fn a_mirostat_run_is_followed_with_the_mu_it_had() {
    let a = config(mirostat(), 12, StopConfig::default());
    let c = compare(&mut Toy::new(64), &Bytes, &a, &a, &mut Ticks(0.0)).unwrap();
    assert_eq!(c.steps.len(), 12);
    // μ moved: the test is about steps after the first.
    let mus: Vec<f64> = c.a.steps.iter().map(|s| s.mirostat_mu.unwrap()).collect();
    assert!(mus.windows(2).any(|w| w[0] != w[1]), "{mus:?}");
    for (s, recorded) in c.steps.iter().zip(&c.a.steps) {
        assert_eq!(s.prob_a, recorded.prob, "step {}", s.step);
        // b is the same policy, its μ moved by the same tokens: the same distribution.
        assert_eq!(s.prob_b, s.prob_a, "step {}", s.step);
        assert_eq!(
            (s.divergence.kl, s.divergence.tv),
            (0.0, 0.0),
            "step {}",
            s.step
        );
    }
}

#[test]
fn a_mirostat_b_moves_its_own_mu_along_as_path() {
    let a = config(
        Policy {
            temperature: 0.8,
            ..Policy::default()
        },
        10,
        StopConfig::default(),
    );
    let b = config(mirostat(), 10, StopConfig::default());
    let c = compare(&mut Toy::new(64), &Bytes, &a, &b, &mut Ticks(0.0)).unwrap();
    // Where a's path is b's own (until they part), b's probability of the token is b's own.
    let same = c.first_divergence.unwrap_or(c.steps.len());
    assert!(same >= 1, "the runs part at once; pick another seed");
    for t in 0..same {
        assert_eq!(c.steps[t].prob_b, c.b.steps[t].prob, "step {t}");
    }
}

/// XTC at chance 0.6 removes the top choices on 60 % of steps where it can: the teacher-
/// forced distribution is the mixture, and the first tokens of 4,000 seeded runs follow it.
#[test]
fn an_xtc_chance_is_the_mixture_of_fired_and_not() {
    let xtc = |probability| Policy {
        temperature: 1.0,
        xtc_probability: probability,
        xtc_threshold: 0.05,
        ..Policy::default()
    };
    let a = config(xtc(0.6), 1, StopConfig::default());
    let mut toy = Toy::new(64);
    let fired = compare(
        &mut toy,
        &Bytes,
        &a,
        &config(xtc(1.0), 1, StopConfig::default()),
        &mut Ticks(0.0),
    )
    .unwrap();
    let unfired = compare(
        &mut toy,
        &Bytes,
        &a,
        &config(xtc(0.0), 1, StopConfig::default()),
        &mut Ticks(0.0),
    )
    .unwrap();
    let (step_f, step_u) = (&fired.steps[0], &unfired.steps[0]);
    assert!(
        step_f.survivors_b < step_u.survivors_b,
        "XTC must fire here"
    );
    let mixed = 0.6 * step_f.prob_b + 0.4 * step_u.prob_b;
    assert!(
        (step_f.prob_a - mixed).abs() < 1e-15,
        "{} vs {mixed}",
        step_f.prob_a
    );

    // Each first token's share over many seeds against its mixed probability.
    let n = 4000u64;
    let mut counts = vec![0usize; support::TOKENS.len()];
    for seed in 0..n {
        let run = policy::RunConfig { seed, ..a.clone() };
        let record = generate(
            &mut toy,
            &Bytes,
            &run,
            &mut Ticks(0.0),
            &mut policy::generate::Unobserved,
        )
        .unwrap();
        counts[record.steps[0].token as usize] += 1;
    }
    for (id, &count) in counts.iter().enumerate() {
        // Its probability with the chance fired and not, each from one step of its own.
        let p_fire = prob_under(
            &mut toy,
            &config(xtc(1.0), 1, StopConfig::default()),
            id as u32,
        );
        let p_not = prob_under(
            &mut toy,
            &config(xtc(0.0), 1, StopConfig::default()),
            id as u32,
        );
        let p = 0.6 * p_fire + 0.4 * p_not;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - n as f64 * p).abs() <= 5.0 * sd + 1.0,
            "token {id}: {count} of {n}, expected {:.1} ± {sd:.1}",
            n as f64 * p
        );
    }
}

/// The probability the first step of `run` gives token `id`, from its final distribution.
fn prob_under(toy: &mut Toy, run: &policy::RunConfig, id: u32) -> f64 {
    let outcome = policy::step(
        &run.policy,
        &first_logits(toy),
        policy::StepContext::new(&[1, 4, 2], 3),
        &mut policy::NumpyRng::new(0),
        policy::Snapshots::Record,
    )
    .unwrap();
    let last = outcome.stages.unwrap().pop().unwrap();
    last.tokens
        .iter()
        .find(|t| t.id == id)
        .map_or(0.0, |t| t.prob)
}

/// The toy's logits after the rendered prompt "a b" (tokens 1, 4, 2).
fn first_logits(toy: &mut Toy) -> Vec<f32> {
    use policy::LanguageModel;
    toy.prefill(&[1, 4, 2]).unwrap().to_vec()
}
