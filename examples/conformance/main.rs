//! `cargo run --release --example conformance -- DIR`: runs every case file in DIR (tinygrad's op vectors,
//! format in ../shared/conformance/README.md) on the default device (`DEV`), prints which device ran, one line per
//! failure, and ends with `N passed, M failed`.

mod dispatch;
mod dispatch_math;
mod dispatch_movement;
mod dispatch_nn;
mod runner;

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "../shared/conformance/ops".into());
    let checked = tinygrad::runtime::check_env().map_err(|e| e.to_string()).and_then(|()| {
        std::fs::read_dir(&dir).map(drop).map_err(|e| format!("case directory {dir}: {e}; pass the directory of case files"))
    });
    if let Err(e) = checked {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    println!("device: {}", tinygrad::runtime::default_device());
    let (passed, failed) = runner::run_dir(std::path::Path::new(&dir));
    failed.iter().for_each(|f| println!("{f}"));
    println!("{passed} passed, {} failed", failed.len());
    std::process::exit(if failed.is_empty() { 0 } else { 1 });
}
