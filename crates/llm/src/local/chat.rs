//! A llama-architecture GGUF chat model on candle's quantized llama, with the ChatML template.
//!
//! GGUF files converted by llama.cpp carry no tokenizer.json; the tokenizer is rebuilt from the file's
//! metadata (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`, control-token types) as a byte-level BPE with
//! single-digit splitting, as SmolLM2's tokenizer does. Decoding is greedy at temperature 0 (or unset), else
//! sampled with the request's seed.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use kgrag_types::{ChatRequest, ChatResponse, FinishReason, Role, Usage};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

use super::local_err;
use crate::config::{asset_path, LocalChatConfig};
use crate::error::{LlmError, Result};
use crate::managed::ChatBackend;

/// GGUF token type of control tokens (`<|im_start|>` and the like).
const CONTROL_TOKEN: i32 = 3;

/// The system prompt SmolLM2's own chat template inserts when a conversation has none.
const DEFAULT_SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

struct Engine {
    model: ModelWeights,
    tokenizer: Tokenizer,
    eos: u32,
}

/// An in-process GGUF chat model (SmolLM2-135M-Instruct by default). One generation runs at a time.
pub struct LocalChat {
    engine: Arc<Mutex<Engine>>,
    name: String,
    path: PathBuf,
    max_context: usize,
    default_max_tokens: u32,
}

impl std::fmt::Debug for LocalChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalChat")
            .field("path", &self.path)
            .field("max_context", &self.max_context)
            .finish_non_exhaustive()
    }
}

fn meta_strings(content: &gguf_file::Content, key: &str, model: &str) -> Result<Vec<String>> {
    let values = content
        .metadata
        .get(key)
        .ok_or_else(|| local_err(model, format!("GGUF metadata has no {key}")))?
        .to_vec()
        .map_err(|e| local_err(model, format!("{key}: {e}")))?;
    values
        .iter()
        .map(|v| {
            v.to_string()
                .cloned()
                .map_err(|e| local_err(model, format!("{key}: {e}")))
        })
        .collect()
}

fn meta_u32(content: &gguf_file::Content, key: &str) -> Option<u32> {
    content.metadata.get(key).and_then(|v| v.to_u32().ok())
}

/// Builds the tokenizer a llama.cpp-converted GGUF describes.
fn tokenizer_from_gguf(content: &gguf_file::Content, model: &str) -> Result<Tokenizer> {
    let kind = content
        .metadata
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok().cloned())
        .unwrap_or_default();
    if kind != "gpt2" {
        return Err(local_err(
            model,
            format!(
                "GGUF tokenizer model {kind:?} is not supported: only byte-level BPE (\"gpt2\", as in SmolLM2) is"
            ),
        ));
    }
    let tokens = meta_strings(content, "tokenizer.ggml.tokens", model)?;
    let merges = meta_strings(content, "tokenizer.ggml.merges", model)?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let merges: Vec<(String, String)> = merges
        .iter()
        .filter_map(|m| m.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| local_err(model, format!("BPE from GGUF: {e}")))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
        Digits::new(true).into(),
        ByteLevel::new(false, true, true).into(),
    ])));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    let types: Vec<i32> = content
        .metadata
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok())
        .map(|vs| vs.iter().map(|v| v.to_i32().unwrap_or(1)).collect())
        .unwrap_or_default();
    let specials: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, t)| **t == CONTROL_TOKEN)
        .map(|(tok, _)| AddedToken::from(tok.clone(), true))
        .collect();
    tokenizer
        .add_special_tokens(specials)
        .map_err(|e| local_err(model, format!("control tokens: {e}")))?;
    Ok(tokenizer)
}

