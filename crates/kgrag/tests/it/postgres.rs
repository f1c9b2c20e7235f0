//! The PostgreSQL + pgvector backend against a real server: `cargo xtask test` starts PostgreSQL 18 with
//! pgvector and sets `KGRAG_TEST_DATABASE_URL` (and `KGRAG_REQUIRE_PG_SERVER=1`, which makes a missing
//! server a failure instead of a skip). Each test works in a schema of its own.
//!
//! - the fixture in PostgreSQL and in the local backend: the same rankings for every strategy, the same
//!   statistics and byte-identical method indexes, after a build, an insert and a delete; pgvector's
//!   HNSW search agreeing with the exact one;
//! - readers opening and querying in a loop while a writer commits generations: every passage of every
//!   answer belongs to the generation the reader opened;
//! - a schema of an older version migrated on open, one of a newer version refused;
//! - two writers: the second fails at once, naming the first;
//! - a second machine (its own folder and cache, the same database) extracts only what is new;
//!
//! The command line against a server killed inside a commit is in `kgrag-cli`'s tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kgrag::config::{Config, StorageBackend};
use kgrag::documents::SourceDoc;
use kgrag::types::{Document, RetrievalRequest};
use kgrag::Pipeline;

use crate::pipeline::{fixture_docs as fixture, tmp};

/// The variable the tests' configurations name as `url_env`.
const URL_ENV: &str = "KGRAG_TEST_DATABASE_URL";

/// Whether the server is there; without it the test is skipped, unless the run requires it.
fn have_server(test: &str) -> bool {
    // The server and its binaries (psql, and a second server for the kill test).
    if std::env::var_os(URL_ENV).is_some() && std::env::var_os("KGRAG_TEST_PG_BIN").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("KGRAG_REQUIRE_PG_SERVER").is_none(),
        "{URL_ENV} or KGRAG_TEST_PG_BIN is not set but KGRAG_REQUIRE_PG_SERVER is: `cargo xtask test` \
         starts the server"
    );
    eprintln!("{test}: skipped (no PostgreSQL: run it through `cargo xtask test`)");
    false
}

/// The offline configuration of the pipeline tests; with `schema`, in PostgreSQL.
fn config(cache: &Path, schema: Option<&str>) -> Config {
    let mut c = crate::pipeline::config(cache);
    if let Some(s) = schema {
        c.storage.backend = StorageBackend::Postgres;
        c.storage.url_env = URL_ENV.to_owned();
        c.storage.schema = s.to_owned();
    }
    c
}

/// A schema no other test (or earlier run) uses.
fn schema(name: &str) -> String {
    format!("t_{name}_{}", std::process::id())
}

fn embedder() -> Arc<dyn kgrag::types::Embedder> {
    crate::pipeline::embedder(64)
}

const ALL: [&str; 4] = ["dense", "hipporag2", "hirag", "leanrag"];

async fn build(docs: &[SourceDoc], root: &Path, c: Config, methods: &[&str]) -> Pipeline {
    let cache = c.cache_dir.clone().unwrap();
    let mut p = Pipeline::with_models(c, cache, embedder(), None, Some(root), false).unwrap();
    let methods: Vec<String> = methods.iter().map(|m| (*m).to_owned()).collect();
    p.index(docs.to_vec(), &methods, Default::default())
        .await
        .unwrap();
    p
}

/// The top 10 chunk ids of every strategy for every question.
async fn rankings(p: &mut Pipeline, questions: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for strategy in kgrag::methods::strategies() {
        if p.manifest().is_some_and(|m| {
            !m.methods
                .contains_key(kgrag::methods::method_of(strategy).unwrap().name())
        }) {
            continue;
        }
        let r = p.retriever(strategy).unwrap();
        for q in questions {
            let ctx = r
                .retrieve(&RetrievalRequest {
                    query: q.clone(),
                    top_k: 10,
                })
                .await
                .unwrap();
            out.push((
                format!("{strategy}: {q}"),
                ctx.passages
                    .iter()
                    .map(|s| s.chunk_id.as_str().to_owned())
                    .collect(),
            ));
        }
    }
    out
}

