//! The OpenAI-compatible server (tinygrad `llm/serve.py`; llama-server's behaviour where tinygrad has none). In:
//! requests from `http`: `GET /` (the chat page, `chat.html` from memory), `GET /health`, `GET /v1/models`,
//! `POST /v1/chat/completions` and `POST /v1/completions` with OpenAI's JSON fields (each API route also without
//! `/v1`, as llama-server's). Out: JSON responses, or server-sent events of the text a [`Batcher`] generates token by
//! token; errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`). Each request thread blocks on
//! its Batcher channel.
//!
//! What a web page elsewhere could send is refused before anything else, as a local model server must (ollama's
//! Host and Origin allow-lists): a `Host` that is not the bound address, localhost, 127.0.0.1 or one of
//! [`Options::allowed_hosts`] (421: a DNS-rebinding page), an `Origin` other than the server's own or
//! [`Options::cors`] (403: a cross-site request), and an API `POST` whose `Content-Type` is not JSON (415: a form or
//! `text/plain` request, which browsers send cross-site without asking).

mod http;

pub use http::MAX_BODY;

use super::batch::{Batcher, Event, Finish, Request};
use super::generate::Sampler;
use super::model::Transformer;
use super::tokenizer::{StreamDecoder, Tokenizer};
use super::{chat_prompt, fetch_model, tokenizer_from_gguf};
use crate::error::{Error, Result};
use crate::nn::gguf::GgufFile;
use http::{Conn, Refused};
use serde_json::{json, Value};
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CHAT_PAGE: &str = include_str!("../chat.html");

/// A loaded model, ready to serve.
pub struct Model {
    /// The name `/v1/models` lists (the file name without `.gguf`).
    pub name: String,
    file: GgufFile,
    tok: Tokenizer,
    batcher: Batcher,
    /// Token ids a request may give: those of both the tokenizer and the model's embeddings.
    vocab: usize,
}

impl Model {
    /// Loads `model` (a path or an `https://` URL, as `llm --model`) with a context of `max_context` tokens and
    /// starts its [`Batcher`] with `slots` KV caches, then runs one short generation (llama-server's warm-up): most
    /// kernels are then compiled, though a new chunk length, span or batch size still compiles its own.
    ///
    /// # Errors
    /// As [`fetch_model`], [`GgufFile::open`], [`tokenizer_from_gguf`] and [`Transformer::from_gguf`]; the
    /// warm-up's failure (a device or compiler error).
    pub fn load(model: &str, max_context: usize, slots: usize) -> Result<Model> {
        let path = fetch_model(model)?;
        let file = GgufFile::open(&path)?;
        let tok = tokenizer_from_gguf(&file)?;
        let transformer = Transformer::from_gguf(&file, &crate::runtime::default_device(), max_context)?;
        let ends: Vec<u32> = (0..tok.vocab_size() as u32).filter(|&t| tok.is_end(t)).collect();
        let vocab = tok.vocab_size().min(transformer.cfg.vocab);
        let batcher = Batcher::spawn(transformer, move |t| ends.contains(&t), slots);
        let name = path.file_name().map_or("model".into(), |n| n.to_string_lossy().trim_end_matches(".gguf").to_string());
        let m = Model { name, file, tok, batcher, vocab };
        let (tx, rx) = mpsc::channel();
        m.batcher.submit(Request {
            prompt: m.tok.encode_prompt("Hello"),
            max_tokens: 3,
            sampler: Sampler::new(0.0, 0, 1.0, 0),
            events: tx,
        })?;
        match rx.iter().find(|e| matches!(e, Event::Done(_) | Event::Failed(_))) {
            Some(Event::Done(_)) => Ok(m),
            Some(Event::Failed(e)) => Err(Error::Context(format!("the warm-up generation failed: {e}"))),
            _ => Err(Error::Context("the model thread stopped during the warm-up generation".into())),
        }
    }
}

