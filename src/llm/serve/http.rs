//! HTTP/1.1 for the server, our own on `httparse` (hyper's request parser). In: TCP connections. Out: each
//! connection's request (its [`Head`], then its body) for the API to answer, answers written whole or as
//! server-sent events, and [`Refused`] for a request the API never sees: a malformed one, headers past 64 KiB or 64
//! lines, a chunked body, or a body past [`MAX_BODY`].
//!
//! A thread per connection, at most a given number at once (past it a connection is answered 503 and closed), one
//! request per connection (`Connection: close`). A body is read only after its
//! `Content-Length` is checked against [`MAX_BODY`]. (tiny_http was the other candidate; it holds a streamed
//! response in 8 KiB chunks, which stalls a token stream, and when a request whose body was not read is dropped it
//! allocates the declared length at once: one `Content-Length: 10000000000000` header aborts the process.)

use serde_json::Value;
use std::fmt::Display;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest request body read, in bytes (a larger one is answered 413 before it is read).
pub const MAX_BODY: usize = 1 << 20;
/// The largest request line plus headers, in bytes (431 past it).
const MAX_HEAD: usize = 64 << 10;

/// A client's connection, and the header lines every answer on it carries (CORS's, for an allowed origin).
pub(super) struct Conn {
    pub stream: TcpStream,
    pub headers: String,
}

/// Answers each connection `listener` accepts with `handle`, on a thread of its own, from a thread that accepts
/// until the process ends. Past `max` connections at once, a new one is answered 503 with the JSON `busy` and closed.
pub(super) fn listen(listener: TcpListener, max: usize, busy: Value, handle: impl Fn(Conn) + Send + Sync + 'static) -> JoinHandle<()> {
    let (handle, open) = (Arc::new(handle), Arc::new(AtomicUsize::new(0)));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(stream) if open.load(Ordering::Acquire) >= max => {
                    // (answered on this thread, its request drained for a moment: closing a socket with unread
                    // bytes resets it, and the client may lose the answer)
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    answer_and_close(&mut Conn { stream, headers: String::new() }, 503, &busy, Duration::from_millis(100));
                }
                Ok(stream) => {
                    let (handle, count) = (handle.clone(), open.clone());
                    open.fetch_add(1, Ordering::AcqRel);
                    let spawned = std::thread::Builder::new().name("llm-http".into()).spawn(move || {
                        // (an answer's writes wait a minute at most for a client that stopped reading)
                        let _ = stream.set_write_timeout(Some(Duration::from_secs(60)));
                        let _ = stream.set_nodelay(true);
                        handle(Conn { stream, headers: String::new() });
                        count.fetch_sub(1, Ordering::AcqRel);
                    });
                    // (a thread that can't be spawned drops the connection; the server goes on)
                    if spawned.is_err() {
                        open.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                // (out of file descriptors: wait for connections to close)
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    })
}

/// A request refused before the API sees it: the status, why, and an error `code` where one applies.
pub(super) struct Refused {
    pub status: u16,
    pub message: String,
    pub code: Option<&'static str>,
}

/// A [`Refused`] with no code.
fn refused(status: u16, message: impl Into<String>) -> Refused {
    Refused { status, message: message.into(), code: None }
}

/// A request line, its headers (names in lower case) and the bytes read past them.
pub(super) struct Head {
    pub method: String,
    pub path: String,
    headers: Vec<(String, String)>,
    rest: Vec<u8>,
}

impl Head {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads what has arrived into `buf`, waiting until `deadline` at most: 0 at the end, at the deadline or on an error.
fn read_by(conn: &mut TcpStream, deadline: Instant, buf: &mut [u8]) -> usize {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
        return 0;
    }
    conn.read(buf).unwrap_or(0)
}

