//! The MCP server (Model Context Protocol, through the official Rust SDK `rmcp`): the tools `search`,
//! `answer`, `add_documents`, `list_strategies` and `list_indexes` — on stdio ([`serve_stdio`], `kgrag
//! mcp`, every tool on its one index) and as streamable HTTP at `/mcp` of `kgrag serve`, where each tool
//! takes an `index` (default: the server's default index) and a key sees only its indexes.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, InitializeResult, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::api::{check_question, check_range, check_strategy, committed, default_strategy};
use crate::documents::{change, Change};
use crate::error::ApiError;
use crate::indexes::{lease_to_change, lease_to_read};
use crate::keys::Grant;
use crate::query::run_strategy;
use crate::{ServeOptions, Server, ServerError, State};

/// `search` and `answer`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct QuestionArgs {
    /// The question.
    pub question: String,
    /// The strategy (see `list_strategies`); default: the index's configured one.
    #[serde(default)]
    pub strategy: Option<String>,
    /// How many passages (1–100); default: the index's configured `top_k` (at most 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: Option<usize>,
    /// The index to ask (see `list_indexes`); default: the server's default index.
    #[serde(default)]
    pub index: Option<String>,
}

/// `list_strategies`' arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct IndexArgs {
    /// The index (see `list_indexes`); default: the server's default index.
    #[serde(default)]
    pub index: Option<String>,
}

/// One document for `add_documents`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DocumentArg {
    /// The document's id (unique in the index).
    pub id: String,
    /// An optional title.
    #[serde(default)]
    pub title: Option<String>,
    /// The text.
    pub text: String,
}

/// `add_documents`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddDocumentsArgs {
    /// The documents to add (one commit).
    pub documents: Vec<DocumentArg>,
    /// The index to add them to (see `list_indexes`); default: the server's default index.
    #[serde(default)]
    pub index: Option<String>,
}

/// The MCP service over a server's indexes.
#[derive(Clone)]
pub struct KgragMcp {
    state: Arc<State>,
    /// Over stdio: the client started the process and may do everything.
    local: bool,
    tool_router: ToolRouter<Self>,
}

/// A tool's result: the JSON as text, or the API error as a tool error the model can read.
fn result(value: Result<serde_json::Value, ApiError>) -> CallToolResult {
    match value {
        Ok(v) => CallToolResult::success(vec![ContentBlock::text(
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string()),
        )]),
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
    }
}

#[tool_router]
impl KgragMcp {
    pub(crate) fn new(state: Arc<State>, local: bool) -> Self {
        Self {
            state,
            local,
            tool_router: Self::tool_router(),
        }
    }

