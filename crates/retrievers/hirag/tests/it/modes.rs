//! Every mode: a hand-built corpus whose cosines and rankings are worked out by hand, then the bundled
//! fixture (sections in order, budgets, determinism of the whole index).

use std::path::Path;
use std::sync::Arc;

use kgrag_hirag::{
    BaseSource, EntityText, ExtractionMode, HiragConfig, HiragRetriever, Mode, FAIL_RESPONSE,
};
use kgrag_text::{Chunker, ChunkerConfig, Encoding};
use kgrag_types::testing::HashingEmbedder;
use kgrag_types::{Document, Extraction, RetrievalRequest, RetrievedContext, Retriever};

use crate::common::{build, chunk, entity, extraction as ex, relation, Keywords};

/// Four chunks about ALPHA, BETA, GAMMA and DELTA.
///
/// With `entity_text = "name_description"`, entity vectors embed `"NAME"` + description (merged
/// descriptions are sorted parts joined by `<SEP>`).
/// With the keyword embedder (alpha, beta, gamma, delta) and the query "alpha" (vector ≈ (0, 1, 0, 0, 0)):
/// - ALPHA: "\"ALPHA\"Alpha founded Beta.<SEP>Alpha visited Delta." → alpha 3, beta 1, delta 1 → cos 3/√11 = 0.905
/// - DELTA: "\"DELTA\"Delta hosted Alpha.<SEP>Delta met Gamma." → delta 3, alpha 1, gamma 1 → 1/√11 = 0.302
/// - BETA: "\"BETA\"Beta came along.<SEP>Beta hired Gamma.<SEP>Beta was founded by Alpha." → beta 4, alpha 1,
///   gamma 1 → 1/√18 = 0.236
/// - GAMMA: no "alpha" → ≈ 0, below the 0.2 floor.
///
/// So the local entities are ALPHA, DELTA, BETA.
fn corpus() -> (Vec<kgrag_types::Chunk>, Vec<Extraction>) {
    let c1 = chunk("Alpha founded Beta.");
    let c2 = chunk("Beta hired Gamma.");
    let c3 = chunk("Gamma met Delta.");
    let c4 = chunk("Alpha visited Delta and Beta.");
    let extractions = vec![
        ex(
            &c1,
            vec![
                entity("Alpha", "Alpha founded Beta.", &c1),
                entity("beta", "Beta was founded by Alpha.", &c1),
            ],
            vec![relation("ALPHA", "BETA", "Alpha founded Beta.", 9.0, &c1)],
        ),
        ex(
            &c2,
            vec![
                entity("BETA", "Beta hired Gamma.", &c2),
                entity("GAMMA", "Gamma works at Beta.", &c2),
            ],
            vec![relation("BETA", "GAMMA", "Beta hired Gamma.", 7.0, &c2)],
        ),
        ex(
            &c3,
            vec![
                entity("GAMMA", "Gamma met Delta.", &c3),
                entity("DELTA", "Delta met Gamma.", &c3),
            ],
            vec![relation("GAMMA", "DELTA", "Gamma met Delta.", 5.0, &c3)],
        ),
        ex(
            &c4,
            vec![
                entity("ALPHA", "Alpha visited Delta.", &c4),
                entity("DELTA", "Delta hosted Alpha.", &c4),
                entity("BETA", "Beta came along.", &c4),
            ],
            vec![
                relation("ALPHA", "DELTA", "Alpha visited Delta.", 3.0, &c4),
                relation("ALPHA", "BETA", "Beta came along with Alpha.", 2.0, &c4),
            ],
        ),
    ];
    (vec![c1, c2, c3, c4], extractions)
}

fn keywords() -> Arc<Keywords> {
    Arc::new(Keywords {
        words: vec!["alpha", "beta", "gamma", "delta"],
    })
}

async fn retrieve(r: &HiragRetriever, query: &str) -> RetrievedContext {
    r.retrieve(&RetrievalRequest {
        query: query.into(),
        top_k: 20,
    })
    .await
    .unwrap()
}

fn section_names(rendered: &str) -> Vec<String> {
    rendered
        .lines()
        .filter(|l| l.starts_with("-----") && l.ends_with("-----") && l.len() > 10)
        .map(|l| l.trim_matches('-').to_owned())
        .collect()
}