/// What every request is served with.
pub struct Options {
    /// Requests must carry `Authorization: Bearer KEY` (all but `/` and `/health`, as llama-server's public routes).
    pub api_key: Option<String>,
    /// The sampling a request gets for the fields it leaves out (the `llm` flags; the seed is fresh per request).
    pub temperature: f32,
    /// See [`Sampler::top_k`].
    pub top_k: usize,
    /// See [`Sampler::top_p`].
    pub top_p: f32,
    /// Names a request's `Host` may give besides the bound address, `localhost` and `127.0.0.1` (`*`: any; the
    /// port is not compared).
    pub allowed_hosts: Vec<String>,
    /// An origin besides the server's own whose pages may call the API (`http://localhost:3000`; `*`: any):
    /// its requests get CORS headers and preflights are answered.
    pub cors: Option<String>,
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
}

impl Default for Options {
    /// No API key, the `llm` binary's sampling defaults, only local hosts, no other origin, 64 connections.
    fn default() -> Options {
        Options { api_key: None, temperature: 0.7, top_k: 0, top_p: 1.0, allowed_hosts: vec![], cors: None, max_connections: 64 }
    }
}

/// What the request threads share: the options, and the model once it has loaded.
struct Server {
    opts: Options,
    model: OnceLock<Model>,
    /// The address the listener is bound to.
    bound: Option<IpAddr>,
}

/// Serves on `listener` from now on, answering `/health` 503 `{"status":"loading model"}` (and the API 503) until
/// `load` returns, then with the model it returns. Returns only on failure.
///
/// # Errors
/// `load`'s error (the listener closes with the process).
pub fn serve(listener: TcpListener, opts: Options, load: impl FnOnce() -> Result<Model>) -> Result<()> {
    let bound = listener.local_addr().ok().map(|a| a.ip()).filter(|ip| !ip.is_unspecified());
    let busy = ApiError::new(503, "unavailable_error", "Too many connections: try again later").code("too_many_connections");
    let max = opts.max_connections.max(1);
    let server = Arc::new(Server { opts, model: OnceLock::new(), bound });
    let s = server.clone();
    let accept = http::listen(listener, max, busy.body(), move |conn| handle(&s, conn));
    let model = load()?;
    eprintln!("llm: serving {}", model.name);
    let _ = server.model.set(model);
    let _ = accept.join();
    Ok(())
}

/// An error answer in OpenAI's shape.
#[derive(Debug)]
struct ApiError {
    status: u16,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
}

/// A 400 `invalid_request_error` about the field `param`.
fn bad(message: impl Into<String>, param: Option<&'static str>) -> ApiError {
    ApiError { param, ..ApiError::new(400, "invalid_request_error", message) }
}

impl ApiError {
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code: None }
    }
    fn code(self, code: &'static str) -> ApiError {
        ApiError { code: Some(code), ..self }
    }
    fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> ApiError {
        ApiError { code: r.code, ..ApiError::new(r.status, "invalid_request_error", r.message) }
    }
}

