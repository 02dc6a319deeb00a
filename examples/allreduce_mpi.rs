//! The allreduce of a tensor over MPI ranks beside a raw `MPI_Allreduce` of the same bytes (`--features mpi`):
//!
//! ```text
//! cargo build --release --features mpi --example allreduce_mpi
//! mpirun -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo target/release/examples/allreduce_mpi
//! ```
//!
//! Rank 0 prints each one's median time over `RUNS` (default 20) sums of `MB` (default 16) megabytes of float32, the
//! algorithm bandwidth (bytes / time) and their ratio. Ours is `Tensor::allreduce_processes` realized: the buffer
//! copied to the host, summed by MPI, copied back.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::process::ExitCode;
use std::time::Instant;
use tinygrad::helpers::getenv_int;
use tinygrad::nn::mpi::DataParallel;
use tinygrad::runtime::{check_env, run_main};
use tinygrad::{Result, Tensor};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    run_main(|| -> Result<()> {
        check_env()?;
        let dp = DataParallel::init()?;
        let (runs, mb) = (getenv_int("RUNS", 20, 1, 10_000)? as usize, getenv_int("MB", 16, 1, 4096)? as usize);
        let n = mb * (1 << 20) / 4;
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * (dp.rank() + 1) as f32).collect();
        let mut recv = vec![0f32; n];
        let mut raw = Vec::with_capacity(runs);
        for _ in 0..runs + 2 {
            dp.world().barrier();
            let t = Instant::now();
            dp.world().all_reduce_into(&host[..], &mut recv[..], SystemOperation::sum());
            raw.push(t.elapsed().as_secs_f64());
        }
        let x = Tensor::from_slice(&host, [n]);
        x.realize()?;
        let mut ours = Vec::with_capacity(runs);
        for _ in 0..runs + 2 {
            dp.world().barrier();
            let t = Instant::now();
            let y = x.allreduce_processes();
            y.realize()?;
            ours.push(t.elapsed().as_secs_f64());
        }
        let check = x.allreduce_processes().to_vec::<f32>()?;
        assert!(check.iter().zip(&recv).all(|(a, b)| a == b), "the tensor's sum differs from MPI_Allreduce's");
        let (raw, ours) = (median(raw[2..].to_vec()), median(ours[2..].to_vec()));
        if dp.is_root() {
            let bw = |s: f64| (n * 4) as f64 / s / 1e9;
            println!("allreduce of {mb} MB float32 over {} ranks (median of {runs})", dp.size());
            println!("MPI_Allreduce       {:8.2} ms {:6.2} GB/s", raw * 1e3, bw(raw));
            println!("allreduce_processes {:8.2} ms {:6.2} GB/s", ours * 1e3, bw(ours));
            println!("ours / MPI bandwidth: {:.2}", raw / ours);
        }
        Ok(())
    })
}