/// Offline (no chat model) `entity_text = "auto"` embeds the description alone, LeanRAG's seed text:
/// ALPHA "Alpha founded Beta.<SEP>Alpha visited Delta." → alpha 2, beta 1, delta 1 → cos 2/√6 = 0.816;
/// DELTA "Delta hosted Alpha.<SEP>Delta met Gamma." → 1/√6 = 0.408; BETA "Beta came along.<SEP>Beta hired
/// Gamma.<SEP>Beta was founded by Alpha." → 1/√11 = 0.302 — the scores of the description alone, not of
/// `"NAME"` + description (3/√11, 1/√11, 1/√18).
#[tokio::test]
async fn offline_entity_vectors_embed_the_description_alone() {
    let (chunks, extractions) = corpus();
    let embedder = keywords();
    for (entity_text, scores) in [
        (
            EntityText::Auto,
            [2.0 / 6f64.sqrt(), 1.0 / 6f64.sqrt(), 1.0 / 11f64.sqrt()],
        ),
        (
            EntityText::Description,
            [2.0 / 6f64.sqrt(), 1.0 / 6f64.sqrt(), 1.0 / 11f64.sqrt()],
        ),
        (
            EntityText::NameDescription,
            [3.0 / 11f64.sqrt(), 1.0 / 11f64.sqrt(), 1.0 / 18f64.sqrt()],
        ),
    ] {
        let config = HiragConfig {
            max_layers: 0,
            entity_text,
            log_layers: false,
            ..HiragConfig::default()
        };
        let index = Arc::new(build(&chunks, &extractions, embedder.clone(), &config).await);
        let local = HiragRetriever::new(index, embedder.clone(), Mode::HiLocal);
        let ctx = retrieve(&local, "alpha").await;
        let hits: Vec<(&str, f64)> = ctx
            .entities
            .iter()
            .map(|e| (e.name.as_str(), e.score))
            .collect();
        assert_eq!(hits.len(), 3, "{entity_text:?}: {hits:?}");
        for ((name, score), (want_name, want)) in hits
            .iter()
            .zip(["ALPHA", "DELTA", "BETA"].into_iter().zip(scores))
        {
            assert_eq!(*name, want_name, "{entity_text:?}: {hits:?}");
            assert!(
                (score - want).abs() < 1e-3,
                "{entity_text:?} {name}: {score} against {want}"
            );
        }
    }
}

