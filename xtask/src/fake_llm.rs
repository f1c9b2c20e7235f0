//! A scripted OpenAI-compatible chat server for the distributed build's tests and measurements: replies
//! after a fixed latency, made from the request alone (the same request, the same reply), and counts what
//! it was asked.
//!
//! - HippoRAG 2's NER request: the passage's capitalised word runs as `{"named_entities": [...]}`;
//! - its triple request: consecutive entities linked, as `{"triples": [...]}`;
//! - anything else: the first 40 words of the last message;
//! - a last message containing `POISON-PILL`: HTTP 500, always.
//!
//! `GET /stats` returns `{"requests": n, "by_prompt": {digest: count}}` (the digest of the last message and
//! of the first, so NER and triple requests of one passage count apart). Only the standard library:
//! `cargo xtask distributed` runs it, and the CLI's tests include this file.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The running server; stops accepting when dropped.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    counts: Arc<Mutex<HashMap<u64, usize>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl FakeLlm {
    /// Starts on a free port of 127.0.0.1, answering after `latency`.
    pub fn start(latency: Duration) -> std::io::Result<FakeLlm> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let counts: Arc<Mutex<HashMap<u64, usize>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let c = c.clone();
                std::thread::spawn(move || serve(conn, latency, &c));
            }
        });
        Ok(FakeLlm {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            counts,
            stop,
            port,
        })
    }

    /// Requests answered (or refused) so far.
    pub fn requests(&self) -> usize {
        self.counts.lock().map(|c| c.values().sum()).unwrap_or(0)
    }

    /// How many times each distinct request was asked.
    pub fn counts(&self) -> HashMap<u64, usize> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Forgets the counts.
    pub fn reset(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.clear();
        }
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, latency: Duration, counts: &Mutex<HashMap<u64, usize>>) {
    let Ok(write) = conn.try_clone() else { return };
    let mut write = write;
    let mut read = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if read.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if read.read_exact(&mut body).is_err() {
            return;
        }
        let (status, reply) = if method == "GET" && path.ends_with("/stats") {
            let c = counts.lock().map(|c| c.clone()).unwrap_or_default();
            (
                200,
                format!(
                    "{{\"requests\": {}, \"distinct\": {}}}",
                    c.values().sum::<usize>(),
                    c.len()
                ),
            )
        } else if path.ends_with("/chat/completions") {
            std::thread::sleep(latency);
            chat(&body, counts)
        } else {
            (404, "{\"error\": {\"message\": \"not found\"}}".to_owned())
        };
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Error" },
            reply.len()
        );
        if write.write_all(head.as_bytes()).is_err() || write.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// FNV-1a of `text`.
