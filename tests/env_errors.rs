//! What the environment causes is an `Err` the caller gets, never a panic: building a model (BatchNorm, Linear,
//! an optimizer) allocates and compiles nothing, and the first step with a missing or broken C compiler returns
//! an error naming the compiler and saying what to do.
//!
//! The device picks its compiler once per process (from `CC`, which is read from the environment, not a
//! `ContextVar`), so each case runs this test binary again as a child with `CC` set and `ENV_ERRORS_CHILD`
//! naming the case; the child prints the error's `Display` text after a marker and the parent checks it.

use std::path::{Path, PathBuf};
use std::process::Command;
use tinygrad::helpers::{Context, TRAINING};
use tinygrad::nn::{optim, BatchNorm, Linear, Module};
use tinygrad::Tensor;

const MARKER: &str = "ENV_ERRORS_RESULT: ";

/// One training step of a small BatchNorm + Linear model with Adam: the first realize compiles kernels.
fn build_and_step() -> tinygrad::Result<()> {
    let _t = Context::new(&[(&TRAINING, 1)]);
    let (bn, lin) = (BatchNorm::new(3, 1e-5, true, true, 0.1), Linear::new(3, 2, true));
    let params: Vec<Tensor> = bn.get_parameters().into_iter().chain(lin.get_parameters()).collect();
    let opt = optim::adam(&params, 1e-3, 0.9, 0.999, 1e-8);
    let x = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6., 7., 8.5, 9., -1., 0., 2.], [4, 3]);
    opt.zero_grad();
    lin.forward(&bn.forward(&x)).square().mean(..).backward();
    opt.step()?;
    lin.weight.to_vec::<f32>().map(|_| ())
}

/// In the child: runs the model and reports its outcome on stdout.
#[test]
fn child() {
    if std::env::var_os("ENV_ERRORS_CHILD").is_none() {
        return;
    }
    match build_and_step() {
        Ok(()) => println!("{MARKER}ok"),
        Err(e) => println!("{MARKER}err {}", e.to_string().replace('\n', " | ")),
    }
}

/// Runs [`child`] in a new process with `CC=cc` and returns the reported line.
fn run_child(case: &str, cc: &Path) -> String {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("ENV_ERRORS_CHILD", case)
        .env("CC", cc)
        .env_remove("DEV")
        .env("CACHELEVEL", "0")
        .output()
        .expect("running the test binary");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !stderr.contains("panicked"), "{case}: child failed ({}):\n{stdout}\n{stderr}", out.status);
    let line =
        stdout.lines().find_map(|l| l.split_once(MARKER).map(|(_, r)| r)).unwrap_or_else(|| panic!("{case}: no result line in\n{stdout}"));
    line.to_string()
}

#[test]
fn missing_compiler_is_an_error_naming_it() {
    let line = run_child("missing", Path::new("/nonexistent/cc"));
    assert!(line.starts_with("err "), "missing compiler: {line}");
    assert!(line.contains("CC=\"/nonexistent/cc\" does not run"), "names the compiler: {line}");
    assert!(line.contains("install clang or gcc") && line.contains("set CC to a working C compiler"), "says what to do: {line}");
}

/// A compiler that answers `--version` but rejects every kernel.
fn broken_compiler() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-env-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cc = dir.join("broken-cc");
    std::fs::write(&cc, "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho 'broken-cc: internal compiler error' >&2\nexit 1\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    cc
}

#[test]
#[cfg(unix)]
fn broken_compiler_is_an_error_with_its_output() {
    let cc = broken_compiler();
    let line = run_child("broken", &cc);
    assert!(line.starts_with("err compiling kernel `"), "broken compiler: {line}");
    assert!(line.contains(&format!("with `{}` failed", cc.display())), "names the compiler: {line}");
    assert!(line.contains("the source is kept at") && line.contains("broken-cc: internal compiler error"), "gives its output: {line}");
}

/// The control: with the compiler this machine has, the same child trains.
#[test]
fn working_compiler_trains() {
    let cc = ["clang", "gcc", "cc"]
        .into_iter()
        .find(|cc| Command::new(cc).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("a C compiler on PATH");
    assert_eq!(run_child("working", Path::new(cc)), "ok");
}
