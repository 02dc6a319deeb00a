//! What the `llm --serve` server refuses before any model work: requests a web page on another site could send (a
//! foreign `Host`, as DNS rebinding sends; a foreign `Origin`; a non-JSON API `POST`), and connections past its cap.
//! No model is needed: the server answers these while its model is still "loading" (a load that never ends), and a
//! request that passes the guards gets the 503 "Loading model" answer instead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tinygrad::llm::serve::{serve, Options};

/// A server on a free loopback port whose model never loads.
fn start(opts: Options) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        serve(listener, opts, || loop {
            std::thread::park();
        })
    });
    addr
}

/// Sends `raw`; the status, the head and the body of the answer.
fn request(addr: SocketAddr, raw: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {out:?}"));
    (head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap(), head.to_string(), body.to_string())
}

/// A completions POST with these header lines; its status, head, and the error code of an error answer.
fn post(addr: SocketAddr, headers: &str) -> (u16, String, Option<String>) {
    let body = r#"{"prompt": "Hi", "max_tokens": 2}"#;
    let (status, head, answer) =
        request(addr, &format!("POST /v1/completions HTTP/1.1\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len()));
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("not JSON: {answer}"));
    (status, head, v["error"]["code"].as_str().map(str::to_string))
}

const JSON: &str = "Content-Type: application/json\r\n";

#[test]
fn a_cross_site_request_is_refused() {
    let addr = start(Options::default());
    let own = format!("Host: 127.0.0.1:{}\r\n", addr.port());
    // the request a page on evil.example could make a browser send
    let evil = "Host: evil.example\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n";
    assert_eq!(post(addr, evil).0, 421);
    assert_eq!(post(addr, "Host: evil.example\r\n").2.as_deref(), Some("host_not_allowed"));
    let (status, _, code) = post(addr, &format!("{own}Origin: http://evil.example\r\n{JSON}"));
    assert_eq!((status, code.as_deref()), (403, Some("origin_not_allowed")));
    let (status, _, code) = post(addr, &format!("{own}Content-Type: text/plain\r\n"));
    assert_eq!((status, code.as_deref()), (415, Some("unsupported_media_type")));
    assert_eq!(post(addr, &own).0, 415, "no Content-Type is no JSON");
    // what passes (then meets the model that is loading): the server's own names, its own origin, JSON
    for host in [own.clone(), "Host: localhost\r\n".into(), "Host: [::1]:80\r\n".into(), String::new()] {
        let own_origin = format!("Origin: http://127.0.0.1:{}\r\n", addr.port());
        let origin = if host == own { own_origin.as_str() } else { "" };
        assert_eq!(post(addr, &format!("{host}{origin}Content-Type: application/json; charset=utf-8\r\n")).0, 503, "{host}");
    }
    // the API routes without `/v1` (llama-server's) pass the same guards, and are the same routes
    let body = r#"{"prompt": "Hi"}"#;
    let alias = |method: &str, path: &str, headers: &str| {
        request(addr, &format!("{method} {path} HTTP/1.1\r\n{own}{headers}Content-Length: {}\r\n\r\n{body}", body.len()))
    };
    for (method, path) in [("POST", "/completions"), ("POST", "/chat/completions"), ("GET", "/models")] {
        let (status, _, answer) = alias(method, path, JSON);
        assert_eq!((status, answer.contains("Loading model")), (503, true), "{path}: {answer}");
    }
    assert_eq!(alias("POST", "/completions", "Content-Type: text/plain\r\n").0, 415);
    assert_eq!(alias("POST", "/v1/completion", JSON).0, 404);
    let (status, _, body) = request(addr, &format!("GET /health HTTP/1.1\r\n{own}\r\n"));
    assert_eq!((status, body.as_str()), (503, r#"{"status":"loading model"}"#));
}

#[test]
fn allowed_hosts_and_cors_widen_what_passes() {
    let opts = Options { allowed_hosts: vec!["box.lan".into()], cors: Some("http://localhost:3000".into()), ..Options::default() };
    let addr = start(opts);
    assert_eq!(post(addr, &format!("Host: box.lan:8080\r\n{JSON}")).0, 503);
    assert_eq!(post(addr, &format!("Host: other.lan\r\n{JSON}")).0, 421);
    // the allowed origin: CORS headers on its answers, and its preflight answered
    let (status, head, _) = post(addr, &format!("Host: 127.0.0.1\r\nOrigin: http://localhost:3000\r\n{JSON}"));
    assert_eq!(status, 503);
    assert!(head.contains("Access-Control-Allow-Origin: http://localhost:3000"), "{head}");
    let preflight = "OPTIONS /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n\r\n";
    let (status, head, _) = request(addr, preflight);
    assert_eq!(status, 204);
    assert!(head.contains("Access-Control-Allow-Headers: Authorization, Content-Type"), "{head}");
    // (the headers a preflight asks for are allowed, as the `openai` package's pages send their own; a list that is
    // not header names is not echoed)
    let asks = |h: &str| request(addr, &preflight.replace("\r\n\r\n", &format!("\r\nAccess-Control-Request-Headers: {h}\r\n\r\n"))).1;
    let head = asks("authorization, content-type, x-stainless-lang");
    assert!(head.contains("Access-Control-Allow-Headers: authorization, content-type, x-stainless-lang\r\n"), "{head}");
    let head = asks("x-a: 1");
    assert!(head.contains("Access-Control-Allow-Headers: Authorization, Content-Type\r\n"), "{head}");
    assert_eq!(post(addr, &format!("Host: 127.0.0.1\r\nOrigin: http://localhost:3001\r\n{JSON}")).0, 403);
}

#[test]
fn connections_past_the_cap_get_503() {
    let addr = start(Options { max_connections: 2, ..Options::default() });
    // two idle connections fill the cap; a third is answered at once, and closed
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let (status, _, body) = request(addr, "GET /health HTTP/1.1\r\n\r\n");
    assert!(start.elapsed() < Duration::from_secs(5), "the refusal took {:?}", start.elapsed());
    assert_eq!(status, 503);
    assert!(body.contains("too_many_connections"), "{body}");
    // once they close, a connection is served again
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = request(addr, "GET /health HTTP/1.1\r\n\r\n");
        if body == r#"{"status":"loading model"}"# {
            assert_eq!(status, 503);
            break;
        }
        assert!(Instant::now() < deadline, "still refused after the idle connections closed: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
