//! Every parser of model output and user files, fuzzed: no panic, no stack overflow, bounded time, and a
//! value or an error, on structure-aware generated input (`KGRAG_FUZZ_CASES` cases per parser) and on the
//! hostile inputs of `kgrag_fuzz::hostile`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kgrag::eval::dataset::Question;
use kgrag::eval::{dataset, judge, score};
use kgrag::hipporag::{filter, qa};
use kgrag::openie::{graphrag, hipporag, lenient};
use kgrag::types::Triple;
use kgrag_community::report::parse_report;
use kgrag_fuzz::{
    any_bytes, any_text, config, damage, hostile, records, reply_with, value, within, BIG_ENV,
};
use kgrag_hierarchy::summarize::{
    parse_aggregate_reply, parse_attribute_reply, parse_relation_reply, Member,
};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// The bound on one generated case (small inputs: far above what any of them takes).
const CASE: Duration = Duration::from_secs(5);

/// The bound on one parser over one hostile input (`KGRAG_FUZZ_SECONDS`, default 60 s: a quadratic path
/// over megabytes takes hours).
fn hostile_limit() -> Duration {
    let s = std::env::var("KGRAG_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(s)
}

fn members() -> Vec<Member> {
    ["ALPHA", "BETA"]
        .iter()
        .map(|n| Member {
            name: (*n).to_owned(),
            entity_type: "THING".into(),
            description: "a member".into(),
            degree: 1,
        })
        .collect()
}

fn candidates() -> Vec<Triple> {
    vec![
        Triple::new("radio city", "is", "india's first private fm radio station"),
        Triple::new("radio city", "started on", "3 july 2001"),
    ]
}

fn questions() -> Vec<Question> {
    ["Who?", "When?"]
        .iter()
        .enumerate()
        .map(|(i, q)| Question {
            id: format!("q{i}"),
            question: (*q).to_owned(),
            answers: vec!["a".into()],
            gold: Vec::new(),
            paragraphs: Vec::new(),
        })
        .collect()
}

/// A parser run for its effects only (a value or an error, both fine).
type Parser = Box<dyn Fn(&str)>;

/// Every parser that reads a model reply or a configuration text, by name.
fn text_parsers() -> Vec<(&'static str, Parser)> {
    let members = members();
    let candidates = candidates();
    vec![
        (
            "lenient::strip_fences",
            Box::new(|s| {
                let _ = lenient::strip_fences(s);
            }),
        ),
        (
            "lenient::close_truncated",
            Box::new(|s| {
                let _ = lenient::close_truncated(s);
            }),
        ),
        (
            "lenient::find_object_with_key",
            Box::new(|s| {
                let _ = lenient::find_object_with_key(s, "named_entities");
            }),
        ),
        (
            "lenient::parse_value",
            Box::new(|s| {
                let _ = lenient::parse_value(s);
            }),
        ),
        (
            "lenient::extract_key",
            Box::new(|s| {
                let _ = lenient::extract_key(s, "triples");
            }),
        ),
        (
            "types::json::replace_non_finite_literals",
            Box::new(|s| {
                let _ = kgrag::types::json::replace_non_finite_literals(s);
            }),
        ),
        (
            "graphrag::parse_records",
            Box::new(|s| {
                let _ = graphrag::parse_records(s, "fuzz", &mut Vec::new());
            }),
        ),
        (
            "hipporag::parse_ner",
            Box::new(|s| {
                let _ = hipporag::parse_ner(s, &mut Vec::new());
            }),
        ),
        (
            "hipporag::parse_triples",
            Box::new(|s| {
                let _ = hipporag::parse_triples(s, &mut Vec::new());
            }),
        ),
        (
            "filter::sections",
            Box::new(|s| {
                let _ = filter::sections(s);
            }),
        ),
        (
            "filter::parse_reply + map_to_candidates",
            Box::new(move |s| {
                if let Ok(facts) = filter::parse_reply(s) {
                    let picked = filter::map_to_candidates(&facts, &candidates);
                    assert!(picked.iter().all(|&i| i < candidates.len()));
                }
            }),
        ),
        (
            "qa::extract_answer",
            Box::new(|s| {
                let _ = qa::extract_answer(s);
            }),
        ),
        (
            "judge::parse_verdict",
            Box::new(|s| {
                let _ = judge::parse_verdict(s);
            }),
        ),
        (
            "score::parse_scores",
            Box::new(|s| {
                let _ = score::parse_scores(s);
            }),
        ),
        (
            "community::parse_report",
            Box::new(|s| {
                let _ = parse_report(s);
            }),
        ),
        (
            "summarize::parse_attribute_reply",
            Box::new({
                let members = members.clone();
                move |s| {
                    if let Ok(a) = parse_attribute_reply(s, &members) {
                        assert!(a.relations.iter().all(|r| r.strength.is_finite()));
                    }
                }
            }),
        ),
        (
            "summarize::parse_aggregate_reply",
            Box::new(move |s| {
                let _ = parse_aggregate_reply(s, &members);
            }),
        ),
        (
            "summarize::parse_relation_reply",
            Box::new(|s| {
                let _ = parse_relation_reply(s);
            }),
        ),
        (
            "config::Config::parse",
            Box::new(|s| {
                let _ = kgrag::config::Config::parse(s);
            }),
        ),
    ]
}

/// A scratch folder per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kgrag-fuzz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every parser that reads a user's file, on `bytes` written into `dir` under each name it reads.
fn file_parsers(dir: &Path, bytes: &[u8]) {
    let write = |name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let _ = kgrag::openie::read_openie_file(&write("openie.json"));
    let _ = dataset::parse_question_lines(Path::new("questions.jsonl"), bytes, "q");
    let (q, c) = (write("questions.json"), write("corpus.json"));
    let _ = dataset::load_hipporag("fuzz", &q, &c, None);
    let _ = judge::read_verdict_file(&write("verdicts.jsonl"));
    let _ = kgrag_bench::judging::read_answer_file(&write("answers.jsonl"), &questions());
    for name in ["doc.jsonl", "doc.json", "doc.txt", "doc.md"] {
        let _ = kgrag::documents::read_inputs(&[write(name)]);
    }
    let index = dir.join("index");
    std::fs::create_dir_all(&index).unwrap();
    std::fs::write(index.join("manifest.json"), bytes).unwrap();
    if let Ok(Some(m)) = kgrag::index_dir::read_manifest(&index) {
        let _ = kgrag::index_dir::check_files(&index, &m);
    }
    let _ = kgrag::graph_store::persist::load::<Vec<String>>(&write("part.bin"), "fuzz", 1);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lenient_json_survives_damaged_replies(s in reply_with("named_entities")) {
        within("extract_key", CASE, || {
            let _ = lenient::extract_key(&s, "named_entities");
            let _ = lenient::parse_value(&s);
            let _ = lenient::close_truncated(&s);
        });
    }

    #[test]
    fn lenient_json_survives_any_value(s in value().prop_flat_map(damage)) {
        within("parse_value", CASE, || {
            let _ = lenient::parse_value(&s);
            let _ = lenient::find_object_with_key(&s, "x");
            let _ = kgrag::types::json::replace_non_finite_literals(&s);
        });
    }

    #[test]
    fn ner_and_triples_survive(ner in reply_with("named_entities"), triples in reply_with("triples")) {
        within("parse_ner/parse_triples", CASE, || {
            let mut issues = Vec::new();
            let names = hipporag::parse_ner(&ner, &mut issues);
            let unique: std::collections::HashSet<&String> = names.iter().collect();
            assert_eq!(unique.len(), names.len(), "duplicates kept");
            let _ = hipporag::parse_triples(&triples, &mut issues);
        });
    }

    #[test]
    fn delimiter_records_survive(s in records()) {
        within("parse_records", CASE, || {
            for r in graphrag::parse_records(&s, "fuzz", &mut Vec::new()) {
                if let graphrag::Record::Relation { weight, .. } = r {
                    assert!(weight.is_finite(), "weight {weight} from {s:?}");
                }
            }
            if let Ok(a) = parse_attribute_reply(&s, &members()) {
                assert!(a.relations.iter().all(|r| r.strength.is_finite()));
            }
        });
    }

    #[test]
    fn filter_replies_survive(s in reply_with("fact")) {
        within("filter", CASE, || {
            let _ = filter::sections(&s);
            if let Ok(facts) = filter::parse_reply(&s) {
                let _ = filter::map_to_candidates(&facts, &candidates());
            }
        });
    }

    #[test]
    fn verdicts_and_scores_survive(v in reply_with("winner"), sc in reply_with("x")) {
        within("parse_verdict/parse_scores", CASE, || {
            let _ = judge::parse_verdict(&v);
            let _ = score::parse_scores(&sc);
        });
    }

    #[test]
    fn community_reports_survive(s in reply_with("title")) {
        within("parse_report", CASE, || {
            if let Ok(r) = parse_report(&s) {
                assert!((0.0..=10.0).contains(&r.rating), "rating {} from {s:?}", r.rating);
            }
        });
    }

    #[test]
    fn cluster_summaries_survive(agg in reply_with("entity_name"), text in any_text()) {
        within("parse_aggregate_reply/parse_relation_reply", CASE, || {
            let _ = parse_aggregate_reply(&agg, &members());
            let _ = parse_relation_reply(&text);
            let _ = qa::extract_answer(&text);
        });
    }

    #[test]
    fn any_text_through_every_text_parser(s in any_text()) {
        let parsers = text_parsers();
        for (name, parse) in &parsers {
            within(name, CASE, || parse(&s));
        }
    }

    #[test]
    fn configuration_files_survive(s in prop_oneof![
        any_text(),
        "(\\[(hipporag2|hirag|leanrag|llm|storage|index)\\]\n)?([a-z_]{1,20} = (nan|inf|-inf|1e400|\"[a-z]*\"|[0-9.]{1,8}|true|\\[\\]|\\{\\})\n){0,6}",
    ]) {
        within("Config::parse", CASE, || { let _ = kgrag::config::Config::parse(&s); });
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn user_files_survive(bytes in prop_oneof![
        any_bytes(),
        reply_with("docs").prop_map(String::into_bytes),
        value().prop_flat_map(damage).prop_map(String::into_bytes),
    ]) {
        let dir = scratch("files");
        within("file parsers", CASE * 4, || file_parsers(&dir, &bytes));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The documents of kgrag-documents' test corpus, with their formats: the seeds of the mutations.
fn document_seeds() -> Vec<(kgrag_documents::Format, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../documents/tests/data");
    [
        "guilds.pdf",
        "guilds-2col.pdf",
        "guilds-core.pdf",
        "guilds.docx",
        "guilds.pptx",
        "guilds-passages.xlsx",
        "guilds-passages.xls",
        "guilds-passages.ods",
        "guilds.epub",
        "guilds.html",
    ]
    .iter()
    .map(|n| {
        let format = kgrag_documents::Format::of_path(Path::new(n)).unwrap();
        (format, std::fs::read(dir.join(n)).unwrap())
    })
    .collect()
}

/// A mutation of a document's bytes: at a position (a fraction of the length), flip a byte, cut the rest,
/// delete or duplicate a span, or insert bytes.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(f64, u8),
    Truncate(f64),
    Delete(f64, usize),
    Duplicate(f64, usize),
    Insert(f64, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..1.0f64;
    prop_oneof![
        (at.clone(), any::<u8>()).prop_map(|(p, b)| Mutation::Flip(p, b)),
        at.clone().prop_map(Mutation::Truncate),
        (at.clone(), 1..4096usize).prop_map(|(p, n)| Mutation::Delete(p, n)),
        (at.clone(), 1..4096usize).prop_map(|(p, n)| Mutation::Duplicate(p, n)),
        (at, prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(p, b)| Mutation::Insert(p, b)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let at = |p: f64, len: usize| ((p * len as f64) as usize).min(len.saturating_sub(1));
        let len = bytes.len();
        if len == 0 {
            break;
        }
        match m {
            Mutation::Flip(p, b) => {
                let i = at(*p, len);
                bytes[i] ^= b | 1;
            }
            Mutation::Truncate(p) => bytes.truncate(at(*p, len)),
            Mutation::Delete(p, n) => {
                let i = at(*p, len);
                bytes.drain(i..(i + n).min(len));
            }
            Mutation::Duplicate(p, n) => {
                let i = at(*p, len);
                let span = bytes[i..(i + n).min(len)].to_vec();
                bytes.splice(i..i, span);
            }
            Mutation::Insert(p, b) => {
                let i = at(*p, len);
                bytes.splice(i..i, b.iter().copied());
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(Config { cases: config().cases / 4, ..config() })]

    /// Mutated PDFs, zip containers (DOCX, PPTX, XLSX, ODS, EPUB), compound files (XLS) and web pages: each
    /// read within its deadline into text or an error — never a panic (which `read` would report as
    /// `DocumentError::Panic`), never a hang.
    #[test]
    fn mutated_documents_survive(seed in 0..10usize, mutations in prop::collection::vec(mutation(), 1..6)) {
        let seeds = document_seeds();
        let (format, bytes) = &seeds[seed];
        let bytes = mutate(bytes.clone(), &mutations);
        let limits = kgrag_documents::Limits {
            deadline: Duration::from_secs(10),
            ..kgrag_documents::Limits::default()
        };
        let outcome = within("a document reader", CASE * 4, || kgrag_documents::read(&bytes, *format, &limits));
        if let Err(kgrag_documents::DocumentError::Panic { detail, .. }) = outcome {
            panic!("{format} reader panicked on a mutation {mutations:?}: {detail}");
        }
    }
}

#[test]
fn hostile_inputs_through_every_parser() {
    let limit = hostile_limit();
    let parsers = text_parsers();
    let dir = scratch("hostile");
    eprintln!(
        "hostile inputs of {} MB ({BIG_ENV})",
        kgrag_fuzz::big_bytes() >> 20
    );
    for (what, input) in hostile() {
        for (name, parse) in &parsers {
            within(&format!("{name} on {what}"), limit, || parse(&input));
        }
        within(&format!("file parsers on {what}"), limit, || {
            file_parsers(&dir, input.as_bytes())
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Crashes and slow paths found by these tests, kept as named cases.
#[test]
fn regressions() {
    // A relation weight of 400 digits parsed to infinity and failed the hierarchy's graph build.
    let reply = format!(
        "(\"entity\"<|>ALPHA2<|>T<|>d)##(\"relationship\"<|>ALPHA2<|>BETA2<|>d<|>{})",
        "9".repeat(400)
    );
    let mut issues = Vec::new();
    let recs = graphrag::parse_records(&reply, "fuzz", &mut issues);
    assert!(recs.iter().all(|r| match r {
        graphrag::Record::Relation { weight, .. } => *weight == 1.0,
        _ => true,
    }));
    assert_eq!(issues.len(), 1, "{issues:?}");
    // Megabytes of `{` made the object search quadratic (every start rescanned to the end).
    let braces = "{".repeat(2 << 20) + "{\"named_entities\": [\"x\"]}";
    within(
        "find_object_with_key on braces",
        Duration::from_secs(10),
        || {
            assert_eq!(
                lenient::find_object_with_key(&braces, "named_entities"),
                Some("{\"named_entities\": [\"x\"]}")
            )
        },
    );
    // Escaped JSON of an earlier, cut-off attempt before the real object (each escaped `{` a candidate
    // whose scan runs to the end): found as the exhaustive search finds it.
    let escaped =
        "{\"raw\": \"".to_owned() + &"{\\\"a\\\": ".repeat(100) + "\n{\"named_entities\": [\"x\"]}";
    assert_eq!(
        lenient::find_object_with_key(&escaped, "named_entities"),
        Some("{\"named_entities\": [\"x\"]}")
    );
    // A million distinct entities made de-duplication quadratic.
    let mut many = String::from("{\"named_entities\": [");
    for i in 0..1_000_000 {
        many.push_str(&format!("\"e{i}\","));
    }
    many.push_str("\"e0\"]}");
    let names = within(
        "parse_ner on a million items",
        Duration::from_secs(20),
        || hipporag::parse_ner(&many, &mut Vec::new()),
    );
    assert_eq!(names.len(), 1_000_000);
}

/// Run only by [`a_hang_fails_instead_of_stalling`], in a child process: a case that never finishes.
#[test]
#[ignore = "run in a child process by a_hang_fails_instead_of_stalling"]
fn hanging_case() {
    kgrag_fuzz::within("the hanging case", Duration::from_millis(200), || {
        std::thread::sleep(Duration::from_secs(120))
    });
}

#[test]
fn a_hang_fails_instead_of_stalling() {
    let started = std::time::Instant::now();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["hanging_case", "--exact", "--ignored", "--nocapture"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains("the hanging case has not finished"),
        "{stderr}"
    );
}