/// Answers the one request `conn` carries.
fn handle(server: &Server, mut conn: Conn) {
    // (a request has a minute to arrive)
    let deadline = Instant::now() + Duration::from_secs(60);
    let head = match http::read_head(&mut conn, deadline) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(e) => return reject(&mut conn, &e.into()),
    };
    let method = head.method.clone();
    let path = head.path.split('?').next().unwrap_or("").to_string();
    // (llama-server's routes without `/v1` too, for clients whose base URL lacks it)
    let path = match path.as_str() {
        "/models" | "/chat/completions" | "/completions" => format!("/v1{path}"),
        _ => path,
    };
    if let Err(e) = guard(server, &head, &method, &path, &mut conn) {
        return reject(&mut conn, &e);
    }
    if method == "OPTIONS" && head.header("origin").is_some() {
        // (a preflight from an allowed origin: what it may send, the headers it asks for among them: the `openai`
        // package's pages send `X-Stainless-*` ones; header names and commas only, as RFC 9110 writes the list)
        let asked = head
            .header("access-control-request-headers")
            .map(str::trim)
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_, ".contains(&b)));
        let headers = asked.unwrap_or("Authorization, Content-Type");
        conn.headers.push_str(&format!("Access-Control-Allow-Methods: GET, POST, OPTIONS\r\nAccess-Control-Allow-Headers: {headers}\r\nAccess-Control-Max-Age: 600\r\n"));
        return http::respond(&mut conn, 204, "text/plain", b"");
    }
    let public = matches!((method.as_str(), path.as_str()), ("GET", "/" | "/index.html" | "/health"));
    if let (Some(key), false) = (&server.opts.api_key, public) {
        // (the scheme is case-insensitive, RFC 9110: `bearer KEY` is the same credential)
        let given = head
            .header("authorization")
            .and_then(|v| v.get(..7).filter(|s| s.eq_ignore_ascii_case("bearer ")).map(|_| &v[7..]))
            .unwrap_or("");
        if !same(given.trim().as_bytes(), key.as_bytes()) {
            let e = ApiError::new(401, "invalid_request_error", "Invalid API key: send the header `Authorization: Bearer KEY`");
            return reject(&mut conn, &e.code("invalid_api_key"));
        }
    }
    let body = match http::read_body(&mut conn, head, deadline) {
        Ok(b) => b,
        Err(e) => return reject(&mut conn, &e.into()),
    };
    let loading = || ApiError::new(503, "unavailable_error", "Loading model");
    let answer = match (method.as_str(), path.as_str(), server.model.get()) {
        ("GET", "/" | "/index.html", _) => return http::respond(&mut conn, 200, "text/html; charset=utf-8", CHAT_PAGE.as_bytes()),
        ("GET", "/health", None) => Ok(Some((503, json!({"status": "loading model"})))),
        ("GET", "/health", Some(m)) if m.batcher.is_alive() => Ok(Some((200, json!({"status": "ok"})))),
        ("GET", "/health", Some(_)) => {
            Ok(Some((503, json!({"status": "error", "message": "the model thread stopped; restart the server"}))))
        }
        ("GET", "/v1/models", Some(m)) => {
            let model = json!({"id": m.name, "object": "model", "created": now(), "owned_by": "tinygrad"});
            Ok(Some((200, json!({"object": "list", "data": [model]}))))
        }
        ("POST", "/v1/chat/completions", Some(m)) => complete(server, m, &body, true, &mut conn),
        ("POST", "/v1/completions", Some(m)) => complete(server, m, &body, false, &mut conn),
        (_, "/v1/models" | "/v1/chat/completions" | "/v1/completions", None) => Err(loading()),
        (_, "/" | "/index.html" | "/health" | "/v1/models" | "/v1/chat/completions" | "/v1/completions", _) => {
            Err(ApiError::new(405, "invalid_request_error", format!("{method} is not allowed on {path}")))
        }
        _ => Err(ApiError::new(404, "invalid_request_error", format!("Invalid URL ({method} {path})"))),
    };
    match answer {
        Ok(Some((status, v))) => http::respond_json(&mut conn, status, &v),
        Ok(None) => {}
        Err(e) => http::respond_json(&mut conn, e.status, &e.body()),
    }
}

/// Refuses what a page on another site could have sent (see the module doc): a foreign `Host` (421), a foreign
/// `Origin` (403), an API `POST` that is not JSON (415). An allowed foreign origin gets CORS headers on `conn`.
fn guard(server: &Server, head: &http::Head, method: &str, path: &str, conn: &mut Conn) -> std::result::Result<(), ApiError> {
    let host = head.header("host").unwrap_or("").trim();
    // the name without its port (`[::1]:8080` -> `::1`, `localhost:8080` -> `localhost`)
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(n, _)| n),
    };
    let allowed = &server.opts.allowed_hosts;
    let local = ["localhost", "127.0.0.1", "::1"].iter().any(|l| name.eq_ignore_ascii_case(l));
    let ok = host.is_empty()
        || local
        || server.bound.is_some_and(|ip| name.parse() == Ok(ip))
        || allowed.iter().any(|a| a == "*" || a.eq_ignore_ascii_case(name));
    if !ok {
        let msg = format!("Host {host:?} is not this server's (a DNS-rebinding page?); start it with --allowed-hosts {name} to allow it");
        return Err(ApiError::new(421, "invalid_request_error", msg).code("host_not_allowed"));
    }
    if let Some(origin) = head.header("origin").map(str::trim) {
        let own = ["http://", "https://"].iter().any(|s| origin.strip_prefix(s).is_some_and(|o| o.eq_ignore_ascii_case(host)));
        let cors = server.opts.cors.as_deref().is_some_and(|c| c == "*" || c.eq_ignore_ascii_case(origin));
        if !own && !cors {
            let msg =
                format!("Origin {origin:?} may not call this server (a cross-site request?); start it with --cors {origin} to allow it");
            return Err(ApiError::new(403, "invalid_request_error", msg).code("origin_not_allowed"));
        }
        if !own {
            conn.headers = format!("Access-Control-Allow-Origin: {origin}\r\nVary: Origin\r\n");
        }
    }
    let json =
        head.header("content-type").is_some_and(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if method == "POST" && path.starts_with("/v1/") && !json {
        let e = ApiError::new(415, "invalid_request_error", "send the request body as JSON with `Content-Type: application/json`");
        return Err(e.code("unsupported_media_type"));
    }
    Ok(())
}

