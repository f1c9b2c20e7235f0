//! Structure-aware generators for fuzzing kgrag's parsers with proptest, and the hostile inputs every
//! parser must survive.
//!
//! The parsers read what language models write (JSON that is fenced, wrapped in prose, cut off at the token
//! limit, written as a Python literal; GraphRAG-style delimiter records; `[[ ## section ## ]]` replies) and
//! what users hand us (datasets, OpenIE caches, document folders, configuration, index manifests). The
//! generators here build such text from its grammar and then damage it the way real replies are damaged:
//! truncation at any character, brackets inserted or dropped, quotes swapped, pieces repeated, `NaN` and
//! `Infinity` literals, numbers beyond f64, duplicated keys, lone surrogate escapes, prose with apostrophes
//! before the object. [`hostile`] adds inputs no generator reaches in a few thousand cases: nesting 10,000
//! deep, 10 MB strings, a million list items, megabytes of one bracket.
//!
//! The tests in `tests/` assert of every parser: no panic, no stack overflow, bounded time, and a value or
//! an error. `cargo xtask fuzz` runs them with [`CASES_ENV`] = 100,000 and [`BIG_ENV`] = 10 (MB) on a
//! release build; the test suite runs them with the defaults here.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use std::time::{Duration, Instant};

/// Environment variable: cases per property (default [`DEFAULT_CASES`]).
pub const CASES_ENV: &str = "KGRAG_FUZZ_CASES";

/// Environment variable: the size in MB of the big [`hostile`] inputs (default [`DEFAULT_BIG_MB`]).
pub const BIG_ENV: &str = "KGRAG_FUZZ_BIG_MB";

/// Cases per property in an ordinary test run.
pub const DEFAULT_CASES: u32 = 512;

/// Size of the big hostile inputs in an ordinary test run, in MB.
pub const DEFAULT_BIG_MB: usize = 1;

/// The keys the generated objects use: the ones our parsers look for, and decoys.
pub const KEYS: [&str; 12] = [
    "named_entities",
    "triples",
    "title",
    "summary",
    "rating",
    "findings",
    "entity_name",
    "entity_description",
    "fact",
    "winner",
    "explanation",
    "x",
];

/// The proptest settings of every property: [`CASES_ENV`] cases (else [`DEFAULT_CASES`]), no
/// regression files (failures become named tests instead).
pub fn config() -> Config {
    Config {
        cases: env_number(CASES_ENV).unwrap_or(DEFAULT_CASES as usize) as u32,
        failure_persistence: None,
        ..Config::default()
    }
}

/// The size of the big hostile inputs in bytes ([`BIG_ENV`] MB, else [`DEFAULT_BIG_MB`]).
pub fn big_bytes() -> usize {
    env_number(BIG_ENV).unwrap_or(DEFAULT_BIG_MB) << 20
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// Runs `f` and returns its value, failing (naming `what`) when it took longer than `limit`. A hang fails
/// too: a watchdog on another thread waits `limit` plus a grace of the same length for `f` to finish,
/// then prints what hung and ends the process with a failure, instead of stalling the test run.
pub fn within<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let name = what.to_owned();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(limit.saturating_mul(2))
        {
            eprintln!(
                "{name} has not finished after {:?} (bound {limit:?}): a hang; ending the test process",
                limit.saturating_mul(2)
            );
            std::process::exit(101);
        }
    });
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    drop(done);
    let _ = watchdog.join();
    assert!(
        took <= limit,
        "{what} took {took:?}, more than the bound of {limit:?}"
    );
    out
}

/// A JSON or Python-literal scalar, hostile ones included.
pub fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        prop::sample::select(vec![
            "NaN",
            "nan",
            "Infinity",
            "-Infinity",
            "inf",
            "1e400",
            "-1e400",
            "1e-400",
            "0.5",
            "-0",
            "007",
            "1.",
            ".5",
            "True",
            "False",
            "None",
            "true",
            "false",
            "null",
            "\"\"",
            "''",
            "\"\\ud800\"",
            "\"\\u00e9\\n\\t\\\"\"",
            "\"\\x41\"",
            "'it''s'",
        ])
        .prop_map(str::to_owned),
        (1usize..500).prop_map(|n| "9".repeat(n)),
        string_literal(),
    ]
}

/// A quoted string in either quote, with escapes, quotes, brackets, delimiters and any character inside.
pub fn string_literal() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(
            prop_oneof![
                4 => "[a-zA-Z0-9 ]{1,12}",
                1 => prop::sample::select(vec![
                    "\\\"", "\\'", "\\\\", "\\n", "\\u0041", "\\ud83d", "{", "}", "[", "]", ",", ":",
                    "'", "\"", "<|>", "##", "<|COMPLETE|>", "```", "é", "🦀", "\u{0}", "\u{feff}",
                ])
                .prop_map(str::to_owned),
                1 => any::<char>().prop_map(|c| c.to_string()),
            ],
            0..8,
        ),
    )
        .prop_map(|(double, parts)| {
            let q = if double { '"' } else { '\'' };
            format!("{q}{}{q}", parts.concat())
        })
}