    /// What the client may do: everything over stdio; over HTTP, what the request's key may (the guard
    /// put it in the request).
    fn grant(&self, ctx: &RequestContext<RoleServer>) -> Grant {
        if self.local {
            return Grant::everything("");
        }
        ctx.extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Grant>().cloned())
            .unwrap_or_else(Grant::nothing)
    }

    /// The index a tool names, else the default one (if the client may see it).
    fn index_name(&self, grant: &Grant, index: Option<String>) -> Result<String, ApiError> {
        match index {
            Some(i) => Ok(i),
            None => crate::indexes::default_for(&self.state, grant).map_err(|_| {
                ApiError::not_found(
                    "this server has no default index: give `index` (list_indexes lists them)",
                )
            }),
        }
    }

    async fn ask(
        &self,
        grant: &Grant,
        args: QuestionArgs,
        answer: bool,
    ) -> Result<serde_json::Value, ApiError> {
        check_question(&args.question)?;
        let name = self.index_name(grant, args.index.clone())?;
        let lease = lease_to_read(&self.state, grant, &name).await?;
        let searcher = committed(&lease)?;
        let strategy = args
            .strategy
            .or_else(|| crate::api::default_strategy(&searcher).map(str::to_owned))
            .unwrap_or_else(|| searcher.config().retriever.strategy.clone());
        check_strategy(&searcher, &strategy)?;
        let top_k = check_range(
            "top_k",
            args.top_k
                .unwrap_or_else(|| searcher.config().retriever.top_k.min(100)),
            1,
            100,
        )?;
        let outcome = run_strategy(
            &self.state,
            &searcher,
            "/mcp",
            &args.question,
            &strategy,
            top_k,
            answer,
            (&None, 0),
        )
        .await?;
        drop(lease);
        let mut v = outcome.to_json(&args.question, false);
        v["index"] = json!(name);
        if !answer {
            if let Some(o) = v.as_object_mut() {
                o.remove("answer");
                o.remove("citations");
            }
        }
        Ok(v)
    }

    /// Ranked passages for a question.
    #[tool(
        description = "Search the knowledge-graph index: the passages a retrieval strategy ranks highest \
                       for a question, with scores, document ids and each passage's source (file, \
                       pages, section: cite it as its label). Strategies: see list_strategies."
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<QuestionArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        result(self.ask(&self.grant(&ctx), args, false).await)
    }

    /// The reader's answer and its passages.
    #[tool(
        description = "Answer a question from the index with a retrieval strategy: the answer with its \
                       citations ([n] marks, each naming its file, pages and section), the passages it \
                       was read from, and the stats (latency, context tokens, LLM calls)."
    )]
    async fn answer(
        &self,
        Parameters(args): Parameters<QuestionArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        result(self.ask(&self.grant(&ctx), args, true).await)
    }

    /// Adds documents in one commit.
    #[tool(
        description = "Add documents to the index (id, optional title, text); they are extracted, \
                       embedded and committed as one new generation. Ids already present are skipped."
    )]
    async fn add_documents(
        &self,
        Parameters(args): Parameters<AddDocumentsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let grant = self.grant(&ctx);
        let index = args.index;
        let docs: Vec<_> = args
            .documents
            .into_iter()
            .map(|d| crate::documents::NewDocument {
                id: d.id,
                title: d.title,
                text: d.text,
            })
            .collect();
        let value = async {
            let docs = crate::documents::json_documents(crate::documents::NewDocuments { documents: docs })?;
            let name = self.index_name(&grant, index)?;
            let lease = lease_to_change(&self.state, &grant, &name).await?;
            let s = change(&lease, Change::Add(docs)).await?;
            Ok(json!({"index": name, "documents": s.documents, "chunks": s.chunks, "skipped": s.skipped, "generation": s.generation}))
        }
        .await;
        result(value)
    }

    /// The strategies an index answers.
    #[tool(
        description = "List the retrieval strategies an index answers (default: the server's default \
                       index), the default one and its top_k."
    )]
    async fn list_strategies(
        &self,
        Parameters(args): Parameters<IndexArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let grant = self.grant(&ctx);
        let value = async {
            let name = self.index_name(&grant, args.index)?;
            let lease = lease_to_read(&self.state, &grant, &name).await?;
            let searcher = lease.reader.searcher();
            Ok(json!({
                "index": name,
                "strategies": searcher.strategies(),
                "default": default_strategy(&searcher),
                "top_k": searcher.config().retriever.top_k,
                "generation": searcher.generation(),
            }))
        }
        .await;
        result(value)
    }

    /// The indexes this client may use.
    #[tool(
        description = "List the indexes (knowledge bases) this client may search, which one is the \
                       default, and whether it may add documents to each."
    )]
    async fn list_indexes(&self, ctx: RequestContext<RoleServer>) -> CallToolResult {
        let grant = self.grant(&ctx);
        let indexes: Vec<serde_json::Value> = self
            .state
            .catalog
            .list()
            .iter()
            .filter(|l| grant.can_see(&l.name))
            .map(|l| {
                json!({
                    "name": l.name,
                    "default": l.default,
                    "read": grant.can_read(&l.name),
                    "change": grant.can_change(&l.name),
                    "strategies": self.state.catalog.strategies(&l.name),
                })
            })
            .collect();
        result(Ok(json!({"indexes": indexes})))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KgragMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kgrag", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Knowledge-graph RAG indexes (HippoRAG 2, HiRAG, LeanRAG, dense). Call list_indexes and \
                 list_strategies, then search or answer with a strategy (and an index); add_documents \
                 indexes new text.",
            )
    }
}

/// The streamable-HTTP MCP service mounted at `/mcp`; `cancel` ends its sessions at shutdown.
pub(crate) fn http_service(
    state: Arc<State>,
    cancel: tokio_util::sync::CancellationToken,
) -> StreamableHttpService<KgragMcp, LocalSessionManager> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.push(state.options.listen.ip().to_string());
    hosts.extend(state.options.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(state.options.body_limit);
    StreamableHttpService::new(
        move || Ok(KgragMcp::new(state.clone(), false)),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Serves the MCP tools over stdin and stdout until the client closes them (`kgrag mcp`).
pub async fn serve_stdio(index: kgrag::Index) -> Result<(), ServerError> {
    let server = Server::new(index, ServeOptions::default())?;
    let service = KgragMcp::new(server.state.clone(), true)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServerError::Io(std::io::Error::other(format!("MCP start: {e}"))))?;
    let ended = service
        .waiting()
        .await
        .map_err(|e| ServerError::Io(std::io::Error::other(format!("MCP: {e}"))));
    // The client is gone: a change it started commits before the process ends.
    server
        .state
        .closing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    server.state.catalog.flush_all().await;
    ended.map(|_| ())
}
