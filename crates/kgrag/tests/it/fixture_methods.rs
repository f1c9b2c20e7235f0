//! Dense retrieval and HippoRAG 2 on the bundled fixture (`datasets/kgrag-fixture/`), with a lexical
//! embedder whose cosines can be worked out by hand: a text's vector is the indicator of its content words
//! (lower-cased, split at non-alphanumerics, the stop words below removed), so
//! `cos(q, p) = |Q ∩ P| / sqrt(|Q| · |P|)`. Passages are `title\ntext`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kgrag::dense::{DenseConfig, DenseRetriever};
use kgrag::eval::{recall_at_k, ExtractionSource, RECALL_KS};
use kgrag::graph_store::EmbeddingStore;
use kgrag::hipporag::{FilterMode, HippoConfig, HippoIndex, HippoRetriever, NoProgress};
use kgrag::types::{
    ChatModel, ChunkId, EmbedKind, Embedder, Embeddings, RetrievalRequest, Retriever,
};

const STOP: &[&str] = &[
    "the", "of", "a", "an", "in", "was", "is", "who", "what", "which", "did", "by", "to", "and",
    "for", "at", "on", "as", "with", "from", "that", "its", "his", "her", "their", "where", "when",
    "how", "name", "were", "are", "be", "been", "it", "this",
];
const DIM: usize = 8192;

/// Indicator vectors of content words; word ids are given in order of first sight.
#[derive(Default)]
struct Lexical {
    vocab: Mutex<HashMap<String, usize>>,
}

impl Lexical {
    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; DIM];
        let mut vocab = self.vocab.lock().unwrap();
        for w in text
            .to_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty() && !STOP.contains(w))
        {
            let n = vocab.len();
            let id = *vocab.entry(w.to_owned()).or_insert(n);
            assert!(id < DIM, "vocabulary larger than the test dimension");
            v[id] = 1.0;
        }
        v
    }
}

#[async_trait]
impl Embedder for Lexical {
    fn model_name(&self) -> &str {
        "lexical-test"
    }
    fn dimension(&self) -> usize {
        DIM
    }
    async fn embed(&self, texts: &[String], _kind: &EmbedKind) -> kgrag::types::Result<Embeddings> {
        Embeddings::from_rows(texts.iter().map(|t| self.vector(t)).collect())
    }
}

struct Run {
    /// Per question: the 1-based rank of each gold passage in the top 20 (0 = not in the top 20).
    ranks: Vec<Vec<usize>>,
    /// Mean recall at 1, 2, 5, 10, 20, rounded to 4 decimals.
    recall: Vec<f64>,
}

