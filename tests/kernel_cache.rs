//! The kernel disk cache heals itself. Each test runs `child_realize` in fresh child processes (a process keeps
//! its loaded kernels in memory, so only a new one reads the cache) with `XDG_CACHE_HOME` set to a directory of
//! its own; between runs it damages every cached object: truncates it, writes garbage, flips a byte, or swaps two
//! kernels' files. The next run must compute the right values, warn at DEBUG=1, and leave the same objects as a
//! clean compile.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tinygrad::Tensor;

/// Inputs of `child_realize`: 4x8 values in [-1, 1).
fn inputs() -> Vec<f32> {
    (0..32).map(|i| ((i * 37 % 32) as f32 - 16.0) / 16.0).collect()
}

/// Realizes a softmax and a column sum (at least two kernels) and checks them against f64 references. Run by the
/// tests below in child processes; `cargo test -- --ignored` runs it against the user's cache.
#[test]
#[ignore = "run in child processes by the other tests"]
fn child_realize() {
    let x = Tensor::from_slice(&inputs(), [4, 8]);
    let soft = x.softmax(1).to_vec::<f32>().unwrap();
    let cols = (&x * 3.0).sum(0).to_vec::<f32>().unwrap();
    let v: Vec<f64> = inputs().into_iter().map(f64::from).collect();
    for r in 0..4 {
        let row = &v[r * 8..r * 8 + 8];
        let max = row.iter().copied().fold(f64::MIN, f64::max);
        let total: f64 = row.iter().map(|x| (x - max).exp()).sum();
        for c in 0..8 {
            let want = (row[c] - max).exp() / total;
            assert!((f64::from(soft[r * 8 + c]) - want).abs() < 1e-6, "softmax[{r}][{c}]: got {}, want {want}", soft[r * 8 + c]);
        }
    }
    let want_cols: Vec<f32> = (0..8).map(|c| (0..4).map(|r| v[r * 8 + c] * 3.0).sum::<f64>() as f32).collect();
    assert_eq!(cols, want_cols);
}

/// A cache directory of the test's own, empty.
fn fresh_cache(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-kernel-cache-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `child_realize` in a new process with the cache under `cache`.
fn spawn_child(cache: &Path, envs: &[(&str, &str)]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_realize", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("XDG_CACHE_HOME", cache)
        .env("DEBUG", "1")
        .env("CACHELEVEL", "2")
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Checks a finished child: it passed; returns its stderr.
#[track_caller]
fn passed(out: Output) -> String {
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success() && stdout.contains("1 passed"), "child failed ({}):\n{stdout}\n{stderr}", out.status);
    stderr
}

fn run_child(cache: &Path, envs: &[(&str, &str)]) -> String {
    passed(spawn_child(cache, envs).wait_with_output().unwrap())
}

/// The cached objects and their bytes, by path.
fn objects(cache: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(cache.join("tinygrad/kernels"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    paths.sort();
    paths.into_iter().map(|p| (p.clone(), std::fs::read(p).unwrap())).collect()
}

/// Fills a cache, damages every object with `damage` (given all of them), then checks that the next run passes,
/// warns about each object with `warning`, and rebuilds them all as they were.
fn heals(test: &str, warning: &str, damage: impl Fn(&[(PathBuf, Vec<u8>)])) {
    let cache = fresh_cache(test);
    let clean = run_child(&cache, &[]);
    assert!(!clean.contains("kernel cache:"), "a cold cache needs no warning:\n{clean}");
    let good = objects(&cache);
    assert!(good.len() >= 2, "child_realize compiles at least two kernels: {good:?}");
    damage(&good);
    assert!(objects(&cache).iter().zip(&good).all(|(d, g)| d.1 != g.1), "every object was damaged");
    let stderr = run_child(&cache, &[]);
    assert_eq!(stderr.matches("kernel cache:").count(), good.len(), "one warning per damaged object:\n{stderr}");
    assert_eq!(stderr.matches(warning).count(), good.len(), "{stderr}");
    assert_eq!(objects(&cache), good, "rebuilt objects are a clean compile's");
    assert!(!run_child(&cache, &[]).contains("kernel cache:"), "the healed cache is used without warnings");
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn truncated_objects_are_rebuilt() {
    heals("truncated", "is truncated", |objs| {
        for (i, (path, bytes)) in objs.iter().enumerate() {
            // one empty file (as a crash before the data reached the disk leaves), the others cut in half
            std::fs::write(path, if i == 0 { &[][..] } else { &bytes[..bytes.len() / 2] }).unwrap();
        }
    });
}

#[test]
fn garbage_objects_are_rebuilt() {
    heals("garbage", "not a tinygrad kernel cache entry", |objs| {
        for (path, bytes) in objs {
            std::fs::write(path, (0..bytes.len()).map(|i| (i * 131 % 251) as u8).collect::<Vec<_>>()).unwrap();
        }
    });
}

#[test]
fn flipped_bytes_are_rebuilt() {
    heals("flipped", "content hash does not match", |objs| {
        for (path, bytes) in objs {
            let mut b = bytes.clone();
            // inside the object: it may still load, and run wrong code
            b[bytes.len() / 3] ^= 0x10;
            std::fs::write(path, b).unwrap();
        }
    });
}

#[test]
fn objects_of_other_kernels_are_rebuilt() {
    heals("foreign", "made for another kernel, compiler or CPU", |objs| {
        // each file gets another kernel's (valid) entry, as a cache copied from another machine might hold: the
        // next one that differs (kernels compiled in one batch share one object, hard-linked under their keys), in
        // a new file
        for (i, (path, bytes)) in objs.iter().enumerate() {
            let other = (1..objs.len()).map(|d| &objs[(i + d) % objs.len()].1).find(|o| *o != bytes).expect("two objects differ");
            std::fs::remove_file(path).unwrap();
            std::fs::write(path, other).unwrap();
        }
    });
}

#[test]
fn cachelevel_0_does_not_read_the_cache() {
    let cache = fresh_cache("cachelevel0");
    run_child(&cache, &[]);
    let good = objects(&cache);
    for (path, _) in &good {
        std::fs::write(path, b"garbage").unwrap();
    }
    let stderr = run_child(&cache, &[("CACHELEVEL", "0")]);
    assert!(!stderr.contains("kernel cache:"), "CACHELEVEL=0 never looks at cached files:\n{stderr}");
    assert_eq!(objects(&cache), good, "compiles still write the cache");
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn concurrent_processes_fill_one_cache() {
    let cache = fresh_cache("concurrent");
    let children: Vec<_> = (0..4).map(|_| spawn_child(&cache, &[])).collect();
    for child in children {
        passed(child.wait_with_output().unwrap());
    }
    let entries: Vec<String> =
        std::fs::read_dir(cache.join("tinygrad/kernels")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(entries.iter().all(|n| n.ends_with(".o")), "no temporary files are left: {entries:?}");
    let filled = objects(&cache);
    assert!(filled.len() >= 2);
    assert!(!run_child(&cache, &[]).contains("kernel cache:"), "every entry the racing processes wrote is whole");
    assert_eq!(objects(&cache), filled);
    std::fs::remove_dir_all(cache).unwrap();
}
