//! The index API: many threads querying cloned searchers while one writer commits, snapshots that keep
//! their generation, a writer dropped without commit, one writer at a time, reload policies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kgrag::documents::SourceDoc;
use kgrag::{Index, ReloadPolicy, Searcher};

use crate::pipeline::{config, embedder, fixture_docs, tmp};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn open_new(root: &Path, cache: &Path) -> Index {
    Index::options()
        .config(config(cache))
        .models(embedder(64), None)
        .cache_dir(cache)
        .create(root)
        .unwrap()
}

fn reopen(root: &Path, cache: &Path) -> Index {
    Index::options()
        .config(config(cache))
        .models(embedder(64), None)
        .cache_dir(cache)
        .open(root)
        .unwrap()
}

/// A ranking as comparable text: chunk ids with their scores to 9 digits.
type Ranking = Vec<(String, String)>;

fn ranking(hits: &[kgrag::PassageHit]) -> Ranking {
    hits.iter()
        .map(|h| (h.chunk_id.as_str().to_owned(), format!("{:.9}", h.score)))
        .collect()
}

fn chunks_of(s: &Searcher) -> BTreeSet<String> {
    s.documents()
        .iter()
        .flat_map(|d| d.chunks.iter().map(|c| c.as_str().to_owned()))
        .collect()
}

/// Every strategy on every question, single-threaded, on `s`.
fn all_rankings(
    rt: &tokio::runtime::Runtime,
    s: &Searcher,
    questions: &[String],
) -> BTreeMap<(String, usize), Ranking> {
    let mut out = BTreeMap::new();
    for strategy in s.strategies() {
        for (i, q) in questions.iter().enumerate() {
            let hits = rt.block_on(s.search(q, strategy, 5)).unwrap();
            out.insert((strategy.to_owned(), i), ranking(&hits));
        }
    }
    out
}