#[tokio::test]
async fn hand_built_rankings_and_local_layout() {
    let (chunks, extractions) = corpus();
    let config = HiragConfig {
        max_layers: 0, // no summary entities: the cosines above are the whole story
        entity_text: EntityText::NameDescription,
        log_layers: false,
        ..HiragConfig::default()
    };
    let embedder = keywords();
    let index = Arc::new(build(&chunks, &extractions, embedder.clone(), &config).await);
    // Names were normalised and merged: four entities, four relations (ALPHA–BETA merged, weight 9 + 2).
    let g = index.graph();
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["ALPHA", "BETA", "DELTA", "GAMMA"]);
    let ab = g.edge(g.edge_between(0, 1).unwrap()).unwrap();
    assert_eq!(ab.weight, 11.0);
    assert_eq!(
        ab.description,
        "Alpha founded Beta.<SEP>Beta came along with Alpha."
    );

    let local = HiragRetriever::new(index.clone(), embedder.clone(), Mode::HiLocal);
    let ctx = retrieve(&local, "alpha").await;
    let hits: Vec<&str> = ctx.entities.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(hits, ["ALPHA", "DELTA", "BETA"]);
    assert!((ctx.entities[0].score - 3.0 / 11f64.sqrt()).abs() < 1e-3);
    // Text units (§7.1): entity 0 ALPHA has c1 and c4. c4's relation count is 2 (neighbours BETA and DELTA
    // both have c4), c1's is 1 (BETA only) → c4, c1. Entity 1 DELTA adds c3 (GAMMA has it). Entity 2 BETA
    // adds c2. Expected order: c4, c1, c3, c2.
    let order: Vec<&str> = ctx
        .passages
        .iter()
        .map(|p| local.chunk_text(&p.chunk_id).unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "Alpha visited Delta and Beta.",
            "Alpha founded Beta.",
            "Gamma met Delta.",
            "Beta hired Gamma."
        ]
    );
    // Relations incident to the local entities: all four, every degree is 2 so every rank is 4; by weight
    // ALPHA–BETA 11, BETA–GAMMA 7, DELTA–GAMMA 5, ALPHA–DELTA 3.
    let rels: Vec<String> = ctx
        .relations
        .iter()
        .map(|r| format!("{}-{}", r.source, r.target))
        .collect();
    assert_eq!(
        rels,
        ["ALPHA-BETA", "BETA-GAMMA", "DELTA-GAMMA", "ALPHA-DELTA"]
    );
    let expected = "\n-----Entities-----\n```csv\n\"id\",\t\"entity\",\t\"type\",\t\"description\",\t\"rank\"\n\
        0,\t\"ALPHA\",\t\"THING\",\t\"Alpha founded Beta.<SEP>Alpha visited Delta.\",\t2\n\
        1,\t\"DELTA\",\t\"THING\",\t\"Delta hosted Alpha.<SEP>Delta met Gamma.\",\t2\n\
        2,\t\"BETA\",\t\"THING\",\t\"Beta came along.<SEP>Beta hired Gamma.<SEP>Beta was founded by Alpha.\",\t2\n```\n\
        -----Relations-----\n```csv\n\"id\",\t\"source\",\t\"target\",\t\"description\",\t\"weight\",\t\"rank\"\n\
        0,\t\"ALPHA\",\t\"BETA\",\t\"Alpha founded Beta.<SEP>Beta came along with Alpha.\",\t11.0,\t4\n\
        1,\t\"BETA\",\t\"GAMMA\",\t\"Beta hired Gamma.\",\t7.0,\t4\n\
        2,\t\"DELTA\",\t\"GAMMA\",\t\"Gamma met Delta.\",\t5.0,\t4\n\
        3,\t\"ALPHA\",\t\"DELTA\",\t\"Alpha visited Delta.\",\t3.0,\t4\n```\n\
        -----Sources-----\n```csv\n\"id\",\t\"content\"\n\
        0,\t\"Alpha visited Delta and Beta.\"\n1,\t\"Alpha founded Beta.\"\n2,\t\"Gamma met Delta.\"\n\
        3,\t\"Beta hired Gamma.\"\n```\n";
    assert_eq!(ctx.rendered, expected);
    assert_eq!(
        ctx.context_tokens,
        Encoding::O200kBase.count(expected).unwrap()
    );

    // A text-unit budget that holds two chunks keeps the first two, and passages still rank all four.
    let tok = |t: &str| Encoding::O200kBase.count(t).unwrap();
    let tight = HiragConfig {
        text_units_budget: tok("Alpha visited Delta and Beta.") + tok("Alpha founded Beta."),
        ..config.clone()
    };
    let index2 = Arc::new(build(&chunks, &extractions, embedder.clone(), &tight).await);
    let ctx2 = retrieve(
        &HiragRetriever::new(index2, embedder.clone(), Mode::HiLocal),
        "alpha",
    )
    .await;
    assert_eq!(ctx2.stats["text_units"], 2.0);
    assert_eq!(ctx2.passages.len(), 4);
    assert!(ctx2.rendered.ends_with(
        "-----Sources-----\n```csv\n\"id\",\t\"content\"\n0,\t\"Alpha visited Delta and Beta.\"\n1,\t\"Alpha founded Beta.\"\n```\n"
    ));

    // No entity above the floor: the fixed context, no error.
    let none = retrieve(&local, "zebra").await;
    assert_eq!(none.rendered, FAIL_RESPONSE);
    assert!(none.passages.is_empty());
    assert_eq!(none.stats["no_entity_hit"], 1.0);
    for mode in Mode::ALL {
        let r = HiragRetriever::new(index.clone(), embedder.clone(), mode);
        assert_eq!(retrieve(&r, "zebra").await.rendered, FAIL_RESPONSE);
    }
}

