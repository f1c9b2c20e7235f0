//! The in-process models against published anchors (feature `local`; assets from `cargo xtask fetch-assets`).
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kgrag_llm::{
    build_chat, build_embedder, ChatConfig, EmbedderConfig, EncoderPrecision, LocalChatConfig,
    LocalEmbedderConfig,
};
use kgrag_types::testing::asset_dir;
use kgrag_types::{ChatRequest, EmbedKind};

/// all-MiniLM-L6-v2 from the assets, in-process, at `precision` (other settings their defaults).
fn minilm(precision: EncoderPrecision) -> std::sync::Arc<dyn kgrag_llm::ManagedEmbedder> {
    let config = LocalEmbedderConfig {
        model_dir: Some(asset_dir("all-minilm-l6-v2", "model.safetensors")),
        precision,
        ..LocalEmbedderConfig::default()
    };
    build_embedder(&EmbedderConfig::Local(config), None).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()
}

#[tokio::test]
async fn minilm_matches_sbert_anchors() {
    let embedder = minilm(EncoderPrecision::default());
    assert_eq!(embedder.dimension(), 384);
    // Published by sbert.net for all-MiniLM-L6-v2.
    let pairs = [
        (
            "The new movie is awesome",
            "The new movie is so great",
            0.8939f32,
        ),
        ("A man is playing guitar", "A woman watches TV", -0.0327),
        (
            "The cat sits outside",
            "The cat plays in the garden",
            0.6788,
        ),
    ];
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|(a, b, _)| [a.to_string(), b.to_string()])
        .collect();
    let e = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    for (i, (a, b, want)) in pairs.iter().enumerate() {
        let got = cosine(e.row(2 * i).unwrap(), e.row(2 * i + 1).unwrap());
        assert!(
            (got - want).abs() < 1e-3,
            "cos({a:?}, {b:?}) = {got}, want {want}"
        );
    }
    for row in e.rows() {
        assert!((cosine(row, row) - 1.0).abs() < 1e-5);
    }
}

#[tokio::test]
async fn padding_in_a_batch_does_not_change_a_vector() {
    let embedder = minilm(EncoderPrecision::default());
    let short = "The cat sits outside".to_owned();
    let long = "A considerably longer sentence, which forces every other sentence in the batch to be padded \
                with many padding tokens before the model runs over the whole batch at once."
        .to_owned();
    let alone = embedder
        .embed(std::slice::from_ref(&short), &EmbedKind::Document)
        .await
        .unwrap();
    let batch = embedder
        .embed(&[long, short], &EmbedKind::Document)
        .await
        .unwrap();
    let (a, b) = (alone.row(0).unwrap(), batch.row(1).unwrap());
    let max_diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(max_diff < 1e-5, "max difference {max_diff}");
}

#[tokio::test]
async fn a_vector_does_not_depend_on_its_batch_or_thread() {
    // The encoder packs a batch without padding and splits it over the cores: each text's vector must be
    // what it is alone, whichever group and thread it lands in.
    let embedder = minilm(EncoderPrecision::default());
    let texts: Vec<String> = (0..24)
        .map(|i| {
            format!(
                "Sentence {i} about the river city {}.",
                "and its harbour ".repeat(i % 7)
            )
        })
        .collect();
    let batch = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    for (i, t) in texts.iter().enumerate() {
        let alone = embedder
            .embed(std::slice::from_ref(t), &EmbedKind::Document)
            .await
            .unwrap();
        let diff = alone
            .row(0)
            .unwrap()
            .iter()
            .zip(batch.row(i).unwrap())
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-6, "text {i}: max difference {diff}");
    }
}

#[tokio::test]
async fn a_batch_in_several_passes_gives_each_text_its_own_bits() {
    // A group of more than 2,048 tokens goes through the layers in several passes of whole texts:
    // every vector must be, bit for bit, the text's vector alone (one pass of its own).
    let config = LocalEmbedderConfig {
        model_dir: Some(asset_dir("all-minilm-l6-v2", "model.safetensors")),
        batch_size: 128,
        ..LocalEmbedderConfig::default()
    };
    let embedder = build_embedder(&EmbedderConfig::Local(config), None).unwrap();
    let texts: Vec<String> = (0..96)
        .map(|i| {
            format!(
                "Text {i}: the ferry leaves the harbour at dawn {}and returns at dusk.",
                "while gulls circle over the old stone pier ".repeat(1 + i % 9)
            )
        })
        .collect();
    let batch = embedder.embed(&texts, &EmbedKind::Document).await.unwrap();
    for i in [0, 1, 30, 47, 48, 70, 95] {
        let alone = embedder
            .embed(std::slice::from_ref(&texts[i]), &EmbedKind::Document)
            .await
            .unwrap();
        assert_eq!(alone.row(0), batch.row(i), "text {i}");
    }
}

