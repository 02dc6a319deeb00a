//! The OpenAI-compatible server: the built `llm --serve` on SmolLM2-135M-Instruct (from `$TINYGRAD_MODELS_DIR`;
//! skipped when absent, except under CI) driven by the official `openai` Python client (tests/serve/openai_client.py,
//! against greedy references from `llm --prompt`), by raw HTTP (malformed, oversized and unknown requests; the API
//! key), and through its chat page in headless Chromium (tests/serve/chat_page.py). The Python tools are looked for in
//! `$TINYGRAD_TEST_PYTHON` (else `python3`); without them the checks that need them print that they skipped, except
//! under CI, which fails naming what to install.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tinygrad::llm::{chat_prompt, models_dir, tokenizer_from_gguf};
use tinygrad::nn::gguf::GgufFile;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The servers share two cores: one test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The model's path, or `None` (skipping) when it is absent outside CI.
fn model() -> Option<String> {
    let path = models_dir().join(MODEL);
    if !path.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI must provide {} (.ci/run fetches it)", path.display());
        eprintln!("skipping: {} is absent", path.display());
        return None;
    }
    Some(path.to_string_lossy().into_owned())
}

/// `$TINYGRAD_TEST_PYTHON` (else `python3`) when it has the package `module`, else `None` (skipping) outside CI.
fn python(module: &str) -> Option<String> {
    let py = std::env::var("TINYGRAD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py).args(["-c", &format!("import {module}")]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI needs `pip install {module}` for {py} (TINYGRAD_TEST_PYTHON); .ci/run does it");
        eprintln!(
            "skipping: {py} lacks the `{module}` package (pip install {module}, or name a Python that has it in TINYGRAD_TEST_PYTHON)"
        );
    }
    ok.then_some(py)
}