/// Answers `e` to a request whose body may be unread ([`http::reject`]).
fn reject(conn: &mut Conn, e: &ApiError) {
    http::reject(conn, e.status, &e.body());
}

/// Whether `a` equals `b`, in time that depends only on their lengths (an API key is not guessed byte by byte).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A fresh id and seed per request.
fn fresh() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ COUNT.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A generation's request, from OpenAI's fields.
struct Params {
    prompt: Vec<u32>,
    max_tokens: usize,
    sampler: Sampler,
    stop: Vec<String>,
    stream: bool,
    include_usage: bool,
}

/// `body[key]` as a number in `[lo, hi]`; `None` when absent or null.
fn number(body: &Value, key: &'static str, lo: f64, hi: f64) -> std::result::Result<Option<f64>, ApiError> {
    match &body[key] {
        Value::Null => Ok(None),
        Value::Number(n) => {
            n.as_f64().filter(|x| (lo..=hi).contains(x)).map(Some).ok_or_else(|| bad(format!("`{key}` must be in [{lo}, {hi}]"), Some(key)))
        }
        v => Err(bad(format!("`{key}` must be a number, not {v}"), Some(key))),
    }
}

/// `body[key]` as a whole number of at least `lo` (the integer fields: OpenAI's `max_tokens` and
/// `max_completion_tokens`, llama-server's `top_k`; a float with no fraction, as `1e30`, counts); `None` when absent
/// or null.
fn whole(body: &Value, key: &'static str, lo: f64) -> std::result::Result<Option<f64>, ApiError> {
    match &body[key] {
        Value::Null => Ok(None),
        v => v
            .as_f64()
            .filter(|x| x.fract() == 0.0 && *x >= lo)
            .map(Some)
            .ok_or_else(|| bad(format!("`{key}` must be a whole number of at least {lo}, not {v}"), Some(key))),
    }
}

/// `v` (the field `key`) as a boolean, false when absent or null; else 400 with `param`.
fn flag(v: &Value, key: &str, param: &'static str) -> std::result::Result<bool, ApiError> {
    match v {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        v => Err(bad(format!("`{key}` must be true or false, not {v}"), Some(param))),
    }
}

/// OpenAI's `logit_bias` (`{"token id": bias}`, each bias in [-100, 100], each id below `vocab`) as pairs; none when
/// absent or null; else 400.
fn logit_bias(v: &Value, vocab: usize) -> std::result::Result<Vec<(u32, f32)>, ApiError> {
    let err = || bad(format!("`logit_bias` must map token ids under {vocab} to numbers in [-100, 100]"), Some("logit_bias"));
    match v {
        Value::Null => Ok(vec![]),
        Value::Object(m) => m
            .iter()
            .map(|(k, b)| {
                // (a key as the id prints: "05" and "+5" would bias 5 twice)
                let t = k.parse::<u32>().ok().filter(|&t| (t as usize) < vocab && t.to_string() == *k).ok_or_else(err)?;
                let b = b.as_f64().filter(|b| (-100.0..=100.0).contains(b)).ok_or_else(err)?;
                Ok((t, b as f32))
            })
            .collect(),
        _ => Err(err()),
    }
}

