//! Local embedder throughput: all-MiniLM-L6-v2 on candle, batches of 32 passages of ~100 words.
//! Needs the model assets (`cargo xtask fetch-assets`; `KGRAG_ASSETS` if they live elsewhere).
//! Report: sentences per second = 32 / time per iteration; the same with `precision = "int8"`. Then 16 questions of about 25 word pieces,
//! embedded one call after another and as 16 concurrent calls (which the encoder's batcher merges into
//! one forward pass): questions per second = 16 / time per iteration.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kgrag_benches::synthetic_text;
use kgrag_llm::{build_embedder, EmbedderConfig, LocalEmbedderConfig};
use kgrag_types::EmbedKind;

fn embedding(c: &mut Criterion) {
    let mut config = LocalEmbedderConfig::default();
    if std::env::var_os("KGRAG_ASSETS").is_none() {
        config.model_dir = Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.assets/all-minilm-l6-v2"),
        );
    }
    let embedder = match build_embedder(&EmbedderConfig::Local(config.clone()), None) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("skipping the embedding bench: {e}");
            return;
        }
    };
    config.precision = kgrag_llm::EncoderPrecision::Int8;
    let int8 = build_embedder(&EmbedderConfig::Local(config), None).ok();
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return;
    };
    let passages: Vec<String> = (0..32).map(|i| synthetic_text(100, i)).collect();
    let mut group = c.benchmark_group("local_embedder");
    group.sample_size(10);
    group.throughput(Throughput::Elements(passages.len() as u64));
    group.bench_function("minilm_batch32_100words", |b| {
        b.iter(|| {
            runtime
                .block_on(embedder.embed(&passages, &EmbedKind::Document))
                .map(std::hint::black_box)
        })
    });
    if let Some(int8) = &int8 {
        group.bench_function("minilm_batch32_100words_int8", |b| {
            b.iter(|| {
                runtime
                    .block_on(int8.embed(&passages, &EmbedKind::Document))
                    .map(std::hint::black_box)
            })
        });
    }
    let questions: Vec<String> = (0..16)
        .map(|i| {
            format!("Which river flows through the capital of the region where item {i} was made?")
        })
        .collect();
    group.throughput(Throughput::Elements(questions.len() as u64));
    group.bench_function("minilm_16_questions_one_by_one", |b| {
        b.iter(|| {
            runtime.block_on(async {
                for q in &questions {
                    let v = embedder
                        .embed(std::slice::from_ref(q), &EmbedKind::Document)
                        .await;
                    std::hint::black_box(v.ok());
                }
            })
        })
    });
    group.bench_function("minilm_16_questions_concurrent", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let calls = questions.iter().map(|q| {
                    let e = std::sync::Arc::clone(&embedder);
                    let q = q.clone();
                    tokio::spawn(async move {
                        e.embed(std::slice::from_ref(&q), &EmbedKind::Document)
                            .await
                            .is_ok()
                    })
                });
                for call in calls.collect::<Vec<_>>() {
                    std::hint::black_box(call.await.ok());
                }
            })
        })
    });
    group.finish();
}

criterion_group!(benches, embedding);
criterion_main!(benches);