/// Renders messages with the ChatML template and opens the assistant turn.
fn chatml(request: &ChatRequest) -> String {
    let mut out = String::new();
    if request.messages.first().map(|m| m.role) != Some(Role::System) {
        out.push_str(&format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"));
    }
    for m in &request.messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out.push_str(&format!("<|im_start|>{role}\n{}<|im_end|>\n", m.content));
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

impl LocalChat {
    /// Loads `config.gguf` (default `$KGRAG_ASSETS/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`).
    pub fn load(config: &LocalChatConfig) -> Result<Self> {
        let path = config
            .gguf
            .clone()
            .unwrap_or_else(|| asset_path("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "gguf".to_owned());
        let mut file = std::fs::File::open(&path).map_err(|e| {
            LlmError::Config(format!(
                "cannot open {}: {e} ({})",
                path.display(),
                crate::config::missing_assets_hint()
            ))
        })?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| local_err(&name, format!("{}: {e}", path.display())))?;
        let tokenizer = tokenizer_from_gguf(&content, &name)?;
        let eos = tokenizer
            .token_to_id("<|im_end|>")
            .or_else(|| meta_u32(&content, "tokenizer.ggml.eos_token_id"))
            .ok_or_else(|| local_err(&name, "no end-of-turn token"))?;
        let model = ModelWeights::from_gguf(content, &mut file, &Device::Cpu)
            .map_err(|e| local_err(&name, e))?;
        Ok(Self {
            engine: Arc::new(Mutex::new(Engine {
                model,
                tokenizer,
                eos,
            })),
            name,
            path,
            max_context: config.max_context,
            default_max_tokens: config.default_max_tokens,
        })
    }
}

impl Engine {
    fn generate(
        &mut self,
        name: &str,
        request: &ChatRequest,
        max_context: usize,
        max_new: usize,
    ) -> Result<ChatResponse> {
        let err = |e: &dyn std::fmt::Display| local_err(name, e);
        let prompt = self
            .tokenizer
            .encode(chatml(request), false)
            .map_err(|e| err(&e))?
            .get_ids()
            .to_vec();
        if prompt.len() + max_new > max_context {
            return Err(LlmError::Local {
                model: name.to_owned(),
                message: format!(
                    "prompt of {} tokens plus {max_new} new tokens exceeds the context of {max_context}",
                    prompt.len()
                ),
            });
        }
        let s = &request.settings;
        let temperature = s.temperature.filter(|t| *t > 0.0).map(f64::from);
        let mut sampler =
            LogitsProcessor::new(s.seed.unwrap_or(0), temperature, s.top_p.map(f64::from));
        let mut generated: Vec<u32> = Vec::new();
        let mut input = prompt.clone();
        let mut pos = 0;
        let mut finish = FinishReason::Length;
        let mut text = String::new();
        while generated.len() < max_new {
            let x = Tensor::new(input.as_slice(), &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(|e| err(&e))?;
            let logits = self
                .model
                .forward(&x, pos)
                .and_then(|l| l.squeeze(0))
                .map_err(|e| err(&e))?;
            pos += input.len();
            let next = sampler.sample(&logits).map_err(|e| err(&e))?;
            if next == self.eos {
                finish = FinishReason::Stop;
                break;
            }
            generated.push(next);
            input = vec![next];
            text = self
                .tokenizer
                .decode(&generated, true)
                .map_err(|e| err(&e))?;
            if let Some(cut) = s
                .stop
                .iter()
                .filter_map(|stop| text.find(stop.as_str()))
                .min()
            {
                text.truncate(cut);
                finish = FinishReason::Stop;
                break;
            }
        }
        Ok(ChatResponse {
            content: text,
            usage: Usage {
                prompt_tokens: prompt.len() as u64,
                completion_tokens: generated.len() as u64,
            },
            finish_reason: finish,
            cached: false,
        })
    }
}

#[async_trait]
impl ChatBackend for LocalChat {
    fn provider(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.name
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let engine = Arc::clone(&self.engine);
        let request = request.clone();
        let name = self.name.clone();
        let max_context = self.max_context;
        let max_new = request
            .settings
            .max_tokens
            .unwrap_or(self.default_max_tokens) as usize;
        tokio::task::spawn_blocking(move || {
            let mut engine = engine
                .lock()
                .map_err(|_| local_err(&name, "a previous generation panicked"))?;
            engine.generate(&name, &request, max_context, max_new)
        })
        .await
        .map_err(|e| local_err(&self.name, e))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kgrag_types::Message;

    #[test]
    fn chatml_adds_default_system_only_when_missing() {
        let r = ChatRequest::user("hi");
        assert_eq!(
            chatml(&r),
            format!("<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        );
        let mut r = ChatRequest::user("hi");
        r.messages.insert(0, Message::system("s"));
        assert!(chatml(&r).starts_with("<|im_start|>system\ns<|im_end|>\n<|im_start|>user"));
    }
}