/// A completion's `prompt` as `m`'s tokens: a string (encoded with the model's BOS), or one of OpenAI's other forms of
/// one prompt: a list of one string, a list of token ids (each below [`Model::vocab`], taken as they are, as
/// llama-server does), or a list of one such list; else 400.
fn prompt_tokens(v: &Value, m: &Model) -> std::result::Result<Vec<u32>, ApiError> {
    let vocab = m.vocab;
    let one = match v.as_array().map(Vec::as_slice) {
        Some([p @ (Value::String(_) | Value::Array(_))]) => p,
        _ => v,
    };
    let id = |t: &Value| t.as_u64().filter(|&t| t < vocab as u64).map(|t| t as u32);
    let ids = match one {
        Value::String(s) => return Ok(m.tok.encode_prompt(s)),
        Value::Array(ids) => ids.iter().map(id).collect::<Option<_>>(),
        _ => None,
    };
    let msg = format!("`prompt` must be a string, a list of token ids under {vocab}, or a list of one of those (one prompt a request)");
    ids.ok_or_else(|| bad(msg, Some("prompt")))
}

/// The text of a message's `content`: a string, OpenAI's list of parts whose `text` parts are joined, or null (empty).
fn content(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some(String::new()),
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts.iter().map(|p| p["text"].as_str().filter(|_| p["type"] == "text")).collect(),
        _ => None,
    }
}

/// The generation a completion request's JSON `body` asks for: its prompt (the chat template's rendering of
/// `messages` when `chat`, else `prompt`) and OpenAI's fields; 400 for a malformed body or a field out of range, and
/// (`context_length_exceeded`) for a prompt plus `max_tokens` past the context.
fn params(server: &Server, m: &Model, body: &[u8], chat: bool) -> std::result::Result<Params, ApiError> {
    let body: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not valid JSON: {e}"), None))?;
    if !body.is_object() {
        return Err(bad("the body must be a JSON object", None));
    }
    let prompt = if chat {
        let msgs = body["messages"]
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| bad("`messages` must be a non-empty list", Some("messages")))?;
        // (a null content only in an assistant turn: one that called tools; the calls themselves are refused, as
        // `tools` is)
        let called =
            |v: &Value| ["tool_calls", "function_call"].iter().any(|k| !(v[k].is_null() || v[k].as_array().is_some_and(Vec::is_empty)));
        if msgs.iter().any(called) {
            return Err(bad("tool calls in `messages` are not supported", Some("messages")));
        }
        let turn = |v: &Value| {
            let role = v["role"].as_str()?;
            Some((role.to_string(), content(v.get("content").filter(|c| !c.is_null() || role == "assistant")?)?))
        };
        let msgs: Vec<(String, String)> = msgs.iter().map(turn).collect::<Option<_>>().ok_or_else(|| {
            bad(
                "each message needs a `role` string and a `content` string or list of text parts (null in an assistant turn)",
                Some("messages"),
            )
        })?;
        let msgs: Vec<(&str, &str)> = msgs.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
        m.tok.encode_prompt(&chat_prompt(&m.file, &m.tok, &msgs).map_err(|e| bad(e.to_string(), Some("messages")))?)
    } else {
        prompt_tokens(&body["prompt"], m)?
    };
    if !(body["n"].is_null() || body["n"] == 1) {
        return Err(bad("only `n` = 1 is supported", Some("n")));
    }
    // (fields that would change the answer's shape: refused when set, rather than answered without them; `logprobs: 0`
    // passes with `false`, as clients send it for "none", though OpenAI's completions read it as the chosen token's)
    for key in ["logprobs", "top_logprobs", "echo", "suffix", "best_of", "tools", "functions"] {
        let v = &body[key];
        let none = v.is_null() || *v == false || *v == 0 || v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty);
        if !(none || (key == "best_of" && *v == 1)) {
            return Err(bad(format!("`{key}` is not supported"), Some(key)));
        }
    }
    // (JSON mode and schemas constrain the answer, as a required or named tool call does: only plain text is answered)
    if !(body["response_format"].is_null() || body["response_format"]["type"] == "text") {
        return Err(bad("only `response_format` {\"type\": \"text\"} is supported", Some("response_format")));
    }
    for key in ["tool_choice", "function_call"] {
        if !(body[key].is_null() || body[key] == "none" || body[key] == "auto") {
            return Err(bad(format!("`{key}` is not supported"), Some(key)));
        }
    }
    let ctx = m.batcher.max_context();
    let max = whole(&body, "max_completion_tokens", 1.0)?.or(whole(&body, "max_tokens", 1.0)?);
    let field = Some(if chat { "messages" } else { "prompt" });
    if prompt.is_empty() {
        return Err(bad("the prompt encodes to no tokens", field));
    }
    // (as OpenAI: the prompt and the tokens asked for must fit the context; without max_tokens, one token)
    let n = prompt.len();
    if max.map_or(n >= ctx, |x| n as f64 + x > ctx as f64) {
        // (a count past 10^15 in exponent form: `max_tokens: 1e300` is not 300 digits)
        let count = |x: f64| if x < 1e15 { format!("{x}") } else { format!("{x:e}") };
        let asked = max.map_or(format!("a prompt of {n} tokens"), |x| {
            format!("{} tokens ({n} in the prompt, {} in the completion)", count(n as f64 + x), count(x))
        });
        let e = bad(format!("This model's maximum context length is {ctx} tokens. However, you requested {asked}. Please reduce the length of the prompt or completion."), field);
        return Err(e.code("context_length_exceeded"));
    }
    let stop = match &body["stop"] {
        Value::Null => vec![],
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("`stop` must be a string or a list of strings", Some("stop")))?,
        _ => return Err(bad("`stop` must be a string or a list of strings", Some("stop"))),
    };
    let o = &server.opts;
    let seed = match &body["seed"] {
        Value::Null => fresh(),
        v => v.as_u64().or(v.as_i64().map(|x| x as u64)).ok_or_else(|| bad("`seed` must be an integer", Some("seed")))?,
    };
    let mut sampler = Sampler::new(
        number(&body, "temperature", 0.0, 2.0)?.map_or(o.temperature, |x| x as f32),
        whole(&body, "top_k", 0.0)?.map_or(o.top_k, |x| x as usize),
        number(&body, "top_p", 0.0, 1.0)?.map_or(o.top_p, |x| x as f32),
        seed,
    );
    sampler.presence_penalty = number(&body, "presence_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    sampler.frequency_penalty = number(&body, "frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    sampler.logit_bias = logit_bias(&body["logit_bias"], m.vocab)?;
    Ok(Params {
        max_tokens: max.map_or(ctx - prompt.len(), |x| x as usize),
        prompt,
        sampler,
        stop: stop.into_iter().filter(|s| !s.is_empty()).collect(),
        stream: flag(&body["stream"], "stream", "stream")?,
        include_usage: flag(&body["stream_options"]["include_usage"], "stream_options.include_usage", "stream_options")?,
    })
}

