//! The library pipeline on the bundled fixture with a scripted embedder: HippoRAG 2's incremental insert
//! and delete against from-scratch builds (stores, edges, full PPR score vectors), the index directory's
//! generations, compatibility errors, and damaged inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kgrag::config::Config;
use kgrag::documents::SourceDoc;
use kgrag::graph_store::EdgeWeighting;
use kgrag::types::testing::HashingEmbedder;
use kgrag::types::{Document, RetrievalRequest};
use kgrag::Pipeline;

pub(crate) fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-pipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn fixture_docs() -> (Vec<SourceDoc>, Vec<String>) {
    let ds = kgrag::eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let docs = ds
        .passages
        .iter()
        .enumerate()
        .map(|(i, p)| SourceDoc {
            id: format!("p{i:02}"),
            source: "fixture".into(),
            document: Document::passage(p.title.clone(), &p.text),
            origin: None,
        })
        .collect();
    let questions = ds.questions.iter().map(|q| q.question.clone()).collect();
    (docs, questions)
}

pub(crate) fn config(cache: &Path) -> Config {
    let mut c = Config {
        cache_dir: Some(cache.to_path_buf()),
        ..Config::default()
    };
    c.index.chunking = kgrag::text::ChunkerConfig::hipporag();
    c.openie = kgrag::config::OpenIeMode::Rules;
    c.hirag.log_layers = false;
    c.leanrag.log_layers = false;
    c
}

pub(crate) fn embedder(dim: usize) -> Arc<dyn kgrag::types::Embedder> {
    Arc::new(HashingEmbedder::new(dim))
}

async fn build(
    docs: &[SourceDoc],
    root: Option<&Path>,
    cache: &Path,
    methods: &[&str],
) -> Pipeline {
    let mut p = Pipeline::with_models(
        config(cache),
        cache.to_path_buf(),
        embedder(64),
        None,
        root,
        false,
    )
    .unwrap();
    let methods: Vec<String> = methods.iter().map(|m| (*m).to_owned()).collect();
    p.index(docs.to_vec(), &methods, Default::default())
        .await
        .unwrap();
    p
}

/// Every passage's PPR score for every question, by chunk id.
async fn ppr_scores(p: &mut Pipeline, questions: &[String]) -> Vec<BTreeMap<String, f64>> {
    let r = p.retriever("hipporag2").unwrap();
    let mut out = Vec::new();
    for q in questions {
        let ctx = r
            .retrieve(&RetrievalRequest {
                query: q.clone(),
                top_k: 10_000,
            })
            .await
            .unwrap();
        out.push(
            ctx.passages
                .iter()
                .map(|s| (s.chunk_id.as_str().to_owned(), s.score))
                .collect(),
        );
    }
    out
}

fn edges(p: &mut Pipeline) -> BTreeSet<(String, String, String)> {
    let index = p.method_index("hipporag2").unwrap();
    let h = kgrag::methods::hippo_index(index.as_ref()).unwrap();
    let g = h.graph().unwrap();
    g.edges()
        .map(|(_, a, b, e)| {
            let (ka, kb) = (
                g.node(a).unwrap().key.clone(),
                g.node(b).unwrap().key.clone(),
            );
            let (ka, kb) = if ka <= kb { (ka, kb) } else { (kb, ka) };
            (
                ka,
                kb,
                format!("{:.12}", e.weight(EdgeWeighting::HippoReference)),
            )
        })
        .collect()
}

