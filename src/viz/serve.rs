//! The viewer's HTTP server: one trace and its own page, on 127.0.0.1 only. In: GET requests. Out: the page
//! (`/`) and JSON routes named as tinygrad's: `/ctxs` (groups and their steps), `/graph-rewrites?ctx=&step=&match=`
//! (a step's graph after its first `match` matches, laid out, with that match's rule and diff), `/code?ctx=` and
//! `/uops?ctx=` (a kernel's source and linear UOps), `/get_profile` (the profiler's events) and `/chrome-trace.json`
//! (the same as Chrome trace JSON, for Perfetto). Anything else is a JSON 404; a bad index a JSON 400.

use super::{layout, TraceFile};
use crate::error::{Error, Result};
use crate::uop::track::{replay, Node};
use crate::uop::Ops;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The page, with its script and styles (no libraries, nothing fetched).
const PAGE: &str = include_str!("index.html");

/// `PORT` from the environment, 8000 when unset or not a port.
pub fn port_from_env() -> u16 {
    std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(8000)
}

/// Binds 127.0.0.1:`port` (0: any free port).
///
/// # Errors
/// [`Error::Serve`] naming `PORT` (and `--port`) when the port is taken.
pub fn bind(port: u16) -> Result<TcpListener> {
    let addr = format!("127.0.0.1:{port}");
    TcpListener::bind(&addr).map_err(|e| Error::Serve { addr, msg: format!("{e}; set PORT (or viz's --port) to a free port") })
}

/// Connections answered at once; past it a connection is answered 503.
const MAX_CONNS: usize = 32;
/// How long a client has to send its request, and each write may wait for it to read.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `trace` on 127.0.0.1:`port` until the process ends.
///
/// # Errors
/// As [`bind`].
pub fn serve(trace: TraceFile, port: u16) -> Result<()> {
    let listener = bind(port)?;
    println!("*** VIZ: serving on http://127.0.0.1:{}", listener.local_addr().map(|a| a.port()).unwrap_or(port));
    serve_on(listener, trace);
    Ok(())
}

/// Answers every connection `listener` accepts, each on a thread of its own (at most [`MAX_CONNS`] at once), for as
/// long as the listener lives.
pub fn serve_on(listener: TcpListener, trace: TraceFile) {
    let (trace, open) = (Arc::new(trace), Arc::new(AtomicUsize::new(0)));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    for mut conn in listener.incoming().flatten() {
        let _ = conn.set_write_timeout(Some(TIMEOUT));
        if open.load(Ordering::Acquire) >= MAX_CONNS {
            respond(&mut conn, 503, "application/json", br#"{"error": "busy"}"#);
            continue;
        }
        open.fetch_add(1, Ordering::AcqRel);
        let (trace, open) = (trace.clone(), open.clone());
        std::thread::spawn(move || {
            handle(conn, &trace, port);
            open.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// Reads one GET request (by [`TIMEOUT`] in all) and answers it. A Host other than this machine's loopback names is
/// refused, so that a web page whose name resolves to 127.0.0.1 (DNS rebinding) can't read the trace.
fn handle(mut conn: TcpStream, t: &TraceFile, port: u16) {
    let deadline = Instant::now() + TIMEOUT;
    let (mut buf, mut chunk) = (Vec::with_capacity(2048), [0u8; 2048]);
    let (path, host) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return;
        }
        let n = match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) if req.method == Some("GET") => {
                let host =
                    req.headers.iter().find(|h| h.name.eq_ignore_ascii_case("host")).map(|h| String::from_utf8_lossy(h.value).to_string());
                break (req.path.unwrap_or("/").to_string(), host);
            }
            Ok(httparse::Status::Partial) if buf.len() < 64 << 10 => continue,
            _ => return respond(&mut conn, 400, "application/json", br#"{"error": "GET requests only"}"#),
        }
    };
    let local = ["127.0.0.1", "localhost", "[::1]"].map(|h| format!("{h}:{port}"));
    if !host.is_some_and(|h| local.contains(&h)) {
        return respond(&mut conn, 403, "application/json", br#"{"error": "open the viewer at http://127.0.0.1:PORT/"}"#);
    }
    let (status, kind, body) = route(t, &path);
    respond(&mut conn, status, kind, &body);
}

fn respond(conn: &mut TcpStream, status: u16, kind: &str, body: &[u8]) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        503 => "Service Unavailable",
        _ => "Not Found",
    };
    let head = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    let _ = conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body));
}