/// Text held back while it may be the start of a stop string: what goes out never contains a stop string, and
/// ends before the first one.
struct StopFilter<'a> {
    stops: &'a [String],
    held: String,
}

impl StopFilter<'_> {
    /// Takes `piece`; returns the text that can go out now, and whether a stop string was reached.
    fn push(&mut self, piece: &str) -> (String, bool) {
        self.held.push_str(piece);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            self.held.truncate(at);
            return (std::mem::take(&mut self.held), true);
        }
        let n = self.held.len();
        let keep = (1..=n.min(self.stops.iter().map(String::len).max().unwrap_or(0)))
            .rev()
            .find(|&k| self.held.is_char_boundary(n - k) && self.stops.iter().any(|s| s.starts_with(&self.held[n - k..])))
            .unwrap_or(0);
        (self.held.drain(..n - keep).collect(), false)
    }
}

/// How a generation ended: OpenAI's `finish_reason`, the tokens generated, the prompt tokens reused.
struct Outcome {
    finish: &'static str,
    tokens: usize,
    cached: usize,
}

/// Runs `p` on the batcher, handing each piece of text to `emit` (stop strings cut out). `None`: `emit` returned
/// false (the client left), which cancels the generation.
fn generate(m: &Model, p: Params, mut emit: impl FnMut(&str) -> bool) -> std::result::Result<Option<Outcome>, ApiError> {
    let (tx, rx) = mpsc::channel();
    let request = Request { prompt: p.prompt, max_tokens: p.max_tokens, sampler: p.sampler, events: tx };
    m.batcher.submit(request).map_err(|e| ApiError::new(500, "server_error", e.to_string()))?;
    let (mut dec, mut stop) = (StreamDecoder::new(), StopFilter { stops: &p.stop, held: String::new() });
    let mut out = Outcome { finish: "length", tokens: 0, cached: 0 };
    for event in rx.iter() {
        let (piece, end) = match event {
            Event::Started { cached } => {
                out.cached = cached;
                continue;
            }
            Event::Token(t) => {
                out.tokens += 1;
                (dec.push(&m.tok, t), None)
            }
            Event::Done(f) => (dec.finish(), Some(if f == Finish::Stop { "stop" } else { "length" })),
            Event::Failed(e) => return Err(ApiError::new(500, "server_error", format!("the generation failed: {e}"))),
        };
        let (mut text, hit) = stop.push(&piece);
        if end.is_some() && !hit {
            text.push_str(&std::mem::take(&mut stop.held));
        }
        if !(text.is_empty() || emit(&text)) {
            return Ok(None);
        }
        if hit || end.is_some() {
            out.finish = if hit { "stop" } else { end.unwrap_or("length") };
            return Ok(Some(out));
        }
    }
    Err(ApiError::new(500, "server_error", "the model thread stopped"))
}

