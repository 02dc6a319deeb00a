//! VIZ: what the recorder keeps of fixed programs (tinygrad's test/null/test_viz.py cases: `(a+0)*1` under the
//! symbolic rules is one group, one step, two matches; nested rewrites; a failing rule; the schedule and kernel
//! groups of a realize), replaying every recorded step of a beautiful_mnist training step back to its recorded
//! output, the trace file, and the viewer's routes over HTTP.

#[path = "../examples/beautiful_mnist/model.rs"]
mod model;

use std::io::{Read, Write};
use std::sync::Mutex;
use tinygrad::helpers::{Context, TRACK_MATCH_STATS, VIZ};
use tinygrad::uop::symbolic::SYMBOLIC;
use tinygrad::uop::{graph_rewrite, track, var, Ops, PatternMatcher, UOp};
use tinygrad::viz::{self, serve, TraceFile};
use tinygrad::{pm, Tensor};

/// The recorder is one per process: tests that record run one at a time, each starting from an empty trace.
static SERIAL: Mutex<()> = Mutex::new(());

/// What `f` records under `VIZ=1` on this thread (nothing else is recorded meanwhile: see [`SERIAL`]).
fn recorded<R>(f: impl FnOnce() -> R) -> (R, track::Trace) {
    track::take();
    let r = Context::with(&[(&VIZ, 1)], f);
    (r, track::take())
}

/// `(a+0)*1` with `a` a variable in [0, 10].
fn a_plus_0_times_1() -> UOp {
    let a = UOp::variable("a", 0, 10);
    (a + 0) * 1
}

#[test]
fn a_plus_0_times_1_is_one_group_one_step_two_matches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (out, t) = recorded(|| graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym"));
    assert_eq!(out.op, Ops::DEFINE_VAR);
    assert_eq!(t.groups.len(), 1);
    let g = &t.groups[0];
    assert!(g.name.starts_with("tests/viz.rs:"), "a rewrite outside any group is grouped by its caller: {}", g.name);
    assert_eq!(g.steps.len(), 1);
    let s = &g.steps[0];
    assert_eq!((s.name.as_str(), s.depth, s.matches.len(), s.error.as_ref()), ("sym", 0, 2, None));
    assert!(s.loc.starts_with("tests/viz.rs:"), "the step's location is graph_rewrite's caller: {}", s.loc);
    // x+0 -> x, then x*1 -> x; the rules' text is as written in src/uop/symbolic.rs
    let rules: Vec<&str> = s.matches.iter().map(|m| t.rules[m.rule as usize].text.as_str()).collect();
    assert!(rules[0].contains('0') && rules[1].contains('1'), "{rules:?}");
    assert!(s.matches.iter().all(|m| t.rules[m.rule as usize].loc.contains("symbolic.rs")));
    assert_eq!(t.nodes[s.matches[0].after as usize].op, Ops::DEFINE_VAR);
    assert_eq!(t.nodes[s.out.unwrap() as usize].op, Ops::DEFINE_VAR);
    // the same program records the same trace, ids included
    let (_, again) = recorded(|| graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym"));
    assert_eq!(again.nodes, t.nodes);
    assert_eq!(
        again.groups[0].steps[0].matches.iter().map(|m| (m.before, m.after)).collect::<Vec<_>>(),
        s.matches.iter().map(|m| (m.before, m.after)).collect::<Vec<_>>()
    );
    // TRACK_MATCH_STATS=2 records too; off, nothing is recorded
    track::take();
    Context::with(&[(&TRACK_MATCH_STATS, 2)], || graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym"));
    graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym");
    assert_eq!(track::take().groups[0].steps.len(), 1);
}

#[test]
fn a_rewrite_a_rule_calls_nests_one_deeper_and_a_failing_rule_is_an_error_step() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // a rule on MUL that simplifies its sources with a rewrite of its own
    let outer: PatternMatcher = pm! { var("x") * var("y") => |x, y| {
        let s = graph_rewrite(&(x.clone() + 0), &SYMBOLIC, &mut (), "inner");
        (s != *x).then(|| s * y.clone())
    } };
    let ((), t) = recorded(|| {
        graph_rewrite(&(UOp::variable("b", 0, 5) * 3), &outer, &mut (), "outer");
    });
    let steps: Vec<(&str, u32)> = t.groups[0].steps.iter().map(|s| (s.name.as_str(), s.depth)).collect();
    // (the rule runs once per order of the commutative MUL's sources: two inner rewrites, each under the outer one)
    assert_eq!(steps, [("outer", 0), ("inner", 1), ("inner", 1)]);
    assert_eq!(t.groups.len(), 1, "a rewrite a rule calls joins its caller's group");
    assert_eq!(t.groups[0].steps[1].matches.len(), 1);
    // a rule that panics on its second match: the step records the first match and the panic's message
    let failing: PatternMatcher = pm! { var("x") + 1 => |x| {
        assert!(x.op != Ops::ADD, "rule refused {:?}", x.op);
        x.clone() + 2
    } };
    let (r, t) = recorded(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            graph_rewrite(&((UOp::variable("c", 0, 5) + 1) + 1), &failing, &mut (), "fails")
        }))
    });
    assert!(r.is_err(), "the panic goes on to the caller");
    let s = &t.groups[0].steps[0];
    assert_eq!(s.matches.len(), 1);
    assert!(s.out.is_none());
    assert!(s.error.as_deref().unwrap_or("").contains("rule refused ADD"), "{:?}", s.error);
}

