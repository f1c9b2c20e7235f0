//! Contexts byte-identical to the reference's: a small hand-made index whose entity graph is a tree (every
//! shortest path unique, so the bridge rule cannot legitimately differ), the context of every mode for a
//! few queries, and the strings `hhy-huang/HiRAG`'s own builders rendered for the same index and query
//! vectors (`tests/data/golden/`, see its README: produced once by running the reference code on this
//! test's export, with `PYTHONHASHSEED=0`).
//!
//! `KGRAG_GOLDEN_EXPORT=DIR cargo test -p kgrag-hirag --test it golden` writes the index in the reference's
//! formats to `DIR/hirag/` and the queries with their vectors to `DIR/queries.json` (the reference run's
//! input), then compares as always.

use std::sync::Arc;

use kgrag_hirag::{HiragConfig, HiragRetriever, Mode};
use kgrag_types::testing::UnitKeywordEmbedder;
use kgrag_types::{Chunk, Embedder, Extraction, RetrievalRequest, Retriever};
use serde_json::json;

use crate::common::{build, chunk, extraction as ex};

/// The keywords of the test's embedder ([`UnitKeywordEmbedder`]).
const WORDS: [&str; 14] = [
    "river", "florence", "tuscany", "pisa", "tower", "galileo", "padua", "veneto", "venice",
    "dante", "comedy", "arno", "capital", "born",
];

fn keywords() -> UnitKeywordEmbedder {
    UnitKeywordEmbedder::new(&WORDS)
}

fn entity(name: &str, kind: &str, description: &str, c: &Chunk) -> kgrag_types::Entity {
    kgrag_types::Entity {
        entity_type: kind.into(),
        ..crate::common::entity(name, description, c)
    }
}

/// Seven chunks; eleven entities joined by ten relations into one tree. Cells that exercise the
/// reference's stripping: a description in single quotes, one ending in `''`, one opening with `"`,
/// trailing spaces, a chunk with spaces around it.
fn corpus() -> (Vec<Chunk>, Vec<Extraction>) {
    let c1 = chunk("The Arno river flows through Florence.");
    let c2 = chunk("Florence is the capital of Tuscany.");
    let c3 = chunk("Pisa lies in Tuscany.");
    let c4 = chunk("\"The Leaning Tower\" stands in Pisa.");
    let c5 = chunk("Galileo was born in Pisa and taught in Padua.");
    let c6 = chunk("Padua is a city in Veneto; Venice is the capital of Veneto.");
    let c7 = chunk("  'Dante' wrote the Comedy in Florence.  ");
    let rel = crate::common::relation;
    let extractions = vec![
        ex(
            &c1,
            vec![
                entity("ARNO", "RIVER", "The Arno is a river.", &c1),
                entity("FLORENCE", "CITY", "Florence lies on the Arno.", &c1),
            ],
            vec![rel(
                "ARNO",
                "FLORENCE",
                "The Arno river flows through Florence.",
                8.0,
                &c1,
            )],
        ),
        ex(
            &c2,
            vec![
                entity(
                    "FLORENCE",
                    "CITY",
                    "Florence is the capital of Tuscany.",
                    &c2,
                ),
                entity(
                    "TUSCANY",
                    "REGION",
                    "Tuscany is a region whose capital is Florence.",
                    &c2,
                ),
            ],
            vec![rel(
                "FLORENCE",
                "TUSCANY",
                "Florence is the capital of Tuscany.",
                9.0,
                &c2,
            )],
        ),
        ex(
            &c3,
            vec![
                entity("PISA", "CITY", "Pisa is a city in Tuscany.", &c3),
                entity("TUSCANY", "REGION", "Tuscany holds Pisa.", &c3),
            ],
            vec![rel("PISA", "TUSCANY", "Pisa lies in Tuscany.", 6.0, &c3)],
        ),
        ex(
            &c4,
            vec![
                entity("TOWER", "BUILDING", "\"The Leaning Tower\" of Pisa", &c4),
                entity("PISA", "CITY", "Pisa has a leaning tower.", &c4),
            ],
            vec![rel(
                "TOWER",
                "PISA",
                "The Leaning Tower stands in Pisa.",
                7.0,
                &c4,
            )],
        ),
        ex(
            &c5,
            vec![
                entity(
                    "GALILEO",
                    "PERSON",
                    "Galileo was born in Pisa and taught in Padua.",
                    &c5,
                ),
                entity("PISA", "CITY", "Pisa is where Galileo was born.", &c5),
                entity("PADUA", "CITY", "Padua is where Galileo taught.", &c5),
            ],
            vec![
                rel("GALILEO", "PISA", "Galileo was born in Pisa.", 5.0, &c5),
                rel("GALILEO", "PADUA", "Galileo taught in Padua.", 4.0, &c5),
            ],
        ),
        ex(
            &c6,
            vec![
                entity("PADUA", "CITY", "Padua is a city in Veneto.", &c6),
                entity(
                    "VENETO",
                    "REGION",
                    "Veneto is a region whose capital is Venice.",
                    &c6,
                ),
                entity("VENICE", "CITY", "Venice is the capital of Veneto.   ", &c6),
            ],
            vec![
                rel("PADUA", "VENETO", "Padua is a city in Veneto.", 3.0, &c6),
                rel(
                    "VENICE",
                    "VENETO",
                    "Venice is the capital of Veneto.",
                    2.0,
                    &c6,
                ),
            ],
        ),
        ex(
            &c7,
            vec![
                entity(
                    "DANTE",
                    "PERSON",
                    "'Dante' wrote the Comedy in Florence.",
                    &c7,
                ),
                entity("COMEDY", "WORK", "The Comedy treats of the Soul.''", &c7),
                entity("FLORENCE", "CITY", "Florence is where Dante wrote.", &c7),
            ],
            vec![
                rel("DANTE", "COMEDY", "Dante wrote the Comedy.", 10.0, &c7),
                rel("DANTE", "FLORENCE", "Dante wrote in Florence.", 1.0, &c7),
            ],
        ),
    ];
    (vec![c1, c2, c3, c4, c5, c6, c7], extractions)
}

