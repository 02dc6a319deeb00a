//! beautiful_mnist trained data-parallel across processes over MPI (`--features mpi`): every rank builds the same
//! model from the same seed, takes rank 0's weights, draws the same batch indices each step and trains on its part
//! of the rows; BatchNorm's statistics and the gradients are summed over the ranks (`nn::mpi::DataParallel`), so every
//! rank takes the same step a single process would take on the whole batch. After every step the ranks check that
//! their parameters are bitwise equal; rank 0 alone prints and saves.
//!
//! ```text
//! cargo build --release --features mpi --example beautiful_mnist_mpi
//! mpirun -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo target/release/examples/beautiful_mnist_mpi
//! ```
//!
//! Env: STEPS (default 70), BS (default 512, split over the ranks), SEED, OPT (`adam`, the default, or `sgd`: lr 0.01,
//! momentum 0.9), DTYPE (`float32`, the default, or `float64`: tests/mpi.rs compares 10 steps with one process's in
//! float64, where float32's last-bit differences in BatchNorm's statistics would flip max-pool choices), BUCKET_KB (the
//! largest gradient bucket summed in one allreduce, default 25,600: one bucket for this model; smaller ones let the
//! first buckets' sums run beside the rest of the backward pass), WEIGHTS (rank 0 saves there, default
//! `beautiful_mnist_mpi.safetensors`), MPI_TIMEOUT (seconds a collective waits before this rank gives up, default
//! 300), and for the tests MPI_FAIL_RANK / MPI_FAIL_AT_STEP (that rank exits with an error before that step, from 1).

// (its train_step is the single-process one: this example steps with the ranks' gradients summed)
#[path = "../beautiful_mnist/model.rs"]
#[allow(dead_code)]
mod model;

use model::Model;
use std::process::ExitCode;
use std::time::Instant;
use tinygrad::helpers::{getenv_int, getenv_output_path, getenv_str, Context, TRAINING};
use tinygrad::nn::mpi::DataParallel;
use tinygrad::nn::{optim, state, Module};
use tinygrad::runtime::{check_env, run_main};
use tinygrad::tensor::Reduction;
use tinygrad::{dtypes, Error, Result, Tensor, TinyJit};

fn main() -> ExitCode {
    run_main(train)
}

fn train() -> Result<()> {
    check_env()?;
    let dp = DataParallel::init()?;
    let steps = getenv_int("STEPS", 70, 1, i64::MAX)? as usize;
    let bs = getenv_int("BS", 512, 1, 60_000)? as usize;
    let seed = getenv_int("SEED", 1337, 0, i64::MAX)? as u64;
    let fail = (getenv_int("MPI_FAIL_RANK", -1, -1, i64::MAX)?, getenv_int("MPI_FAIL_AT_STEP", -1, -1, i64::MAX)?);
    let bucket = getenv_int("BUCKET_KB", 25 << 10, 1, i64::MAX)? as usize * 1024;
    let weights = getenv_output_path("WEIGHTS", "beautiful_mnist_mpi.safetensors")?;
    let t0 = Instant::now();
    Tensor::manual_seed(seed);
    let (x_train, y_train, x_test, y_test) = tinygrad::nn::datasets::mnist()?;
    let model = Model::new();
    let params = model.get_parameters();
    // DTYPE=float64: the whole model in double precision (so a comparison with one process is not lost to float32
    // rounding that flips a max-pool's choice)
    match getenv_str("DTYPE", "float32").as_str() {
        "float32" => {}
        "float64" => params.iter().filter(|p| p.dtype().is_float()).for_each(|p| _ = p.replace(&p.cast(dtypes::FLOAT64))),
        v => return Err(Error::Env { var: "DTYPE".into(), value: v.into(), allowed: "float32 or float64".into() }),
    }
    let all: Vec<&Tensor> = params.iter().collect();
    dp.broadcast(&all)?;
    if dp.is_root() {
        println!("training on {} ranks, {} rows of each batch of {bs} per rank", dp.size(), bs / dp.size());
    }
    let opt = match getenv_str("OPT", "adam").as_str() {
        "sgd" => optim::sgd(&params, 0.01, 0.9, 0.0, false, false),
        _ => optim::adam_with(&params, optim::AdamOpts::default()),
    };
    let trainable: Vec<Tensor> = params.iter().filter(|p| p.is_param()).cloned().collect();
    let (lo, hi) = dp.part(bs);
    let n = x_train.shape()[0] as i64;
    // io[0]: the whole batch's row indices (the same on every rank); this rank trains on rows lo..hi of them
    let mut train_step = TinyJit::new(|io: &[Tensor]| {
        let _training = Context::new(&[(&TRAINING, 1)]);
        opt.zero_grad();
        let samples = io[0].shrink(&[(lo, hi)]);
        let (x, y) = (x_train.getitem(&[(&samples).into()]), y_train.getitem(&[(&samples).into()]));
        let loss = model.forward(&x).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        dp.allreduce_gradients(&trainable, bucket);
        // the whole batch's loss: the mean of the ranks'
        let whole = loss.allreduce_processes() / dp.size() as f64;
        let mut ts = vec![whole.clone()];
        ts.extend(opt.schedule_step());
        Tensor::realize_all(&ts.iter().collect::<Vec<_>>())?;
        Ok(vec![whole])
    });
    for i in 0..steps {
        if fail == (dp.rank() as i64, i as i64 + 1) {
            eprintln!("error: rank {}: failing at step {} (MPI_FAIL_AT_STEP)", dp.rank(), i + 1);
            std::process::exit(3);
        }
        let t = Instant::now();
        let loss = train_step.call(&[Tensor::randint([bs], 0, n)])?[0].cast(dtypes::FLOAT32).item::<f32>()?;
        dp.check_equal(&all)?;
        if dp.is_root() {
            println!(
                "step {:3} loss {loss:.6} ({:.0} ms), parameters equal on {} ranks",
                i + 1,
                t.elapsed().as_secs_f64() * 1e3,
                dp.size()
            );
        }
    }
    if dp.is_root() {
        let acc = (model.forward(&x_test).argmax(Some(1), false).eq(&y_test).cast(dtypes::FLOAT32).mean(..) * 100.0).item::<f32>()?;
        state::safe_save(&model.get_state_dict(), &weights)?;
        println!("wall {:.1} s; saved weights to {}", t0.elapsed().as_secs_f64(), weights.display());
        println!("test accuracy: {acc:.2}%");
    }
    Ok(())
}