#[test]
fn a_realize_records_its_schedule_and_kernel_groups_and_the_profile() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (v, t) = recorded(|| (Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [7]) * 3.0 + 1.0).sum(..).item::<f32>().unwrap());
    assert_eq!(v, 91.0);
    let names: Vec<&str> = t.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names[0], "Schedule 1 Kernel", "{names:?}");
    let kernels: Vec<&track::Kernel> = t.groups.iter().filter_map(|g| g.kernel.as_ref()).collect();
    assert_eq!(kernels.len(), 1, "{names:?}");
    let g = t.groups.iter().find(|g| g.kernel.is_some()).unwrap();
    assert_eq!(g.name, kernels[0].name, "a kernel's group is named by the kernel");
    assert!(kernels[0].src.contains(&kernels[0].name) && !kernels[0].uops.is_empty());
    assert!(g.steps.iter().any(|s| s.name == "simplify and reduce collapse"), "{:?}", g.steps.iter().map(|s| &s.name).collect::<Vec<_>>());
    let k = t.groups.iter().position(|g| g.kernel.is_some()).unwrap() as u32;
    assert_eq!(t.groups[0].calls, [(kernels[0].name.clone(), Some(k))], "the schedule names the kernel it launched");
    let p = tinygrad::profile::events();
    assert!(p.iter().any(|e| e.kind == "launch" && e.name.contains(&kernels[0].name[..1])), "{p:?}");
    assert!(p.iter().any(|e| e.kind == "schedule") && p.iter().any(|e| e.kind == "compile"));
}

#[test]
fn replaying_each_step_of_a_beautiful_mnist_training_step_gives_its_recorded_output() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Tensor::manual_seed(3);
    let m = model::Model::new();
    let opt = tinygrad::nn::optim::adam_with(&tinygrad::nn::Module::get_parameters(&m), Default::default());
    let x = Tensor::rand([4, 1, 28, 28]);
    let y = Tensor::from_slice(&[1i32, 7, 3, 0], [4]);
    let (loss, t) = recorded(|| m.train_step(&opt, &x, &y).unwrap().item::<f32>().unwrap());
    assert!(loss.is_finite());
    let steps: Vec<&track::Step> = t.groups.iter().flat_map(|g| &g.steps).collect();
    let kernels = t.groups.iter().filter(|g| g.kernel.is_some()).count();
    assert!(kernels >= 10 && steps.len() > 3 * kernels, "{kernels} kernels, {} steps", steps.len());
    // every kernel each schedule launched is listed under it, linked to the group of its compile where it was
    // compiled in this step (a kernel compiled by an earlier schedule is launched again, not compiled)
    let scheduled: usize = t.groups.iter().filter_map(|g| g.name.strip_prefix("Schedule ")?.split(' ').next()?.parse::<usize>().ok()).sum();
    let calls: Vec<&(String, Option<u32>)> = t.groups.iter().flat_map(|g| &g.calls).collect();
    assert_eq!(calls.len(), scheduled);
    // (kernels another test compiled earlier in this process, e.g. Adam's, link to nothing)
    let linked: Vec<_> = calls.iter().filter_map(|(name, k)| Some((name, (*k)?))).collect();
    assert!(linked.len() >= 10, "{} of {} launched kernels linked", linked.len(), calls.len());
    for (name, k) in linked {
        assert_eq!(&t.groups[k as usize].kernel.as_ref().unwrap().name, name);
    }
    let (mut replayed, mut matched) = (0, 0);
    for s in steps {
        let mut extra = vec![];
        let got = track::replay(&t.nodes, &mut extra, s.sink, s.out, &s.matches).unwrap();
        assert_eq!(Some(got), s.out, "step {} at {}: replaying {} matches", s.name, s.loc, s.matches.len());
        replayed += 1;
        matched += s.matches.len();
    }
    assert!(replayed > 0 && matched > 1000, "{replayed} steps, {matched} matches");
}

