//! The whole conformance suite under BEAM: every kernel of every case searched (width 1, at most `BEAM_MAX_SEC=1`
//! a kernel, so that a cold run takes minutes) and timed on the kernel's real inputs, and every case must still
//! pass. Before this, BEAM timed candidates on zeros and an integer division by them killed the process.
//! (tests/fuzz_devices.rs runs the fuzzer's programs under BEAM too; `BEAM=2` over the suite is the conformance
//! runner's `BEAM=2 cargo run --release --example conformance -- DIR`.)

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

use tinygrad::codegen::opt::search::BEAM_MAX_SEC;
use tinygrad::helpers::{Context, BEAM};

#[test]
fn conformance_cases_pass_under_beam() {
    let _beam = Context::new(&[(&BEAM, 1), (&BEAM_MAX_SEC, 1)]);
    let dir = std::env::var("TINYGRAD_CONFORMANCE_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/ops").into());
    let (passed, failed) = runner::run_dir(std::path::Path::new(&dir));
    println!("BEAM=1 on {}: {passed} passed, {} failed", tinygrad::helpers::default_device(), failed.len());
    assert!(passed > 0, "no cases found in {dir}");
    let lines: Vec<&str> = failed.iter().map(|s| s.lines().next().unwrap_or("")).collect();
    assert!(failed.is_empty(), "{} failing cases:\n{}", failed.len(), lines.join("\n"));
}
