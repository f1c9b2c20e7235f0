//! The MCP server (Model Context Protocol, through the official Rust SDK `rmcp`): the tools `search`,
//! `answer`, `add_documents` and `list_strategies` over one index — on stdio ([`serve_stdio`], `kgrag
//! mcp`) and as streamable HTTP at `/mcp` of `kgrag serve`.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, InitializeResult, ServerCapabilities,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::api::{check_question, check_range, check_strategy, committed, default_strategy};
use crate::documents::{change, Change};
use crate::error::ApiError;
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
}

/// The MCP service over one index.
#[derive(Clone)]
pub struct KgragMcp {
    state: Arc<State>,
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
    pub(crate) fn new(state: Arc<State>) -> Self {
        Self {
            state,
            tool_router: Self::tool_router(),
        }
    }

    async fn ask(&self, args: QuestionArgs, answer: bool) -> Result<serde_json::Value, ApiError> {
        let searcher = committed(&self.state)?;
        check_question(&args.question)?;
        let strategy = args
            .strategy
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
        let mut v = outcome.to_json(&args.question, false);
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
    async fn search(&self, Parameters(args): Parameters<QuestionArgs>) -> CallToolResult {
        result(self.ask(args, false).await)
    }

    /// The reader's answer and its passages.
    #[tool(
        description = "Answer a question from the index with a retrieval strategy: the answer with its \
                       citations ([n] marks, each naming its file, pages and section), the passages it \
                       was read from, and the stats (latency, context tokens, LLM calls)."
    )]
    async fn answer(&self, Parameters(args): Parameters<QuestionArgs>) -> CallToolResult {
        result(self.ask(args, true).await)
    }

    /// Adds documents in one commit.
    #[tool(
        description = "Add documents to the index (id, optional title, text); they are extracted, \
                       embedded and committed as one new generation. Ids already present are skipped."
    )]
    async fn add_documents(
        &self,
        Parameters(args): Parameters<AddDocumentsArgs>,
    ) -> CallToolResult {
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
            let s = change(&self.state, Change::Add(docs)).await?;
            Ok(json!({"documents": s.documents, "chunks": s.chunks, "skipped": s.skipped, "generation": s.generation}))
        }
        .await;
        result(value)
    }

    /// The strategies this index answers.
    #[tool(
        description = "List the retrieval strategies this index answers, the default one and its top_k."
    )]
    async fn list_strategies(&self) -> CallToolResult {
        let searcher = self.state.reader.searcher();
        result(Ok(json!({
            "strategies": searcher.strategies(),
            "default": default_strategy(&searcher),
            "top_k": searcher.config().retriever.top_k,
            "generation": searcher.generation(),
        })))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KgragMcp {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kgrag", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "A knowledge-graph RAG index (HippoRAG 2, HiRAG, LeanRAG, dense). Call list_strategies, \
                 then search or answer with a strategy; add_documents indexes new text.",
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
        move || Ok(KgragMcp::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Serves the MCP tools over stdin and stdout until the client closes them (`kgrag mcp`).
pub async fn serve_stdio(index: kgrag::Index) -> Result<(), ServerError> {
    let server = Server::new(index, ServeOptions::default())?;
    let service = KgragMcp::new(server.state.clone())
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
    server.state.writer.flush().await;
    ended.map(|_| ())
}