#[test]
fn replaying_matches_that_cycle_is_an_error_not_a_hang() {
    // a runaway rewrite records n -> m and m -> n
    let node = |arg: &str| track::Node { op: Ops::CONST, dtype: "int".into(), arg: arg.into(), tag: None, src: vec![] };
    let nodes = vec![node("3"), node("4")];
    let m = |before, after| track::Match { before, after, rule: 0, ns: 0 };
    let err = track::replay(&nodes, &mut vec![], 0, None, &[m(0, 1), m(1, 0)]).unwrap_err();
    assert!(err.contains("cycle"), "{err}");
    assert_eq!(track::replay(&nodes, &mut vec![], 0, None, &[m(0, 1)]), Ok(1));
}

#[test]
fn the_trace_file_round_trips_and_bad_files_are_one_line_errors() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ((), trace) = recorded(|| {
        graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym");
    });
    let t = TraceFile { trace, profile: vec![] };
    let dir = std::env::temp_dir().join(format!("viz_test_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    viz::save(&t, &path).unwrap();
    assert_eq!(viz::load(&path).unwrap(), t);
    let text = std::fs::read_to_string(&path).unwrap();
    for (bad, want) in [
        (text[..text.len() / 2].to_string(), "not JSON"),
        (text.replace("\"version\":1", "\"version\":7"), "trace version 7"),
        (text.replace("tinygrad-rs viz", "other"), "bad or missing format"),
        ("{}".to_string(), "bad or missing format"),
    ] {
        std::fs::write(&path, bad).unwrap();
        let e = viz::load(&path).unwrap_err().to_string();
        assert!(e.contains(want) && e.contains("trace.json") && !e.contains('\n'), "{e}");
    }
    assert!(viz::load(&dir.join("missing.json")).unwrap_err().to_string().contains("missing.json"));
    std::fs::remove_dir_all(&dir).ok();
}

/// GET `path` from the server at `port`: status and body.
fn get(port: u16, path: &str) -> (u16, serde_json::Value) {
    get_as(port, path, &format!("127.0.0.1:{port}"))
}

/// GET `path` with Host `host`.
fn get_as(port: u16, path: &str, host: &str) -> (u16, serde_json::Value) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.into())))
}