fn digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The string value of `"content"` fields in `body`, in order (enough JSON for the requests we send).
fn contents(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("\"content\"") {
        rest = &rest[i + 9..];
        let Some(q) = rest.find('"') else { break };
        let mut s = String::new();
        let mut chars = rest[q + 1..].char_indices();
        let mut end = rest.len();
        while let Some((j, c)) = chars.next() {
            match c {
                '"' => {
                    end = q + 1 + j + 1;
                    break;
                }
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('u') => {
                        let hex: String = (0..4)
                            .filter_map(|_| chars.next().map(|(_, c)| c))
                            .collect();
                        if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            s.push(c);
                        }
                    }
                    Some(c) => s.push(c),
                    None => break,
                },
                c => s.push(c),
            }
        }
        out.push(s);
        rest = &rest[end.min(rest.len())..];
    }
    out
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Runs of capitalised words in `text`, once each, at most 8.
fn names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let flush = |run: &mut Vec<&str>, out: &mut Vec<String>| {
        if !run.is_empty() {
            let n = run.join(" ");
            if !out.contains(&n) && out.len() < 8 {
                out.push(n);
            }
            run.clear();
        }
    };
    for w in text.split_whitespace() {
        let clean = w.trim_matches(|c: char| !c.is_alphanumeric());
        if clean.chars().next().is_some_and(char::is_uppercase) && clean.len() > 1 {
            run.push(clean);
            if w.ends_with([',', '.', ';', ':']) {
                flush(&mut run, &mut out);
            }
        } else {
            flush(&mut run, &mut out);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn chat(body: &[u8], counts: &Mutex<HashMap<u64, usize>>) -> (u16, String) {
    let body = String::from_utf8_lossy(body);
    let messages = contents(&body);
    let first = messages.first().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    if let Ok(mut c) = counts.lock() {
        *c.entry(digest(&first) ^ digest(&last).rotate_left(1))
            .or_default() += 1;
    }
    if last.contains("POISON-PILL") {
        return (
            500,
            "{\"error\": {\"message\": \"scripted failure\"}}".into(),
        );
    }
    let content = if first.contains("named entities in a passage") {
        let items: Vec<String> = names(&last).iter().map(|n| quote(n)).collect();
        format!("{{\"named_entities\": [{}]}}", items.join(", "))
    } else if first.contains("RDF-style triples") {
        let n = names(&last);
        let items: Vec<String> = n
            .windows(2)
            .map(|w| format!("[{}, \"relates to\", {}]", quote(&w[0]), quote(&w[1])))
            .collect();
        format!("{{\"triples\": [{}]}}", items.join(", "))
    } else {
        let words: Vec<&str> = last.split_whitespace().take(40).collect();
        words.join(" ")
    };
    let prompt_tokens = body.len() / 4;
    let completion_tokens = content.len() / 4 + 1;
    (
        200,
        format!(
            "{{\"id\": \"x\", \"object\": \"chat.completion\", \"created\": 0, \"model\": \"scripted\", \
             \"choices\": [{{\"index\": 0, \"message\": {{\"role\": \"assistant\", \"content\": {}}}, \
             \"finish_reason\": \"stop\"}}], \"usage\": {{\"prompt_tokens\": {prompt_tokens}, \
             \"completion_tokens\": {completion_tokens}, \"total_tokens\": {}}}}}",
            quote(&content),
            prompt_tokens + completion_tokens
        ),
    )
}

/// `n` short passages about invented people, places and firms (capitalised names for the scripted NER),
/// as JSON lines; the passage numbered `poison` carries the scripted server's failure marker.
pub fn corpus(n: usize, poison: Option<usize>) -> String {
    const PEOPLE: [&str; 12] = [
        "Ada Varga",
        "Bram Okafor",
        "Celia Nunes",
        "Dorian Pike",
        "Elif Sahin",
        "Farid Mansour",
        "Greta Lund",
        "Hugo Brenner",
        "Ines Castillo",
        "Jonas Weber",
        "Kiri Tane",
        "Lena Moreau",
    ];
    const PLACES: [&str; 8] = [
        "Tarvik",
        "Ostmere",
        "Calder Bay",
        "Rivenholm",
        "Santa Ilia",
        "Mount Orrin",
        "Vessel Creek",
        "Port Amund",
    ];
    const FIRMS: [&str; 6] = [
        "Halcyon Works",
        "Brightwater Mills",
        "Norrland Glass",
        "Quill Press",
        "Ember Foundry",
        "Kestrel Shipping",
    ];
    (0..n)
        .map(|i| {
            let (a, b) = (PEOPLE[i % 12], PEOPLE[(i * 5 + 3) % 12]);
            let (p, f) = (PLACES[(i * 3) % 8], FIRMS[(i * 7) % 6]);
            let mut text = format!(
                "{a} met {b} in {p} in {}. Together they founded {f}, which later moved to {}. \
                 Record {i} says {b} led {f} for {} years.",
                1900 + i,
                PLACES[(i + 1) % 8],
                i % 17 + 2
            );
            if poison == Some(i) {
                text.push_str(" POISON-PILL");
            }
            format!(
                "{{\"id\": \"r{i:04}\", \"title\": \"Record {i}\", \"text\": {}}}\n",
                quote(&text)
            )
        })
        .collect()
}