/// A JSON / Python-literal value: scalars in lists, tuples and objects nested up to 6 deep, keys from
/// [`KEYS`] (so duplicates are frequent), trailing commas sometimes.
pub fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..6), any::<u8>()).prop_map(|(items, style)| {
                let (open, close) = if style % 5 == 0 {
                    ("(", ")")
                } else {
                    ("[", "]")
                };
                let comma = if style % 7 == 0 { "," } else { "" };
                format!("{open}{}{comma}{close}", items.join(", "))
            }),
            (prop::collection::vec((key(), inner), 0..6), any::<u8>()).prop_map(
                |(pairs, style)| {
                    let body: Vec<String> =
                        pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    let comma = if style % 7 == 0 { "," } else { "" };
                    format!("{{{}{comma}}}", body.join(", "))
                }
            ),
        ]
    })
}

/// An object key: one of [`KEYS`] in either quote, or unquoted, or another string.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::sample::select(KEYS.to_vec()), any::<u8>()).prop_map(|(k, style)| match style % 4 {
            0 | 1 => format!("\"{k}\""),
            2 => format!("'{k}'"),
            _ => k.to_owned(),
        }),
        1 => string_literal(),
    ]
}

/// A reply holding an object with `key` (a list of strings, a list of 3-lists, or any value under it, and
/// other keys around it), wrapped the ways models wrap JSON, then [`damage`]d.
pub fn reply_with(wanted: &'static str) -> impl Strategy<Value = String> {
    let payload = prop_oneof![
        prop::collection::vec(string_literal(), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
        prop::collection::vec(
            prop::collection::vec(prop_oneof![string_literal(), scalar()], 0..5),
            0..5
        )
        .prop_map(|v| {
            let rows: Vec<String> = v.iter().map(|r| format!("[{}]", r.join(", "))).collect();
            format!("[{}]", rows.join(", "))
        }),
        value(),
    ];
    (
        payload,
        prop::collection::vec((key(), value()), 0..3),
        wrapper(),
        any::<bool>(),
    )
        .prop_map(move |(payload, others, (before, after), single)| {
            let k = if single {
                format!("'{wanted}'")
            } else {
                format!("\"{wanted}\"")
            };
            let mut fields: Vec<String> = others.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            fields.insert(fields.len() / 2, format!("{k}: {payload}"));
            format!("{before}{{{}}}{after}", fields.join(", "))
        })
        .prop_flat_map(damage)
}

/// Text models put around an object: prose (apostrophes included), code fences, nothing.
fn wrapper() -> impl Strategy<Value = (String, String)> {
    prop::sample::select(vec![
        ("", ""),
        ("```json\n", "\n```"),
        ("```\n", "\n```\n"),
        ("Here's the JSON you asked for:\n", "\nHope it's useful!"),
        ("Sure! {not json} ", " (done)"),
        (
            "[[ ## fact_after_filter ## ]]\n",
            "\n\n[[ ## completed ## ]]",
        ),
        ("Answer: ", ""),
        ("\u{feff}", ""),
    ])
    .prop_map(|(a, b)| (a.to_owned(), b.to_owned()))
}

/// `text` as it is, or damaged the ways model output and hand-edited files are: cut at any character,
/// a bracket, quote or delimiter inserted, a character dropped, a slice repeated, quotes swapped.
pub fn damage(text: String) -> impl Strategy<Value = String> {
    (
        0u8..8,
        any::<Index>(),
        any::<Index>(),
        prop::sample::select(vec![
            "{", "}", "[", "]", "\"", "'", ",", "\\", "<|>", "##", "\n",
        ]),
    )
        .prop_map(move |(how, a, b, piece)| {
            let bounds: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .collect();
            let at = bounds[a.index(bounds.len())];
            let to = bounds[b.index(bounds.len())];
            let (lo, hi) = (at.min(to), at.max(to));
            match how {
                0 | 1 => text.clone(),
                2 => text[..at].to_owned(),
                3 => format!("{}{piece}{}", &text[..at], &text[at..]),
                4 => {
                    let next = bounds.iter().copied().find(|&i| i > at).unwrap_or(at);
                    format!("{}{}", &text[..at], &text[next..])
                }
                5 => format!("{}{}{}", &text[..hi], &text[lo..hi], &text[hi..]),
                6 => text.replace('"', "'"),
                _ => text.replace('\'', "\""),
            }
        })
}

/// GraphRAG-style delimiter records (`("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`, relationships with a
/// weight, `##` between records, `<|COMPLETE|>` at the end), with missing parentheses, wrong field
/// counts, weights beyond f64 and stray delimiters, then [`damage`]d.
pub fn records() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        4 => "[A-Za-z0-9 ]{0,12}",
        1 => string_literal(),
        1 => prop::sample::select(vec!["&amp;", "&#x27;", "\"\"", "<|>", "(", ")", "1e400", "nan"])
            .prop_map(str::to_owned),
    ];
    let weight = prop_oneof![
        any::<f64>().prop_map(|w| format!("{w}")),
        (1usize..450).prop_map(|n| "9".repeat(n)),
        prop::sample::select(vec!["1e400", "-1", "NaN", "inf", "+3.5", "2.", ".5", ""])
            .prop_map(str::to_owned),
    ];
    let record = (
        prop::sample::select(vec![
            "\"entity\"",
            "\"relationship\"",
            "entity",
            "\"other\"",
            "",
        ]),
        prop::collection::vec(field, 0..6),
        weight,
        any::<u8>(),
    )
        .prop_map(|(kind, fields, weight, style)| {
            let mut parts = vec![kind.to_owned()];
            parts.extend(fields);
            if style % 2 == 0 {
                parts.push(weight);
            }
            let body = parts.join("<|>");
            match style % 9 {
                0 => body,
                1 => format!("({body}"),
                _ => format!("({body})"),
            }
        });
    (prop::collection::vec(record, 0..8), any::<bool>())
        .prop_map(|(records, complete)| {
            let mut out = records.join("##\n");
            if complete {
                out.push_str("<|COMPLETE|>");
            }
            out
        })
        .prop_flat_map(damage)
}

