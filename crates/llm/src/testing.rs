//! Helpers for tests against the real local server: `cargo xtask test` starts llama.cpp's server with
//! SmolLM2 and passes its URL in `KGRAG_TEST_LLM_URL` (feature `test-utils`).

use std::sync::Arc;

use crate::{build_chat, ChatConfig, Limits, ManagedChatModel, OpenAiConfig, Result};

/// The test server's URL; `None` (with a message) when it is not set. Panics when it is not set but
/// `KGRAG_REQUIRE_LLM_SERVER` is (xtask and CI set it): the server did not start.
pub fn test_server_url() -> Option<String> {
    match std::env::var("KGRAG_TEST_LLM_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var_os("KGRAG_REQUIRE_LLM_SERVER").is_some() {
                #[allow(clippy::panic)]
                {
                    panic!(
                        "KGRAG_TEST_LLM_URL is not set but KGRAG_REQUIRE_LLM_SERVER is: the local server did not start"
                    );
                }
            }
            eprintln!("KGRAG_TEST_LLM_URL not set: skipping the real-server test (run `cargo xtask test`)");
            None
        }
    }
}

/// SmolLM2 on the test server through the OpenAI-compatible client (two attempts, 120 s timeout, no cache).
pub fn smollm2_chat(url: String) -> Result<Arc<dyn ManagedChatModel>> {
    build_chat(
        &ChatConfig::Openai(OpenAiConfig {
            base_url: url,
            model: "smollm2".into(),
            api_key_env: None,
            limits: Limits {
                max_attempts: 2,
                initial_backoff_ms: 50,
                request_timeout_secs: 120.0,
                ..Limits::default()
            },
            dimension: None,
            batch_size: 8,
            price_per_million_input: None,
            price_per_million_output: None,
        }),
        None,
    )
}
