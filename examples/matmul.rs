//! `(a+b).relu()` on 1M floats and a 512x512 matmul, realized twice (the second run is warm: compiled and
//! scheduled). Run with DEBUG=2 to see each launch's time and GFLOPS, DEBUG=4 for the source.

use tinygrad::Tensor;

fn main() -> std::process::ExitCode {
    tinygrad::runtime::run_main(run)
}

fn run() -> tinygrad::Result<()> {
    tinygrad::runtime::check_env()?;
    let n = 1 << 20;
    let (a, b) = (Tensor::from_slice(&vec![1.5f32; n], [n]), Tensor::from_slice(&vec![-0.5f32; n], [n]));
    for _ in 0..2 {
        (&a + &b).relu().realize()?;
    }
    let m = 512;
    let x = Tensor::from_slice(&(0..m * m).map(|i| (i % 7) as f32 * 0.1).collect::<Vec<_>>(), [m, m]);
    let y = Tensor::from_slice(&(0..m * m).map(|i| (i % 5) as f32 * 0.2).collect::<Vec<_>>(), [m, m]);
    for _ in 0..2 {
        x.matmul(&y).realize()?;
    }
    Ok(())
}
