//! VIZ (tinygrad `VIZ=1`): the trace file and its viewer. In: what [`crate::uop::track`] recorded (every graph
//! rewrite, kernel and group) and the [`crate::profile`] events. Out: the trace file (JSON, format below) written at
//! exit, and the viewer: an HTTP server on 127.0.0.1 ([`serve`]) whose page lists the groups and steps, draws each
//! step's graph match by match (laid out by [`layout`]), shows kernels' source and UOps and the profiler timeline.
//!
//! Trace file, version 1 (`"format": "tinygrad-rs viz"`), one JSON object:
//! - `nodes`: `[op, dtype, arg, tag, [src ids]]` per node, ids by position, sources before users.
//! - `rules`: `[location, text]` per rule that matched.
//! - `groups`: `{name, loc, kernel, calls, steps}`; `kernel` is null or `{name, device, src, uops}`; `calls` (a
//!   schedule's) `[kernel name, its group or null]` per kernel launched; each step is `{name, loc, depth, sink, out,
//!   error, matches}` with `matches` as `[before, after, rule, ns]`.
//! - `profile`: `{device, kind, name, start_ns, dur_ns, bytes}` per event ([`crate::profile::Event`]).

pub mod layout;
pub mod serve;

use crate::error::{Error, Result};
use crate::helpers::VIZ;
use crate::profile::{self, Event};
use crate::uop::track::{self, Group, Kernel, Match, Node, RuleInfo, Step, Trace};
use crate::uop::Ops;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The trace file's `format` field.
pub const FORMAT: &str = "tinygrad-rs viz";
/// The trace file's version; a reader refuses others.
pub const VERSION: u64 = 1;

/// A trace as the file holds it: the recorded rewrites and the profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceFile {
    /// The rewrites, groups and kernels.
    pub trace: Trace,
    /// The profiler's events.
    pub profile: Vec<Event>,
}

/// `t` as the trace file's JSON.
pub fn to_json(t: &TraceFile) -> Value {
    let nodes: Vec<Value> = t.trace.nodes.iter().map(|n| json!([format!("{:?}", n.op), n.dtype, n.arg, n.tag, n.src])).collect();
    let rules: Vec<Value> = t.trace.rules.iter().map(|r| json!([r.loc, r.text])).collect();
    let groups: Vec<Value> = t
        .trace
        .groups
        .iter()
        .map(|g| {
            let steps: Vec<Value> = g
                .steps
                .iter()
                .map(|s| {
                    let m: Vec<Value> = s.matches.iter().map(|m| json!([m.before, m.after, m.rule, m.ns])).collect();
                    json!({"name": s.name, "loc": s.loc, "depth": s.depth, "sink": s.sink, "out": s.out, "error": s.error, "matches": m})
                })
                .collect();
            let kernel = g.kernel.as_ref().map(|k| json!({"name": k.name, "device": k.device, "src": k.src, "uops": k.uops}));
            json!({"name": g.name, "loc": g.loc, "kernel": kernel, "steps": steps, "calls": g.calls})
        })
        .collect();
    let profile: Vec<Value> = t
        .profile
        .iter()
        .map(|e| json!({"device": e.device, "kind": e.kind, "name": e.name, "start_ns": e.start_ns, "dur_ns": e.dur_ns, "bytes": e.bytes}))
        .collect();
    json!({"format": FORMAT, "version": VERSION, "nodes": nodes, "rules": rules, "groups": groups, "profile": profile})
}

