//! tinygrad's beautiful_mnist: a small convnet trained with Adam on MNIST, with a jitted train step.
//!
//! `cargo run --release --example beautiful_mnist` (env: STEPS, default 70; BS, default 512; SEED; MNIST files
//! from `$TINYGRAD_DATA_DIR/mnist/`, downloaded when missing). Settings are checked before anything runs: a bad
//! one (or an unwritable `WEIGHTS` path, or no working C compiler) prints one `error: ...` line and exits with 1. It prints `test accuracy: NN.NN%` and saves the
//! weights to `WEIGHTS` (default `beautiful_mnist.safetensors`). `EVAL=path.safetensors` only evaluates a saved
//! model. The training set stays on the device: each step draws `BS` row indices (`Tensor::randint`) and the jitted
//! step gathers its batch, `X_train[samples]` (uint8 pixels, fed unnormalized), as tinygrad's does. The draw is the
//! jit's input rather than made inside it: the RNG counter lives on the host, so a replayed step would reuse the
//! captured draw.
//!
//! Data-parallel on several devices (tinygrad's examples/beautiful_mnist_multigpu.py): `GPUS=n` trains on the
//! default device's instances `DEV:0`..`DEV:n-1` (`GPUS=2`: `CPU` and `CPU:1`), `DEVICES=CL,CPU` on those named;
//! the weights and optimizer state are replicated on each, each step's batch is sharded along its rows, and the
//! reductions over the batch (the loss, BatchNorm's statistics, the weights' gradients) are allreduces.

mod model;

use indicatif::{ProgressBar, ProgressStyle};
use model::Model;
use std::process::ExitCode;
use std::time::Instant;
use tinygrad::helpers::{getenv_int, getenv_output_path, getenv_str};
use tinygrad::nn::{optim, state, Module};
use tinygrad::runtime::{canonicalize_device, check_env, default_device, run_main};
use tinygrad::{dtypes, Result, Tensor, TinyJit};

/// The devices to train on: `DEVICES` (comma-separated), else `GPUS` instances of the default device, else the
/// default device alone.
fn train_devices() -> Result<Vec<String>> {
    let named = getenv_str("DEVICES", "");
    if !named.is_empty() {
        let devs: Vec<String> = named.split(',').map(canonicalize_device).collect();
        for d in &devs {
            tinygrad::runtime::open_device(d)?;
        }
        return Ok(devs);
    }
    let gpus = getenv_int("GPUS", 1, 1, 64)?;
    let base = default_device();
    let base = base.split(':').next().unwrap_or("CPU");
    Ok(if gpus == 1 { vec![default_device()] } else { (0..gpus).map(|i| canonicalize_device(&format!("{base}:{i}"))).collect() })
}

/// The test accuracy in percent.
fn accuracy(model: &Model, x: &Tensor, y: &Tensor) -> Result<f32> {
    (model.forward(x).argmax(Some(1), false).eq(y).cast(dtypes::FLOAT32).mean(..) * 100.0).item::<f32>()
}

fn main() -> ExitCode {
    run_main(train)
}

fn train() -> Result<()> {
    check_env()?;
    let steps = getenv_int("STEPS", 70, 1, i64::MAX)? as usize;
    let bs = getenv_int("BS", 512, 1, 60_000)? as usize;
    let seed = getenv_int("SEED", 1337, 0, i64::MAX)? as u64;
    let eval = getenv_str("EVAL", "");
    // EVAL's file is read before the data set loads; WEIGHTS is only written, so it is checked when training
    let eval_state = if eval.is_empty() { None } else { Some(state::safe_load(&eval)?) };
    let weights = if eval.is_empty() { getenv_output_path("WEIGHTS", "beautiful_mnist.safetensors")? } else { Default::default() };
    let t0 = Instant::now();
    Tensor::manual_seed(seed);
    let (x_train, y_train, x_test, y_test) = tinygrad::nn::datasets::mnist()?;
    let model = Model::new();
    let devices = train_devices()?;
    let devs: Vec<&str> = devices.iter().map(String::as_str).collect();
    if devs.len() > 1 {
        println!("training on {}", devs.join(", "));
        model.get_parameters().iter().for_each(|p| _ = p.shard_(&devs, None));
    }
    // a batch split along its rows over the devices (itself on one device)
    let shard = |t: Tensor| if devs.len() > 1 && t.shape()[0].is_multiple_of(devs.len()) { t.shard(&devs, Some(0)) } else { t };
    let (x_test, y_test) = (shard(x_test), shard(y_test));
    if let Some(sd) = eval_state {
        model.load_state_dict(&sd, true)?;
        println!("test accuracy: {:.2}%", accuracy(&model, &x_test, &y_test)?);
        return Ok(());
    }
    let opt = optim::adam_with(&model.get_parameters(), optim::AdamOpts::default());
    let n = x_train.shape()[0] as i64;
    // `X_train[samples]`: a gather once codegen collapses the one-hot sum
    let batch = |t: &Tensor, samples: &Tensor| shard(t.getitem(&[samples.into()]));
    // io[0]: the batch's row indices, int32 (BS,)
    // (the loss is replicated on every device: the jit returns the first device's)
    let mut train_step = TinyJit::new(|io: &[Tensor]| {
        Ok(vec![model.train_step(&opt, &batch(&x_train, &io[0]), &batch(&y_train, &io[0]))?.to(devs[0]).contiguous()])
    });
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"));
    let (mut test_acc, mut times) = (f32::NAN, Vec::with_capacity(steps));
    for i in 0..steps {
        let t = Instant::now();
        if i == 0 {
            // the weights' random init in kernels of its own (timed with the first step): fused into the first
            // step's kernels it would make them differ from every later step's, and all be compiled twice
            Tensor::realize_all(&model.get_parameters().iter().collect::<Vec<_>>())?;
        }
        let loss = train_step.call(&[Tensor::randint([bs], 0, n)])?[0].item::<f32>()?;
        times.push(t.elapsed().as_secs_f64());
        if i % 10 == 9 || i + 1 == steps {
            test_acc = accuracy(&model, &x_test, &y_test)?;
        }
        bar.set_message(format!("loss {loss:6.2} test accuracy {test_acc:5.2}% {:.2} steps/s", 1.0 / times[i]));
        bar.inc(1);
    }
    bar.finish();
    let steady = if times.len() > 3 { times[2..].iter().sum::<f64>() / (times.len() - 2) as f64 } else { f64::NAN };
    println!(
        "wall {:.1} s, first step {:.2} s, second (capture) {:.2} s, replayed steps {:.0} ms (mean, training only)",
        t0.elapsed().as_secs_f64(),
        times.first().copied().unwrap_or(0.0),
        times.get(1).copied().unwrap_or(0.0),
        steady * 1e3
    );
    state::safe_save(&model.get_state_dict(), &weights)?;
    println!("saved weights to {}", weights.display());
    println!("test accuracy: {test_acc:.2}%");
    Ok(())
}