/// `llm --serve 0` (a free port) with `args`, killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// Starts the server and waits until `/health` answers 200; a 503 before it must say the model is loading.
    fn start(model: &str, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_llm"))
            .args(["--model", model, "--serve", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start llm --serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        // (the rest of stdout drained, so a later print, DEBUG's say, never meets a closed pipe)
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let addr = line.trim().strip_prefix("listening on http://").map(str::to_string);
        let server = Server { child, addr: addr.unwrap_or_default() };
        assert!(!server.addr.is_empty(), "first line: {line:?}");
        let start = Instant::now();
        loop {
            let (status, body) = server.request("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            match status {
                200 => {
                    assert_eq!(body, r#"{"status":"ok"}"#);
                    return server;
                }
                503 => assert_eq!(body, r#"{"status":"loading model"}"#),
                s => panic!("/health answered {s}: {body}"),
            }
            assert!(start.elapsed() < Duration::from_secs(600), "the model did not load in 10 minutes");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Sends `raw` and returns the status and body of the answer.
    fn request(&self, raw: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        // (a server that stops answering fails the test instead of hanging CI)
        s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {out:?}"));
        (head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("status line: {head}")), body.to_string())
    }

    /// Posts JSON `body` to `path`: the status and the JSON answer.
    fn post(&self, path: &str, body: &str) -> (u16, serde_json::Value) {
        let head =
            format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
        json_answer(self.request(&(head + body)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `llm --prompt TEXT --temperature 0 --count n`: the greedy continuation the server must reproduce.
fn greedy(model: &str, prompt: &str, count: usize) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_llm"))
        .args(["--model", model, "--prompt", prompt, "--temperature", "0", "--count", &count.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "llm --prompt failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

/// An error answer in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, with status `status`.
#[track_caller]
fn check_error((status, v): (u16, serde_json::Value), want: u16, param: Option<&str>, code: Option<&str>) {
    let e = &v["error"];
    assert_eq!(status, want, "{v}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert_eq!(e["type"], "invalid_request_error", "{v}");
    assert_eq!((e["param"].as_str(), e["code"].as_str()), (param, code), "{v}");
}

/// An answer's status and its body parsed as JSON.
fn json_answer((status, body): (u16, String)) -> (u16, serde_json::Value) {
    (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

#[test]
fn raw_http() {
    let Some(model) = model() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = Server::start(&model, &[]);
    let (status, page) = srv.request("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(status, 200);
    for id in ["id=\"messages\"", "id=\"input\"", "id=\"send\""] {
        assert!(page.contains(id), "the chat page lacks {id}");
    }
    let (status, models) = json_answer(srv.request("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    assert_eq!((status, &models["data"][0]["id"]), (200, &"SmolLM2-135M-Instruct.Q4_1".into()));
    let long = format!(r#"{{"prompt": "{}"}}"#, "hello ".repeat(2000));
    let (chat, text, past) = ("/v1/chat/completions", "/v1/completions", Some("context_length_exceeded"));
    for (path, body, param, code) in [
        (chat, "{\"messages\": [", None, None),
        (chat, "[1, 2]", None, None),
        (chat, r#"{"model": "x"}"#, Some("messages"), None),
        (chat, r#"{"messages": [{"role": "user"}]}"#, Some("messages"), None),
        (text, r#"{"prompt": 7}"#, Some("prompt"), None),
        (text, r#"{"prompt": ""}"#, Some("prompt"), None),
        (text, r#"{"prompt": []}"#, Some("prompt"), None),
        (text, r#"{"prompt": ["Hi", "Ho"]}"#, Some("prompt"), None),
        (text, r#"{"prompt": [[1], [2]]}"#, Some("prompt"), None),
        (text, r#"{"prompt": [1, 2.5]}"#, Some("prompt"), None),
        (text, r#"{"prompt": [1, 49152]}"#, Some("prompt"), None),
        (text, r#"{"prompt": [-1]}"#, Some("prompt"), None),
        (text, r#"{"prompt": {"text": "Hi"}}"#, Some("prompt"), None),
        (text, r#"{"prompt": "Hi", "temperature": "hot"}"#, Some("temperature"), None),
        (text, r#"{"prompt": "Hi", "top_p": 1.5}"#, Some("top_p"), None),
        (text, r#"{"prompt": "Hi", "seed": "x"}"#, Some("seed"), None),
        (text, r#"{"prompt": "Hi", "stop": [1]}"#, Some("stop"), None),
        (text, r#"{"prompt": "Hi", "n": 2}"#, Some("n"), None),
        (text, &long, Some("prompt"), past),
        (text, r#"{"prompt": "Hi", "max_tokens": 1000000}"#, Some("prompt"), past),
        (text, r#"{"prompt": "Hi", "max_tokens": 1e30}"#, Some("prompt"), past),
        (text, r#"{"prompt": "Hi", "max_tokens": -1}"#, Some("max_tokens"), None),
        (text, r#"{"prompt": "Hi", "max_tokens": 2.5}"#, Some("max_tokens"), None),
        (chat, r#"{"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 0}"#, Some("max_completion_tokens"), None),
        (text, r#"{"prompt": "Hi", "top_k": 2.5}"#, Some("top_k"), None),
        (text, r#"{"prompt": "Hi", "logprobs": 5}"#, Some("logprobs"), None),
        (chat, r#"{"messages": [{"role": "user", "content": "Hi"}], "logprobs": true}"#, Some("logprobs"), None),
        (text, r#"{"prompt": "Hi", "echo": true}"#, Some("echo"), None),
        (text, r#"{"prompt": "Hi", "stream": "yes"}"#, Some("stream"), None),
        (text, r#"{"prompt": "Hi", "presence_penalty": 3}"#, Some("presence_penalty"), None),
        (text, r#"{"prompt": "Hi", "frequency_penalty": "x"}"#, Some("frequency_penalty"), None),
        (text, r#"{"prompt": "Hi", "logit_bias": {"abc": 1}}"#, Some("logit_bias"), None),
        (text, r#"{"prompt": "Hi", "logit_bias": {"5": 101}}"#, Some("logit_bias"), None),
        (text, r#"{"prompt": "Hi", "logit_bias": {"49152": 1}}"#, Some("logit_bias"), None),
        (text, r#"{"prompt": "Hi", "logit_bias": [1]}"#, Some("logit_bias"), None),
        (
            chat,
            r#"{"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_object"}}"#,
            Some("response_format"),
            None,
        ),
        (chat, r#"{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function"}]}"#, Some("tools"), None),
        (chat, r#"{"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required"}"#, Some("tool_choice"), None),
        (text, r#"{"prompt": "Hi", "logit_bias": {"05": 1}}"#, Some("logit_bias"), None),
        (text, r#"{"prompt": "Hi", "stream": true, "stream_options": {"include_usage": 1}}"#, Some("stream_options"), None),
    ] {
        check_error(srv.post(path, body), 400, param, code);
    }
    let (_, v) = srv.post(text, r#"{"prompt": "Hi", "max_tokens": -1}"#);
    assert_eq!(v["error"]["message"], "`max_tokens` must be a whole number of at least 1, not -1");
    let (_, v) = srv.post(text, r#"{"prompt": "Hi", "max_tokens": 1e300}"#);
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.contains("you requested 1e300 tokens (") && m.contains(" in the prompt, 1e300 in the completion)"), "{m}");
    let chat_none = r#"{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "logprobs": false, "top_logprobs": 0}"#;
    assert_eq!(srv.post(chat, chat_none).0, 200);
    // bodies past 1 MiB are refused by their Content-Length, before being read (one claims 10 TB)
    for len in [(1 << 20) + 1, 10_000_000_000_000u64] {
        let answer = srv.request(&format!("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n{{\"prompt\""));
        check_error(json_answer(answer), 413, None, Some("request_too_large"));
    }
    let chunked =
        "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    check_error(json_answer(srv.request(chunked)), 411, None, None);
    let huge_header = format!("GET /health HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(70_000));
    check_error(json_answer(srv.request(&huge_header)), 431, None, None);
    check_error(json_answer(srv.request("GET /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")), 404, None, None);
    check_error(json_answer(srv.request("DELETE /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")), 405, None, None);
    check_error(json_answer(srv.request("NOT HTTP\r\n\r\n")), 400, None, None);
    // a client that leaves before the answer, then one that sends half a body and leaves
    drop(TcpStream::connect(&srv.addr).unwrap());
    let mut half = TcpStream::connect(&srv.addr).unwrap();
    half.write_all(b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pro").unwrap();
    drop(half);
    // still serving, and right: a greedy completion equals `llm --prompt`'s
    // (with the values clients send for "none" of what is refused above)
    let none = concat!(
        r#""n": 1, "logprobs": 0, "echo": false, "suffix": null, "best_of": 1, "stream": false, "stream_options": null, "top_k": 1e30, "#,
        r#""presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}, "response_format": {"type": "text"}, "tools": [], "#,
        r#""tool_choice": "none""#
    );
    let (status, v) =
        srv.post("/v1/completions", &format!(r#"{{"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, {none}}}"#));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["text"].as_str().unwrap(), greedy(&model, "The capital of France is", 8));
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!((v["usage"]["prompt_tokens"].as_u64(), v["usage"]["completion_tokens"].as_u64()), (Some(5), Some(8)));
    // OpenAI's other forms of one prompt: a list of one string, its token ids, a list of one list of them
    let ids = tokenizer_from_gguf(&GgufFile::open(&model).unwrap()).unwrap().encode_prompt("The capital of France is");
    let ids = serde_json::to_string(&ids).unwrap();
    for prompt in [r#"["The capital of France is"]"#.to_string(), ids.clone(), format!("[{ids}]")] {
        let (status, v) = srv.post("/completions", &format!(r#"{{"prompt": {prompt}, "max_tokens": 8, "temperature": 0}}"#));
        assert_eq!(
            (status, v["choices"][0]["text"].as_str()),
            (200, Some(greedy(&model, "The capital of France is", 8).as_str())),
            "{prompt}"
        );
        assert_eq!(v["usage"]["prompt_tokens"].as_u64(), Some(5), "{prompt}");
    }
    // an assistant turn with null content is an empty turn, as `""` is; null elsewhere, and tool calls, are refused
    for body in [
        r#"{"messages": [{"role": "user", "content": null}]}"#,
        r#"{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}, {"role": "user", "content": "Hi"}]}"#,
    ] {
        check_error(srv.post(chat, body), 400, Some("messages"), None);
    }
    let turns = |c: &str| {
        format!(
            r#"{{"messages": [{{"role": "user", "content": "Hi"}}, {{"role": "assistant", "content": {c}}}, {{"role": "user", "content": "Hi"}}], "max_tokens": 4, "temperature": 0}}"#
        )
    };
    let (null, empty) = (srv.post(chat, &turns("null")), srv.post(chat, &turns(r#""""#)));
    let seen = |v: &serde_json::Value| (v["choices"].clone(), v["usage"]["prompt_tokens"].clone());
    assert_eq!((null.0, seen(&null.1)), (200, seen(&empty.1)), "{}", null.1);
    // a bias of 100 on one token: every greedy token is that one
    let bang = tokenizer_from_gguf(&GgufFile::open(&model).unwrap()).unwrap().encode("!");
    assert_eq!(bang.len(), 1, "{bang:?}");
    let body = format!(r#"{{"prompt": "Hi", "max_tokens": 3, "temperature": 0, "logit_bias": {{"{}": 100}}}}"#, bang[0]);
    let (status, v) = srv.post(text, &body);
    assert_eq!((status, v["choices"][0]["text"].as_str()), (200, Some("!!!")), "{v}");
    assert_eq!(srv.request("GET /health HTTP/1.1\r\n\r\n"), (200, r#"{"status":"ok"}"#.into()));
}

/// Runs `script` (in tests/serve/) with `args`, failing with its output when it fails.
fn run_script(py: &str, script: &str, args: &[&str]) {
    let out = Command::new(py).arg(format!("{}/tests/serve/{script}", env!("CARGO_MANIFEST_DIR"))).args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
}

#[test]
fn openai_client() {
    let Some(model) = model() else { return };
    let Some(py) = python("openai") else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // greedy references from `llm --prompt` for the chat prompts the script sends (a conversation and its next turn)
    let file = GgufFile::open(&model).unwrap();
    let tok = tokenizer_from_gguf(&file).unwrap();
    let (q1, q2, count) = ("What is the capital of France?", "And of Germany?", 24);
    let turn1 = chat_prompt(&file, &tok, &[("user", q1)]).unwrap();
    let a1 = greedy(&model, &turn1, count);
    let turn2 = chat_prompt(&file, &tok, &[("user", q1), ("assistant", &a1), ("user", q2)]).unwrap();
    let a2 = greedy(&model, &turn2, count);
    let expected = serde_json::json!({"count": count, "turns": [[q1, a1, turn1], [q2, a2, turn2]]}).to_string();
    let srv = Server::start(&model, &["--slots", "4"]);
    run_script(&py, "openai_client.py", &["api", &format!("http://{}", srv.addr), &expected]);
}

#[test]
fn api_key() {
    let Some(model) = model() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // (its /health and / answer without the key, as llama-server's public routes)
    let srv = Server::start(&model, &["--api-key", "sesame"]);
    assert_eq!(srv.request("GET / HTTP/1.1\r\n\r\n").0, 200);
    let body = r#"{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}"#;
    let post = |auth: &str| {
        json_answer(srv.request(&format!(
            "POST /v1/chat/completions HTTP/1.1\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )))
    };
    for auth in ["", "Authorization: Bearer sesamE\r\n", "Authorization: sesame\r\n"] {
        check_error(post(auth), 401, None, Some("invalid_api_key"));
    }
    check_error(json_answer(srv.request("GET /v1/nothing HTTP/1.1\r\n\r\n")), 401, None, Some("invalid_api_key"));
    // (the scheme in any case, as RFC 9110 says)
    for auth in ["Authorization: Bearer sesame\r\n", "Authorization: bearer sesame\r\n"] {
        let (status, v) = post(auth);
        assert_eq!((status, v["usage"]["completion_tokens"].as_u64()), (200, Some(2)), "{auth}: {v}");
    }
    if let Some(py) = python("openai") {
        run_script(&py, "openai_client.py", &["auth", &format!("http://{}", srv.addr), "sesame"]);
    }
}

#[test]
fn chat_page() {
    let Some(model) = model() else { return };
    let Some(py) = python("selenium") else { return };
    let missing: Vec<&str> =
        ["/usr/bin/chromium", "/usr/bin/chromedriver"].into_iter().filter(|p| !std::path::Path::new(p).exists()).collect();
    if !missing.is_empty() {
        assert!(std::env::var_os("CI").is_none(), "CI needs {missing:?}: apt-get install chromium chromium-driver (.ci/run does)");
        eprintln!("skipping: no {missing:?} (apt-get install chromium chromium-driver)");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = Server::start(&model, &[]);
    run_script(&py, "chat_page.py", &[&format!("http://{}", srv.addr)]);
}

/// `llm --prompt` under `DEBUG=2` (each kernel printed, from the CPU's worker threads) finishes, printing its kernels:
/// the binary once held stdout's lock across a decode step, and the workers' prints waited for it forever.
#[test]
fn prompt_under_debug_finishes() {
    let Some(model) = model() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_llm"))
        .args(["--model", &model, "--prompt", "Hi", "--temperature", "0", "--count", "3"])
        .env("DEBUG", "2")
        .env("JIT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start llm --prompt");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s)
    });
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("llm --prompt under DEBUG=2 did not finish in 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = reader.join().unwrap().unwrap();
    // (the streamed pieces interleave with DEBUG's lines, so only these are checked)
    assert!(out.lines().filter(|l| l.starts_with("*** CPU")).count() > 100, "too few kernel lines under DEBUG=2:\n{out}");
}
