//! Token counting and chunking throughput on a synthetic 100k-word document (HiRAG and LeanRAG windows).
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kgrag_benches::synthetic_text;
use kgrag_text::{Chunker, ChunkerConfig, Encoding};
use kgrag_types::Document;

fn chunking(c: &mut Criterion) {
    let text = synthetic_text(100_000, 7);
    let doc = Document::new(text.clone());
    let mut group = c.benchmark_group("chunking");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    for (name, encoding) in [
        ("count_o200k", Encoding::O200kBase),
        ("count_cl100k", Encoding::Cl100kBase),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| encoding.count(&text).map(std::hint::black_box))
        });
    }
    for (name, config) in [
        ("hirag_1200_100", ChunkerConfig::hirag()),
        ("leanrag_1024_128", ChunkerConfig::leanrag()),
    ] {
        let Ok(chunker) = Chunker::new(config) else {
            continue;
        };
        group.bench_function(name, |b| {
            b.iter(|| chunker.chunk(&doc).map(std::hint::black_box))
        });
    }
    group.finish();
}

criterion_group!(benches, chunking);
criterion_main!(benches);