async fn evaluate(
    retriever: &dyn Retriever,
    store: &EmbeddingStore,
    ds: &kgrag::eval::Dataset,
) -> Run {
    let mut ranks = Vec::new();
    let mut sums = vec![0.0; RECALL_KS.len()];
    for q in &ds.questions {
        let ctx = retriever
            .retrieve(&RetrievalRequest {
                query: q.question.clone(),
                top_k: 20,
            })
            .await
            .unwrap();
        let got: Vec<String> = ctx
            .passages
            .iter()
            .map(|p| {
                store
                    .text(store.row(p.chunk_id.as_str()).unwrap())
                    .unwrap()
                    .to_owned()
            })
            .collect();
        ranks.push(
            q.gold
                .iter()
                .map(|g| got.iter().position(|x| x == g).map_or(0, |i| i + 1))
                .collect(),
        );
        for (s, k) in sums.iter_mut().zip(RECALL_KS) {
            *s += recall_at_k(&got, &q.gold, k);
        }
    }
    let n = ds.questions.len() as f64;
    Run {
        ranks,
        recall: sums.iter().map(|s| (s / n * 1e4).round() / 1e4).collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_misses_bridges_that_hipporag_finds() {
    let ds = kgrag::eval::load("kgrag-fixture", std::path::Path::new("unused")).unwrap();
    assert_eq!(ds.questions.len(), 10);
    let embedder = Arc::new(Lexical::default());
    let passages: Vec<(ChunkId, String)> = ds
        .passages
        .iter()
        .map(|p| (p.chunk_id(), p.content()))
        .collect();
    let mut store = EmbeddingStore::new("passages");
    let items: Vec<(String, String)> = passages
        .iter()
        .map(|(id, t)| (id.as_str().to_owned(), t.clone()))
        .collect();
    store
        .insert(&items, embedder.as_ref(), 16, |_| {})
        .await
        .unwrap();
    let store = Arc::new(store);

    // Dense: worked out by hand from the word overlaps (|Q ∩ P| / sqrt(|Q| |P|)). Each question's first-hop
    // passage shares its distinctive words; every bridge passage shares none, so it scores 0 and ranks
    // below all passages with any overlap, among the zero-score passages in corpus order:
    //
    // | q   | content words of the question (|Q|)                           | first hop: rank (overlap, cos)        | bridge passages: rank (passages with cos > 0 above them) |
    // | q01 | born founder glassblowers guild quillmarsh town (6)           | Quillmarsh Glassblowers Guild 2 (4, .341) < Dunmarrow Weavers Guild (4, .365) | Tesk Amberlow 9 (8) |
    // | q02 | across brightwell captained carried charter saltgrey sea ship (8) | Brightwell Charter 2 (6, .474) < Saltgrey Sea (6, .487) | Heron of Dusk 16 (13) |
    // | q03 | instrument osrin painter play teacher velde (6)               | Osrin Velde 2 (3, .261) < Rook Teague (4, .385) | Hanne Carrow 12 (5) |
    // | q04 | company headed husband mapmaker merra quell trading (7)       | Merra Quell 2 (3, .254) < Ilka Brune (5, .458) | Brannoc Hale 14 (6) |
    // | q05 | built first gannet point ship shipyard sink year (8)          | Gannet Point Shipyard 1 (6, .474)      | Marrow Lark 20 (9) |
    // | q06 | died harrand lio mountain overlooks poet village (7)          | Lio Harrand 2 (4, .347) < Ballad of the Grey Village (5, .488) | Cindermoss 18 (6) |
    // | q07 | bridge crosses designed oxhollow river (5)                    | Oxhollow 2 (2, .205) < Stonefoot Bridge (4, .400) | Gullwing Span 21 (6) |
    // | q08 | flows hometown inventor lamp river through tide (7)           | Tide Lamp 2 (3, .283) < Storm Lamp (5, .434) | Corvin Dray 22, Kestlemere 23 (5) |
    // | q09 | commanded daughter founder glassblowers guild quillmarsh ship (7) | Quillmarsh Glassblowers Guild 1 (4, .315) | Tesk Amberlow 11, Sabeth Amberlow 12 (10) |
    // | q10 | buried captain dusk festival held heron town (7)              | Heron of Dusk 3 (3, .236) < Feast of Lanterns (.338), Roke Aldane (.267) | Yselle Marrowind 11, Pellsworth 12 (7) |
    //
    // Recall per question at k = 1, 2, 5, 10, 20 (gold found / gold count):
    // q01 0, ½, ½, 1, 1   q02 0, ½, ½, ½, 1   q03 0, ½, ½, ½, 1   q04 0, ½, ½, ½, 1   q05 ½, ½, ½, ½, 1
    // q06 0, ½, ½, ½, 1   q07 0, ½, ½, ½, ½   q08 0, ⅓, ⅓, ⅓, ⅓   q09 ⅓, ⅓, ⅓, ⅓, 1   q10 0, 0, ⅓, ⅓, 1
    // Means: @1 = (½ + ⅓)/10 = .0833; @2 = (7·½ + 2·⅓)/10 = .4167; @5 = (7·½ + 3·⅓)/10 = .45;
    // @10 = (1 + 6·½ + 3·⅓)/10 = .5; @20 = (8 + ½ + ⅓)/10 = .8833.
    let dense = DenseRetriever::new(store.clone(), embedder.clone(), DenseConfig::default());
    let d = evaluate(&dense, &store, &ds).await;
    let expected_dense_ranks: Vec<Vec<usize>> = vec![
        vec![2, 9],
        vec![2, 16],
        vec![2, 12],
        vec![2, 14],
        vec![1, 20],
        vec![2, 18],
        vec![2, 0],
        vec![2, 0, 0],
        vec![1, 11, 12],
        vec![3, 11, 12],
    ];
    assert_eq!(d.ranks, expected_dense_ranks);
    assert_eq!(d.recall, vec![0.0833, 0.4167, 0.45, 0.5, 0.8833]);

    // HippoRAG 2 without the LLM filter over the fixture's hand-written triples.
    let ExtractionSource::Inline(extractions) = &ds.extraction else {
        panic!("the fixture ships its triples inline");
    };
    let config = HippoConfig {
        filter: FilterMode::None,
        ..HippoConfig::default()
    };
    let mut index = HippoIndex::new(store.clone(), config.clone());
    let chunks = index.chunks_from_extractions(&passages, extractions);
    let stats = index
        .insert(&chunks, embedder.as_ref(), &mut NoProgress)
        .await
        .unwrap();
    assert_eq!(stats.new_passages, 31);
    let hippo = HippoRetriever::new(Arc::new(index), embedder.clone(), None, config).unwrap();
    let h = evaluate(&hippo, &store, &ds).await;
    eprintln!("hipporag2 ranks {:?} recall {:?}", h.ranks, h.recall);

    // How the walk finds the bridges: the best-scoring facts share the question's words and usually hold the
    // first-hop entity (q01: ('tesk amberlow', 'founded', 'quillmarsh glassblowers guild')); seeding that
    // fact's phrases sends PPR mass along the fact edges to the bridge entity and from it (context edge) to
    // the bridge passage, which dense retrieval ranks below every passage sharing a word with the question.
    // In 9 of 10 questions the first bridge passage enters the top 5. q07 is the exception: its best facts
    // are the distractor's ('stonefoot bridge', 'crosses', 'river ember') and ('gilly roan', 'designed',
    // 'stonefoot bridge'), sharing "bridge", "crosses", "river", "designed" with the question, so the seeds
    // sit on the wrong bridge and the Gullwing Span passage is only reached at rank 10 (dense: 21).
    let expected_hippo_ranks: Vec<Vec<usize>> = vec![
        vec![1, 5],
        vec![1, 4],
        vec![1, 3],
        vec![2, 4],
        vec![1, 3],
        vec![2, 3],
        vec![3, 10],
        vec![1, 4, 9],
        vec![1, 6, 12],
        vec![1, 4, 11],
    ];
    assert_eq!(h.ranks, expected_hippo_ranks);
    // Recall per question at k = 1, 2, 5, 10, 20 from these ranks:
    // q01 ½, ½, 1, 1, 1   q02 ½, ½, 1, 1, 1   q03 ½, ½, 1, 1, 1   q04 0, ½, 1, 1, 1   q05 ½, ½, 1, 1, 1
    // q06 0, ½, 1, 1, 1   q07 0, 0, ½, 1, 1   q08 ⅓, ⅓, ⅔, 1, 1   q09 ⅓, ⅓, ⅓, ⅔, 1   q10 ⅓, ⅓, ⅔, ⅔, 1
    // Means: @1 = (4·½ + 3·⅓)/10 = .3; @2 = (6·½ + 3·⅓)/10 = .4; @5 = (6 + ½ + ⅔ + ⅓ + ⅔)/10 = .8167;
    // @10 = (7 + 1 + ⅔ + ⅔)/10 = .9333; @20 = 1.
    assert_eq!(h.recall, vec![0.3, 0.4, 0.8167, 0.9333, 1.0]);
    for (q, (dr, hr)) in ds.questions.iter().zip(d.ranks.iter().zip(&h.ranks)) {
        let (bridge_d, bridge_h) = (dr[1], hr[1]);
        assert!(
            bridge_d == 0 || bridge_d > 5,
            "{}: dense ranks the bridge {bridge_d}",
            q.id
        );
        assert!(
            bridge_h < bridge_d || bridge_d == 0,
            "{}: the walk ranks the bridge higher than dense retrieval",
            q.id
        );
    }
    assert!(
        h.recall[2] > d.recall[2] + 0.3,
        "{:?} vs {:?}",
        h.recall,
        d.recall
    );
}

/// The recognition filter through the retriever, with a scripted chat model: a selection seeds the walk
/// from the kept fact only; a reply that selects nothing, an unparsable reply and a failed call all fall
/// back to dense retrieval (same ranking as the dense retriever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recognition_filter_and_dense_fallback() {
    use kgrag::types::testing::ScriptedChatModel;

    let ds = kgrag::eval::load("kgrag-fixture", std::path::Path::new("unused")).unwrap();
    let embedder = Arc::new(Lexical::default());
    let passages: Vec<(ChunkId, String)> = ds
        .passages
        .iter()
        .map(|p| (p.chunk_id(), p.content()))
        .collect();
    let items: Vec<(String, String)> = passages
        .iter()
        .map(|(id, t)| (id.as_str().to_owned(), t.clone()))
        .collect();
    let mut store = EmbeddingStore::new("passages");
    store
        .insert(&items, embedder.as_ref(), 16, |_| {})
        .await
        .unwrap();
    let store = Arc::new(store);
    let ExtractionSource::Inline(extractions) = &ds.extraction else {
        panic!("inline triples expected");
    };
    let config = HippoConfig::default();
    assert_eq!(config.filter, FilterMode::Llm);
    let mut index = HippoIndex::new(store.clone(), config.clone());
    let chunks = index.chunks_from_extractions(&passages, extractions);
    index
        .insert(&chunks, embedder.as_ref(), &mut NoProgress)
        .await
        .unwrap();
    let index = Arc::new(index);

    let q = &ds.questions[0]; // founder of the Quillmarsh Glassblowers Guild -> Tesk Amberlow -> Farrowmoor
    let keep = "[[ ## fact_after_filter ## ]]\n{\"fact\": [[\"tesk amberlow\", \"founded\", \"quillmarsh glassblowers guild\"]]}\n\n[[ ## completed ## ]]";
    let none = "[[ ## fact_after_filter ## ]]\n{\"fact\": []}\n\n[[ ## completed ## ]]";
    let chat = Arc::new(ScriptedChatModel::new([keep, none, "I cannot tell."]));
    chat.push_error("connection refused");
    let hippo = HippoRetriever::new(
        index.clone(),
        embedder.clone(),
        Some(chat.clone() as Arc<dyn ChatModel>),
        config,
    )
    .unwrap();
    let dense = DenseRetriever::new(store.clone(), embedder.clone(), DenseConfig::default());
    let dense_ranking: Vec<String> = dense
        .retrieve(&RetrievalRequest {
            query: q.question.clone(),
            top_k: 31,
        })
        .await
        .unwrap()
        .passages
        .iter()
        .map(|p| p.chunk_id.to_string())
        .collect();

    // 1. The model keeps one candidate: seeds are its two phrases, no fallback.
    let (ctx, trace) = hippo.query(&q.question, 31).await.unwrap();
    assert!(!trace.dense_fallback);
    assert_eq!(trace.kept.len(), 1);
    assert_eq!(trace.kept[0].0.subject(), "tesk amberlow");
    let seeds: Vec<&str> = trace.seeds.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(seeds.len(), 2);
    assert!(seeds.contains(&"tesk amberlow") && seeds.contains(&"quillmarsh glassblowers guild"));
    assert_eq!(ctx.stats["dense_fallback"], 0.0);
    let bridge = ChunkId::from_content(&q.gold[1]).to_string();
    let pos = ctx
        .passages
        .iter()
        .position(|p| p.chunk_id.to_string() == bridge)
        .unwrap();
    assert!(
        pos < 5,
        "the bridge passage is reached from the kept fact (rank {})",
        pos + 1
    );
    // The filter saw the five candidates in the reference's section format.
    let req = &chat.requests()[0];
    let last = &req.messages.last().unwrap().content;
    assert!(last.starts_with(&format!(
        "[[ ## question ## ]]\n{}\n\n[[ ## fact_before_filter ## ]]\n{{\"fact\": [[",
        q.question
    )));

    // 2-4. Nothing selected, an unparsable reply, a failed call: dense ranking, scores on the dense scale.
    for case in ["empty selection", "unparsable reply", "failed call"] {
        let (ctx, trace) = hippo.query(&q.question, 31).await.unwrap();
        assert!(trace.dense_fallback, "{case}");
        assert!(trace.kept.is_empty(), "{case}");
        assert_eq!(ctx.stats["dense_fallback"], 1.0, "{case}");
        let got: Vec<String> = ctx
            .passages
            .iter()
            .map(|p| p.chunk_id.to_string())
            .collect();
        assert_eq!(got, dense_ranking, "{case}");
        assert_eq!(ctx.passages[0].score, 1.0, "{case}");
        assert_eq!(
            trace.filter_error.is_some(),
            case != "empty selection",
            "{case}"
        );
    }
    assert_eq!(chat.calls(), 4);
}

/// An extractor that counts its calls (the rule extractor underneath).
pub(crate) struct Counting(pub(crate) std::sync::atomic::AtomicUsize);

#[async_trait]
impl kgrag::types::Extractor for Counting {
    fn fingerprint(&self) -> String {
        "counting-rules-test".into()
    }
    async fn extract(
        &self,
        chunk: &kgrag::types::Chunk,
    ) -> kgrag::types::Result<kgrag::types::Extraction> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(kgrag::openie::RuleExtractor.extract_text(chunk))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leanrag_g0_is_hirag_base_layer_extracted_once() {
    let ds = kgrag::eval::load("kgrag-fixture", std::path::Path::new("/nonexistent")).unwrap();
    let cache = std::env::temp_dir().join(format!("kgrag-g0-shared-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let mut config = kgrag::config::Config {
        cache_dir: Some(cache.clone()),
        ..kgrag::config::Config::default()
    };
    config.index.chunking = kgrag::text::ChunkerConfig::hipporag();
    config.hirag.base = kgrag::hirag::BaseSource::Extract;
    config.hirag.extraction = kgrag::hirag::ExtractionMode::Rules;
    config.hirag.log_layers = false;
    config.leanrag.log_layers = false;
    config.leanrag.cluster_size = 5;
    let extractor = Arc::new(Counting(std::sync::atomic::AtomicUsize::new(0)));
    let mut pipeline = kgrag::Pipeline::with_models(
        config,
        cache.clone(),
        Arc::new(kgrag::types::testing::HashingEmbedder::new(64)),
        None,
        None,
        false,
    )
    .unwrap();
    pipeline.set_extractor(extractor.clone()).unwrap();
    let docs: Vec<kgrag::documents::SourceDoc> = ds
        .passages
        .iter()
        .enumerate()
        .map(|(i, p)| kgrag::documents::SourceDoc {
            id: format!("p{i}"),
            source: "fixture".into(),
            document: kgrag::types::Document::passage(p.title.clone(), &p.text),
            origin: None,
        })
        .collect();
    pipeline
        .index(
            docs,
            &["hirag".into(), "leanrag".into()],
            Default::default(),
        )
        .await
        .unwrap();
    let hirag_index = pipeline.method_index("hirag").unwrap();
    let leanrag_index = pipeline.method_index("leanrag").unwrap();
    let hirag = kgrag::methods::hirag_index(hirag_index.as_ref()).unwrap();
    let leanrag = kgrag::methods::leanrag_index(leanrag_index.as_ref()).unwrap();
    // One extraction call per chunk, for both methods together.
    assert_eq!(
        extractor.0.load(std::sync::atomic::Ordering::SeqCst),
        hirag.chunks().len()
    );
    // G0 = HiRAG's base layer: its layer-0 nodes, and only edges among them.
    let base: Vec<&str> = hirag
        .graph()
        .nodes()
        .iter()
        .filter(|n| n.layer == 0)
        .map(|n| n.name.as_str())
        .collect();
    let g0: Vec<&str> = leanrag.hierarchy().layers[0]
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(base, g0);
    let g = hirag.graph();
    let base_edges = g
        .edges()
        .iter()
        .filter(|e| g.node(e.a).unwrap().layer == 0 && g.node(e.b).unwrap().layer == 0)
        .count();
    assert_eq!(leanrag.stats().base_relations, base_edges);
    assert!(
        base_edges < g.edges().len(),
        "member relations are not in G0"
    );
    let _ = std::fs::remove_dir_all(&cache);
}