const LAYOUTS: [(Mode, &[&str]); 5] = [
    (
        Mode::Hi,
        &[
            "Backgrounds",
            "Reasoning Path",
            "Detail Entity Information",
            "Source Documents",
        ],
    ),
    (Mode::HiLocal, &["Entities", "Relations", "Sources"]),
    (Mode::HiGlobal, &["Backgrounds", "Source Documents"]),
    (Mode::HiBridge, &["Reasoning Path", "Source Documents"]),
    (
        Mode::HiNobridge,
        &["Reports", "Entities", "Relationships", "Sources"],
    ),
];

/// The bundled fixture, extracted offline with the rule extractor, chunked 1200/100 o200k.
async fn fixture_index(config: &HiragConfig) -> kgrag_hirag::HiragIndex {
    let ds = kgrag_eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let chunker = Chunker::new(ChunkerConfig::hirag()).unwrap();
    let mut chunks = Vec::new();
    for p in &ds.passages {
        chunks.extend(chunker.chunk(&Document::new(p.content())).unwrap());
    }
    let extractions: Vec<Extraction> = chunks
        .iter()
        .map(|c| kgrag_openie::RuleExtractor.extract_text(c))
        .collect();
    build(
        &chunks,
        &extractions,
        Arc::new(HashingEmbedder::new(64)),
        config,
    )
    .await
}

fn offline() -> HiragConfig {
    HiragConfig {
        base: BaseSource::Extract,
        extraction: ExtractionMode::Rules,
        log_layers: false,
        ..HiragConfig::default()
    }
}

