//! A shortened beautiful_mnist (tinygrad's model, Adam, a jitted step on host-sampled batches) on the real
//! MNIST files (TINYGRAD_DATA_DIR, default ../shared/datasets): 40 steps of batch 128 must reach 90% on the
//! first 2000 test images. (The full recipe is `examples/beautiful_mnist/`.) Under the default compiler, and again
//! under gcc where that is another (a max's gradient once went NaN under gcc alone).

#[path = "../examples/beautiful_mnist/model.rs"]
mod model;

mod common;

use model::Model;
use tinygrad::nn::{datasets, optim, Module};
use tinygrad::{dtypes, Tensor, TinyJit};

#[test]
fn short_training_reaches_90_percent() {
    let dir = std::env::var_os("TINYGRAD_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/datasets").into());
    let (x_train, y_train, x_test, y_test) = datasets::mnist_from(&dir.join("mnist"), datasets::MNIST_URL).unwrap();
    Tensor::manual_seed(7);
    let model = Model::new();
    let opt = optim::adam_with(&model.get_parameters(), optim::AdamOpts::default());
    let (xs, ys) = (x_train.to_bytes().unwrap(), y_train.to_bytes().unwrap());
    let (bs, mut rng) = (128usize, 0x2545_f491_4f6c_dd1du64);
    let mut step = TinyJit::new(|io: &[Tensor]| Ok(vec![model.train_step(&opt, &io[0], &io[1])?]));
    let mut losses = Vec::new();
    for _ in 0..40 {
        let idx: Vec<usize> = (0..bs)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng % 60000) as usize
            })
            .collect();
        let xb: Vec<u8> = idx.iter().flat_map(|&j| xs[j * 784..(j + 1) * 784].iter().copied()).collect();
        let yb: Vec<u8> = idx.iter().map(|&j| ys[j]).collect();
        let io = [Tensor::from_bytes(&xb, dtypes::UINT8, [bs, 1, 28, 28]), Tensor::from_bytes(&yb, dtypes::UINT8, [bs])];
        losses.push(step.call(&io).unwrap()[0].item::<f32>().unwrap());
    }
    let (xt, yt) = (x_test.shrink(&[(0, 2000), (0, 1), (0, 28), (0, 28)]), y_test.shrink(&[(0, 2000)]));
    let acc = (model.forward(&xt).argmax(Some(1), false).eq(&yt).cast(dtypes::FLOAT32).mean(..) * 100.0).item::<f32>().unwrap();
    assert!(losses[39] < losses[0] / 3.0, "loss did not fall: {losses:?}");
    assert!(acc >= 90.0, "test accuracy {acc:.2}% after 40 steps (losses {losses:?})");
    println!("40 steps: loss {:.3} -> {:.3}, test accuracy {acc:.2}%", losses[0], losses[39]);
}

#[test]
fn short_training_reaches_90_percent_under_gcc() {
    if common::default_compiler_is("gcc") {
        eprintln!("skipping: the default compiler is gcc, which short_training_reaches_90_percent ran");
    } else if common::have(&["gcc"], "training under gcc") {
        common::rerun("short_training_reaches_90_percent", &[("CC", "gcc")]);
    }
}

/// The beautiful_mnist example binary `cargo test` builds beside this test (`target/<profile>/examples/`).
fn example_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps/");
    profile_dir.join("examples").join(format!("beautiful_mnist{}", std::env::consts::EXE_SUFFIX))
}

/// tinygrad's beautiful_mnist_multigpu: `GPUS=2` trains on `CPU` and `CPU:1` (weights replicated, each batch split
/// along its rows, the batch reductions allreduced) and must reach the single device's 97.5% at 70 steps.
#[test]
fn data_parallel_training_on_two_devices_reaches_97_5_percent() {
    let dir = std::env::var("TINYGRAD_DATA_DIR").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/datasets").into());
    let weights = std::env::temp_dir().join(format!("gpus2-{}.safetensors", std::process::id()));
    let out = std::process::Command::new(example_binary())
        .envs([("GPUS", "2"), ("STEPS", "70"), ("SEED", "1337"), ("TINYGRAD_DATA_DIR", dir.as_str())])
        .env("WEIGHTS", &weights)
        .output()
        .expect("the beautiful_mnist example runs");
    let _ = std::fs::remove_file(&weights);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("training on CPU, CPU:1"), "{stdout}");
    let acc: f32 =
        stdout.lines().find_map(|l| l.strip_prefix("test accuracy: ")?.strip_suffix('%')?.parse().ok()).expect("an accuracy line");
    assert!(acc >= 97.5, "GPUS=2: test accuracy {acc:.2}% after 70 steps\n{stdout}");
}
