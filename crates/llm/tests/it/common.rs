//! HTTP/1.1 servers on loopback for provider tests: [`serve`] answers each request with what a closure makes
//! of it; [`ScriptedServer`] answers with the next scripted response (status, body) and records what it
//! received, so tests can assert on request bodies.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: String,
}

impl Recorded {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

pub struct ScriptedServer {
    pub port: u16,
    pub received: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<(u16, String)>>>,
}

impl ScriptedServer {
    /// Starts a server answering with `script` in order; once it runs out, it answers 599.
    pub async fn start(script: Vec<(u16, String)>) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let (rec, scr) = (received.clone(), script.clone());
        let port = serve(move |request| {
            rec.lock().unwrap().push(request);
            let answer = scr
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or((599, "{\"error\":{\"message\":\"script exhausted\"}}".into()));
            async move { answer }
        })
        .await;
        Self {
            port,
            received,
            script,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.received.lock().unwrap().clone()
    }
}

/// A loopback HTTP/1.1 server answering each request with the `(status, JSON body)` that `answer` makes
/// of it, one task per connection; returns its port. Bounded: a test server never outlives a few hundred
/// requests.
pub async fn serve<F, Fut>(answer: F) -> u16
where
    F: Fn(Recorded) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = (u16, String)> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        for _ in 0..500 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let Some(request) = read_request(&mut socket).await else {
                    return;
                };
                let (status, body) = answer(request).await;
                let response = format!(
                    "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    port
}

/// Reads one HTTP/1.1 request (head and `content-length` body) from `socket`; `None` when it closes first.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[header_end..]).to_string();
    Some(Recorded { method, path, body })
}

/// A port nothing listens on (bound, then released).
pub fn refused_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// An OpenAI chat completion body.
pub fn openai_reply(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    })
    .to_string()
}