#[tokio::test]
async fn fixture_every_mode_sections_budgets_and_determinism() {
    let config = HiragConfig {
        // Budgets small enough to bite on the fixture.
        reports_budget: 400,
        bridge_budget: 300,
        local_relations_budget: 300,
        text_units_budget: 500,
        ..offline()
    };
    let index = Arc::new(fixture_index(&config).await);
    let s = index.stats();
    assert!(
        s.entities_per_layer.len() >= 2,
        "summary entities exist: {s:?}"
    );
    assert!(!index.communities().is_empty());
    assert_eq!(s.reports_written, index.communities().len());
    assert!(index
        .communities()
        .iter()
        .all(|c| c.report.title.starts_with("Community ")));
    // No membership edges: every edge carries a relation.
    assert!(index.graph().edges().iter().all(|e| e.weight > 0.0));

    let embedder: Arc<dyn kgrag_types::Embedder> = Arc::new(HashingEmbedder::new(64));
    // Built again, its entity vectors on disk and screened per query: the same index and contexts.
    let scratch = std::env::temp_dir().join(format!("kgrag-hirag-disk-{}", std::process::id()));
    let mut again = fixture_index(&config).await;
    again.set_entity_vectors_dir(Some(&scratch)).unwrap();
    assert!(again.entity_vectors().rows_are_on_disk());
    assert!(again.entity_vectors().len() > 100);
    let again = Arc::new(again);
    assert_eq!(index.graph(), again.graph());
    assert_eq!(index.hierarchy().unwrap(), again.hierarchy().unwrap());
    assert_eq!(index.communities(), again.communities());
    assert_eq!(index.entity_vectors(), again.entity_vectors());

    let queries = [
        "Who founded the Quillmarsh Glassblowers Guild?",
        "Where did Tesk Amberlow grow up?",
    ];
    let tok = |t: &str| Encoding::O200kBase.count(t).unwrap();
    for (mode, sections) in LAYOUTS {
        let r = HiragRetriever::new(index.clone(), embedder.clone(), mode);
        let r2 = HiragRetriever::new(again.clone(), embedder.clone(), mode);
        for q in queries {
            let ctx = retrieve(&r, q).await;
            assert_eq!(ctx.stats["no_entity_hit"], 0.0, "{mode:?} {q}");
            assert_eq!(section_names(&ctx.rendered), *sections, "{mode:?}");
            // The summed count equals a full count of the rendered context.
            assert_eq!(ctx.context_tokens, tok(&ctx.rendered), "{mode:?} {q}");
            // Byte-identical contexts from the rebuilt index.
            assert_eq!(ctx.rendered, retrieve(&r2, q).await.rendered, "{mode:?}");
            // Budgets: reports, relations and source documents within theirs.
            let report_tokens: usize = ctx.reports.iter().map(|r| tok(&r.text)).sum();
            assert!(report_tokens <= config.reports_budget, "{mode:?}");
            let relation_budget = match mode {
                Mode::Hi | Mode::HiBridge => config.bridge_budget,
                _ => config.local_relations_budget,
            };
            let relation_tokens: usize = ctx.relations.iter().map(|r| tok(&r.description)).sum();
            assert!(relation_tokens <= relation_budget, "{mode:?}");
            let shown = r.rendered_units(&ctx);
            let unit_tokens: usize = shown
                .iter()
                .map(|p| tok(r.chunk_text(&p.chunk_id).unwrap()))
                .sum();
            assert!(unit_tokens <= config.text_units_budget, "{mode:?}");
            assert!(!shown.is_empty(), "{mode:?}");
            // §7.1: the first text unit is a source chunk of the best entity.
            let best = index.graph().find(&ctx.entities[0].name).unwrap();
            let first = &ctx.passages[0].chunk_id;
            assert!(index
                .graph()
                .node(best)
                .unwrap()
                .sources
                .iter()
                .any(|&c| index.chunks()[c as usize].id == *first));
            assert!(ctx.entities.len() <= config.top_k);
            if matches!(mode, Mode::Hi | Mode::HiBridge) {
                assert_eq!(ctx.paths.len(), 1);
            }
            if matches!(mode, Mode::Hi | Mode::HiGlobal | Mode::HiNobridge) {
                assert!(!ctx.reports.is_empty(), "{mode:?}");
            }
        }
    }

    let _ = std::fs::remove_dir_all(&scratch);

    // The export in the reference's formats.
    let dir = std::env::temp_dir().join(format!("kgrag-hirag-export-{}", std::process::id()));
    let files = kgrag_hirag::export::export_reference(&index, &dir).unwrap();
    let graphml = std::fs::read_to_string(&files.graphml).unwrap();
    assert!(graphml.contains("attr.name=\"weight\" attr.type=\"double\""));
    assert_eq!(
        graphml.matches("<node ").count(),
        index.graph().node_count()
    );
    assert_eq!(
        graphml.matches("<edge ").count(),
        index.graph().edges().len()
    );
    let chunks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.text_chunks).unwrap()).unwrap();
    assert_eq!(chunks.as_object().unwrap().len(), index.chunks().len());
    let reports: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.community_reports).unwrap()).unwrap();
    let first = reports.as_object().unwrap().values().next().unwrap();
    for key in [
        "level",
        "title",
        "nodes",
        "edges",
        "chunk_ids",
        "occurrence",
        "sub_communities",
        "report_string",
        "report_json",
    ] {
        assert!(first.get(key).is_some(), "{key}");
    }
    let npy = std::fs::read(&files.vectors).unwrap();
    assert_eq!(&npy[..6], b"\x93NUMPY");
    let names: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.vector_names).unwrap()).unwrap();
    assert_eq!(
        names.as_array().unwrap().len(),
        index.entity_vectors().len()
    );
    let _ = std::fs::remove_dir_all(&dir);

    // Reports are reused when their input is unchanged.
    let models = kgrag_hirag::Models {
        embedder: embedder.clone(),
        chat: None,
        cheap_chat: None,
        scratch_dir: None,
    };
    let ds = kgrag_eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let chunker = Chunker::new(ChunkerConfig::hirag()).unwrap();
    let mut chunks = Vec::new();
    for p in &ds.passages {
        chunks.extend(chunker.chunk(&Document::new(p.content())).unwrap());
    }
    let extractions: Vec<Extraction> = chunks
        .iter()
        .map(|c| kgrag_openie::RuleExtractor.extract_text(c))
        .collect();
    let reused = kgrag_hirag::HiragIndex::build(
        &chunks,
        &extractions,
        &models,
        &config,
        &index.reports_by_hash(),
    )
    .await
    .unwrap();
    assert_eq!(reused.stats().reports_reused, index.communities().len());
    assert_eq!(reused.stats().reports_written, 0);
}

