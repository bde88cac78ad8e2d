//! Observing run lines: the shipped model's 6-step record (about 3.4 kB a line), copied with
//! other seeds, slices and timings and sealed again, 20,000 lines with outcomes for half,
//! through a whole observation (parse, digest and ids checked, grouped, joined). Linear in
//! lines: the figure per line times 1,000,000 is the budget of 5 s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use observe::{DriftRule, Inspector, Observation, Outcomes};

const BASE: &str = include_str!("../../policy/tests/fixtures/records-before-backend-kind.jsonl");
const LINES: usize = 20_000;

struct Tagged;

impl Inspector for Tagged {
    fn slice_of(&self, _: &str) -> String {
        "untagged".into()
    }

    fn unseen_bytes(&self, _: &str) -> usize {
        0
    }
}

fn lines() -> (String, String) {
    let base = policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0);
    let (mut runs, mut outcomes) = (String::new(), String::new());
    for i in 0..LINES {
        let mut r = base.clone();
        r.config.seed = i as u64;
        r.ttft_us = 500.0 + (i % 997) as f64;
        r.tags
            .insert("slice".into(), if i % 5 == 0 { "eu" } else { "en" }.into());
        r.tags.insert("at_s".into(), i.to_string());
        r.seal();
        runs += &serde_json::to_string(&r).unwrap();
        runs.push('\n');
        if i % 2 == 0 {
            outcomes += &format!(
                "{{\"run_id\":\"{}\",\"outcome\":\"accepted\",\"at_s\":{}}}\n",
                r.run_id.unwrap(),
                i + 100
            );
        }
    }
    (runs, outcomes)
}

fn observe(c: &mut Criterion) {
    let (runs, outcomes) = lines();
    let mut group = c.benchmark_group("observe");
    group.sample_size(10);
    group.throughput(Throughput::Elements(LINES as u64));
    group.bench_function("20k run lines", |b| {
        b.iter(|| {
            let o = Outcomes::parse(&outcomes, f64::INFINITY).unwrap();
            let mut obs = Observation::new(&Tagged, o, None);
            obs.add_lines("runs", &runs);
            obs.finish(None, &DriftRule::default()).unwrap()
        })
    });
    // What counting each run once costs of the whole: the same 20,000 records, already
    // read, each seen by run id (issue 33).
    let records: Vec<policy::RunRecord> = runs
        .lines()
        .map(|l| policy::parse_records(l).unwrap().remove(0))
        .collect();
    group.bench_function("20k runs seen once", |b| {
        b.iter(|| {
            let mut seen = observe::SeenRuns::default();
            for (i, r) in records.iter().enumerate() {
                assert_eq!(seen.see(r, "runs", i + 1), observe::Seen::First);
            }
            seen
        })
    });
    group.finish();
}

criterion_group!(benches, observe);

fn parts(c: &mut Criterion) {
    let base = policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0);
    let line = serde_json::to_string(&base).unwrap();
    let mut group = c.benchmark_group("observe parts");
    group.bench_function("parse one line", |b| {
        b.iter(|| serde_json::from_str::<policy::RunRecord>(&line).unwrap())
    });
    group.bench_function("content digest", |b| b.iter(|| base.content_digest()));
    group.bench_function("version id", |b| b.iter(|| base.computed_version_id()));
    group.bench_function("check", |b| b.iter(|| base.check().unwrap()));
    let bytes = vec![7u8; line.len()];
    group.bench_function("sha-256 of a line's length", |b| {
        b.iter(|| <sha2::Sha256 as sha2::Digest>::digest(&bytes))
    });
    group.finish();
}

criterion_group!(parts_group, parts);
criterion_main!(benches, parts_group);