#[tokio::test]
async fn bf16_precision_stays_within_a_cosine_of_the_f32_vectors() {
    // `precision = "bf16"` rounds the products' inputs to bfloat16: its vectors must stay within cosine
    // 0.9999 of f32's, carry their own model name (so the response cache never mixes the two), and still
    // not depend on their batch. Without AVX512-BF16 the encoder stays in f32 under the plain name.
    let dir = asset_dir("all-minilm-l6-v2", "model.safetensors");
    let f32_config = LocalEmbedderConfig {
        model_dir: Some(dir.clone()),
        ..LocalEmbedderConfig::default()
    };
    let bf16_config = LocalEmbedderConfig {
        model_dir: Some(dir),
        precision: EncoderPrecision::Bf16,
        ..LocalEmbedderConfig::default()
    };
    let full = build_embedder(&EmbedderConfig::Local(f32_config), None).unwrap();
    let half = build_embedder(&EmbedderConfig::Local(bf16_config), None).unwrap();
    let has_bf16 = std::arch::is_x86_feature_detected!("avx512bf16")
        && std::arch::is_x86_feature_detected!("avx512f");
    assert_eq!(
        half.model_name().ends_with("@bf16"),
        has_bf16,
        "{}",
        half.model_name()
    );
    assert!(!full.model_name().contains("@bf16"));
    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "Item {i}: the {} founded in {} by the river, {}",
                ["company", "album", "city", "school"][i % 4],
                1900 + i * 3,
                "whose records were kept by its first mayor ".repeat(i % 9)
            )
        })
        .collect();
    let a = full.embed(&texts, &EmbedKind::Document).await.unwrap();
    let b = half.embed(&texts, &EmbedKind::Document).await.unwrap();
    for (i, text) in texts.iter().enumerate() {
        let cos = cosine(a.row(i).unwrap(), b.row(i).unwrap());
        assert!(cos >= 0.9999, "text {i}: cosine {cos}");
        let alone = half
            .embed(std::slice::from_ref(text), &EmbedKind::Document)
            .await
            .unwrap();
        assert_eq!(alone.row(0).unwrap(), b.row(i).unwrap(), "text {i}");
    }
}

#[tokio::test]
async fn bf16x3_precision_is_f32_to_about_1e5() {
    // `precision = "bf16x3"` (and `auto`, the default) splits the products' inputs into two bfloat16
    // parts on AMX: cosine to the f32 vectors at least 0.99999, the f32 model name (the two are one
    // embedder), and vectors that do not depend on their batch. Without AMX it is the f32 kernel.
    let full = minilm(EncoderPrecision::F32);
    let split = minilm(EncoderPrecision::Bf16x3);
    let auto = minilm(EncoderPrecision::Auto);
    assert_eq!(split.model_name(), full.model_name());
    assert_eq!(auto.model_name(), full.model_name());
    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "Record {i}: the {} opened in {} near the harbour; {}",
                ["museum", "bridge", "railway", "library"][i % 4],
                1850 + i * 4,
                "its archive lists every keeper of the lighthouse ".repeat(i % 11)
            )
        })
        .collect();
    let a = full.embed(&texts, &EmbedKind::Document).await.unwrap();
    let b = split.embed(&texts, &EmbedKind::Document).await.unwrap();
    let c = auto.embed(&texts, &EmbedKind::Document).await.unwrap();
    let mut worst = 1f32;
    for (i, text) in texts.iter().enumerate() {
        let cos = cosine(a.row(i).unwrap(), b.row(i).unwrap());
        worst = worst.min(cos);
        assert!(cos >= 0.99999, "text {i}: cosine {cos}");
        assert_eq!(
            b.row(i).unwrap(),
            c.row(i).unwrap(),
            "text {i}: auto and bf16x3"
        );
        let alone = split
            .embed(std::slice::from_ref(text), &EmbedKind::Document)
            .await
            .unwrap();
        assert_eq!(alone.row(0).unwrap(), b.row(i).unwrap(), "text {i}");
    }
    eprintln!("bf16x3 against f32: lowest cosine {worst}");
}

#[tokio::test]
async fn long_texts_are_truncated_not_rejected() {
    let embedder = minilm(EncoderPrecision::default());
    let long = "word ".repeat(2000);
    let e = embedder.embed(&[long], &EmbedKind::Document).await.unwrap();
    assert_eq!(e.len(), 1);
}

