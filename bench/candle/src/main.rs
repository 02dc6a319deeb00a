//! candle's CPU timings of bench/compare.py's workloads, one JSON line per figure in the format of
//! `examples/bench.rs`: `{"name": ..., "value": ..., "unit": ..., "runs": N}`, the median of N runs after a
//! warm-up. candle is eager: a run is the op call itself. Env: `FILTER=substring`, `RUNS=n`.
//!
//! `cargo run --release --manifest-path bench/candle/Cargo.toml`

use candle_core::{Device, Result, Tensor};
use std::time::Instant;

/// Times `f` (one warm-up, then the median of `runs` calls) and prints the figure unless FILTER excludes it;
/// `work` is flops (GFLOP/s), bytes (GB/s) or, with unit "ms", ignored.
fn time(name: &str, unit: &str, work: f64, runs: usize, f: impl Fn() -> Result<Tensor>) -> Result<()> {
    if !name.contains(&std::env::var("FILTER").unwrap_or_default()) {
        return Ok(());
    }
    let runs = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(runs).max(1);
    f()?;
    let mut ts = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f().map(|_| t.elapsed().as_secs_f64())
        })
        .collect::<Result<Vec<_>>>()?;
    ts.sort_by(f64::total_cmp);
    let t = if runs % 2 == 1 { ts[runs / 2] } else { (ts[runs / 2 - 1] + ts[runs / 2]) / 2.0 };
    let value = if unit == "ms" { t * 1e3 } else { work / t / 1e9 };
    println!(r#"{{"name": "{name}", "value": {value:.3}, "unit": "{unit}", "runs": {runs}}}"#);
    Ok(())
}

/// Uniform float32 values in `[-1, 1)`.
fn rand(shape: &[usize]) -> Result<Tensor> {
    Tensor::rand(-1f32, 1f32, shape, &Device::Cpu)
}

/// `(m, k) @ (k, n)` in GFLOP/s.
fn matmul(name: &str, m: usize, k: usize, n: usize, runs: usize) -> Result<()> {
    let (a, b) = (rand(&[m, k])?, rand(&[k, n])?);
    time(name, "GFLOP/s", 2.0 * (m * k * n) as f64, runs, || a.matmul(&b))
}

fn main() -> Result<()> {
    for n in [256, 512, 1000, 1024] {
        matmul(&format!("matmul_{n}"), n, n, n, 5)?;
    }
    matmul("matmul_2048", 2048, 2048, 2048, 3)?;
    matmul("matmul_odd", 509, 1021, 257, 5)?;
    matmul("matmul_tall", 8192, 64, 64, 5)?;
    matmul("matmul_wide_k", 64, 8192, 64, 5)?;
    matmul("matvec_4096", 1, 4096, 4096, 5)?;
    let n = 1 << 24;
    let (x, y) = (rand(&[n])?, rand(&[n])?);
    time("mul_add_16M", "GB/s", 12.0 * n as f64, 5, || (&x * &y)? + 1.0)?;
    time("sum_16M", "GB/s", 4.0 * n as f64, 5, || x.sum_all())?;
    let s = rand(&[4096, 4096])?;
    time("softmax_4096", "ms", 0.0, 5, || candle_nn::ops::softmax_last_dim(&s))?;
    let (x, w) = (rand(&[32, 64, 56, 56])?, rand(&[64, 64, 3, 3])?);
    time("conv2d", "GFLOP/s", 2.0 * 32.0 * 64.0 * 56.0 * 56.0 * 64.0 * 9.0, 3, || x.conv2d(&w, 1, 1, 1, 1))
}