#[test]
fn the_viewer_serves_groups_steps_graphs_kernels_and_the_profile_on_loopback() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    track::take();
    let (v, trace) = recorded(|| {
        graph_rewrite(&a_plus_0_times_1(), &SYMBOLIC, &mut (), "sym");
        (Tensor::from_slice(&[2.0f32, 4.0, 8.0], [3]).sqrt() * 2.0).sum(..).item::<f32>().unwrap()
    });
    assert!((v - 2.0 * (2f32.sqrt() + 2.0 + 8f32.sqrt())).abs() < 1e-4);
    let listener = serve::bind(0).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(listener.local_addr().unwrap().ip().is_loopback());
    std::thread::spawn(move || serve::serve_on(listener, TraceFile { trace, profile: tinygrad::profile::events() }));
    let (status, ctxs) = get(port, "/ctxs");
    assert_eq!(status, 200);
    assert_eq!(ctxs[0]["steps"][0]["name"], "sym");
    assert_eq!(ctxs[0]["steps"][0]["match_count"], 2);
    // the step's graph before any match, after the first (x+0 -> x: the ADD gone) and after both
    let nodes = |v: &serde_json::Value| {
        v["graph"].as_array().unwrap().iter().map(|n| n["label"][0].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let (_, g0) = get(port, "/graph-rewrites?ctx=0&step=0&match=0");
    assert_eq!(nodes(&g0), ["DEFINE_VAR", "CONST", "ADD", "CONST", "MUL"]);
    assert!(g0["match"].is_null());
    let (_, g1) = get(port, "/graph-rewrites?ctx=0&step=0&match=1");
    assert_eq!(nodes(&g1), ["DEFINE_VAR", "CONST", "MUL"]);
    assert!(g1["match"]["rule_loc"].as_str().unwrap().contains("symbolic.rs"));
    assert!(g1["match"]["diff"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().starts_with("-%") && l.as_str().unwrap().contains("ADD")));
    let (_, g2) = get(port, "/graph-rewrites?ctx=0&step=0&match=2");
    assert_eq!(nodes(&g2), ["DEFINE_VAR"]);
    // laid out: every node has a position inside the drawing
    assert!(g0["graph"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["x"].as_f64().unwrap() <= g0["width"].as_f64().unwrap() && n["y"].as_f64().is_some()));
    // the kernel's group: its source and UOps
    let k = ctxs.as_array().unwrap().iter().position(|c| !c["kernel"].is_null()).unwrap();
    let (_, code) = get(port, &format!("/code?ctx={k}"));
    assert!(code["src"].as_str().unwrap().contains(code["name"].as_str().unwrap()));
    let (_, uops) = get(port, &format!("/uops?ctx={k}"));
    assert!(uops["src"].as_str().unwrap().contains("STORE"));
    let (_, prof) = get(port, "/get_profile");
    assert!(prof["events"].as_array().unwrap().iter().any(|e| e["kind"] == "launch"));
    let (_, chrome) = get(port, "/chrome-trace.json");
    assert!(chrome["traceEvents"].as_array().unwrap().iter().any(|e| e["ph"] == "X"));
    let (status, page) = get(port, "/");
    assert_eq!(status, 200);
    assert!(page.as_str().unwrap().contains("<svg id=\"graph\""));
    assert_eq!(get(port, "/graph-rewrites?ctx=99&step=0").0, 400);
    assert_eq!(get(port, "/etc/passwd").0, 404);
    assert_eq!(get(port, "/../Cargo.toml").0, 404);
    // another Host (a page whose name resolves to 127.0.0.1) is refused; localhost is this machine
    assert_eq!(get_as(port, "/ctxs", &format!("evil.example:{port}")).0, 403);
    assert_eq!(get_as(port, "/ctxs", &format!("localhost:{port}")).0, 200);
}

/// `$TINYGRAD_TEST_PYTHON` (else `python3`) when it has selenium and Debian's chromium and chromedriver are
/// installed; else `None` after saying what is missing (under CI, a failure naming it).
fn browser_python() -> Option<String> {
    let py = std::env::var("TINYGRAD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let selenium = std::process::Command::new(&py).args(["-c", "import selenium"]).output().is_ok_and(|o| o.status.success());
    let missing: Vec<&str> =
        ["/usr/bin/chromium", "/usr/bin/chromedriver"].into_iter().filter(|p| !std::path::Path::new(p).exists()).collect();
    if selenium && missing.is_empty() {
        return Some(py);
    }
    let what =
        format!("selenium for {py} (TINYGRAD_TEST_PYTHON): {selenium}; missing: {missing:?} (apt-get install chromium chromium-driver)");
    assert!(std::env::var_os("CI").is_none(), "CI needs {what}; .ci/run installs them");
    eprintln!("skipping the page in Chromium: {what}");
    None
}

#[test]
fn the_page_in_headless_chromium_shows_kernels_steps_matches_and_a_5000_node_graph() {
    let Some(py) = browser_python() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Tensor::manual_seed(5);
    let m = model::Model::new();
    let opt = tinygrad::nn::optim::adam_with(&tinygrad::nn::Module::get_parameters(&m), Default::default());
    let (x, y) = (Tensor::rand([2, 1, 28, 28]), Tensor::from_slice(&[4i32, 2], [2]));
    let ((), trace) = recorded(|| {
        m.train_step(&opt, &x, &y).unwrap().item::<f32>().unwrap();
        // a sum of 2,500 (variable + 1): 5,001 nodes, one rule applied at its root
        let big = (0..2500).map(|i| UOp::variable(&format!("v{i}"), 0, 9) + 1).reduce(|a, b| a + b).unwrap() * 1;
        let _big = track::group(|| "big graph".into());
        let times_one: PatternMatcher = pm! { var("x") * 1 => |x| x };
        graph_rewrite(&big, &times_one, &mut (), "times one");
    });
    let listener = serve::bind(0).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || serve::serve_on(listener, TraceFile { trace, profile: tinygrad::profile::events() }));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shot = root.join("target/viz_page.png");
    let out = std::process::Command::new(py).arg(root.join("tests/viz/page.py")).args([&base, shot.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a screenshot with something on it");
}
