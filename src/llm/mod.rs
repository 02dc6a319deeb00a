//! Large language models from GGUF files (tinygrad `llm/`): the tokenizer, the Transformer, and what the `llm`
//! binary builds on them. In: a GGUF file ([`crate::nn::gguf`]). Out: tokens, logits and generated text.

pub mod batch;
pub mod generate;
pub mod model;
pub mod serve;
pub mod tokenizer;

use crate::error::{Error, Result};
use crate::nn::gguf::{GgufFile, GgufValue};
use std::path::PathBuf;
use tokenizer::{Tokenizer, TokenizerSpec};

/// Where models live: `$TINYGRAD_MODELS_DIR`, else `models` in the cache directory (`~/.cache/tinygrad/models`).
pub fn models_dir() -> PathBuf {
    std::env::var_os("TINYGRAD_MODELS_DIR").map_or_else(|| crate::helpers::cache_dir().join("models"), PathBuf::from)
}

/// The tokenizer `file`'s `tokenizer.ggml.*` metadata describes.
///
/// # Errors
/// [`Error::Format`] naming the file when a key has the wrong type or the tokens are missing; the tokenizer's
/// errors.
pub fn tokenizer_from_gguf(file: &GgufFile) -> Result<Tokenizer> {
    let m = |k: &str| file.metadata.get(&format!("tokenizer.ggml.{k}"));
    let bad =
        |k: &str| Error::Format { path: file.path.clone(), msg: format!("metadata `tokenizer.ggml.{k}` is missing or of the wrong type") };
    let strings = |k: &str| -> Result<Vec<String>> {
        m(k).map_or(Ok(vec![]), |v| {
            v.as_array().ok_or_else(|| bad(k))?.iter().map(|s| s.as_str().map(str::to_string).ok_or_else(|| bad(k))).collect()
        })
    };
    let nums = |k: &str| -> Result<Vec<f64>> {
        m(k).map_or(Ok(vec![]), |v| v.as_array().ok_or_else(|| bad(k))?.iter().map(|s| s.as_f64().ok_or_else(|| bad(k))).collect())
    };
    let id = |k: &str| m(k).and_then(GgufValue::as_u64).and_then(|v| u32::try_from(v).ok());
    let tokens = strings("tokens")?;
    if tokens.is_empty() {
        return Err(bad("tokens"));
    }
    Tokenizer::new(TokenizerSpec {
        model: m("model").and_then(GgufValue::as_str).ok_or_else(|| bad("model"))?.to_string(),
        pre: m("pre").and_then(GgufValue::as_str).unwrap_or("default").to_string(),
        tokens,
        token_types: nums("token_type")?.into_iter().map(|x| x as i32).collect(),
        merges: strings("merges")?,
        scores: nums("scores")?.into_iter().map(|x| x as f32).collect(),
        bos: id("bos_token_id"),
        eos: id("eos_token_id"),
        add_bos: m("add_bos_token").and_then(GgufValue::as_bool),
        add_space_prefix: m("add_space_prefix").and_then(GgufValue::as_bool),
    })
}

/// The prompt for a chat: `messages` (`(role, content)`) rendered with the GGUF file's Jinja chat template
/// (`tokenizer.chat_template`, with tinygrad's globals: `bos_token`, `eos_token`, `add_generation_prompt`,
/// `raise_exception`); when the file has none, Gemma's turns (`<start_of_turn>role\n...<end_of_turn>`) if the
/// vocabulary has them, else ChatML (`<|im_start|>role\ncontent<|im_end|>`).
///
/// # Errors
/// [`Error::Format`] naming the file when the template does not parse or raises.
pub fn chat_prompt(file: &GgufFile, tok: &Tokenizer, messages: &[(&str, &str)]) -> Result<String> {
    let Some(template) = file.metadata.get("tokenizer.chat_template").and_then(GgufValue::as_str) else {
        // (no template in the file: Gemma's turns where the vocabulary has them, as its template writes them)
        if tok.token_id("<start_of_turn>").is_some() {
            let role = |r: &str| if r == "assistant" { "model".to_string() } else { r.to_string() };
            let mut s: String = messages.iter().map(|(r, c)| format!("<start_of_turn>{}\n{c}<end_of_turn>\n", role(r))).collect();
            s.push_str("<start_of_turn>model\n");
            return Ok(s);
        }
        let mut s: String = messages.iter().map(|(r, c)| format!("<|im_start|>{r}\n{c}<|im_end|>\n")).collect();
        s.push_str("<|im_start|>assistant\n");
        return Ok(s);
    };
    let bad = |e: minijinja::Error| Error::Format { path: file.path.clone(), msg: format!("chat template: {e}") };
    let mut env = minijinja::Environment::new();
    // (Python's `str`, `list` and `dict` methods, which Hugging Face's Jinja has and templates call)
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> std::result::Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    env.add_template("chat", template).map_err(bad)?;
    let text = |id: Option<u32>| id.map(|i| String::from_utf8_lossy(&tok.decode_token(i)).into_owned()).unwrap_or_default();
    let msgs: Vec<minijinja::Value> = messages.iter().map(|(r, c)| minijinja::context! { role => *r, content => *c }).collect();
    let ctx =
        minijinja::context! { messages => msgs, add_generation_prompt => true, bos_token => text(tok.bos()), eos_token => text(tok.eos()) };
    env.get_template("chat").and_then(|t| t.render(ctx)).map_err(bad)
}

/// The names tinygrad's `llm` gives models (its `models` table), of the ones this `llm` runs, and their files' URLs.
pub const MODELS: [(&str, &str); 8] = [
    ("llama3.2:1b", "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q6_K.gguf"),
    ("llama3.2:1b-q4", "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
    ("llama3.2:3b", "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-Q6_K.gguf"),
    ("llama3.2:3b-f16", "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-f16.gguf"),
    ("llama3.1:8b", "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/resolve/main/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"),
    ("qwen3:0.6b", "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf"),
    ("qwen3:1.7b", "https://huggingface.co/unsloth/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q4_K_M.gguf"),
    ("qwen3:8b", "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf"),
];

/// A local path for `model`: itself when it is a path, else (an `http(s)://` URL, or a name of [`MODELS`]) the file
/// downloaded once into [`models_dir`] with a progress bar.
///
/// # Errors
/// [`Error::Download`] when the download fails; [`Error::Io`] when the file can't be written.
pub fn fetch_model(model: &str) -> Result<PathBuf> {
    let model = MODELS.iter().find(|(name, _)| *name == model).map_or(model, |(_, url)| url);
    if !(model.starts_with("http://") || model.starts_with("https://")) {
        return Ok(PathBuf::from(model));
    }
    let name = model.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("model.gguf");
    let path = models_dir().join(name.split('?').next().unwrap_or(name));
    if !path.exists() {
        crate::nn::datasets::download(model, &path)?;
    }
    Ok(path)
}