fn assert_scores_equal(a: &[BTreeMap<String, f64>], b: &[BTreeMap<String, f64>]) {
    assert_eq!(a.len(), b.len());
    for (qa, qb) in a.iter().zip(b) {
        assert_eq!(qa.keys().collect::<Vec<_>>(), qb.keys().collect::<Vec<_>>());
        for (k, va) in qa {
            assert!((va - qb[k]).abs() < 1e-9, "{k}: {va} vs {}", qb[k]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hipporag_delete_equals_a_build_without_the_document() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("delete-cache");
    let root = tmp("delete-index");
    // The deleted document comes first and repeats a later passage's body: the facts it shares with
    // that passage must move to where that passage first has them.
    let mut with_copy = vec![SourceDoc {
        id: "copy".into(),
        source: "test".into(),
        document: Document::passage("A copy", docs[5].document.text.split_once('\n').unwrap().1),
        origin: None,
    }];
    with_copy.extend(docs.iter().cloned());
    let mut full = build(&with_copy, Some(&root), &cache, &["dense", "hipporag2"]).await;
    let copy_facts: BTreeSet<String> = {
        let index = full.method_index("hipporag2").unwrap();
        let h = kgrag::methods::hippo_index(index.as_ref()).unwrap();
        let first = full.documents()[0].chunks[0].clone();
        h.chunk_triples(&first)
            .unwrap()
            .map(|t| kgrag::types::FactId::from_triple(t).as_str().to_owned())
            .collect()
    };
    let victim = "copy".to_owned();
    let s = full.delete(std::slice::from_ref(&victim)).await.unwrap();
    assert_eq!((s.documents, s.chunks, s.generation), (1, 1, 2));
    let removed = full.manifest().unwrap().methods["hipporag2"].stats["last_build"]["removed_facts"]
        .as_u64()
        .unwrap() as usize;
    assert!(
        removed < copy_facts.len(),
        "the copy shares facts with a remaining passage"
    );
    let rest: Vec<SourceDoc> = docs.clone();
    let mut fresh = build(&rest, None, &cache, &["dense", "hipporag2"]).await;

    // Stores: same rows, same order, same vectors.
    {
        let (a, b) = (&mut full, &mut fresh);
        let ia = a.method_index("hipporag2").unwrap();
        let ib = b.method_index("hipporag2").unwrap();
        let (ha, hb) = (
            kgrag::methods::hippo_index(ia.as_ref()).unwrap(),
            kgrag::methods::hippo_index(ib.as_ref()).unwrap(),
        );
        assert_eq!(ha.phrases(), hb.phrases());
        assert_eq!(ha.facts(), hb.facts());
        assert_eq!(ha.passages().as_ref(), hb.passages().as_ref());
        assert_eq!(ha.chunk_facts(), hb.chunk_facts());
    }
    assert_eq!(edges(&mut full), edges(&mut fresh));
    let sa = ppr_scores(&mut full, &questions).await;
    let sb = ppr_scores(&mut fresh, &questions).await;
    assert_scores_equal(&sa, &sb);

    // The committed generation reloads to the same scores, and deleting again is an error naming the id.
    let mut reopened =
        Pipeline::open_with_models(&root, config(&cache), embedder(64), None).unwrap();
    assert_eq!(reopened.manifest().unwrap().generation, 2);
    let sc = ppr_scores(&mut reopened, &questions).await;
    assert_scores_equal(&sa, &sc);
    let err = reopened.delete(&[victim]).await.err().unwrap().to_string();
    assert!(err.contains("copy"), "{err}");
    // The failed delete left the pipeline as it was.
    assert_eq!(reopened.documents().len(), docs.len());
    assert_scores_equal(&ppr_scores(&mut reopened, &questions).await, &sa);
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hipporag_insert_equals_a_build_with_the_documents() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("insert-cache");
    let root = tmp("insert-index");
    let n = docs.len();
    let mut grown = build(&docs[..n - 3], Some(&root), &cache, &["dense", "hipporag2"]).await;
    let mut reopened =
        Pipeline::open_with_models(&root, config(&cache), embedder(64), None).unwrap();
    let s = reopened.insert(docs[n - 3..].to_vec()).await.unwrap();
    assert_eq!((s.documents, s.generation), (3, 2));
    // Inserting the same documents again changes nothing.
    let again = reopened.insert(docs[n - 1..].to_vec()).await.unwrap();
    assert_eq!((again.documents, again.skipped.len()), (0, 1));
    let mut fresh = build(&docs, None, &cache, &["dense", "hipporag2"]).await;
    // New phrases come after the old passages in vertex order, so compare full score vectors.
    let sa = ppr_scores(&mut reopened, &questions).await;
    let sb = ppr_scores(&mut fresh, &questions).await;
    assert_scores_equal(&sa, &sb);
    assert_eq!(edges(&mut reopened), edges(&mut fresh));
    // The first pipeline still sees its own generation.
    assert_eq!(grown.documents().len(), n - 3);
    let _ = ppr_scores(&mut grown, &questions[..1]).await;
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ppr_that_does_not_converge_is_reported_and_zero_iterations_rejected() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("ppr-cache");
    let mut c = config(&cache);
    c.hipporag.ppr_max_iter = 1;
    // The fixture's rule-extracted graph is sparse enough for the solver to eliminate every node exactly
    // (one sweep then converges); synonymy edges between every pair of phrases leave a core that needs
    // real sweeps.
    c.hipporag.synonymy_threshold = 0.0;
    let mut p = Pipeline::with_models(c, cache.clone(), embedder(64), None, None, false).unwrap();
    p.index(docs, &["hipporag2".into()], Default::default())
        .await
        .unwrap();
    let a = p.answer(&questions[0], "hipporag2", 5).await.unwrap();
    assert_eq!(a.context.stats["dense_fallback"], 0.0);
    assert_eq!(a.context.stats["ppr_not_converged"], 1.0);
    let err = Config::parse("[hipporag]\nppr_max_iter = 0\n")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("ppr_max_iter"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_directory_survives_damage_and_refuses_other_settings() {
    let (docs, _) = fixture_docs();
    let cache = tmp("dir-cache");
    let root = tmp("dir-index");
    build(&docs, Some(&root), &cache, &["dense", "hipporag2"]).await;
    // Another embedder.
    let err = Pipeline::open_with_models(&root, config(&cache), embedder(32), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("hashing-embedder") && err.contains("64") && err.contains("32"),
        "{err}"
    );
    // Another index-time setting names the key.
    let mut other = config(&cache);
    other.hipporag.synonymy_threshold = 0.9;
    let err = Pipeline::open_with_models(&root, other, embedder(64), None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("hipporag2.synonymy_threshold"), "{err}");
    // A query-time setting is fine.
    let mut query_time = config(&cache);
    query_time.hipporag.qa_top_k = 3;
    assert!(Pipeline::open_with_models(&root, query_time, embedder(64), None).is_ok());
    // A crash between the generation's files and the manifest: the leftover folder does not matter.
    std::fs::create_dir_all(root.join("gen-000002/hipporag2")).unwrap();
    std::fs::write(root.join("gen-000002/hipporag2/graph.kg"), b"half").unwrap();
    let mut p = Pipeline::open_with_models(&root, config(&cache), embedder(64), None).unwrap();
    assert_eq!(p.manifest().unwrap().generation, 1);
    let _ = p.answer("Who?", "hipporag2", 3).await.unwrap();
    // A damaged method file is an error naming it, at first use.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["generation"], 1);
    let graph = root.join("gen-000001/hipporag2/graph.kg");
    let mut bytes = std::fs::read(&graph).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&graph, &bytes).unwrap();
    let mut p = Pipeline::open_with_models(&root, config(&cache), embedder(64), None).unwrap();
    let err = p.retriever("hipporag2").err().unwrap().to_string();
    assert!(err.contains("graph.kg"), "{err}");
    // A manifest that names a file outside the index folder (hand-edited or hostile).
    let text = std::fs::read(root.join("manifest.json")).unwrap();
    for outside in ["../../etc/passwd", "/etc/passwd", ""] {
        let mut m: serde_json::Value = serde_json::from_slice(&text).unwrap();
        m["files"][0]["path"] = serde_json::json!(outside);
        std::fs::write(root.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
        let err = Pipeline::open_with_models(&root, config(&cache), embedder(64), None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("outside the index folder"), "{err}");
    }
    // A truncated manifest.
    std::fs::write(root.join("manifest.json"), &text[..text.len() / 2]).unwrap();
    let err = Pipeline::open_with_models(&root, config(&cache), embedder(64), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("manifest.json") && err.contains("damaged"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_strategy_answers_from_a_reloaded_index() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("all-cache");
    let root = tmp("all-index");
    let mut built = build(&docs, Some(&root), &cache, &[]).await;
    let mut reopened =
        Pipeline::open_with_models(&root, config(&cache), embedder(64), None).unwrap();
    for strategy in kgrag::methods::strategies() {
        let a = built.answer(&questions[0], strategy, 5).await.unwrap();
        let b = reopened.answer(&questions[0], strategy, 5).await.unwrap();
        assert!(!a.passages.is_empty(), "{strategy}");
        let ids = |x: &kgrag::pipeline::QueryAnswer| {
            x.passages
                .iter()
                .map(|p| (p.chunk_id.clone(), format!("{:.9}", p.score)))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&a), ids(&b), "{strategy}");
        assert_eq!(a.answer, b.answer, "{strategy}");
        assert_eq!(a.context.rendered, b.context.rendered, "{strategy}");
        assert!(a.passages[0].documents.iter().all(|d| d.starts_with('p')));
    }
    let stats = reopened.stats().unwrap();
    assert_eq!(stats["documents"], docs.len());
    for m in kgrag::methods::METHOD_NAMES {
        assert!(stats["methods"].get(m).is_some(), "{m}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn openie_cache_with_bom_and_curly_quotes_is_an_error_not_a_panic() {
    let d = tmp("openie");
    let bom = d.join("openie_results_ner_bom.json");
    std::fs::write(
        &bom,
        "\u{feff}{\"docs\": [{\"idx\": \"x\", \"passage\": \"A b.\", \"extracted_entities\": [], \"extracted_triples\": []}], \"avg_ent_chars\": NaN, \"avg_ent_words\": 0}",
    )
    .unwrap();
    // A BOM is accepted.
    let docs = kgrag::openie::read_openie_file(&bom).unwrap();
    assert_eq!(docs.len(), 1);
    let curly = d.join("openie_results_ner_curly.json");
    std::fs::write(
        &curly,
        "{\u{201c}docs\u{201d}: [], \u{201c}avg\u{201d}: NaN — Infinity\u{2019}s}",
    )
    .unwrap();
    let err = kgrag::openie::read_openie_file(&curly)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("openie_results_ner_curly.json"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
