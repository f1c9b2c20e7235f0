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
pub mod catalog;
mod documents;
pub mod error;
mod federated;
mod graph;
mod indexes;
mod keys;
pub mod mcp;
pub mod metrics;
mod openai;
mod query;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::path::PathBuf;

use axum::Router;
use kgrag::config::Config;
use kgrag::Index;

pub use catalog::{IndexSource, Limits, NamedIndex};
pub use error::{ApiError, ApiResult};

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to listen on (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// The bearer token every endpoint but `/health` and the page's files requires (`None`: no auth); it
    /// may do everything. Not with `keys_file`.
    pub api_key: Option<String>,
    /// A keys file: each key with the indexes it may read and change, and whether it may create and drop
    /// indexes (see the crate's README); reloaded on SIGHUP. Not with `api_key`.
    pub keys_file: Option<PathBuf>,
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
            keys_file: None,
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
         the index. Give --api-key-env VAR (the key in $VAR) or --keys FILE (a key per client), or \
         --insecure-no-auth if the network is trusted"
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

/// What a server serves: named indexes, an indexes root, and how many stay loaded.
#[derive(Default)]
pub struct Indexes {
    /// Indexes by name (`--index NAME=DIR`).
    pub named: Vec<NamedIndex>,
    /// A folder whose every sub-folder is an index, and where `POST /v1/indexes` makes new ones
    /// (`--indexes ROOT`).
    pub root: Option<PathBuf>,
    /// The configuration every index is opened with (else the one it was built with).
    pub config: Option<Config>,
    /// The index the routes without a name answer from (default: the first of `named`).
    pub default: Option<String>,
    /// How many indexes stay in memory.
    pub limits: Limits,
}

/// What every handler shares.
pub(crate) struct State {
    pub(crate) catalog: Arc<catalog::Catalog>,
    /// The keys (`None`: the server takes requests without one).
    pub(crate) keys: Option<keys::Keys>,
    /// Set at shutdown: changes not yet started are refused.
    pub(crate) closing: Arc<AtomicBool>,
    pub(crate) metrics: Arc<metrics::Metrics>,
    pub(crate) limiter: tokio::sync::Semaphore,
    pub(crate) options: ServeOptions,
    /// Numbers chat completion ids.
    pub(crate) completions: AtomicU64,
}

/// The server: its indexes and options. Clone-free; [`Server::router`] hands out the routes.
pub struct Server {
    state: Arc<State>,
    mcp_cancel: tokio_util::sync::CancellationToken,
}

impl Server {
    /// A server over one index, served as `default` (its committed generation is loaded now).
    pub fn new(index: Index, options: ServeOptions) -> Result<Self, ServerError> {
        let server = Self::with_indexes(
            Indexes {
                named: vec![NamedIndex::open("default", index)],
                ..Indexes::default()
            },
            options,
        )?;
        // Loaded now: a broken index fails here, not on the first request.
        server.state.catalog.preload("default")?;
        Ok(server)
    }

    /// A server over several indexes, each loaded on first use.
    pub fn with_indexes(indexes: Indexes, options: ServeOptions) -> Result<Self, ServerError> {
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
        if indexes.limits.max_loaded == Some(0) {
            return Err(ServerError::Options("max_loaded must be at least 1".into()));
        }
        let keys = match (&options.api_key, &options.keys_file) {
            (Some(_), Some(_)) => {
                return Err(ServerError::Options(
                    "give an API key or a keys file, not both".into(),
                ))
            }
            (Some(k), None) => Some(keys::Keys::new(keys::KeyTable::single(k.trim()), None)),
            (None, Some(file)) => Some(keys::Keys::new(
                keys::KeyTable::load(file).map_err(ServerError::Options)?,
                Some(file.clone()),
            )),
            (None, None) => None,
        };
        if indexes.named.is_empty() && indexes.root.is_none() {
            return Err(ServerError::Options(
                "no index to serve: give an index (--index) or an indexes root (--indexes)".into(),
            ));
        }
        let closing = Arc::new(AtomicBool::new(false));
        let metrics = Arc::new(metrics::Metrics::default());
        let catalog = catalog::Catalog::new(indexes, metrics.clone(), closing.clone())
            .map_err(ServerError::Options)?;
        let state = Arc::new(State {
            catalog: Arc::new(catalog),
            keys,
            limiter: tokio::sync::Semaphore::new(options.max_concurrency),
            closing,
            metrics,
            options,
            completions: AtomicU64::new(0),
        });
        Ok(Self {
            state,
            mcp_cancel: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// The generation the default index answers from now (0 when it is not loaded or has none).
    pub fn generation(&self) -> u64 {
        self.state
            .catalog
            .default_name()
            .and_then(|d| self.state.catalog.if_loaded(d))
            .map_or(0, |s| s.reader.searcher().generation())
    }

    /// The index the routes without a name answer from.
    pub fn default_index(&self) -> Option<&str> {
        self.state.catalog.default_name()
    }

    /// The names of the indexes served (those under the indexes root included).
    pub fn index_names(&self) -> Vec<String> {
        self.state
            .catalog
            .list()
            .into_iter()
            .map(|l| l.name)
            .collect()
    }

    /// Loads index `name` now if it is not in memory (it may be evicted later like any other); returns
    /// the generation it answers from.
    pub async fn load(&self, name: &str) -> Result<u64, ServerError> {
        let lease = self
            .state
            .catalog
            .lease(name)
            .await
            .map_err(|e| ServerError::Options(e.message))?;
        let generation = lease.reader.searcher().generation();
        Ok(generation)
    }

    /// Reads the keys file again (what SIGHUP does): the new keys apply to requests that start after
    /// it; on an error the keys in force stay. Returns the number of keys.
    pub fn reload_keys(&self) -> Result<usize, ServerError> {
        reload_keys(&self.state)
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
    /// the document changes that have started to commit. With a keys file, SIGHUP reloads it.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let router = self.router();
        let state = self.state.clone();
        let cancel = self.mcp_cancel.clone();
        let hangups = reload_on_sighup(&self.state);
        let signal = async move {
            shutdown.await;
            state.closing.store(true, Ordering::SeqCst);
            // MCP's event streams stay open until cancelled; graceful shutdown waits for connections.
            cancel.cancel();
        };
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(signal)
            .await;
        if let Some(h) = hangups {
            h.abort();
        }
        self.state.closing.store(true, Ordering::SeqCst);
        // A change that started commits; those queued behind it are refused (also when serving failed).
        self.state.catalog.flush_all().await;
        served.map_err(ServerError::from)
    }
}

fn reload_keys(state: &State) -> Result<usize, ServerError> {
    let Some(keys) = &state.keys else {
        return Err(ServerError::Options("this server has no keys".into()));
    };
    let outcome = keys.reload();
    state.metrics.keys_reloaded(outcome.is_ok());
    outcome.map_err(ServerError::Options)
}

/// On Unix with a keys file: a task that reloads it on every SIGHUP (connections stay open).
fn reload_on_sighup(state: &Arc<State>) -> Option<tokio::task::JoinHandle<()>> {
    #[cfg(unix)]
    {
        state.options.keys_file.as_ref()?;
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()?;
        let state = state.clone();
        Some(tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                match reload_keys(&state) {
                    Ok(n) => tracing::info!("SIGHUP: reloaded the keys file ({n} keys)"),
                    Err(e) => tracing::error!("SIGHUP: the keys file was not reloaded: {e}"),
                }
            }
        }))
    }
    #[cfg(not(unix))]
    {
        let _ = state;
        None
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
    let keyed = options.api_key.is_some() || options.keys_file.is_some();
    if !addr.ip().is_loopback() && !keyed && !options.insecure_no_auth {
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
