//! What the test binaries that run a test of their own again under other compiler settings share: `CC` and
//! `CC_CHECK` are read once per process, so [`rerun`] starts this test binary again with them set.

#![allow(dead_code)]

use std::process::Command;

/// The first line of `cc --version`, if `cc` runs.
fn version(cc: &str) -> Option<String> {
    let out = Command::new(cc).arg("--version").output().ok().filter(|o| o.status.success())?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
}

/// Whether the C compilers `ccs` all run here. Where one does not, prints that `what` is skipped, except under CI
/// (`CI` set), whose `.ci/run` installs gcc and clang: there it panics.
pub fn have(ccs: &[&str], what: &str) -> bool {
    let missing: Vec<&str> = ccs.iter().copied().filter(|cc| version(cc).is_none()).collect();
    assert!(missing.is_empty() || std::env::var_os("CI").is_none(), "CI must have {missing:?} (.ci/run installs gcc and clang)");
    if !missing.is_empty() {
        eprintln!("skipping {what}: {} not found", missing.join(" and "));
    }
    missing.is_empty()
}

/// Whether the CPU device's compiler in this process (`CC`, else the first of clang, cc, gcc) is `cc`.
pub fn default_compiler_is(cc: &str) -> bool {
    let ours = tinygrad::runtime::cpu::device().cc().map(|c| c.cc().to_string()).ok();
    ours.and_then(|o| version(&o)) == version(cc)
}

/// Runs test `name` of this test binary (exactly; an ignored one too) in a child process with `envs` set, and
/// returns its output; panics with that output when the test fails or does not run.
pub fn rerun(name: &str, envs: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .envs(envs.iter().copied())
        .output()
        .expect("running the test binary again");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{name} with {envs:?} failed:\n{text}");
    text
}
