//! What the server's tests share: a small offline index and a server on a loopback port.

#![allow(dead_code)]

use std::time::Duration;

use kgrag::config::Config;
use kgrag::documents::SourceDoc;
use kgrag::Index;
use kgrag_server::{ServeOptions, Server, ServerError};
use serde_json::Value;

pub const DOCS: [(&str, &str); 6] = [
    (
        "curie.md",
        "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903 with Pierre Curie.",
    ),
    (
        "warsaw.md",
        "Warsaw is the capital of Poland. The Vistula River flows through Warsaw and Krakow.",
    ),
    (
        "pierre.md",
        "Pierre Curie was a French physicist. He married Marie Curie in Paris in 1895.",
    ),
    (
        "krakow.md",
        "Krakow was the capital of Poland until 1596. Wawel Castle stands in Krakow.",
    ),
    (
        "paris.md",
        "Paris is the capital of France. The Seine flows through Paris. The Sorbonne is in Paris.",
    ),
    (
        "sorbonne.md",
        "Marie Curie taught at the Sorbonne. She was the first woman to teach there.",
    ),
];

/// An offline, model-free index of every method over [`DOCS`].
pub async fn index(dir: &std::path::Path) -> Index {
    offline_index(
        dir,
        "\"dense\", \"hipporag2\", \"hirag\", \"leanrag\"",
        &DOCS,
    )
    .await
}

/// An offline, model-free index of dense and HippoRAG 2 over `docs`, made in `dir`.
pub async fn small_index(dir: &std::path::Path, docs: &[(&str, &str)]) -> Index {
    offline_index(dir, "\"dense\", \"hipporag2\"", docs).await
}

/// An offline index (rule extraction, a hashing embedder, `top_k` 3) of `methods` over `docs`.
async fn offline_index(dir: &std::path::Path, methods: &str, docs: &[(&str, &str)]) -> Index {
    let config = Config::parse(&format!(
        "openie = \"rules\"\n[embedder]\nprovider = \"hashing\"\ndim = 64\n\
         [index]\nmethods = [{methods}]\n[retriever]\nstrategy = \"hipporag2\"\ntop_k = 3\n"
    ))
    .unwrap();
    let index = Index::create(dir, config).unwrap();
    let mut writer = index.writer().unwrap();
    writer
        .add_documents(
            docs.iter()
                .map(|(id, text)| SourceDoc::text(*id, *text))
                .collect(),
        )
        .await
        .unwrap();
    writer.commit().await.unwrap();
    drop(writer);
    index
}

/// The document ids of a result's passages, in rank order.
pub fn passage_documents(result: &Value) -> Vec<String> {
    result["passages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["documents"].as_array().unwrap().clone())
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

pub struct Running {
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
    pub client: reqwest::Client,
    key: Option<String>,
    _dir: tempfile::TempDir,
}

impl Running {
    pub async fn start(options: ServeOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path()).await;
        Self::launch(options, dir, |o| Server::new(index, o)).await
    }

    /// A server over `indexes` (their folders kept by the caller) with `options` on a free port.
    pub async fn start_with(indexes: kgrag_server::Indexes, options: ServeOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::launch(options, dir, |o| Server::with_indexes(indexes, o)).await
    }

    /// The server `make` makes with `options` on a free loopback port, keeping `dir` until it stops.
    async fn launch(
        options: ServeOptions,
        dir: tempfile::TempDir,
        make: impl FnOnce(ServeOptions) -> Result<Server, ServerError>,
    ) -> Self {
        // With the workspace's `https` features reqwest has no crypto provider of its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = options.api_key.clone();
        let mut options = options;
        options.listen = "127.0.0.1:0".parse().unwrap();
        let listener = kgrag_server::bind(&options).await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = make(options).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(listener, async {
            let _ = stopped.await;
        }));
        Self {
            base,
            stop: Some(stop),
            task,
            client: reqwest::Client::new(),
            key,
            _dir: dir,
        }
    }

    /// A request with `key` as its bearer token.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.client.request(method, self.url(path)).bearer_auth(key);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn with_key(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .with_key(self.client.get(self.url(path)))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .with_key(self.client.post(self.url(path)).json(&body))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.with_key(self.client.get(self.url("/metrics")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Uploads `body` as the file `name` (`POST /v1/documents?filename=`).
    pub async fn upload(&self, name: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let r = self
            .with_key(
                self.client
                    .post(self.url(&format!("/v1/documents?filename={name}"))),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Stops the server; returns the index's folder (removed when dropped).
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the server stops within 30 s")
            .unwrap()
            .unwrap();
        self._dir
    }
}