#[test]
fn eight_threads_query_every_strategy_while_a_writer_commits_ten_inserts() {
    let (docs, questions) = fixture_docs();
    let questions: Vec<String> = questions.into_iter().take(3).collect();
    let cache = tmp("api-threads-cache");
    let root = tmp("api-threads-index");
    let rt = runtime();
    let index = open_new(&root, &cache);
    let first = docs.len() - 10;
    {
        let mut w = index.writer().unwrap();
        rt.block_on(w.add_documents(docs[..first].to_vec()))
            .unwrap();
        assert_eq!(rt.block_on(w.commit()).unwrap(), 1);
    }
    let reader = index.reader().unwrap();
    let before = reader.searcher();
    assert_eq!(before.generation(), 1);
    assert_eq!(
        before.strategies().len(),
        kgrag::methods::strategies().len()
    );
    let expected_before = all_rankings(&rt, &before, &questions);

    // Every (generation, strategy, question) ranking the threads saw, and one searcher per generation.
    type Seen = BTreeMap<(u64, String, usize), Ranking>;
    let seen: Mutex<Seen> = Mutex::new(BTreeMap::new());
    let searchers: Mutex<BTreeMap<u64, Searcher>> = Mutex::new(BTreeMap::new());
    let done = AtomicBool::new(false);
    let strategies: Vec<&str> = kgrag::methods::strategies();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let reader = reader.clone();
            let (seen, searchers, done, questions, strategies) =
                (&seen, &searchers, &done, &questions, &strategies);
            scope.spawn(move || {
                let rt = runtime();
                let mut rounds = 0;
                // At least two rounds each, and on until the writer is done.
                while rounds < 2 || !done.load(Ordering::Acquire) {
                    let s = reader.searcher();
                    let chunks = chunks_of(&s);
                    searchers
                        .lock()
                        .unwrap()
                        .entry(s.generation())
                        .or_insert_with(|| s.clone());
                    for (k, strategy) in strategies.iter().enumerate() {
                        let qi = (t + k + rounds) % questions.len();
                        let hits = rt.block_on(s.search(&questions[qi], strategy, 5)).unwrap();
                        assert!(!hits.is_empty(), "{strategy}");
                        for h in &hits {
                            assert!(
                                chunks.contains(h.chunk_id.as_str()),
                                "{strategy}: {} is not in generation {}",
                                h.chunk_id,
                                s.generation()
                            );
                        }
                        let r = ranking(&hits);
                        let mut seen = seen.lock().unwrap();
                        let key = (s.generation(), (*strategy).to_owned(), qi);
                        if let Some(earlier) = seen.get(&key) {
                            assert_eq!(earlier, &r, "{key:?}: two threads disagree");
                        }
                        seen.insert(key, r);
                    }
                    rounds += 1;
                }
            });
        }
        // The writer: ten inserts, each committed.
        let rt = runtime();
        let mut w = index.writer().unwrap();
        for (i, d) in docs[first..].iter().enumerate() {
            let s = rt.block_on(w.add_documents(vec![d.clone()])).unwrap();
            assert_eq!(s.documents, 1);
            assert_eq!(rt.block_on(w.commit()).unwrap(), 2 + i as u64);
        }
        drop(w);
        done.store(true, Ordering::Release);
    });

    let seen = seen.into_inner().unwrap();
    let searchers = searchers.into_inner().unwrap();
    let generations: BTreeSet<u64> = seen.keys().map(|k| k.0).collect();
    assert!(
        generations.len() >= 2,
        "the readers saw only {generations:?}"
    );
    assert_eq!(reader.searcher().generation(), 11);
    assert_eq!(reader.searcher().documents().len(), docs.len());
    // Each generation's results equal a single-threaded run on that generation.
    for ((g, strategy, qi), r) in &seen {
        let s = &searchers[g];
        let hits = rt.block_on(s.search(&questions[*qi], strategy, 5)).unwrap();
        assert_eq!(
            &ranking(&hits),
            r,
            "generation {g}, {strategy}, question {qi}"
        );
    }
    // The searcher taken before the commits still answers from generation 1, as it did then.
    assert_eq!(before.generation(), 1);
    assert_eq!(before.documents().len(), first);
    assert_eq!(all_rankings(&rt, &before, &questions), expected_before);
    // The last generation reopened from disk answers as the reader's last searcher does.
    let last = reader.searcher();
    let again = reopen(&root, &cache).reader().unwrap().searcher();
    assert_eq!(again.generation(), 11);
    assert_eq!(
        all_rankings(&rt, &again, &questions),
        all_rankings(&rt, &last, &questions)
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_writer_dropped_without_commit_changes_nothing() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("api-drop-cache");
    let root = tmp("api-drop-index");
    let rt = runtime();
    let index = open_new(&root, &cache);
    {
        let mut w = index.writer().unwrap();
        rt.block_on(w.add_documents(docs[..5].to_vec())).unwrap();
        rt.block_on(w.commit()).unwrap();
    }
    let reader = index.reader().unwrap();
    let s = reader.searcher();
    let ranked = rt
        .block_on(s.search(&questions[0], "hipporag2", 5))
        .unwrap();
    let manifest = std::fs::read(root.join("manifest.json")).unwrap();
    {
        let mut w = index.writer().unwrap();
        let added = rt.block_on(w.add_documents(docs[5..7].to_vec())).unwrap();
        assert_eq!(added.documents, 2);
        let gone = rt
            .block_on(w.delete_documents(&[docs[0].id.clone()]))
            .unwrap();
        assert_eq!(gone.documents, 1);
        // Dropped here, uncommitted.
    }
    assert_eq!(std::fs::read(root.join("manifest.json")).unwrap(), manifest);
    assert_eq!(index.committed().unwrap().unwrap().generation, 1);
    let after = reader.searcher();
    assert_eq!(after.generation(), 1);
    assert_eq!(after.documents().len(), 5);
    assert_eq!(
        ranking(
            &rt.block_on(after.search(&questions[0], "hipporag2", 5))
                .unwrap()
        ),
        ranking(&ranked)
    );
    let fresh = reopen(&root, &cache).reader().unwrap().searcher();
    assert_eq!(fresh.documents().len(), 5);
    // The next writer starts from the committed generation, not from the dropped changes.
    let mut w = index.writer().unwrap();
    assert_eq!(w.opened(), 1);
    assert_eq!(w.documents().unwrap().len(), 5);
    // rollback drops what an open writer changed.
    rt.block_on(w.add_documents(docs[5..6].to_vec())).unwrap();
    w.rollback();
    assert_eq!(rt.block_on(w.commit()).unwrap(), 1);
    assert_eq!(w.documents().unwrap().len(), 5);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_second_writer_fails_at_once() {
    let (docs, _) = fixture_docs();
    let cache = tmp("api-two-cache");
    let root = tmp("api-two-index");
    let rt = runtime();
    let index = open_new(&root, &cache);
    let mut w = index.writer().unwrap();
    rt.block_on(w.add_documents(docs[..3].to_vec())).unwrap();
    rt.block_on(w.commit()).unwrap();
    // The same index, another handle on it in this process, another process's view: all refused.
    let t = Instant::now();
    let same = index.clone().writer().err().unwrap().to_string();
    assert!(same.contains("another writer"), "{same}");
    let other = reopen(&root, &cache);
    let err = other.writer().err().unwrap().to_string();
    assert!(
        err.contains("being changed by another kgrag process")
            && err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(w);
    // Once the first is gone, a writer opens on either handle.
    let mut w2 = other.writer().unwrap();
    rt.block_on(w2.add_documents(docs[3..4].to_vec())).unwrap();
    assert_eq!(rt.block_on(w2.commit()).unwrap(), 2);
    drop(w2);
    // A reader of the first handle sees that commit after a reload (another handle committed it).
    let reader = index.reader_with(ReloadPolicy::Manual).unwrap();
    assert_eq!(reader.searcher().generation(), 1);
    assert_eq!(reader.reload().unwrap(), 2);
    assert_eq!(reader.searcher().generation(), 2);
    assert_eq!(reader.searcher().documents().len(), 4);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn reload_policies_in_memory() {
    let (docs, questions) = fixture_docs();
    let cache = tmp("api-mem-cache");
    let rt = runtime();
    let index = Index::options()
        .config(config(&cache))
        .models(embedder(64), None)
        .cache_dir(&cache)
        .in_memory()
        .unwrap();
    let on_commit = index.reader().unwrap();
    let manual = index.reader_with(ReloadPolicy::Manual).unwrap();
    let empty = on_commit.searcher();
    assert_eq!(empty.generation(), 0);
    let err = rt
        .block_on(empty.search(&questions[0], "dense", 3))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("nothing committed"), "{err}");
    let mut w = index.writer().unwrap();
    rt.block_on(w.add_documents(docs[..4].to_vec())).unwrap();
    assert_eq!(
        on_commit.searcher().generation(),
        0,
        "visible before commit"
    );
    rt.block_on(w.commit()).unwrap();
    assert_eq!(on_commit.searcher().generation(), 1);
    assert_eq!(manual.searcher().generation(), 0);
    assert_eq!(manual.reload().unwrap(), 1);
    assert_eq!(manual.searcher().generation(), 1);
    let s = manual.searcher();
    let hits = rt.block_on(s.search(&questions[0], "dense", 3)).unwrap();
    assert_eq!(hits.len(), 3);
    // Insert and delete in memory: the writer's next generation keeps the triples it needs.
    rt.block_on(w.add_documents(docs[4..6].to_vec())).unwrap();
    rt.block_on(w.delete_documents(&[docs[0].id.clone()]))
        .unwrap();
    assert_eq!(rt.block_on(w.commit()).unwrap(), 2);
    drop(w);
    let mut w = index.writer().unwrap();
    rt.block_on(w.add_documents(vec![SourceDoc::text("extra", "Ada Lovelace wrote notes.")]))
        .unwrap();
    assert_eq!(rt.block_on(w.commit()).unwrap(), 3);
    let last = on_commit.searcher();
    assert_eq!(last.documents().len(), 6);
    for strategy in last.strategies() {
        rt.block_on(last.search(&questions[0], strategy, 3))
            .unwrap();
    }
    assert_eq!(
        s.documents().len(),
        4,
        "the older searcher keeps its generation"
    );
}

#[test]
fn fact_vectors_on_disk_are_a_file_of_the_generation_and_rank_as_in_memory() {
    let (docs, questions) = fixture_docs();
    let questions: Vec<String> = questions.into_iter().take(3).collect();
    let rt = runtime();
    let build = |name: &str, on_disk: bool| {
        let cache = tmp(&format!("api-facts-{name}-cache"));
        let root = tmp(&format!("api-facts-{name}-index"));
        let mut c = config(&cache);
        c.index.fact_vectors_on_disk = on_disk;
        // HiRAG's and LeanRAG's build-time sentence vectors (the fixture's offline build composes its
        // descriptions from them) likewise: the same index either way.
        c.index.sentence_vectors_on_disk = on_disk;
        // Every method's entity vectors likewise (HiRAG's and LeanRAG's screened per query).
        c.index.entity_vectors_on_disk = on_disk;
        let index = Index::options()
            .config(c)
            .models(embedder(64), None)
            .cache_dir(&cache)
            .create(&root)
            .unwrap();
        let mut w = index.writer().unwrap();
        rt.block_on(w.add_documents(docs[..8].to_vec())).unwrap();
        rt.block_on(w.commit()).unwrap();
        rt.block_on(w.delete_documents(&[docs[2].id.clone()]))
            .unwrap();
        rt.block_on(w.add_documents(docs[8..10].to_vec())).unwrap();
        assert_eq!(rt.block_on(w.commit()).unwrap(), 2);
        drop(w);
        (index, root, cache)
    };
    assert!(kgrag::config::Config::default().index.fact_vectors_on_disk);
    assert!(
        kgrag::config::Config::default()
            .index
            .sentence_vectors_on_disk
    );
    assert!(
        kgrag::config::Config::default()
            .index
            .entity_vectors_on_disk
    );
    let (disk, disk_root, _) = build("disk", true);
    let (mem, mem_root, _) = build("mem", false);
    let rows = |root: &Path| {
        root.join(kgrag::index_dir::generation_dir(2))
            .join("hipporag2/facts.store.rows")
    };
    assert!(rows(&disk_root).is_file());
    assert!(!rows(&mem_root).exists());
    let manifest = std::fs::read_to_string(disk_root.join("manifest.json")).unwrap();
    assert!(manifest.contains("facts.store.rows"), "{manifest}");
    let (ds, ms) = (
        disk.reader().unwrap().searcher(),
        mem.reader().unwrap().searcher(),
    );
    assert_eq!(
        all_rankings(&rt, &ds, &questions),
        all_rankings(&rt, &ms, &questions)
    );
    // Reopened from disk (the facts read from the generation's rows file): the same rankings.
    let cache = tmp("api-facts-reopen-cache");
    let again = reopen(&disk_root, &cache).reader().unwrap().searcher();
    assert_eq!(
        all_rankings(&rt, &again, &questions),
        all_rankings(&rt, &ms, &questions)
    );
    let _ = std::fs::remove_dir_all(&disk_root);
    let _ = std::fs::remove_dir_all(&mem_root);
}