/// The answer to GET `path` (with its query): status, content type, body.
pub fn route(t: &TraceFile, path: &str) -> (u16, &'static str, Vec<u8>) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let q: FxHashMap<&str, &str> = query.split('&').filter_map(|kv| kv.split_once('=')).collect();
    let int = |k: &str| q.get(k).and_then(|v| v.parse::<usize>().ok());
    let json = |status: u16, v: Value| (status, "application/json", serde_json::to_vec(&v).expect("JSON"));
    let groups = &t.trace.groups;
    let group = || int("ctx").and_then(|c| groups.get(c));
    match route {
        "/" | "/index.html" => (200, "text/html; charset=utf-8", PAGE.as_bytes().to_vec()),
        "/ctxs" => json(200, ctxs(t)),
        "/graph-rewrites" => match group().zip(int("step")).and_then(|(g, s)| g.steps.get(s)) {
            Some(step) => json(200, graph_state(t, step, int("match").unwrap_or(0))),
            None => json(400, json!({"error": "no such ctx or step"})),
        },
        "/code" | "/uops" => match group().and_then(|g| g.kernel.as_ref()) {
            Some(k) if route == "/code" => json(200, json!({"name": k.name, "device": k.device, "src": k.src, "lang": "cpp"})),
            Some(k) => json(200, json!({"name": k.name, "src": k.uops.join("\n"), "lang": "uops"})),
            None => json(400, json!({"error": "no such ctx, or it holds no kernel"})),
        },
        "/get_profile" => {
            let events: Vec<Value> = t
                .profile
                .iter()
                .map(|e| json!({"device": e.device, "kind": e.kind, "name": e.name, "st": e.start_ns, "dur": e.dur_ns, "bytes": e.bytes}))
                .collect();
            json(200, json!({ "events": events }))
        }
        "/chrome-trace.json" => json(200, crate::profile::chrome_trace(&t.profile)),
        _ => json(404, json!({"error": format!("no route {route}")})),
    }
}

/// `/ctxs`: each group's name, location, its kernel's name (or null), the kernels it launched (a schedule's:
/// `[name, ctx or null]`), and its steps.
fn ctxs(t: &TraceFile) -> Value {
    let groups: Vec<Value> = t
        .trace
        .groups
        .iter()
        .map(|g| {
            let steps: Vec<Value> = g
                .steps
                .iter()
                .map(|s| json!({"name": s.name, "loc": s.loc, "depth": s.depth, "match_count": s.matches.len(), "error": s.error}))
                .collect();
            json!({"name": g.name, "loc": g.loc, "kernel": g.kernel.as_ref().map(|k| &k.name), "calls": g.calls, "steps": steps})
        })
        .collect();
    Value::Array(groups)
}

/// A node's label lines: op, arg (wrapped at 60 characters, at most 4 lines), dtype unless void.
fn label(n: &Node) -> Vec<String> {
    let mut lines = vec![format!("{:?}", n.op)];
    let arg: Vec<char> = n.arg.chars().collect();
    lines.extend(arg.chunks(60).take(4).map(|c| c.iter().collect::<String>()));
    if n.dtype != "void" {
        lines.push(n.dtype.clone());
    }
    if let Some(tag) = n.tag {
        lines.push(format!("tag {tag}"));
    }
    lines
}

/// A node's fill, by op family (tinygrad's colours).
fn color(op: Ops) -> &'static str {
    use Ops::*;
    match op {
        LOAD => "#ffc0c0",
        STORE => "#87CEEB",
        CONST | VCONST | DEFINE_VAR => "#e0e0e0",
        REDUCE | REDUCE_AXIS => "#FF5B5B",
        RANGE | END => "#c8a0e0",
        RESHAPE | PERMUTE | EXPAND | PAD | SHRINK | FLIP => "#D8F9E4",
        BUFFER | DEFINE_GLOBAL | DEFINE_LOCAL | DEFINE_REG => "#B0BDFF",
        INDEX => "#CEF9B7",
        COPY => "#a040a0",
        CONTIGUOUS => "#FFC14D",
        AFTER | ASSIGN => "#8A7866",
        SINK => "#ffffff",
        o if crate::uop::GroupOp::ALU.contains(o) => "#ffffc0",
        _ => "#f0f0f0",
    }
}

