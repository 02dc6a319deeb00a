//! Runs the conformance runner over ../shared/conformance/ops (TINYGRAD_CONFORMANCE_DIR overrides), with the default
//! opts and with none (NOOPT=1), on the CPU, on the interpreter (DEV=PYTHON) and on OpenCL (DEV=CL; skipped with a
//! note where there is no OpenCL device, except under CI, which installs PoCL), checking every graph against the spec
//! (SPEC=1): every case, forward and gradients, must pass; the failure lists the failing cases. And on the CPU under
//! BEAM (width 1, at most `BEAM_MAX_SEC=1` a kernel, so that a cold run takes minutes), every kernel searched on its
//! real inputs (BEAM had timed candidates on zeros, and an integer division by them killed the process).

#[path = "../examples/conformance/dispatch.rs"]
mod dispatch;
#[path = "../examples/conformance/dispatch_math.rs"]
mod dispatch_math;
#[path = "../examples/conformance/dispatch_movement.rs"]
mod dispatch_movement;
#[path = "../examples/conformance/dispatch_nn.rs"]
mod dispatch_nn;
#[path = "../examples/conformance/runner.rs"]
mod runner;

fn run(what: &str) {
    let _spec = tinygrad::helpers::Context::new(&[(&tinygrad::helpers::SPEC, 1)]);
    let dir = std::env::var("TINYGRAD_CONFORMANCE_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/ops").into());
    let (passed, failed) = runner::run_dir(std::path::Path::new(&dir));
    let (dev, width) = (tinygrad::runtime::default_device(), tinygrad::renderer::CpuFeatures::host().vector_bytes());
    println!("{what} on {dev} ({width}-byte CPU vectors): {passed} passed, {} failed", failed.len());
    assert!(passed > 0, "no cases found in {dir}");
    let lines: Vec<&str> = failed.iter().map(|s| s.lines().next().unwrap_or("")).collect();
    assert!(failed.is_empty(), "{} failing cases:\n{}", failed.len(), lines.join("\n"));
}

#[test]
fn conformance_cases_pass() {
    run("default opts");
}

#[test]
fn conformance_cases_pass_without_opts() {
    tinygrad::helpers::Context::with(&[(&tinygrad::helpers::NOOPT, 1)], || run("NOOPT=1"));
}

#[test]
fn conformance_cases_pass_under_beam() {
    let beam = [(&tinygrad::helpers::BEAM, 1), (&tinygrad::codegen::opt::search::BEAM_MAX_SEC, 1)];
    tinygrad::helpers::Context::with(&beam, || run("BEAM=1"));
}

/// The AVX2 code path on an x86-64 machine with AVX-512: this binary's default-opts case again in a child process
/// with `CPU_TARGET=x86-64-v3` (the features are detected once per process). An AVX2-only machine's default run is
/// that path already.
#[test]
fn conformance_cases_pass_on_avx2() {
    let host = tinygrad::renderer::CpuFeatures::host();
    if std::env::var_os("CPU_TARGET").is_some() || !cfg!(target_arch = "x86_64") || !host.avx2 || host.vector_bytes() <= 32 {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "conformance_cases_pass", "--nocapture"])
        .env("CPU_TARGET", "x86-64-v3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "CPU_TARGET=x86-64-v3:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("default opts on CPU (32-byte CPU vectors):") && stdout.contains(" 0 failed"), "{stdout}");
}

#[test]
fn conformance_cases_pass_on_the_interpreter() {
    let _dev = tinygrad::helpers::Context::new(&[]).dev("PYTHON");
    run("default opts");
}

#[test]
fn conformance_cases_pass_on_the_interpreter_without_opts() {
    let _dev = tinygrad::helpers::Context::new(&[(&tinygrad::helpers::NOOPT, 1)]).dev("PYTHON");
    run("NOOPT=1");
}

/// Whether OpenCL has a device here; without one the CL tests are skipped, except in CI (`CI` set), where they fail.
pub fn have_opencl() -> bool {
    match tinygrad::runtime::cl::device() {
        Ok(_) => true,
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
            eprintln!("skipping the OpenCL cases: {e}");
            false
        }
    }
}

#[test]
fn conformance_cases_pass_on_opencl() {
    if have_opencl() {
        let _dev = tinygrad::helpers::Context::new(&[]).dev("CL");
        run("default opts");
    }
}

#[test]
fn conformance_cases_pass_on_opencl_without_opts() {
    if have_opencl() {
        let _dev = tinygrad::helpers::Context::new(&[(&tinygrad::helpers::NOOPT, 1)]).dev("CL");
        run("NOOPT=1");
    }
}
