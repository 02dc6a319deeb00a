//! BEAM search (tinygrad `test/test_search.py`): kernels realized with BEAM=2 give the NOOPT=1 results; the winner
//! is cached on disk, so a second search of the same kernel finds it and searches nothing, IGNORE_BEAM_CACHE=1
//! searches again, CACHELEVEL=0 neither reads nor writes the cache, and a corrupt or no longer legal entry is
//! ignored and overwritten.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once};
use tinygrad::codegen::kernel;
use tinygrad::codegen::opt::search::{beam_cache_get, beam_cache_path, beam_searches};
use tinygrad::engine::beam_search;
use tinygrad::helpers::{Context, BEAM, CACHELEVEL, IGNORE_BEAM_CACHE, NOOPT};
use tinygrad::renderer::Renderer;
use tinygrad::schedule::create_schedule;
use tinygrad::{Tensor, UOp};

static SERIAL: Mutex<()> = Mutex::new(());

/// The cache directory of this test binary's run (XDG_CACHE_HOME), removed when the guard drops.
fn cache_home() -> PathBuf {
    std::env::temp_dir().join(format!("tinygrad-beam-test-{}", std::process::id()))
}

/// Tests share the search counter and the cache directory: one at a time, each with an empty cache.
struct Serial(#[allow(dead_code)] MutexGuard<'static, ()>);
impl Drop for Serial {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(cache_home());
    }
}
fn serial() -> Serial {
    static ENV: Once = Once::new();
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ENV.call_once(|| std::env::set_var("XDG_CACHE_HOME", cache_home()));
    Serial(g)
}

/// A realized tensor of `shape` with deterministic values in [-1, 1).
fn input(shape: &[usize], salt: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 7919 + salt * 104729) % 2003) as f32 / 1001.5 - 1.0).collect();
    Tensor::from_slice(&v, shape).realize().unwrap().clone()
}

/// The values of `f()` realized under `vars`.
fn values(vars: &[(&'static tinygrad::helpers::ContextVar, i64)], f: impl Fn() -> Tensor) -> Vec<f32> {
    Context::with(vars, || f().to_vec::<f32>().unwrap())
}

#[track_caller]
fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "element {i}: got {g}, want {w}");
    }
}

/// The last kernel of `t`'s schedule (the one that computes it).
fn last_kernel(t: &Tensor) -> UOp {
    create_schedule(&[t.uop()], &tinygrad::renderer::Renderer::cpu()).items.last().expect("a kernel").ast.clone()
}

#[test]
fn beam_results_match_noopt() {
    let _s = serial();
    let (a, b) = (input(&[64, 48], 1), input(&[48, 40], 2));
    let x = input(&[37, 300], 3);
    let searches = beam_searches();
    for (name, f) in
        [("matmul", Box::new(|| a.matmul(&b)) as Box<dyn Fn() -> Tensor>), ("sum", Box::new(|| x.sum(1))), ("max", Box::new(|| x.max(0)))]
    {
        let got = values(&[(&BEAM, 2)], &f);
        let want = values(&[(&NOOPT, 1)], &f);
        close(&got, &want);
        eprintln!("{name}: {} values match", got.len());
    }
    assert!(beam_searches() >= searches + 3, "each kernel was searched");
}

#[test]
fn second_search_hits_the_cache() {
    let _s = serial();
    let ast = last_kernel(&input(&[40, 24], 4).matmul(&input(&[24, 56], 5)));
    let n = beam_searches();
    let opts = beam_search(&ast, 2).unwrap();
    assert_eq!(beam_searches(), n + 1);
    let k = kernel(&ast, &Renderer::cpu());
    assert_eq!(beam_cache_get(&k, 2), Some(opts.clone()), "the winner is cached");
    let text = std::fs::read_to_string(beam_cache_path(&k, 2)).unwrap();
    assert_eq!(text.lines().count(), 1 + opts.len(), "a header, then one opt a line:\n{text}");
    assert_eq!(beam_search(&ast, 2).unwrap(), opts);
    assert_eq!(beam_searches(), n + 1, "the second search found the cache");
    assert_eq!(beam_cache_get(&k, 3), None, "the beam width is part of the key");
    Context::with(&[(&IGNORE_BEAM_CACHE, 1)], || beam_search(&ast, 2).unwrap());
    assert_eq!(beam_searches(), n + 2, "IGNORE_BEAM_CACHE=1 searches again");
}

#[test]
fn corrupt_or_illegal_entries_are_searched_again() {
    let _s = serial();
    let ast = last_kernel(&input(&[24, 33], 6).sum(0));
    let k = kernel(&ast, &Renderer::cpu());
    let path = beam_cache_path(&k, 2);
    beam_search(&ast, 2).unwrap();
    for bad in ["garbage\n", "tinygrad-rs beam 1\nUPCAST x 4\n", "tinygrad-rs beam 1\nUPCAST 9 16\n", ""] {
        std::fs::write(&path, bad).unwrap();
        assert_eq!(beam_cache_get(&k, 2), None, "{bad:?} is not a usable entry");
        let n = beam_searches();
        let opts = beam_search(&ast, 2).unwrap();
        assert_eq!(beam_searches(), n + 1, "{bad:?} is ignored");
        assert_eq!(beam_cache_get(&k, 2), Some(opts), "{bad:?} is overwritten");
    }
}

#[test]
fn cachelevel_0_bypasses_the_cache() {
    let _s = serial();
    let ast = last_kernel(&(input(&[16, 40], 7) * 3.0f32).sum(1));
    let path = beam_cache_path(&kernel(&ast, &Renderer::cpu()), 2);
    let n = beam_searches();
    Context::with(&[(&CACHELEVEL, 0)], || {
        beam_search(&ast, 2).unwrap();
        beam_search(&ast, 2).unwrap();
    });
    assert_eq!(beam_searches(), n + 2, "no cache read");
    assert!(!path.exists(), "no cache written");
}

/// BEAM on OpenCL: candidates compiled by the driver and timed on the device, LOCAL and GROUP among the actions; the
/// results are NOOPT=1's, and the winner is cached under the device's name.
#[test]
fn beam_on_opencl() {
    let _s = serial();
    if let Err(e) = tinygrad::runtime::cl::device() {
        assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
        return eprintln!("skipping: {e}");
    }
    let _dev = Context::new(&[]).dev("CL");
    let (a, b) = (input(&[16, 48], 5), input(&[48, 16], 6));
    let want = values(&[(&NOOPT, 1)], || a.matmul(&b));
    let searched = beam_searches();
    close(&values(&[(&BEAM, 1), (&IGNORE_BEAM_CACHE, 1)], || a.matmul(&b)), &want);
    assert!(beam_searches() > searched, "BEAM=1 searched");
    let entries: Vec<String> =
        std::fs::read_dir(cache_home().join("tinygrad/beam")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(entries.iter().any(|e| e.contains("-CL-")), "a CL entry in {entries:?}");
}
