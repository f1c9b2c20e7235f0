//! The `kgrag` binary end to end, on files the tests write, with the local MiniLM embedder and the offline
//! kit: index, query with several strategies, stats, GraphML export, insert, delete, usage and input
//! errors; and builds killed with SIGKILL at seeded random moments, then resumed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kgrag-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn assets() -> PathBuf {
    std::env::var_os("KGRAG_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.assets"))
}

/// Writes the fixture's passages as `corpus.jsonl` in `work` (ids `p00`, `p01`, …); returns the dataset.
pub(crate) fn fixture_corpus(work: &Path) -> kgrag::eval::Dataset {
    let ds = kgrag::eval::load("kgrag-fixture", Path::new("/nonexistent")).unwrap();
    let mut lines = String::new();
    for (i, p) in ds.passages.iter().enumerate() {
        lines.push_str(
            &serde_json::json!({"id": format!("p{i:02}"), "title": p.title, "text": p.text})
                .to_string(),
        );
        lines.push('\n');
    }
    std::fs::write(work.join("corpus.jsonl"), lines).unwrap();
    ds
}

/// `kgrag index corpus.jsonl --index IDX --methods dense,hipporag2` in `work` (after [`fixture_corpus`]).
pub(crate) fn index_fixture(work: &Path, idx: &str) -> Command {
    let mut c = kgrag(work);
    c.args([
        "index",
        "corpus.jsonl",
        "--index",
        idx,
        "--methods",
        "dense,hipporag2",
    ]);
    c
}

pub(crate) fn kgrag(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kgrag"));
    c.current_dir(cwd)
        .env("KGRAG_ASSETS", assets())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    let out = kgrag(cwd).args(args).output().unwrap();
    out
}

