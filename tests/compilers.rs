//! The compiler differential check: every kernel of the conformance suite and of beautiful_mnist training steps is
//! compiled by gcc (`CC`) and by clang (`CC_CHECK`), both builds run on the same inputs, and their outputs must agree
//! (see `runtime::Device::check_compiler`); a disagreement is an error naming the kernel. And the check itself: a
//! kernel miscompiled on purpose is caught. Each runs in a child process of this binary (the compilers are chosen
//! once per process). Skipped with a note where gcc or clang is missing, except under CI.

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

#[path = "../examples/beautiful_mnist/model.rs"]
#[allow(dead_code)]
mod model;

mod common;

use tinygrad::nn::{datasets, optim, Module};
use tinygrad::{dtypes, Tensor};

const GCC_CHECKED_BY_CLANG: [(&str, &str); 2] = [("CC", "gcc"), ("CC_CHECK", "clang")];

#[test]
fn conformance_kernels_agree_under_gcc_and_clang() {
    if common::have(&["gcc", "clang"], "the gcc/clang differential check") {
        common::rerun("conformance_under_the_check", &GCC_CHECKED_BY_CLANG);
    }
}

#[test]
#[ignore = "run by conformance_kernels_agree_under_gcc_and_clang, with CC and CC_CHECK set"]
fn conformance_under_the_check() {
    let dir = std::env::var("TINYGRAD_CONFORMANCE_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/conformance/ops").into());
    let (passed, failed) = runner::run_dir(std::path::Path::new(&dir));
    println!(
        "conformance with CC={:?} CC_CHECK={:?}: {passed} passed, {} failed",
        std::env::var("CC"),
        std::env::var("CC_CHECK"),
        failed.len()
    );
    assert!(passed > 0, "no cases found in {dir}");
    let lines: Vec<&str> = failed.iter().map(|s| s.lines().next().unwrap_or("")).collect();
    assert!(failed.is_empty(), "{} failing cases:\n{}", failed.len(), lines.join("\n"));
}

#[test]
fn beautiful_mnist_kernels_agree_under_gcc_and_clang() {
    if common::have(&["gcc", "clang"], "the gcc/clang differential check") {
        common::rerun("beautiful_mnist_under_the_check", &GCC_CHECKED_BY_CLANG);
    }
}

#[test]
#[ignore = "run by beautiful_mnist_kernels_agree_under_gcc_and_clang, with CC and CC_CHECK set"]
fn beautiful_mnist_under_the_check() {
    // the main job's model and batch (512), its weights' init, two training steps and an evaluation
    let dir = std::env::var_os("TINYGRAD_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/datasets").into());
    let (x_train, y_train, x_test, _) = datasets::mnist_from(&dir.join("mnist"), datasets::MNIST_URL).unwrap();
    Tensor::manual_seed(1337);
    let model = model::Model::new();
    let opt = optim::adam_with(&model.get_parameters(), optim::AdamOpts::default());
    Tensor::realize_all(&model.get_parameters().iter().collect::<Vec<_>>()).unwrap();
    for step in 0..2 {
        let samples = Tensor::randint([512], 0, 60000);
        let (x, y) = (x_train.getitem(&[(&samples).into()]), y_train.getitem(&[(&samples).into()]));
        let loss = model.train_step(&opt, &x, &y).unwrap().item::<f32>().unwrap();
        assert!(loss.is_finite(), "step {step}: loss {loss}");
    }
    let xt = x_test.shrink(&[(0, 1000), (0, 1), (0, 28), (0, 28)]);
    model.forward(&xt).argmax(Some(1), false).cast(dtypes::INT32).realize().unwrap();
}

#[test]
fn narrow_integer_casts_agree_under_gcc_and_clang() {
    if common::have(&["gcc", "clang"], "the gcc/clang differential check") {
        common::rerun("narrow_integer_casts_under_the_check", &GCC_CHECKED_BY_CLANG);
    }
}