/// A chat completion (`chat`) or a text completion: whole (the answer returned), or streamed to `conn` (`None`
/// returned; once a stream has begun, a failure is sent as an `{"error": ...}` event).
fn complete(server: &Server, m: &Model, body: &[u8], chat: bool, conn: &mut Conn) -> std::result::Result<Option<(u16, Value)>, ApiError> {
    let p = params(server, m, body, chat)?;
    let (stream, include_usage, prompt_tokens) = (p.stream, p.include_usage, p.prompt.len());
    let (id, created, t0) = (format!("{}-{:016x}", if chat { "chatcmpl" } else { "cmpl" }, fresh()), now(), Instant::now());
    let object = match (chat, stream) {
        (true, false) => "chat.completion",
        (true, true) => "chat.completion.chunk",
        (false, _) => "text_completion",
    };
    let usage = |o: &Outcome| {
        json!({"prompt_tokens": prompt_tokens, "completion_tokens": o.tokens, "total_tokens": prompt_tokens + o.tokens,
               "prompt_tokens_details": {"cached_tokens": o.cached}})
    };
    let frame = |choices: Value| json!({"id": id, "object": object, "created": created, "model": m.name, "choices": choices});
    let (result, answer) = if stream {
        let delta = |text: &str, finish: Option<&str>| match (chat, finish) {
            (true, None) => json!([{"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}]),
            (true, Some(_)) => json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
            (false, _) => json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}]),
        };
        let mut ok = http::start_events(conn);
        if chat {
            ok &=
                http::send_event(conn, frame(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}])));
        }
        let result = generate(m, p, |text| ok && http::send_event(conn, frame(delta(text, None))));
        match &result {
            Ok(Some(o)) => {
                http::send_event(conn, frame(delta("", Some(o.finish))));
                if include_usage {
                    let mut v = frame(json!([]));
                    v["usage"] = usage(o);
                    http::send_event(conn, v);
                }
                http::send_event(conn, "[DONE]");
            }
            Ok(None) => {}
            Err(e) => {
                http::send_event(conn, e.body());
            }
        }
        (result, None)
    } else {
        let mut text = String::new();
        let result = generate(m, p, |t| {
            text.push_str(t);
            !http::client_left(conn)
        });
        let answer = result.as_ref().ok().and_then(Option::as_ref).map(|o| {
            let choice = match chat {
                true => json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": o.finish}),
                false => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": o.finish}),
            };
            let mut v = frame(json!([choice]));
            v["usage"] = usage(o);
            (200, v)
        });
        (result, answer)
    };
    let s = t0.elapsed().as_secs_f64();
    match result {
        Ok(Some(o)) => eprintln!(
            "llm: {id}: {prompt_tokens} prompt tokens ({} cached), {} tokens in {s:.2} s ({:.1} tok/s), {}",
            o.cached,
            o.tokens,
            o.tokens as f64 / s,
            o.finish
        ),
        Ok(None) => eprintln!("llm: {id}: cancelled after {s:.2} s: the client left"),
        Err(e) => {
            eprintln!("llm: {id}: {}", e.message);
            // (a stream has sent it already)
            if !stream {
                return Err(e);
            }
        }
    }
    Ok(answer)
}