/// Any text at all: arbitrary Unicode, or printable ASCII heavy in structure characters.
pub fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[\\[\\]{}()\"',:#<>|\\\\a-z0-9 \n]{0,200}",]
}

/// Byte strings for the parsers of files: [`any_text`]'s UTF-8, or bytes that are not UTF-8 (a lone
/// continuation byte, a cut multi-byte sequence, 0xff) spliced into text.
pub fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any_text().prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..200),
        (
            any_text(),
            any::<Index>(),
            prop::sample::select(vec![
                vec![0xffu8],
                vec![0x80],
                vec![0xe2, 0x82],
                vec![0xf0, 0x9f, 0xa6],
                vec![0xc0, 0xaf],
            ])
        )
            .prop_map(|(t, at, bad)| {
                let mut b = t.into_bytes();
                let i = at.index(b.len() + 1);
                b.splice(i..i, bad);
                b
            }),
    ]
}

/// Inputs beyond what the generators reach, by name: nesting 10,000 deep (open, closed, unclosed with a
/// key), [`big_bytes`]-sized runs of one character, bracket or quoted string, a list of as many items,
/// `NaN`/`Infinity` literals, duplicated keys, and records in bulk.
pub fn hostile() -> Vec<(&'static str, String)> {
    let big = big_bytes();
    let depth = 10_000;
    let mut items = String::from("{\"named_entities\": [");
    let mut i = 0usize;
    while items.len() < big {
        items.push_str(&format!("\"e{i}\", [\"s{i}\", \"p\", \"o{}\"], ", i % 97));
        i += 1;
    }
    items.push_str("\"last\"], \"triples\": []}");
    let mut records = String::new();
    let mut r = 0usize;
    while records.len() < big {
        records.push_str(&format!(
            "(\"entity\"<|>E{r}<|>T<|>d)##(\"relationship\"<|>E{r}<|>E{}<|>d<|>{})##",
            r + 1,
            "9".repeat(400)
        ));
        r += 1;
    }
    vec![
        ("letters", "a".repeat(big)),
        ("open braces", "{".repeat(big)),
        ("open brackets, then a key", "[".repeat(big / 2) + "\"named_entities\""),
        ("brace and quote, repeated", "{'".repeat(big / 2)),
        (
            "objects nested 10,000 deep",
            "{\"a\": ".repeat(depth) + "1" + &"}".repeat(depth),
        ),
        (
            "lists nested 10,000 deep",
            "[".repeat(depth) + &"]".repeat(depth),
        ),
        (
            "a key, then 10,000 unclosed lists",
            "{\"named_entities\": ".to_owned() + &"[".repeat(depth),
        ),
        (
            "a key, then 10,000 nested objects with the key",
            "{\"named_entities\": ".repeat(depth) + "[]" + &"}".repeat(depth),
        ),
        (
            "one huge string",
            format!("{{\"named_entities\": [\"{}\"]}}", "x".repeat(big)),
        ),
        ("a huge list", items),
        (
            "non-finite literals",
            "{\"title\": \"t\", \"summary\": Infinity, \"rating\": NaN, \"named_entities\": [NaN, Infinity, \
             -Infinity, 1e400, -1e400], \"triples\": [[NaN, \"p\", 1e400]], \"winner\": NaN}"
                .to_owned(),
        ),
        (
            "duplicated keys",
            "{\"title\": \"a\", \"title\": \"b\", \"summary\": \"s\", \"summary\": 1, \"named_entities\": \
             [\"x\"], \"named_entities\": \"y\", \"entity_name\": \"n\", \"entity_name\": \"\"}"
                .to_owned(),
        ),
        ("records in bulk", records),
        ("fence lines", "```\n".repeat(big / 4)),
        (
            "section markers",
            "[[ ## fact_after_filter ## ]]\n".repeat(big / 32),
        ),
    ]
}
