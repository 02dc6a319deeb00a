//! A person's mistakes in running the beautiful_mnist example (bad settings, unwritable or corrupt files) or the `llm`
//! binary (bad flags) end in one `error: ...` line naming the variable, file or flag, a nonzero exit status, no panic
//! and no backtrace, before any work starts.
//!
//! Runs the example binary that `cargo test` builds next to this test (`target/<profile>/examples/`); with
//! `cargo test --test cli_errors` alone, build it first (`cargo build --example beautiful_mnist`, same profile).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/examples/beautiful_mnist`, found from this test binary (`target/<profile>/deps/cli_errors-*`).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("test binary under target/<profile>/deps");
    let bin = profile_dir.join("examples").join(format!("beautiful_mnist{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --example beautiful_mnist` (same profile as the tests)",
        bin.display()
    );
    bin
}

/// A fresh scratch directory for one case.
fn scratch(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-cli-errors-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mnist")).unwrap();
    dir
}

/// Runs the example with `env` (on top of a clean setting: no tinygrad variables inherited, an empty data dir)
/// and returns its exit status and its combined output; kills it after `limit`.
fn run(case: &str, env: &[(&str, &str)], data_dir: &Path) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(example_binary());
    for var in ["DEBUG", "BEAM", "NOOPT", "JIT", "DEV", "CC", "CPU_TARGET", "CACHELEVEL", "SPEC", "STEPS", "BS", "SEED", "WEIGHTS", "EVAL"]
    {
        cmd.env_remove(var);
    }
    cmd.env("TINYGRAD_DATA_DIR", data_dir).env("RUST_BACKTRACE", "1").env("NO_COLOR", "1").env("TINYGRAD_MNIST_URL", "http://127.0.0.1:9/");
    cmd.envs(env.iter().copied()).current_dir(data_dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawning the example");
    let limit = Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("{case}: the example still ran after {limit:?}; a bad setting must fail before any work");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Asserts the run failed with exactly one `error: ` line on stderr that contains each of `names`, and no panic.
fn assert_one_line_error(case: &str, env: &[(&str, &str)], data_dir: &Path, names: &[&str]) -> String {
    let (code, stdout, stderr) = run(case, env, data_dir);
    let all = format!("{stdout}{stderr}");
    assert!(code.is_some_and(|c| c != 0), "{case}: exit status {code:?}, want nonzero; output:\n{all}");
    assert!(!all.contains("panicked") && !all.contains("backtrace") && !all.contains("RUST_BACKTRACE"), "{case}: panicked:\n{all}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{case}: want one line on stderr, got:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{case}: {}", lines[0]);
    for name in names {
        assert!(lines[0].contains(name), "{case}: {:?} does not name {name:?}", lines[0]);
    }
    assert!(!lines[0].contains("Error {") && !lines[0].contains("Format {"), "{case}: a Debug struct, not a message: {}", lines[0]);
    lines[0].to_string()
}

#[test]
fn bad_settings_are_one_line_errors_naming_the_variable() {
    let dir = scratch("env");
    let cases: [(&str, &str, &[&str]); 9] = [
        ("STEPS", "abc", &["STEPS=\"abc\"", "integer"]),
        ("BS", "0", &["BS=\"0\"", "from 1"]),
        ("DEBUG", "x", &["DEBUG=\"x\"", "from 0 to 7"]),
        ("BEAM", "-1", &["BEAM=\"-1\"", "from 0"]),
        ("NOOPT", "2", &["NOOPT=\"2\"", "from 0 to 1"]),
        ("DEV", "FOO", &["DEV=\"FOO\"", "CPU"]),
        ("CC", "/nonexistent/cc", &["CC=\"/nonexistent/cc\"", "C compiler"]),
        ("CPU_TARGET", "avx9", &["CPU_TARGET=\"avx9\"", "x86-64-v3"]),
        ("WEIGHTS", "/nonexistent/dir/w.safetensors", &["WEIGHTS=", "/nonexistent/dir", "writable"]),
    ];
    for (var, value, names) in cases {
        let line = assert_one_line_error(&format!("{var}={value}"), &[(var, value)], &dir, names);
        assert!(line.starts_with(&format!("error: environment variable {var}=")), "{line}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_corrupt_weights_file_for_eval_is_an_error_naming_it() {
    let dir = scratch("eval");
    let garbage = dir.join("garbage.safetensors");
    std::fs::write(&garbage, b"this is not a safetensors file").unwrap();
    let g = garbage.to_str().unwrap();
    assert_one_line_error("EVAL=garbage", &[("EVAL", g)], &dir, &[g, "safetensors"]);
    let missing = dir.join("missing.safetensors");
    assert_one_line_error("EVAL=missing", &[("EVAL", missing.to_str().unwrap())], &dir, &[missing.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_truncated_dataset_file_is_an_error_naming_it() {
    let dir = scratch("gzip");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&(0..20_000u32).flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let bytes = gz.finish().unwrap();
    // the first file the loader reads, cut in half
    let file = dir.join("mnist").join("train-images-idx3-ubyte.gz");
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    assert_one_line_error("truncated gzip", &[("STEPS", "1")], &dir, &[file.to_str().unwrap(), "gzip", "delete it"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn llm_flags_are_checked_one_line_each() {
    let llm = env!("CARGO_BIN_EXE_llm");
    let cases: [(&[&str], &str); 5] = [
        (&["--count", "-5"], "'--count"),
        (&["--top_k", "2.7"], "'--top_k"),
        (&["--temperature", "x"], "'--temperature"),
        (&["--top-p", "1.5"], "'--top_p"),
        (&["--nope"], "'--nope'"),
    ];
    for (args, flag) in cases {
        let out = Command::new(llm).args(["--model", "m.gguf"]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.trim().lines().count() == 1 && err.starts_with("error: ") && err.contains(flag), "{args:?}: {err}");
    }
    let help = Command::new(llm).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert_eq!(help.status.code(), Some(0));
    for flag in [
        "--model",
        "--prompt",
        "--count",
        "--benchmark",
        "--temperature",
        "--top_k",
        "--top-k",
        "--top_p",
        "--seed",
        "--max_context",
        "--serve",
        "--host",
        "--api-key",
        "--slots",
        "--allowed-hosts",
        "--cors",
        "--max-connections",
    ] {
        assert!(text.contains(&format!("{flag} ")) || text.contains(&format!("{flag}]")), "--help lacks {flag}:\n{text}");
    }
}