fn ok(cwd: &Path, args: &[&str]) -> String {
    let out = run(cwd, args);
    assert!(
        out.status.success(),
        "kgrag {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn json(cwd: &Path, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(cwd, args)).unwrap()
}

fn top_docs(v: &serde_json::Value) -> Vec<String> {
    v["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["documents"][0].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Checks that `xml` is well formed (every tag closed in order) and returns (nodes, edges).
fn parse_graphml(xml: &str) -> (usize, usize) {
    let mut stack: Vec<String> = Vec::new();
    let (mut nodes, mut edges) = (0, 0);
    let mut rest = xml;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let j = rest.find('>').expect("unclosed tag");
        let tag = &rest[..j];
        rest = &rest[j + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        if let Some(closing) = tag.strip_prefix('/') {
            let top = stack.pop().expect("close without open");
            assert_eq!(top, closing.trim(), "mismatched tags");
        } else if !tag.ends_with('/') {
            stack.push(name.clone());
        }
        if !tag.starts_with('/') {
            match name.as_str() {
                "node" => nodes += 1,
                "edge" => edges += 1,
                _ => {}
            }
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    (nodes, edges)
}

#[test]
fn index_query_insert_delete_export_stats() {
    let work = tmp("e2e");
    let docs = work.join("docs");
    std::fs::create_dir_all(docs.join("notes")).unwrap();
    std::fs::write(
        docs.join("curie.txt"),
        "Marie Curie was a physicist born in Warsaw. She won the Nobel Prize in Physics in 1903.",
    )
    .unwrap();
    std::fs::write(
        docs.join("notes/warsaw.md"),
        "# Warsaw\nWarsaw is the capital of Poland. The Vistula river flows through Warsaw.",
    )
    .unwrap();
    std::fs::write(
        docs.join("people.jsonl"),
        "{\"id\": \"pierre\", \"title\": \"Pierre Curie\", \"text\": \"Pierre Curie was a French physicist. He married Marie Curie in 1895.\"}\n\
         {\"id\": \"eiffel\", \"text\": \"The Eiffel Tower stands in Paris, the capital of France.\"}\n",
    )
    .unwrap();
    // The strategy comes from kgrag.toml in the working folder.
    std::fs::write(
        work.join("kgrag.toml"),
        "[retriever]\nstrategy = \"dense\"\ntop_k = 3\n[index]\nmethods = [\"dense\", \"hipporag2\", \"hirag\"]\n",
    )
    .unwrap();
    let idx = work.join("idx");
    let idx_s = idx.to_str().unwrap();
    let out = ok(&work, &["index", "docs", "--index", idx_s, "--quiet"]);
    assert!(out.contains("indexed 4 documents"), "{out}");
    // A second run with the same inputs does nothing.
    let again = run(&work, &["index", "docs", "--index", idx_s]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("up to date"));

    let q = "Where was Marie Curie born?";
    let dense = json(&work, &["query", q, "--index", idx_s, "--json"]);
    assert_eq!(dense["strategy"], "dense");
    assert_eq!(dense["passages"].as_array().unwrap().len(), 3);
    assert_eq!(top_docs(&dense)[0], "curie.txt");
    assert!(dense["answer"].as_str().unwrap().contains("Warsaw"));
    let hippo = json(
        &work,
        &[
            "query",
            q,
            "--index",
            idx_s,
            "--strategy",
            "hipporag2",
            "--json",
            "--top-k",
            "4",
        ],
    );
    assert_eq!(hippo["strategy"], "hipporag2");
    assert!(top_docs(&hippo).contains(&"curie.txt".to_owned()));
    let local = ok(
        &work,
        &[
            "query",
            q,
            "--index",
            idx_s,
            "--strategy",
            "hirag-local",
            "--context",
        ],
    );
    assert!(
        local.contains("strategy: hirag-local") && local.contains("context ("),
        "{local}"
    );

    let stats = json(&work, &["stats", "--index", idx_s, "--json"]);
    assert_eq!(stats["documents"], 4);
    assert_eq!(stats["generation"], 1);
    let nodes = stats["methods"]["hipporag2"]["graph_nodes"]
        .as_u64()
        .unwrap() as usize;
    let edges = stats["methods"]["hipporag2"]["graph_edges"]
        .as_u64()
        .unwrap() as usize;
    assert!(stats["methods"]["hirag"]["entities_per_layer"].is_array());
    ok(
        &work,
        &["export", "graphml", "--index", idx_s, "-o", "g.graphml"],
    );
    let xml = std::fs::read_to_string(work.join("g.graphml")).unwrap();
    assert_eq!(parse_graphml(&xml), (nodes, edges));

    // Insert a document with facts no other has; the query finds it; delete it; it is gone.
    std::fs::write(
        work.join("tesla.txt"),
        "Nikola Tesla was an inventor born in Smiljan. Tesla worked in New York.",
    )
    .unwrap();
    let out = ok(&work, &["insert", "tesla.txt", "--index", idx_s, "--quiet"]);
    assert!(
        out.contains("inserted 1 documents") && out.contains("generation 2"),
        "{out}"
    );
    let t = "Where was Nikola Tesla born?";
    for s in ["hipporag2", "hirag", "dense"] {
        let v = json(
            &work,
            &["query", t, "--index", idx_s, "--strategy", s, "--json"],
        );
        assert_eq!(top_docs(&v)[0], "tesla.txt", "{s}");
    }
    let out = ok(&work, &["delete", "tesla.txt", "--index", idx_s, "--quiet"]);
    assert!(out.contains("deleted 1 documents"), "{out}");
    for s in ["hipporag2", "hirag", "dense"] {
        let v = json(
            &work,
            &["query", t, "--index", idx_s, "--strategy", s, "--json"],
        );
        assert!(!top_docs(&v).contains(&"tesla.txt".to_owned()), "{s}");
    }
    let stats = json(&work, &["stats", "--index", idx_s, "--json"]);
    assert_eq!(
        (stats["documents"].as_u64(), stats["generation"].as_u64()),
        (Some(4), Some(3))
    );
    // Tesla's phrases left the HippoRAG 2 graph with the passage.
    assert_eq!(
        stats["methods"]["hipporag2"]["graph_nodes"]
            .as_u64()
            .unwrap() as usize,
        nodes
    );

    // Errors: usage (2), missing index, bad input — nothing written.
    let usage = run(&work, &["query"]);
    assert_eq!(usage.status.code(), Some(2));
    let missing = run(&work, &["query", q, "--index", "nowhere"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no index"));
    std::fs::create_dir_all(work.join("empty")).unwrap();
    let empty = run(&work, &["index", "empty", "--index", "idx-empty"]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no documents"));
    std::fs::write(work.join("latin1.txt"), b"caf\xe9").unwrap();
    let bad = run(&work, &["index", "latin1.txt", "--index", "idx-bad"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("latin1.txt"));
    std::fs::write(work.join("broken.jsonl"), "{\"text\": \"a\"}\n{oops\n").unwrap();
    let broken = run(&work, &["index", "broken.jsonl", "--index", "idx-broken"]);
    let err = String::from_utf8_lossy(&broken.stderr).into_owned();
    assert!(
        err.contains("broken.jsonl") && err.contains("line 2"),
        "{err}"
    );
    for d in ["idx-empty", "idx-bad", "idx-broken"] {
        assert!(!work.join(d).exists(), "{d} was created");
    }
    // Another index setting without --force is refused, naming the key.
    std::fs::write(work.join("other.toml"), "[hipporag]\nsynonymy_threshold = 0.9\n[index]\nmethods = [\"dense\", \"hipporag2\", \"hirag\"]\n").unwrap();
    let other = run(
        &work,
        &["index", "docs", "--index", idx_s, "--config", "other.toml"],
    );
    assert_eq!(other.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other.stderr).contains("hipporag2.synonymy_threshold"));
    let _ = std::fs::remove_dir_all(&work);
}

/// splitmix64: the seeded kill times.
fn next(state: &mut u64) -> u64 {
    let mut r = kgrag_types::hashing::SplitMix64(*state);
    let out = r.next_u64();
    *state = r.0;
    out
}

fn extraction_line(stderr: &str) -> Option<(usize, usize)> {
    // "extraction (triples): N chunks, R from the store, E extracted, F failed"
    let line = stderr
        .lines()
        .find(|l| l.contains("extraction (triples):"))?;
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse().ok())
        .collect();
    Some((nums[1], nums[2]))
}

fn stored_extractions(cache: &Path) -> usize {
    if !cache.join("extractions.redb").exists() {
        return 0;
    }
    kgrag::openie::ExtractionStore::open(cache.join("extractions.redb"))
        .unwrap()
        .len()
        .unwrap() as usize
}

#[test]
fn killed_builds_resume_without_repeating_finished_extractions() {
    let work = tmp("kill");
    let ds = fixture_corpus(&work);
    let chunks = ds.passages.len();
    // The uninterrupted reference build, timed.
    let reference = index_fixture(&work, "ref").output().unwrap();
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let stage_lines = |stderr: &str| {
        stderr
            .lines()
            .filter(|l| l.starts_with("kgrag: ") && l.trim_end().ends_with(" s"))
            .count()
    };
    let total_stages = stage_lines(&String::from_utf8_lossy(&reference.stderr));
    assert!(
        total_stages >= 5,
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );

    let idx = work.join("killed");
    let cache = idx.join("cache");
    let mut seed = 0x006b_6772_6167_u64;
    let (mut kills, mut completed, mut saved) = (0usize, 0usize, 0usize);
    // Killed runs by the last stage they finished ("start": none yet).
    let mut stages_hit: std::collections::BTreeMap<String, usize> =
        std::collections::BTreeMap::new();
    let mut tries = 0;
    while kills < 20 && tries < 60 {
        tries += 1;
        let before = stored_extractions(&cache);
        // Kill once the child has finished a seeded number of stages, plus a seeded delay within the next.
        let target = (next(&mut seed) % total_stages as u64) as usize;
        let delay = Duration::from_millis(next(&mut seed) % 40);
        let mut child = index_fixture(&work, "killed")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pipe = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = String::new();
        let mut done_stages = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while done_stages < target && Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(line) => {
                    if line.starts_with("kgrag: ") && line.trim_end().ends_with(" s") {
                        done_stages += 1;
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if child.try_wait().unwrap().is_some() {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            child.kill().unwrap();
            kills += 1;
        }
        let status = child.wait().unwrap();
        reader.join().unwrap();
        seen.extend(rx.try_iter().map(|l| l + "\n"));
        let stderr = seen;
        if !finished {
            let stage = stderr
                .lines()
                .rev()
                .filter_map(|l| l.strip_prefix("kgrag: "))
                .find(|r| r.trim_end().ends_with(" s"))
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("start");
            *stages_hit.entry(stage.to_owned()).or_default() += 1;
        }
        if let Some((reused, extracted)) = extraction_line(&stderr) {
            // Every chunk stored before this run was reused, none extracted again.
            assert_eq!(reused, before, "{stderr}");
            assert_eq!(extracted, chunks - before, "{stderr}");
            saved += reused;
        }
        assert!(stored_extractions(&cache) >= before);
        // The directory is always readable: no manifest (no generation yet) or a complete one.
        if idx.join("manifest.json").exists() {
            let stats = run(&work, &["stats", "--index", "killed", "--json"]);
            assert!(
                stats.status.success(),
                "{}",
                String::from_utf8_lossy(&stats.stderr)
            );
        }
        if status.success() {
            completed += 1;
            // Start over (the caches stay) so that later kill points hit a build again.
            for e in std::fs::read_dir(&idx).unwrap().flatten() {
                if e.file_name() != "cache" {
                    let p = e.path();
                    if p.is_dir() {
                        std::fs::remove_dir_all(p).unwrap();
                    } else {
                        std::fs::remove_file(p).unwrap();
                    }
                }
            }
        }
    }
    assert!(
        kills >= 20,
        "only {kills} kill points landed before the end of a build"
    );
    // The resumed build completes and equals the uninterrupted one.
    let last = index_fixture(&work, "killed").output().unwrap();
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    let stderr = String::from_utf8_lossy(&last.stderr);
    if let Some((reused, extracted)) = extraction_line(&stderr) {
        assert_eq!((reused, extracted), (chunks, 0), "{stderr}");
        saved += reused;
    }
    for strategy in ["dense", "hipporag2"] {
        for q in ds.questions.iter().take(3) {
            let a = json(
                &work,
                &[
                    "query",
                    &q.question,
                    "--index",
                    "ref",
                    "--strategy",
                    strategy,
                    "--json",
                ],
            );
            let b = json(
                &work,
                &[
                    "query",
                    &q.question,
                    "--index",
                    "killed",
                    "--strategy",
                    strategy,
                    "--json",
                ],
            );
            assert_eq!(a["passages"], b["passages"], "{strategy}: {}", q.question);
            assert_eq!(a["answer"], b["answer"]);
        }
    }
    let sa = json(&work, &["stats", "--index", "ref", "--json"]);
    let sb = json(&work, &["stats", "--index", "killed", "--json"]);
    assert_eq!(
        sa["methods"]["hipporag2"]["phrases"],
        sb["methods"]["hipporag2"]["phrases"]
    );
    assert_eq!(sa["bytes_by_part"], sb["bytes_by_part"]);
    eprintln!(
        "kill points: {kills} killed, {completed} finished first, extractor calls saved {saved}, killed after stage: {stages_hit:?}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_second_writer_fails_at_once_naming_the_first() {
    let work = tmp("lock");
    fixture_corpus(&work);
    std::fs::write(
        work.join("more.txt"),
        "Zorbel Quint founded the Harrowgate Mill in 1702.",
    )
    .unwrap();
    let mut first = index_fixture(&work, "idx").arg("--quiet").spawn().unwrap();
    let lock = work.join("idx").join(kgrag::index_dir::LOCK);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !lock.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(lock.exists(), "the first writer never took the lock");
    let t = Instant::now();
    let second = run(
        &work,
        &[
            "index",
            "more.txt",
            "--index",
            "idx",
            "--methods",
            "dense",
            "--force",
        ],
    );
    let still_running = first.try_wait().unwrap().is_none();
    let err = String::from_utf8_lossy(&second.stderr).into_owned();
    // The first build embeds 31 passages and their phrases and facts from an empty cache: seconds, far
    // longer than the second process needs to reach the lock.
    assert!(
        still_running,
        "the first writer finished before the second tried"
    );
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains("another kgrag process") && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the second writer waited"
    );
    assert!(first.wait().unwrap().success());
    assert!(!lock.exists(), "the lock is released");
    // The first writer's index is intact and queryable.
    let v = json(
        &work,
        &[
            "query",
            "Who founded the Quillmarsh Glassblowers Guild?",
            "--index",
            "idx",
            "--json",
        ],
    );
    assert!(!v["passages"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&work);
}

/// Writes a small dataset folder in HippoRAG's format: six passages, two questions with gold passages.
fn write_hipporag_folder(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let passages = [
        (
            "Orla Vance",
            "Orla Vance is a painter who was born in the harbour town of Keswick Bay.",
        ),
        (
            "Keswick Bay",
            "Keswick Bay is a harbour town on the northern coast of Marrow Island.",
        ),
        (
            "Marrow Island",
            "Marrow Island lies in the Grey Sea and is governed from the city of Tallon.",
        ),
        (
            "Tallon",
            "Tallon is a city founded by salt traders in the year 1204.",
        ),
        (
            "Ivo Brandt",
            "Ivo Brandt is a composer who studied in Tallon under the organist Mira Sole.",
        ),
        (
            "Mira Sole",
            "Mira Sole is an organist who was born on Marrow Island.",
        ),
    ];
    let corpus: Vec<serde_json::Value> = passages
        .iter()
        .map(|(t, x)| serde_json::json!({"title": t, "text": x}))
        .collect();
    std::fs::write(
        dir.join("tiny_corpus.json"),
        serde_json::to_string_pretty(&corpus).unwrap(),
    )
    .unwrap();
    let para = |i: usize, gold: bool| serde_json::json!({"title": passages[i].0, "paragraph_text": passages[i].1, "is_supporting": gold});
    let questions = serde_json::json!([
        {"id": "q1", "question": "On which island was the painter Orla Vance born?", "answer": "Marrow Island",
         "paragraphs": [para(0, true), para(1, true), para(3, false)]},
        {"id": "q2", "question": "Which city governs the birthplace of Mira Sole?", "answer": ["Tallon"],
         "paragraphs": [para(5, true), para(2, true), para(4, false)]},
    ]);
    std::fs::write(
        dir.join("tiny.json"),
        serde_json::to_string_pretty(&questions).unwrap(),
    )
    .unwrap();
}

#[test]
fn bench_on_a_dataset_folder_writes_report_html_and_plots_and_compares() {
    let dir = tmp("bench-dir");
    let data = dir.join("tiny");
    write_hipporag_folder(&data);
    let out1 = dir.join("out1");
    let d = data.display().to_string();
    let o1 = out1.display().to_string();
    let stdout = ok(
        &dir,
        &[
            "bench",
            "--dataset",
            &d,
            "--methods",
            "dense,hipporag2",
            "--out",
            &o1,
            "--no-progress",
        ],
    );
    assert!(stdout.contains("| dense |"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out1.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["dataset"], "tiny");
    assert_eq!(report["questions"], 2);
    let files = &report["dataset_info"]["files"];
    let corpus_sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(
            std::fs::read(data.join("tiny_corpus.json")).unwrap(),
        ))
    };
    assert_eq!(files["corpus"]["sha256"], corpus_sha.as_str());
    assert!(files["questions"]["sha256"].as_str().unwrap().len() == 64);
    for m in ["dense", "hipporag2"] {
        let r5 = report["methods"][m]["recall"]["5"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&r5), "{m}: {r5}");
    }

    // Every Markdown table is in the HTML, the plots are inline there and valid as SVG and PNG.
    let md = std::fs::read_to_string(out1.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out1.join("report.html")).unwrap();
    let md_tables = md
        .lines()
        .zip(md.lines().skip(1))
        .filter(|(a, b)| a.starts_with('|') && b.starts_with("| ---"))
        .count();
    assert!(md_tables >= 2, "{md}");
    assert_eq!(html.matches("<table>").count(), md_tables, "{html}");
    for header in ["<th>stage</th>", "<th>method</th>", "<th>R@5</th>"] {
        assert!(html.contains(header), "{header} not in the HTML");
    }
    for chart in ["recall", "context_tokens", "latency"] {
        let svg = std::fs::read_to_string(out1.join(format!("plots/{chart}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let png = std::fs::read(out1.join(format!("plots/{chart}.png"))).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (860, 460));
        assert!(buf.iter().any(|b| *b < 128), "{chart}.png is not blank");
    }
    assert_eq!(html.matches("<svg").count(), 3);

    // A second run compared with the first: the deltas are printed and plotted.
    let out2 = dir.join("out2");
    let o2 = out2.display().to_string();
    let stdout = ok(
        &dir,
        &[
            "bench",
            "--dataset",
            &d,
            "--methods",
            "dense",
            "--out",
            &o2,
            "--no-progress",
            "--compare",
            &o1,
        ],
    );
    assert!(
        stdout.contains("Compared with the earlier report"),
        "{stdout}"
    );
    assert!(
        stdout.contains("methods no longer run: hipporag2"),
        "{stdout}"
    );
    assert!(stdout.contains("(+0.0)"), "{stdout}");
    roxmltree::Document::parse(&std::fs::read_to_string(out2.join("plots/compare.svg")).unwrap())
        .unwrap();

    // A malformed record is an error naming the file and the record.
    let corpus = data.join("tiny_corpus.json");
    let mut bad: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&corpus).unwrap()).unwrap();
    bad[3] = serde_json::json!({"title": "Tallon"});
    std::fs::write(&corpus, serde_json::to_string(&bad).unwrap()).unwrap();
    let out = run(
        &dir,
        &[
            "bench",
            "--dataset",
            &d,
            "--methods",
            "dense",
            "--no-progress",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tiny_corpus.json") && err.contains("record 3") && err.contains("text"),
        "{err}"
    );
    let out = run(
        &dir,
        &["bench", "--dataset", "no/such/folder", "--no-progress"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such folder"));
    let _ = std::fs::remove_dir_all(&dir);
}