/// `kgrag stats` without what differs by backend: where the bytes are, and the cache folder.
fn comparable_stats(p: &Pipeline) -> serde_json::Value {
    let mut s = p.stats().unwrap();
    let o = s.as_object_mut().unwrap();
    for k in [
        "bytes_by_part",
        "bytes_total",
        "storage",
        "cache",
        "last_build_stages",
    ] {
        o.remove(k);
    }
    s
}

/// Each method's index files (name → sha256) as the manifest records them.
fn method_checksums(p: &Pipeline) -> Vec<(String, String)> {
    let m = p.manifest().unwrap();
    let mut out: Vec<(String, String)> = m
        .methods
        .iter()
        .flat_map(|(name, e)| {
            e.files.iter().map(move |f| {
                let file = f.path.rsplit('/').next().unwrap().to_owned();
                (format!("{name}/{file}"), f.sha256.clone())
            })
        })
        .collect();
    out.sort();
    out
}

/// Every leaf of `v` by its path.
fn leaves(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut std::collections::BTreeMap<String, String>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                leaves(&format!("{prefix}.{k}"), x, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves(&format!("{prefix}[{i}]"), x, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

fn assert_same_json(a: &serde_json::Value, b: &serde_json::Value) {
    let (mut la, mut lb) = (Default::default(), Default::default());
    leaves("", a, &mut la);
    leaves("", b, &mut lb);
    let keys: BTreeSet<&String> = la.keys().chain(lb.keys()).collect();
    let diff: Vec<String> = keys
        .into_iter()
        .filter(|k| la.get(*k) != lb.get(*k))
        .map(|k| format!("{k}: {:?} vs {:?}", la.get(k), lb.get(k)))
        .collect();
    assert!(
        diff.is_empty(),
        "local and postgres differ:\n{}",
        diff.join("\n")
    );
}

fn assert_same_rankings(a: &[(String, Vec<String>)], b: &[(String, Vec<String>)]) {
    assert_eq!(a.len(), b.len());
    for ((qa, ra), (qb, rb)) in a.iter().zip(b) {
        assert_eq!(qa, qb);
        assert_eq!(ra, rb, "{qa}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_and_local_rank_and_count_alike_through_build_insert_and_delete() {
    if !have_server("postgres_and_local") {
        return;
    }
    let (docs, questions) = fixture();
    // A cache each: HiRAG's index records how many of its reports came from the cache.
    let (cache_l, cache_p) = (tmp("same-cache-local"), tmp("same-cache-pg"));
    let (root_l, root_p) = (tmp("same-local"), tmp("same-pg"));
    let s = schema("same");
    let n = docs.len();
    let mut local = build(&docs[..n - 2], &root_l, config(&cache_l, None), &ALL).await;
    let mut pgp = build(&docs[..n - 2], &root_p, config(&cache_p, Some(&s)), &ALL).await;
    assert!(root_p.join("storage.json").is_file());
    assert!(!root_p.join("manifest.json").exists());
    assert_eq!(method_checksums(&local), method_checksums(&pgp));
    // HiRAG's and LeanRAG's layers and HiRAG's communities are rows to query as well.
    {
        let hi = pgp.method_index("hirag").unwrap();
        let h = kgrag::methods::hirag_index(hi.as_ref()).unwrap();
        let li = pgp.method_index("leanrag").unwrap();
        let l = kgrag::methods::leanrag_index(li.as_ref()).unwrap();
        let count = |table: &str, method: &str| -> usize {
            psql(&format!(
                "select count(*) from {s}.{table} where generation = 1 and method = '{method}'"
            ))
            .trim()
            .parse()
            .unwrap()
        };
        assert!(!h.communities().is_empty());
        assert_eq!(count("communities", "hirag"), h.communities().len());
        let nodes = |layers: &[Vec<_>]| layers.iter().map(Vec::len).sum::<usize>();
        assert_eq!(
            count("hierarchy_nodes", "hirag"),
            nodes(&h.hierarchy().unwrap().layers)
        );
        assert_eq!(
            count("hierarchy_nodes", "leanrag"),
            nodes(&l.hierarchy().layers)
        );
        assert_eq!(
            count("hierarchy_relations", "leanrag"),
            l.hierarchy().relations.len()
        );
        let c = &h.communities()[0];
        assert_eq!(
            psql(&format!(
                "select report from {s}.communities where generation = 1 and method = 'hirag' and id = {}",
                c.id
            ))
            .strip_suffix('\n')
            .unwrap(),
            c.report_string
        );
    }
    // Opened again: everything read back from the database.
    let reopen = |root: &Path, schema: Option<&str>| {
        let cache = if schema.is_some() { &cache_p } else { &cache_l };
        Pipeline::open_with_models(root, config(cache, schema), embedder(), None).unwrap()
    };
    let mut pg_again = reopen(&root_p, Some(&s));
    assert_eq!(
        pg_again.stats().unwrap()["storage"]["backend"],
        "postgres",
        "{}",
        pg_again.stats().unwrap()
    );
    let want = rankings(&mut local, &questions).await;
    assert!(want.len() >= 8 * questions.len());
    assert_same_rankings(&want, &rankings(&mut pgp, &questions).await);
    assert_same_rankings(&want, &rankings(&mut pg_again, &questions).await);
    assert_same_json(&comparable_stats(&local), &comparable_stats(&pg_again));

    // An insert and a delete on each, from the reopened indexes: HippoRAG 2 updates the graph it read
    // back from the node and edge rows (vacancies included).
    let mut local = reopen(&root_l, None);
    // (queried first, as `pg_again` was: the notes of the session go into the next manifest)
    assert_same_rankings(&want, &rankings(&mut local, &questions).await);
    local.insert(docs[n - 2..].to_vec()).await.unwrap();
    pg_again.insert(docs[n - 2..].to_vec()).await.unwrap();
    let victims = vec!["p03".to_owned(), "p07".to_owned()];
    let a = local.delete(&victims).await.unwrap();
    let b = pg_again.delete(&victims).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(b.generation, 3);
    let mut local = reopen(&root_l, None);
    let mut pg_last = reopen(&root_p, Some(&s));
    assert_eq!(method_checksums(&local), method_checksums(&pg_last));
    assert_same_rankings(
        &rankings(&mut local, &questions).await,
        &rankings(&mut pg_last, &questions).await,
    );
    assert_same_json(&comparable_stats(&local), &comparable_stats(&pg_last));
    // `kgrag stats` of the database backend measures its rows.
    let stats = pg_last.stats().unwrap();
    assert!(stats["bytes_by_part"]["passages"].as_u64().unwrap() > 0);
    assert!(stats["bytes_by_part"]["hipporag2"].as_u64().unwrap() > 0);

    // pgvector's HNSW search (forced on with a threshold of 0) agrees with the exact one here.
    let hs = schema("hnsw");
    let mut c = config(&cache_p, Some(&hs));
    c.storage.hnsw_min_rows = 0;
    let root_h = tmp("same-hnsw");
    build(&docs, &root_h, c.clone(), &["dense"]).await;
    let mut hnsw = Pipeline::open_with_models(&root_h, c, embedder(), None).unwrap();
    let mut exact = build(
        &docs,
        &tmp("same-exact"),
        config(&cache_l, None),
        &["dense"],
    )
    .await;
    let (h, e) = (
        rankings(&mut hnsw, &questions).await,
        rankings(&mut exact, &questions).await,
    );
    assert_same_rankings(&e, &h);
    for d in [root_l, root_p, root_h] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_whole_generations_while_a_writer_commits() {
    if !have_server("readers_see_whole_generations") {
        return;
    }
    let (docs, questions) = fixture();
    let cache = tmp("readers-cache");
    let root = tmp("readers-index");
    let s = schema("readers");
    let c = config(&cache, Some(&s));
    let n = docs.len();
    build(&docs[..n / 2], &root, c.clone(), &["dense", "hipporag2"]).await;

    let writer = {
        let (root, c, rest) = (root.clone(), c.clone(), docs[n / 2..].to_vec());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut p = Pipeline::open_with_models(&root, c, embedder(), None).unwrap();
                for d in rest {
                    p.insert(vec![d]).await.unwrap();
                }
                p.manifest().unwrap().generation
            })
        })
    };
    let mut rounds = 0;
    let mut generations = BTreeSet::new();
    while !writer.is_finished() || rounds < 3 {
        let mut p = Pipeline::open_with_models(&root, c.clone(), embedder(), None).unwrap();
        let m = p.manifest().unwrap().clone();
        generations.insert(m.generation);
        let chunks: BTreeSet<String> = m
            .documents
            .iter()
            .flat_map(|d| d.chunks.iter().map(|c| c.as_str().to_owned()))
            .collect();
        for strategy in ["dense", "hipporag2"] {
            let q = &questions[rounds % questions.len()];
            let a = p.answer(q, strategy, 10).await.unwrap();
            assert_eq!(a.passages.len(), chunks.len().min(10));
            for hit in &a.passages {
                assert!(
                    chunks.contains(hit.chunk_id.as_str()),
                    "{strategy} returned {} which generation {} does not hold",
                    hit.chunk_id.as_str(),
                    m.generation
                );
            }
        }
        rounds += 1;
    }
    let last = writer.join().unwrap();
    assert_eq!(last as usize, 1 + (n - n / 2));
    assert!(
        generations.len() >= 2,
        "the readers saw only generations {generations:?} in {rounds} rounds"
    );
    let p = Pipeline::open_with_models(&root, c, embedder(), None).unwrap();
    assert_eq!(p.manifest().unwrap().generation, last);
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_fails_at_once_naming_the_first() {
    if !have_server("a_second_writer") {
        return;
    }
    let (docs, questions) = fixture();
    let cache = tmp("writers-cache");
    let root = tmp("writers-index");
    let s = schema("writers");
    let mut c = config(&cache, Some(&s));
    // Replaced generations go at the next commit but one.
    c.storage.replaced_grace_secs = 0;
    build(&docs[..5], &root, c.clone(), &["dense", "hipporag2"]).await;
    let mut old = Pipeline::open_with_models(&root, c.clone(), embedder(), None).unwrap();
    let store = kgrag::storage::for_existing(&root, Some(&c.storage)).unwrap();
    let lock = store.lock().unwrap();
    let mut second = Pipeline::open_with_models(&root, c.clone(), embedder(), None).unwrap();
    let t = Instant::now();
    let err = second
        .insert(docs[5..6].to_vec())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        err.contains("being changed by another kgrag process")
            && err.contains(&format!("kgrag writer pid {}", std::process::id())),
        "{err}"
    );
    assert_eq!(second.manifest().unwrap().generation, 1);
    drop(lock);
    let s2 = second.insert(docs[5..6].to_vec()).await.unwrap();
    assert_eq!(s2.generation, 2);
    let s3 = second.insert(docs[6..7].to_vec()).await.unwrap();
    assert_eq!(s3.generation, 3);
    // Text PostgreSQL cannot hold is refused before anything is written, naming the document.
    let nul = SourceDoc {
        id: "nul".into(),
        source: "test".into(),
        document: Document::passage("Bad", "A text with a \0 inside."),
        origin: None,
    };
    let err = second.insert(vec![nul]).await.err().unwrap().to_string();
    assert!(err.contains("U+0000") && err.contains("chunk-"), "{err}");
    assert_eq!(second.committed().unwrap().unwrap().generation, 3);

    // Generation 1 is gone from the database now. Its reader still answers dense queries from the
    // passages it loaded, and is told to reopen for an index it had not loaded.
    let first: BTreeSet<String> = old
        .documents()
        .iter()
        .flat_map(|d| d.chunks.iter().map(|c| c.as_str().to_owned()))
        .collect();
    let a = old.answer(&questions[0], "dense", 10).await.unwrap();
    assert_eq!(a.passages.len(), 5);
    assert!(a
        .passages
        .iter()
        .all(|h| first.contains(h.chunk_id.as_str())));
    let err = old
        .answer(&questions[0], "hipporag2", 10)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("open the index again"), "{err}");
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_machine_reuses_the_extractions_the_first_shared() {
    if !have_server("a_second_machine") {
        return;
    }
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (docs, _) = fixture();
    let s = schema("machines");
    let n = docs.len();
    // HiRAG with its own extraction: the work a second machine must not repeat.
    let machine = |name: &str| {
        let cache = tmp(&format!("machines-cache-{name}"));
        let mut c = config(&cache, Some(&s));
        c.hirag.base = kgrag::hirag::BaseSource::Extract;
        c.hirag.extraction = kgrag::hirag::ExtractionMode::Rules;
        (c, tmp(&format!("machines-index-{name}")))
    };
    let (ca, root_a) = machine("a");
    let counted_a = Arc::new(crate::fixture_methods::Counting(AtomicUsize::new(0)));
    let mut a = Pipeline::with_models(
        ca.clone(),
        ca.cache_dir.clone().unwrap(),
        embedder(),
        None,
        Some(&root_a),
        false,
    )
    .unwrap();
    a.set_extractor(counted_a.clone()).unwrap();
    a.index(
        docs[..n - 1].to_vec(),
        &["hirag".into()],
        Default::default(),
    )
    .await
    .unwrap();
    let first = counted_a.0.load(Ordering::SeqCst);
    assert!(first >= n - 1, "{first}");

    // Another machine, its own folder and an empty cache, the same database: only the new document's
    // chunks are extracted there.
    let (cb, root_b) = machine("b");
    let counted_b = Arc::new(crate::fixture_methods::Counting(AtomicUsize::new(0)));
    let mut b = Pipeline::open_with_models(&root_b, cb, embedder(), None).unwrap();
    b.set_extractor(counted_b.clone()).unwrap();
    b.insert(docs[n - 1..].to_vec()).await.unwrap();
    let second = counted_b.0.load(Ordering::SeqCst);
    assert!(second >= 1 && second < first, "{second} of {first}");
    let m = b.manifest().unwrap();
    assert_eq!(m.extraction["shared"] as usize, first);
    assert_eq!(m.extraction["extracted"] as usize, second);
    for d in [root_a, root_b] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `psql` of the test server's binaries on `sql` (as the superuser of the test server).
fn psql(sql: &str) -> String {
    let bin = PathBuf::from(std::env::var_os("KGRAG_TEST_PG_BIN").unwrap());
    let out = Command::new(bin.join("psql"))
        .arg(std::env::var(URL_ENV).unwrap())
        .args(["-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_schema_is_migrated_and_a_newer_one_refused() {
    if !have_server("an_older_schema") {
        return;
    }
    let (docs, questions) = fixture();
    let cache = tmp("migrate-cache");
    let root = tmp("migrate-index");
    let s = schema("migrate");
    let c = config(&cache, Some(&s));
    build(&docs[..6], &root, c.clone(), &["dense", "hipporag2"]).await;
    assert_eq!(
        psql(&format!(
            "select string_agg(version::text, ',' order by version) from {s}.schema_version"
        ))
        .trim(),
        "1,2,3,4"
    );
    // Back to version 1, as an index written by an earlier kgrag.
    psql(&format!(
        "drop table {s}.extraction_cache, {s}.hierarchy_nodes, {s}.hierarchy_relations, {s}.communities, \
         {s}.jobs, {s}.workers, {s}.embedding_cache, {s}.llm_cache; \
         delete from {s}.schema_version where version > 1"
    ));
    let mut p = Pipeline::open_with_models(&root, c.clone(), embedder(), None).unwrap();
    assert_eq!(
        psql(&format!(
            "select string_agg(version::text, ',' order by version) from {s}.schema_version"
        ))
        .trim(),
        "1,2,3,4"
    );
    let a = p.answer(&questions[0], "hipporag2", 5).await.unwrap();
    assert_eq!(a.passages.len(), 5);
    p.insert(docs[6..7].to_vec()).await.unwrap();
    // The table migration 2 created is in use: the insert shared its new chunk's extraction.
    let shared: usize = psql(&format!("select count(*) from {s}.extraction_cache"))
        .trim()
        .parse()
        .unwrap();
    assert!(shared >= 1, "{shared}");
    // A schema from a newer kgrag is refused, saying so.
    psql(&format!(
        "insert into {s}.schema_version (version) values (99)"
    ));
    let err = Pipeline::open_with_models(&root, c, embedder(), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("version 99") && err.contains("newer kgrag"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(root);
}