#[tokio::test]
async fn smollm2_answers_within_32_tokens() {
    let config = LocalChatConfig {
        gguf: Some(
            asset_dir("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
                .join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        ),
        ..LocalChatConfig::default()
    };
    let chat = build_chat(&ChatConfig::Local(config), None).unwrap();
    let mut request = ChatRequest::user("What is the capital of France?");
    request.settings.max_tokens = Some(32);
    request.settings.temperature = Some(0.0);
    let reply = chat.chat(&request).await.unwrap();
    assert!(!reply.content.trim().is_empty());
    assert!(reply.usage.completion_tokens <= 32 && reply.usage.completion_tokens > 0);
    assert!(reply.usage.prompt_tokens > 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_get_the_vectors_they_get_alone() {
    // The encoder merges concurrent calls into one forward pass; a text's vector must not depend on
    // which other calls shared its pass, to the bit.
    let embedder = minilm(EncoderPrecision::default());
    let texts: Vec<String> = (0..48)
        .map(|i| {
            let words = [
                "river",
                "capital",
                "who founded the company",
                "Marie Curie",
                "Tuscany",
            ];
            format!("{} number {i}? {}", words[i % 5], "and more ".repeat(i % 7))
        })
        .collect();
    let mut alone = Vec::new();
    for t in &texts {
        let e = embedder
            .embed(std::slice::from_ref(t), &EmbedKind::Document)
            .await
            .unwrap();
        alone.push(e.row(0).unwrap().to_vec());
    }
    // Calls of one, two and three texts at once, all in flight together.
    let mut tasks = Vec::new();
    let mut start = 0;
    while start < texts.len() {
        let n = (start % 3 + 1).min(texts.len() - start);
        let part = texts[start..start + n].to_vec();
        let e = std::sync::Arc::clone(&embedder);
        tasks.push((
            start,
            tokio::spawn(async move { e.embed(&part, &EmbedKind::Document).await }),
        ));
        start += n;
    }
    for (start, task) in tasks {
        let got = task.await.unwrap().unwrap();
        for (j, row) in got.rows().enumerate() {
            assert_eq!(row, alone[start + j].as_slice(), "text {}", start + j);
        }
    }
}

/// Cosines of `int8`'s vectors to `f32`'s, row by row, sorted.
async fn int8_cosines(texts: &[String]) -> Option<Vec<f32>> {
    let f32s = minilm(EncoderPrecision::F32);
    let int8 = minilm(EncoderPrecision::Int8);
    if !int8.model_name().ends_with("@int8") {
        // No AVX512-VNNI here: the int8 precision runs in f32.
        return None;
    }
    let a = f32s.embed(texts, &EmbedKind::Document).await.unwrap();
    let b = int8.embed(texts, &EmbedKind::Document).await.unwrap();
    let mut c: Vec<f32> = a.rows().zip(b.rows()).map(|(x, y)| cosine(x, y)).collect();
    c.sort_by(f32::total_cmp);
    Some(c)
}

#[tokio::test]
async fn int8_precision_stays_within_a_cosine_of_the_f32_vectors() {
    // `precision = "int8"` quantises the linear layers' weights per output and inputs per token; its
    // vectors are another embedder's, but must stay close to f32's: on these texts (questions, entity
    // names, facts and passages, as an index embeds them) mean cosine ≥ 0.995, every one ≥ 0.97.
    let mut texts: Vec<String> = [
        "Which river flows through the capital of the region where Galileo was born?",
        "Marie Curie",
        "Marie Curie married Pierre Curie in 1895.",
        "The Arno river flows through Florence and Pisa before it reaches the Ligurian Sea.",
        "Who is the spouse of the performer of Hey Jude?",
        "LeANN",
        "1923",
        "The company reported revenue of $4.2 billion in fiscal 2023, up 12% from a year earlier.",
        "photosynthesis converts light energy into chemical energy stored in glucose",
        "Q: what is the boiling point of water at sea level? A: 100 degrees Celsius.",
    ]
    .map(str::to_owned)
    .to_vec();
    for i in 0..30 {
        texts.push(format!(
            "Passage {i}: the treaty signed at the conference in {} set the border along the river, \
             and the delegates agreed to meet again within {} years to review it.",
            ["Vienna", "Geneva", "Lisbon", "Krakow", "Oslo"][i % 5],
            i % 7 + 2
        ));
    }
    if let Ok(path) = std::env::var("KGRAG_COSINE_TEXTS") {
        // More texts to measure on (a JSON list), e.g. MuSiQue's.
        let extra: Vec<String> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        texts.extend(extra);
    }
    let Some(c) = int8_cosines(&texts).await else {
        return;
    };
    let mean = c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64;
    let p1 = c[c.len() / 100];
    eprintln!(
        "int8 cosine to f32 over {} texts: mean {mean:.5}, 1st percentile {p1:.5}, min {:.5}",
        c.len(),
        c[0]
    );
    assert!(mean >= 0.995, "mean cosine {mean}");
    assert!(c[0] >= 0.97, "lowest cosine {}", c[0]);
}

#[test]
fn loads_of_one_model_share_its_encoder_while_one_lives() {
    use kgrag_llm::local::LocalEmbedder;
    let config = LocalEmbedderConfig {
        model_dir: Some(asset_dir("all-minilm-l6-v2", "model.safetensors")),
        max_tokens: 200,
        ..LocalEmbedderConfig::default()
    };
    let a = LocalEmbedder::load(&config).unwrap();
    let b = LocalEmbedder::load(&config).unwrap();
    assert!(a.shares_encoder_with(&b));
    // Other settings are another encoder.
    let other = LocalEmbedder::load(&LocalEmbedderConfig {
        max_tokens: 100,
        ..config.clone()
    })
    .unwrap();
    assert!(!other.shares_encoder_with(&a));
    // Dropped by all, it is freed; the next loads make a new one and share it.
    drop((a, b));
    let c = LocalEmbedder::load(&config).unwrap();
    let d = LocalEmbedder::load(&config).unwrap();
    assert!(c.shares_encoder_with(&d) && !c.shares_encoder_with(&other));
}