#[test]
#[ignore = "run by narrow_integer_casts_agree_under_gcc_and_clang, with CC and CC_CHECK set"]
fn narrow_integer_casts_under_the_check() {
    // 8- and 16-bit integers to floats, as vectors (4,096 elements: the kernels take vector loads), through the C
    // renderer's int32 lanes and gcc's register hold; every value is exact in float32 and float64
    let n = 4096;
    // (the extremes first, then a spread of values)
    let vals =
        |lo: i64, hi: i64| -> Vec<i64> { [lo, hi].into_iter().chain((2..n as i64).map(|i| lo + (i * 7919) % (hi - lo + 1))).collect() };
    let check = |t: Tensor, want: &[i64], what: &str| {
        let got = t.cast(dtypes::FLOAT32).to_vec::<f32>().unwrap();
        assert!(got.iter().zip(want).all(|(&g, &w)| g == w as f32), "{what} -> float32");
        let got = t.cast(dtypes::FLOAT64).to_vec::<f64>().unwrap();
        assert!(got.iter().zip(want).all(|(&g, &w)| g == w as f64), "{what} -> float64");
    };
    let u8s = vals(0, 255);
    check(Tensor::from_slice(&u8s.iter().map(|&v| v as u8).collect::<Vec<_>>(), [n]), &u8s, "uint8");
    let i8s = vals(-128, 127);
    check(Tensor::from_slice(&i8s.iter().map(|&v| v as i8).collect::<Vec<_>>(), [n]), &i8s, "int8");
    let u16s = vals(0, 65535);
    check(Tensor::from_slice(&u16s.iter().map(|&v| v as u16).collect::<Vec<_>>(), [n]), &u16s, "uint16");
    let i16s = vals(-32768, 32767);
    check(Tensor::from_slice(&i16s.iter().map(|&v| v as i16).collect::<Vec<_>>(), [n]), &i16s, "int16");
}

#[test]
fn half_vector_conversions_agree_under_gcc_and_clang() {
    if common::have(&["gcc", "clang"], "the gcc/clang differential check") {
        common::rerun("half_vector_conversions_under_the_check", &GCC_CHECKED_BY_CLANG);
    }
}

#[test]
#[ignore = "run by half_vector_conversions_agree_under_gcc_and_clang, with CC and CC_CHECK set"]
fn half_vector_conversions_under_the_check() {
    // every float16 bit pattern to float32 as vectors (gcc: one F16C or AVX-512 conversion a vector), against the
    // half crate's conversion; NaNs stay NaNs
    let bits: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
    let got = Tensor::from_slice(&bits, [bits.len()]).cast(dtypes::FLOAT32).to_vec::<f32>().unwrap();
    for (h, g) in bits.iter().zip(&got) {
        let want = h.to_f32();
        assert!(*g == want || (g.is_nan() && want.is_nan()), "{:#06x}: {g}, want {want}", h.to_bits());
    }
    // and back: each finite half, the midpoints between neighbours (ties to even), just off them, past the largest
    // half (to infinity), both signs
    let halves = |i: u16| half::f16::from_bits(i).to_f32();
    let floats: Vec<f32> = (0..0x7c00u16)
        .flat_map(|i| {
            let (lo, mid) = (halves(i), (halves(i) + halves(i + 1)) / 2.0);
            [lo, mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1), 65520.0, 1e-9]
        })
        .flat_map(|f| [f, -f])
        .collect();
    let got = Tensor::from_slice(&floats, [floats.len()]).cast(dtypes::FLOAT16).to_vec::<half::f16>().unwrap();
    for (f, g) in floats.iter().zip(&got) {
        assert_eq!(g.to_bits(), half::f16::from_f32(*f).to_bits(), "{f} -> half");
    }
}

#[test]
fn a_miscompiled_kernel_is_caught() {
    // the check compiler: the C compiler, after turning the kernel's constant 2 into 3
    if !common::have(&["cc", "sed"], "the differential check's own test") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tinygrad-miscompile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("wrong-cc");
    std::fs::write(&script, "#!/bin/sh\nsed 's/2\\.0f/3.0f/g' | exec cc \"$@\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = common::rerun("a_kernel_under_a_wrong_check", &[("CC", "cc"), ("CC_CHECK", script.to_str().unwrap())]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.contains("caught: "), "{out}");
}

#[test]
#[ignore = "run by a_miscompiled_kernel_is_caught, with CC_CHECK set to a compiler that changes the kernel"]
fn a_kernel_under_a_wrong_check() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [4]);
    let err = (&a * 2.0 + 1.0).realize().map(drop).expect_err("the check build computes a*3+1");
    let msg = err.to_string();
    assert!(msg.contains("kernel E_4") && msg.contains("disagree at output element 0") && msg.contains("3 vs 4"), "{msg}");
    println!("caught: {msg}");
}