/// Reads a trace from the file's JSON `v`; `path` names it in errors.
///
/// # Errors
/// [`Error::Format`] for another format or version, or a malformed field (a trace never loads half read).
pub fn from_json(v: &Value, path: &Path) -> Result<TraceFile> {
    let fmt = |msg: String| Error::Format { path: path.into(), msg };
    let bad = |field: &str| fmt(format!("not a tinygrad-rs viz trace (bad or missing {field}); write one with VIZ=-1"));
    if v["format"] != FORMAT {
        return Err(bad("format"));
    }
    if v["version"].as_u64() != Some(VERSION) {
        return Err(fmt(format!("trace version {} (this viewer reads version {VERSION}); record it again", v["version"])));
    }
    let ops: rustc_hash::FxHashMap<String, Ops> = Ops::ALL.iter().map(|o| (format!("{o:?}"), *o)).collect();
    let s = |v: &Value, f: &str| v.as_str().map(str::to_string).ok_or_else(|| bad(f));
    let u = |v: &Value, f: &str| v.as_u64().ok_or_else(|| bad(f));
    let id = |v: &Value, f: &str| v.as_u64().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| bad(f));
    let mut nodes = vec![];
    for n in array(&v["nodes"], || bad("nodes"))? {
        let op = *ops.get(n[0].as_str().unwrap_or("")).ok_or_else(|| bad("node op"))?;
        let src = array(&n[4], || bad("node src"))?.iter().map(|x| id(x, "node src")).collect::<Result<Vec<_>>>()?;
        if src.iter().any(|&x| x as usize >= nodes.len()) {
            return Err(bad("node src"));
        }
        let tag = if n[3].is_null() { None } else { Some(id(&n[3], "node tag")?) };
        nodes.push(Node { op, dtype: s(&n[1], "node dtype")?, arg: s(&n[2], "node arg")?, tag, src });
    }
    let rules: Vec<RuleInfo> = array(&v["rules"], || bad("rules"))?
        .iter()
        .map(|r| Ok(RuleInfo { loc: s(&r[0], "rule")?, text: s(&r[1], "rule")? }))
        .collect::<Result<_>>()?;
    let node = |x: &Value, f: &str| id(x, f).and_then(|x| if (x as usize) < nodes.len() { Ok(x) } else { Err(bad(f)) });
    let mut groups = vec![];
    for g in array(&v["groups"], || bad("groups"))? {
        let mut steps = vec![];
        for st in array(&g["steps"], || bad("steps"))? {
            let matches = array(&st["matches"], || bad("matches"))?
                .iter()
                .map(|m| {
                    Ok(Match {
                        before: node(&m[0], "match")?,
                        after: node(&m[1], "match")?,
                        rule: id(&m[2], "match")?,
                        ns: u(&m[3], "match")?,
                    })
                })
                .collect::<Result<_>>()?;
            let out = if st["out"].is_null() { None } else { Some(node(&st["out"], "step out")?) };
            let error = st["error"].as_str().map(str::to_string);
            let depth = id(&st["depth"], "step depth")?;
            steps.push(Step {
                name: s(&st["name"], "step name")?,
                loc: s(&st["loc"], "step loc")?,
                depth,
                sink: node(&st["sink"], "step sink")?,
                out,
                matches,
                error,
            });
        }
        let kernel = match &g["kernel"] {
            Value::Null => None,
            k => Some(Kernel {
                name: s(&k["name"], "kernel name")?,
                device: s(&k["device"], "kernel device")?,
                src: s(&k["src"], "kernel src")?,
                uops: array(&k["uops"], || bad("kernel uops"))?.iter().map(|x| s(x, "kernel uops")).collect::<Result<_>>()?,
            }),
        };
        let calls = array(&g["calls"], || bad("group calls"))?
            .iter()
            .map(|c| Ok((s(&c[0], "call")?, if c[1].is_null() { None } else { Some(id(&c[1], "call")?) })))
            .collect::<Result<_>>()?;
        groups.push(Group { name: s(&g["name"], "group name")?, loc: s(&g["loc"], "group loc")?, steps, kernel, calls });
    }
    let kinds = ["schedule", "compile", "launch", "copy", "alloc", "free"];
    let mut events = vec![];
    for e in array(&v["profile"], || bad("profile"))? {
        let kind = kinds.into_iter().find(|k| e["kind"] == *k).ok_or_else(|| bad("profile kind"))?;
        events.push(Event {
            device: s(&e["device"], "profile device")?,
            kind,
            name: s(&e["name"], "profile name")?,
            start_ns: u(&e["start_ns"], "profile start_ns")?,
            dur_ns: u(&e["dur_ns"], "profile dur_ns")?,
            bytes: u(&e["bytes"], "profile bytes")?,
        });
    }
    if groups.iter().flat_map(|g: &Group| &g.steps).flat_map(|s| &s.matches).any(|m| m.rule as usize >= rules.len()) {
        return Err(bad("match rule"));
    }
    if groups.iter().flat_map(|g| &g.calls).any(|c| c.1.is_some_and(|k| k as usize >= groups.len())) {
        return Err(bad("call"));
    }
    Ok(TraceFile { trace: Trace { nodes, rules, groups }, profile: events })
}