/// Reads up to the end of the headers. `None`: the client closed, or sent no whole request by `deadline`.
pub(super) fn read_head(conn: &mut Conn, deadline: Instant) -> std::result::Result<Option<Head>, Refused> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = read_by(&mut conn.stream, deadline, &mut chunk);
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let headers = req.headers.iter().map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()));
                return Ok(Some(Head {
                    method: req.method.unwrap_or("").to_string(),
                    path: req.path.unwrap_or("").to_string(),
                    headers: headers.collect(),
                    rest: buf[len..].to_vec(),
                }));
            }
            Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => {}
            Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
                return Err(refused(431, format!("the request's headers pass {MAX_HEAD} bytes or 64 lines")))
            }
            Err(e) => return Err(refused(400, format!("malformed HTTP request: {e}"))),
        }
    }
}

/// The body `head` announces by its `Content-Length`, at most [`MAX_BODY`] bytes (413 past it, before reading; 411
/// for a chunked body).
pub(super) fn read_body(conn: &mut Conn, head: Head, deadline: Instant) -> std::result::Result<Vec<u8>, Refused> {
    if head.header("transfer-encoding").is_some() {
        return Err(refused(411, "send the body with a Content-Length, not chunked"));
    }
    let len = match head.header("content-length") {
        Some(v) => v.trim().parse::<u64>().map_err(|_| refused(400, format!("Content-Length {v:?} is not a number")))?,
        None => 0,
    };
    if len > MAX_BODY as u64 {
        let e = refused(413, format!("the body's {len} bytes pass the limit of {MAX_BODY}"));
        return Err(Refused { code: Some("request_too_large"), ..e });
    }
    if head.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        conn.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").ok();
    }
    let (len, mut body, mut chunk) = (len as usize, head.rest, vec![0u8; 64 << 10]);
    body.truncate(len);
    while body.len() < len {
        let n = read_by(&mut conn.stream, deadline, &mut chunk[..(len - body.len()).min(64 << 10)]);
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if body.len() < len {
        return Err(refused(400, format!("the body ended after {} of its {len} bytes", body.len())));
    }
    Ok(body)
}

/// Answers `status` with the JSON `body` to a request whose body may be unread, then reads (and drops) what the
/// client still sends for a moment, so closing does not reset the connection before the client has read the answer.
pub(super) fn reject(conn: &mut Conn, status: u16, body: &Value) {
    answer_and_close(conn, status, body, Duration::from_secs(1));
}

/// Answers `status` with the JSON `body`, closes the sending side, and reads what the client still sends for `drain`.
fn answer_and_close(conn: &mut Conn, status: u16, body: &Value, drain: Duration) {
    respond_json(conn, status, body);
    if conn.stream.shutdown(Shutdown::Write).is_ok() {
        let (deadline, mut chunk) = (Instant::now() + drain, [0u8; 8192]);
        while read_by(&mut conn.stream, deadline, &mut chunk) > 0 {}
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Writes a whole answer (a client that has left is nobody's error: the write's failure is dropped).
pub(super) fn respond(conn: &mut Conn, status: u16, content_type: &str, body: &[u8]) {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        reason(status),
        body.len(),
        conn.headers
    )
    .into_bytes();
    out.extend_from_slice(body);
    let _ = conn.stream.write_all(&out);
}

/// Writes a whole JSON answer.
pub(super) fn respond_json(conn: &mut Conn, status: u16, v: &Value) {
    respond(conn, status, "application/json", v.to_string().as_bytes());
}

/// Starts an answer of server-sent events (`text/event-stream`); false when the client has left.
pub(super) fn start_events(conn: &mut Conn) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n{}Connection: close\r\n\r\n",
        conn.headers
    );
    conn.stream.write_all(head.as_bytes()).is_ok()
}

/// Sends one event of `data`; false when the client has left.
pub(super) fn send_event(conn: &mut Conn, data: impl Display) -> bool {
    conn.stream.write_all(format!("data: {data}\n\n").as_bytes()).is_ok()
}

/// Whether the connection to the client is broken (looked at without blocking). A client that only shut down its
/// sending side (end of file: `nc -N`, some proxies) still gets its answer.
pub(super) fn client_left(conn: &Conn) -> bool {
    let conn = &conn.stream;
    if conn.set_nonblocking(true).is_err() {
        return true;
    }
    let r = conn.peek(&mut [0u8; 1]);
    let _ = conn.set_nonblocking(false);
    matches!(r, Err(ref e) if e.kind() != ErrorKind::WouldBlock)
}