/// The base layer handed to LeanRAG before the hierarchy ([`kgrag_hirag::HiragBase::graph`]) is the finished
/// index's layer 0 — every base node and the edges among them, with their descriptions and sources — on
/// the fixture, where no summary entity takes a base entity's name.
#[tokio::test]
async fn the_base_layer_is_the_finished_index_layer_zero() {
    let ds = kgrag_eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let chunker = Chunker::new(ChunkerConfig::hirag()).unwrap();
    let mut chunks = Vec::new();
    for p in &ds.passages {
        chunks.extend(chunker.chunk(&Document::new(p.content())).unwrap());
    }
    let extractions: Vec<Extraction> = chunks
        .iter()
        .map(|c| kgrag_openie::RuleExtractor.extract_text(c))
        .collect();
    let models = kgrag_hirag::Models {
        embedder: Arc::new(HashingEmbedder::new(64)),
        chat: None,
        cheap_chat: None,
        scratch_dir: None,
    };
    let config = offline();
    let base = kgrag_hirag::HiragBase::new(&chunks, &extractions, &models, &config)
        .await
        .unwrap();
    let layer = base.graph().unwrap();
    let base_chunks: Vec<_> = base.chunks().iter().map(|c| c.id.clone()).collect();
    // The consuming form gives the same graph, chunks and aliases (a base built again from the same
    // inputs, the extractions given by value).
    let again = kgrag_hirag::HiragBase::new(&chunks, extractions.clone(), &models, &config)
        .await
        .unwrap();
    let (taken, taken_chunks, taken_aliases) = again.into_graph().unwrap();
    assert_eq!(
        format!("{:?}", (taken.nodes(), taken.edges())),
        format!("{:?}", (layer.nodes(), layer.edges()))
    );
    assert_eq!(
        taken_chunks
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>(),
        base_chunks
    );
    assert_eq!(*taken_aliases, *base.sentence_aliases());
    let index = base
        .finish(&models, &std::collections::HashMap::new())
        .await
        .unwrap();
    let whole = index.graph();
    assert!(
        whole.nodes().iter().any(|n| n.layer > 0),
        "the fixture has summary entities"
    );
    assert_eq!(
        base_chunks,
        index
            .chunks()
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>()
    );
    let nodes = |g: &kgrag_hirag::HiGraph| -> Vec<(String, String, String, Vec<u32>)> {
        g.nodes()
            .iter()
            .filter(|n| n.layer == 0)
            .map(|n| {
                (
                    n.name.clone(),
                    n.entity_type.clone(),
                    n.description.clone(),
                    n.sources.clone(),
                )
            })
            .collect()
    };
    let edges = |g: &kgrag_hirag::HiGraph| -> Vec<(String, String, String, Vec<u32>, u64)> {
        g.edges()
            .iter()
            .filter_map(|e| {
                let (a, b) = (g.node(e.a)?, g.node(e.b)?);
                (a.layer == 0 && b.layer == 0).then(|| {
                    (
                        a.name.clone(),
                        b.name.clone(),
                        e.description.clone(),
                        e.sources.clone(),
                        e.weight.to_bits(),
                    )
                })
            })
            .collect()
    };
    assert!(!nodes(&layer).is_empty() && !edges(&layer).is_empty());
    assert_eq!(nodes(&layer), nodes(whole));
    assert_eq!(edges(&layer), edges(whole));
}

/// An index whose hierarchy was reduced by PCA (no UMAP layout start to record in its rounds) saves and
/// loads: the index files are postcard, read field by field in order, so a field left out when `None`
/// shifted every later one (`umap_init` was, until it was written always).
#[tokio::test]
async fn an_index_reduced_by_pca_saves_loads_and_unpacks_its_hierarchy() {
    let mut config = offline();
    config.cluster.reduction = kgrag_hierarchy::Reduction::Pca(4);
    let index = fixture_index(&config).await;
    let h = index.hierarchy().unwrap();
    assert!(!h.log.is_empty() && h.log.iter().all(|l| l.umap_init.is_none()));
    assert!(!index.stats().hierarchy_rounds.is_empty());
    let dir = std::env::temp_dir().join(format!("kgrag-hirag-pca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hirag.index");
    index.save(&path).unwrap();
    let back = kgrag_hirag::HiragIndex::load(&path).unwrap();
    assert_eq!(back.hierarchy().unwrap(), h);
    assert_eq!(back.graph(), index.graph());
    assert_eq!(back.communities(), index.communities());
    // Every figure but the stage timings, which are not saved.
    let mut built = index.stats().clone();
    built.secs.clear();
    assert_eq!(back.stats(), &built);
    let _ = std::fs::remove_dir_all(&dir);
}