/// The graph under `root` (`get` reads a node by id), sources before users.
fn toposort(get: &dyn Fn(u32) -> Node, root: u32) -> Vec<u32> {
    let (mut out, mut seen, mut stack) = (vec![], FxHashSet::default(), vec![(root, false)]);
    while let Some((u, ready)) = stack.pop() {
        if ready {
            out.push(u);
        } else if seen.insert(u) {
            stack.push((u, true));
            stack.extend(get(u).src.iter().rev().filter(|s| !seen.contains(s)).map(|&s| (s, false)));
        }
    }
    out
}

/// The lines a diff shows of node `u`: its graph, nearest the node first, at most 40 nodes.
fn render(get: &dyn Fn(u32) -> Node, u: u32) -> Vec<String> {
    let topo = toposort(get, u);
    topo.iter()
        .rev()
        .take(40)
        .map(|&i| {
            let n = get(i);
            let src: Vec<String> = n.src.iter().map(|s| format!("%{s}")).collect();
            format!("%{i} = {:?} {} {} ({})", n.op, n.dtype, n.arg, src.join(", "))
        })
        .collect()
}

/// `/graph-rewrites`: the step's graph after its first `k` matches, laid out; the nodes match `k` made; the match.
fn graph_state(t: &TraceFile, step: &crate::uop::track::Step, k: usize) -> Value {
    let nodes = &t.trace.nodes;
    let k = k.min(step.matches.len());
    let mut extra = vec![];
    // (a step whose matches cycle, a runaway rewrite's, shows its input and why)
    let (root, replay_error) = match k {
        0 => (step.sink, None),
        _ => match replay(nodes, &mut extra, step.sink, step.out.filter(|_| k == step.matches.len()), &step.matches[..k]) {
            Ok(root) => (root, None),
            Err(e) => (step.sink, Some(format!("replaying {k} matches: {e}"))),
        },
    };
    let base = nodes.len() as u32;
    let get = |i: u32| if i < base { nodes[i as usize].clone() } else { extra[(i - base) as usize].clone() };
    let topo = toposort(&get, root);
    let at: FxHashMap<u32, usize> = topo.iter().enumerate().map(|(i, &u)| (u, i)).collect();
    let labels: Vec<Vec<String>> = topo.iter().map(|&u| label(&get(u))).collect();
    let size: Vec<(f64, f64)> = labels
        .iter()
        .map(|l| (l.iter().map(|s| s.chars().count()).max().unwrap_or(1) as f64 * 7.0 + 12.0, l.len() as f64 * 14.0 + 8.0))
        .collect();
    let src: Vec<Vec<usize>> = topo.iter().map(|&u| get(u).src.iter().map(|s| at[s]).collect()).collect();
    let lay = layout::layout(&size, &src);
    let graph: Vec<Value> = topo
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            let n = get(u);
            json!({"id": u, "label": labels[i], "color": color(n.op), "x": lay.pos[i].0, "y": lay.pos[i].1, "w": size[i].0, "h": size[i].1, "src": n.src})
        })
        .collect();
    let m = k.checked_sub(1).map(|i| step.matches[i]);
    let changed: Vec<u32> = m.map(|m| toposort(&get, m.after).into_iter().filter(|u| at.contains_key(u)).collect()).unwrap_or_default();
    let matched = m.map(|m| {
        let (before, after) = (render(&get, m.before), render(&get, m.after));
        let (b, a): (FxHashSet<&String>, FxHashSet<&String>) = (before.iter().collect(), after.iter().collect());
        let mut diff: Vec<String> = before.iter().map(|l| format!("{}{l}", if a.contains(l) { ' ' } else { '-' })).collect();
        diff.extend(after.iter().filter(|l| !b.contains(l)).map(|l| format!("+{l}")));
        let rule = &t.trace.rules[m.rule as usize];
        json!({"before": m.before, "after": m.after, "rule_loc": rule.loc, "rule_text": rule.text, "us": m.ns as f64 / 1e3, "diff": diff})
    });
    let error = step.error.iter().chain(&replay_error).cloned().collect::<Vec<_>>().join("\n");
    json!({"name": step.name, "loc": step.loc, "root": root, "match": matched, "match_count": step.matches.len(), "error": (!error.is_empty()).then_some(error),
           "changed": changed, "graph": graph, "width": lay.width, "height": lay.height})
}
