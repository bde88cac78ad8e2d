//! The shipped language identifier's speed: classifying the held-out pages whole, and as
//! 64-byte prompts (what the observe report classifies), and the novelty of the prompts;
//! each reported in bytes per second.
//!
//! Run with `cargo bench -p langid --bench classify` (the shipped file and the corpus must
//! be there).

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use langid::held_out::{pages, prefix};
use langid::LangId;

fn bench_classify(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let model = LangId::from_bytes(
        &std::fs::read(root.join("models/decode-lab-tiny-v1/langid.bin")).expect("langid.bin"),
    )
    .expect("the shipped file reads");
    let text: String = ["valid.en.txt", "valid.eu.txt"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join("corpus").join(f)).expect("corpus"))
        .collect();
    let whole: Vec<&str> = pages(&text).collect();
    let prompts: Vec<&str> = whole.iter().map(|p| prefix(p, 64)).collect();
    let bytes = |texts: &[&str]| texts.iter().map(|t| t.len() as u64).sum::<u64>();

    let mut group = c.benchmark_group("langid");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(bytes(&whole)));
    group.bench_function("classify-pages", |b| {
        b.iter(|| {
            for page in &whole {
                black_box(model.classify(black_box(page)));
            }
        })
    });
    group.throughput(Throughput::Bytes(bytes(&prompts)));
    group.bench_function("classify-64-byte-prompts", |b| {
        b.iter(|| {
            for prompt in &prompts {
                black_box(model.classify(black_box(prompt)));
            }
        })
    });
    group.bench_function("novelty-64-byte-prompts", |b| {
        b.iter(|| {
            for prompt in &prompts {
                black_box(model.novelty(black_box(prompt)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench_classify);
criterion_main!(benches);
