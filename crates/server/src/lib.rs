//! # kgrag-server
//!
//! `kgrag serve` as a library: an HTTP API over one [`kgrag::Index`] — query one strategy or compare
//! several on the same question, add and delete documents (each change one commit through the index's one
//! writer, queries answered from the previous generation until the new one is committed), the graph around
//! an entity, HiRAG's communities — plus an OpenAI-compatible chat endpoint (model = strategy), an MCP
//! server (stdio with [`mcp::serve_stdio`], streamable HTTP at `/mcp`), Prometheus metrics and a web page
//! that puts the strategies side by side, its files embedded in the binary.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let index = kgrag::Index::open(std::path::Path::new("notes.kgrag"))?;
//! let options = kgrag_server::ServeOptions::default(); // 127.0.0.1:8080, no key
//! kgrag_server::serve(index, options, kgrag_server::shutdown_signal()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Safety: the server binds to loopback by default and refuses a non-loopback address without an API key
//! unless told otherwise ([`ServeOptions::insecure_no_auth`]); with a key every endpoint but `/health` and
//! the page's files needs `Authorization: Bearer <key>`. Request bodies are capped, queries time out, and
//! at most [`ServeOptions::max_concurrency`] requests run at once (others wait, then get 503). Errors are
//! `{"error": {"code", "message"}}`. On shutdown requests in flight finish, and a document change that has
//! started commits before the process ends (a commit is atomic: its manifest is written last).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod api;
mod assets;
mod documents;
pub mod error;
mod graph;
pub mod mcp;
pub mod metrics;
mod openai;
mod query;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use kgrag::{Index, IndexReader};

pub use error::{ApiError, ApiResult};

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to listen on (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// The bearer token every endpoint but `/health` and the page's files requires (`None`: no auth).
    pub api_key: Option<String>,
    /// Allow listening on a non-loopback address without an API key.
    pub insecure_no_auth: bool,
    /// The largest request body, in bytes (default 32 MiB).
    pub body_limit: usize,
    /// How long a query may take before a 503 (default 120 s; document changes are not cut short).
    pub request_timeout: Duration,
    /// Requests answered at once (default 64); the rest wait up to `request_timeout`, then get a 503.
    pub max_concurrency: usize,
    /// Host names accepted in `Host` besides loopback's (DNS-rebinding protection): by every path when the
    /// server has no key, and by `/mcp` always.
    pub allowed_hosts: Vec<String>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            api_key: None,
            insecure_no_auth: false,
            body_limit: 32 << 20,
            request_timeout: Duration::from_secs(120),
            max_concurrency: 64,
            allowed_hosts: Vec::new(),
        }
    }
}

/// Errors of starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A non-loopback address without an API key.
    #[error(
        "refusing to listen on {0} without an API key: anyone who can reach it could read and change \
         the index. Give --api-key-env VAR (the key in $VAR), or --insecure-no-auth if the network is \
         trusted"
    )]
    Insecure(SocketAddr),
    /// The options are inconsistent (an empty key, a zero limit).
    #[error("server options: {0}")]
    Options(String),
    /// The index could not be opened or read.
    #[error(transparent)]
    Index(#[from] kgrag::KgragError),
    /// Serving failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// What every handler shares.
pub(crate) struct State {
    pub(crate) reader: IndexReader,
    /// Makes the document changes, one at a time.
    pub(crate) writer: documents::WriterThread,
    /// Set at shutdown: changes not yet started are refused.
    pub(crate) closing: Arc<AtomicBool>,
    pub(crate) metrics: Arc<metrics::Metrics>,
    pub(crate) limiter: tokio::sync::Semaphore,
    pub(crate) options: ServeOptions,
    /// The reader the answers come from (`extractive`, `llm` or `none`: the configured `auto` resolved).
    pub(crate) reader_name: String,
    /// Numbers chat completion ids.
    pub(crate) completions: AtomicU64,
}

/// The server: an index and its options. Clone-free; [`Server::router`] hands out the routes.
pub struct Server {
    state: Arc<State>,
    mcp_cancel: tokio_util::sync::CancellationToken,
}

impl Server {
    /// A server over `index` (its committed generation is loaded now).
    pub fn new(index: Index, options: ServeOptions) -> Result<Self, ServerError> {
        if options
            .api_key
            .as_deref()
            .is_some_and(|k| k.trim().is_empty())
        {
            return Err(ServerError::Options("the API key is empty".into()));
        }
        if options.max_concurrency == 0 || options.body_limit == 0 {
            return Err(ServerError::Options(
                "max_concurrency and body_limit must be at least 1".into(),
            ));
        }
        let reader = index.reader()?;
        let closing = Arc::new(AtomicBool::new(false));
        let reader_name = serde_json::to_value(index.env().reader)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let metrics = Arc::new(metrics::Metrics::default());
        let writer =
            documents::WriterThread::start(index.clone(), closing.clone(), metrics.clone())?;
        let state = Arc::new(State {
            limiter: tokio::sync::Semaphore::new(options.max_concurrency),
            reader,
            writer,
            closing,
            metrics,
            options,
            completions: AtomicU64::new(0),
            reader_name,
        });
        Ok(Self {
            state,
            mcp_cancel: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// The generation queries are answered from now.
    pub fn generation(&self) -> u64 {
        self.state.reader.searcher().generation()
    }

    /// Every route: the JSON API, the OpenAI-compatible endpoints, `/mcp`, `/metrics`, `/openapi.json`
    /// and the page.
    pub fn router(&self) -> Router {
        let mcp = mcp::http_service(self.state.clone(), self.mcp_cancel.clone());
        // The guard (key, host, limits, metrics) is layered last: it covers `/mcp` too.
        api::layered(
            api::routes(self.state.clone()).nest_service("/mcp", mcp),
            self.state.clone(),
        )
    }

    /// Serves on `listener` until `shutdown` completes; then lets requests in flight finish and waits for
    /// a document change that has started to commit.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let router = self.router();
        let state = self.state.clone();
        let cancel = self.mcp_cancel.clone();
        let signal = async move {
            shutdown.await;
            state.closing.store(true, Ordering::SeqCst);
            // MCP's event streams stay open until cancelled; graceful shutdown waits for connections.
            cancel.cancel();
        };
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(signal)
            .await;
        self.state.closing.store(true, Ordering::SeqCst);
        // A change that started commits; those queued behind it are refused (also when serving failed).
        self.state.writer.flush().await;
        served.map_err(ServerError::from)
    }
}

/// Binds `options.listen` (refusing a non-loopback address without a key unless allowed) and serves
/// `index` until `shutdown` completes. Prints nothing; `kgrag serve` says where it listens.
pub async fn serve(
    index: Index,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let listener = bind(&options).await?;
    Server::new(index, options)?.run(listener, shutdown).await
}

/// Binds the listener for `options`, after the loopback check.
pub async fn bind(options: &ServeOptions) -> Result<tokio::net::TcpListener, ServerError> {
    let addr = options.listen;
    if !addr.ip().is_loopback() && options.api_key.is_none() && !options.insecure_no_auth {
        return Err(ServerError::Insecure(addr));
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