/// The queries and the number of entities each retrieves (the reference's `QueryParam.top_k`).
const QUERIES: [&str; 4] = [
    "Which river flows through Florence?",
    "Where was Galileo born?",
    "What did Dante write?",
    "Which region is Venice the capital of?",
];
const TOP_K: usize = 5;

/// The modes and the file of the reference's contexts for each.
const MODES: [(Mode, &str); 5] = [
    (Mode::Hi, "hi"),
    (Mode::HiBridge, "hi_bridge"),
    (Mode::HiGlobal, "hi_global"),
    (Mode::HiLocal, "hi_local"),
    (Mode::HiNobridge, "hi_nobridge"),
];

fn config() -> HiragConfig {
    HiragConfig {
        // No summary layers: the entity graph stays the tree above.
        max_layers: 0,
        top_k: TOP_K,
        // The reference's entity text (offline, `auto` would embed the description alone).
        entity_text: kgrag_hirag::EntityText::NameDescription,
        log_layers: false,
        ..HiragConfig::default()
    }
}

#[tokio::test]
async fn every_mode_renders_the_references_context_byte_for_byte() {
    let (chunks, extractions) = corpus();
    let embedder: Arc<dyn Embedder> = Arc::new(keywords());
    let index = Arc::new(build(&chunks, &extractions, embedder.clone(), &config()).await);
    // A tree: as many relations as entities less one, all connected.
    let g = index.graph();
    assert_eq!(g.nodes().len(), 11);
    assert_eq!(g.edges().len(), 10);

    if let Some(dir) = std::env::var_os("KGRAG_GOLDEN_EXPORT") {
        let dir = std::path::PathBuf::from(dir);
        kgrag_hirag::export::export_reference(&index, &dir.join("hirag")).unwrap();
        let queries: Vec<serde_json::Value> = QUERIES
            .iter()
            .map(|q| json!({"query": q, "vector": keywords().vector(q), "top_k": TOP_K}))
            .collect();
        std::fs::write(
            dir.join("queries.json"),
            serde_json::to_vec_pretty(&queries).unwrap(),
        )
        .unwrap();
    }

    compare_every_mode(&index, &embedder).await;

    // A saved index gives the same contexts and counts (files of the two previous versions: the
    // crate's `index::legacy` tests); version 1 is refused.
    let dir = std::env::temp_dir().join(format!("hirag-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hirag.idx");
    index.save(&path).unwrap();
    let loaded = Arc::new(kgrag_hirag::HiragIndex::load(&path).unwrap());
    compare_every_mode(&loaded, &embedder).await;
    kgrag_graph_store::persist::save(&path, "hirag-index", 1, &*index).unwrap();
    let refused = kgrag_hirag::HiragIndex::load(&path)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("version"), "{refused}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every mode's context for every query: its o200k count exact, its text the reference's.
async fn compare_every_mode(index: &Arc<kgrag_hirag::HiragIndex>, embedder: &Arc<dyn Embedder>) {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden");
    for (mode, name) in MODES {
        let retriever = HiragRetriever::new(Arc::clone(index), Arc::clone(embedder), mode);
        let mut ours = Vec::new();
        for q in QUERIES {
            let ctx = retriever
                .retrieve(&RetrievalRequest {
                    query: q.into(),
                    top_k: TOP_K,
                })
                .await
                .unwrap();
            let tokens = kgrag_text::Encoding::O200kBase
                .count(&ctx.rendered)
                .unwrap();
            assert_eq!(ctx.context_tokens, tokens, "{name} {q}");
            ours.push(ctx.rendered);
        }
        let path = data.join(format!("hirag-{name}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let reference: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(reference.len(), QUERIES.len(), "{}", path.display());
        for ((q, ours), theirs) in QUERIES.iter().zip(&ours).zip(&reference) {
            assert_eq!(ours, theirs, "mode {name}, query {q:?}");
        }
    }
}