/// `v`'s elements in place (the file's arrays are read, not copied), else `bad()`'s error.
fn array(v: &Value, bad: impl FnOnce() -> Error) -> Result<&[Value]> {
    v.as_array().map(Vec::as_slice).ok_or_else(bad)
}

/// Writes `t` to `path` (a temporary file beside it, then renamed: an existing trace is never left half written).
///
/// # Errors
/// [`Error::Io`] naming the path.
pub fn save(t: &TraceFile, path: &Path) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let io = |source| Error::Io { path: path.into(), source };
    std::fs::write(&tmp, serde_json::to_vec(&to_json(t)).expect("JSON of plain data")).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Reads the trace file at `path`.
///
/// # Errors
/// [`Error::Io`] when unreadable; [`Error::Format`] when not JSON or not a trace this version reads.
pub fn load(path: &Path) -> Result<TraceFile> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.into(), source })?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| Error::Format { path: path.into(), msg: format!("not JSON ({e})") })?;
    from_json(&v, path)
}

/// Everything recorded in this process so far.
pub fn recorded() -> TraceFile {
    TraceFile { trace: track::trace(), profile: profile::events() }
}

/// Where the exit hook writes the trace: `VIZ_PATH`, else `tinygrad_viz_<pid>.json` in the temp directory.
pub fn default_path() -> PathBuf {
    std::env::var_os("VIZ_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tinygrad_viz_{}.json", std::process::id())))
}

/// What VIZ (or PROFILE alone: the profile as Chrome trace JSON) does at exit: writes the trace (and its profile as Chrome trace JSON beside it, `*.chrome.json`); under
/// `VIZ=1` with stdout a terminal, serves the viewer until interrupted, else prints how to open the file.
pub fn at_exit() {
    let t = recorded();
    if crate::helpers::getenv("VIZ", 0) == 0 {
        // PROFILE=1 alone: the profile, for Perfetto
        let path = std::env::temp_dir().join(format!("tinygrad_profile_{}.json", std::process::id()));
        match std::fs::write(&path, profile::chrome_trace(&t.profile).to_string()) {
            Ok(()) => println!("PROFILE: {} events saved to {} (open it in https://ui.perfetto.dev)", t.profile.len(), path.display()),
            Err(e) => eprintln!("PROFILE: {}: {e}", path.display()),
        }
        return;
    }
    if t.trace.groups.is_empty() && t.profile.is_empty() {
        return;
    }
    let path = default_path();
    if let Err(e) = save(&t, &path) {
        eprintln!("VIZ: {e}");
        return;
    }
    // the profile also as Chrome trace JSON, for Perfetto
    let chrome = path.with_extension("chrome.json");
    if let Err(e) = std::fs::write(&chrome, profile::chrome_trace(&t.profile).to_string()) {
        eprintln!("VIZ: {}: {e}", chrome.display());
    }
    let steps: usize = t.trace.groups.iter().map(|g| g.steps.len()).sum();
    let matches: usize = t.trace.groups.iter().flat_map(|g| &g.steps).map(|s| s.matches.len()).sum();
    println!(
        "VIZ: rewrote {steps} graphs and matched {matches} times, saved to {} (profile for Perfetto: {})",
        path.display(),
        chrome.display()
    );
    use std::io::IsTerminal;
    if VIZ.value() >= 1 && std::io::stdout().is_terminal() {
        if let Err(e) = serve::serve(t, serve::port_from_env()) {
            eprintln!("VIZ: {e}");
        }
    } else {
        println!("view it with: cargo run --release --bin viz -- {}", path.display());
    }
}

/// Registers [`at_exit`] to run when the process exits (once; the engine calls this when it opens a device under
/// `VIZ` or `PROFILE`).
pub fn register_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn hook() {
        // (a panic must not unwind into libc)
        let _ = std::panic::catch_unwind(at_exit);
    }
    extern "C" {
        fn atexit(f: extern "C" fn()) -> std::os::raw::c_int;
    }
    // SAFETY: `hook` is a plain `extern "C"` function with no arguments that never unwinds, as atexit requires.
    ONCE.call_once(|| unsafe {
        atexit(hook);
    });
}
