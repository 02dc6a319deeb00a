//! A seeded random-graph differential fuzzer (tinygrad's fuzz_schedule / fuzz_uops in spirit): random programs of
//! elementwise, reduce and movement ops over float32 inputs, with the gradients of a scalar loss, realized fused on
//! every device (CPU, PYTHON, CL where OpenCL has a device: required under CI, and CUDA where a GPU is) and unfused on the interpreter (every forward op its own kernel: `contiguous` after
//! each); all results must agree within float32 tolerance. A failure prints the seed, the device and the program.
//!
//! The CPU's programs run again with gcc compiling the kernels and clang checking each (`CC_CHECK`, see
//! tests/compilers.rs).
//!
//! `FUZZ_SEEDS=n` changes the number of seeds per device (default 200); `FUZZ_SEED=s` runs one seed.

mod common;

use rand::{rngs::StdRng, Rng, SeedableRng};
use tinygrad::helpers::Context;
use tinygrad::Tensor;

/// One op of a program: its operands are earlier values, by index (the inputs first).
#[derive(Clone, Debug)]
enum Step {
    Unary(&'static str, usize),
    Binary(&'static str, usize, usize),
    Reduce(&'static str, usize, usize),
    Permute(usize, Vec<usize>),
    Flatten(usize),
    Pad(usize, Vec<(i64, i64)>),
    Shrink(usize, Vec<(usize, usize)>),
    Flip(usize, usize),
    Expand(usize, usize, usize),
}

const UNARY: [&str; 8] = ["neg", "relu", "sigmoid", "tanh", "sin", "exp2", "log2", "sqrt"];
const BINARY: [&str; 4] = ["add", "sub", "mul", "maximum"];

fn unary(op: &str, x: &Tensor) -> Tensor {
    match op {
        "neg" => x.neg(),
        "relu" => x.relu(),
        "sigmoid" => x.sigmoid(),
        "tanh" => x.tanh(),
        "sin" => x.sin(),
        // bounded inputs keep every value finite
        "exp2" => x.tanh().exp2(),
        "log2" => (x.abs() + 1.0).log2(),
        "sqrt" => (x.abs() + 0.5).sqrt(),
        _ => unreachable!(),
    }
}

fn binary(op: &str, x: &Tensor, y: &Tensor) -> Tensor {
    match op {
        "add" => x + y,
        "sub" => x - y,
        "mul" => x * y,
        "maximum" => x.maximum(y),
        _ => unreachable!(),
    }
}

/// The values of `steps` over `inputs` (contiguous after every op when `unfused`): every value, in order.
fn run(inputs: &[Tensor], steps: &[Step], unfused: bool) -> Vec<Tensor> {
    let mut v: Vec<Tensor> = inputs.to_vec();
    for s in steps {
        let t = match s {
            Step::Unary(op, a) => unary(op, &v[*a]),
            Step::Binary(op, a, b) => binary(op, &v[*a], &v[*b]),
            Step::Reduce("sum", a, axis) => v[*a].sum_keepdim(*axis),
            Step::Reduce(_, a, axis) => v[*a].max_keepdim(*axis),
            Step::Permute(a, p) => v[*a].permute(p.clone()),
            Step::Flatten(a) => v[*a].reshape(v[*a].numel()),
            Step::Pad(a, p) => v[*a].pad(p),
            Step::Shrink(a, b) => v[*a].shrink(b),
            Step::Flip(a, axis) => v[*a].flip(*axis),
            Step::Expand(a, axis, n) => {
                let mut shape = v[*a].shape();
                shape[*axis] = *n;
                v[*a].expand(shape)
            }
        };
        v.push(if unfused { t.contiguous() } else { t });
    }
    v
}

/// A random program over `inputs` of 3-8 steps, each drawn among the ops that fit the shapes at hand.
fn program(rng: &mut StdRng, inputs: &[Tensor]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut v: Vec<Tensor> = inputs.to_vec();
    for _ in 0..3 + rng.random_range(0..6) {
        let a = rng.random_range(0..v.len());
        let shape = v[a].shape();
        let axis = rng.random_range(0..shape.len());
        let step = match rng.random_range(0..9) {
            0 | 1 => Step::Unary(UNARY[rng.random_range(0..UNARY.len())], a),
            2 | 3 => {
                let same: Vec<usize> = (0..v.len()).filter(|&b| v[b].shape() == shape).collect();
                Step::Binary(BINARY[rng.random_range(0..BINARY.len())], a, same[rng.random_range(0..same.len())])
            }
            4 => Step::Reduce(["sum", "max"][rng.random_range(0..2)], a, axis),
            5 => {
                let mut p: Vec<usize> = (0..shape.len()).collect();
                (1..p.len()).rev().for_each(|i| p.swap(i, rng.random_range(0..i + 1)));
                Step::Permute(a, p)
            }
            6 if shape.len() > 1 => Step::Flatten(a),
            6 => Step::Flip(a, axis),
            7 => match rng.random_range(0..2) {
                0 => Step::Pad(a, shape.iter().map(|_| (rng.random_range(0..2) as i64, rng.random_range(0..3) as i64)).collect()),
                _ => Step::Shrink(
                    a,
                    shape
                        .iter()
                        .map(|&d| {
                            let lo = rng.random_range(0..d);
                            (lo, lo + 1 + rng.random_range(0..d - lo))
                        })
                        .collect(),
                ),
            },
            _ => match shape.iter().position(|&d| d == 1) {
                Some(ax) => Step::Expand(a, ax, 2 + rng.random_range(0..3)),
                None => Step::Reduce("sum", a, axis),
            },
        };
        v.push(run(&v, std::slice::from_ref(&step), false).pop().expect("one value"));
        steps.push(step);
    }
    steps
}

/// Inputs for seed `seed`: 1-3 float32 tensors of rank 1-3, dims 1-5, values in [-2, 2), on the default device; one
/// seed in four has a long last axis (256 or 512) instead, whose reductions GPU targets split over a workgroup.
fn inputs(rng: &mut StdRng) -> Vec<(Vec<usize>, Vec<f32>)> {
    let mut shape: Vec<usize> = (0..1 + rng.random_range(0..3)).map(|_| 1 + rng.random_range(0..5)).collect();
    if rng.random_range(0..4) == 0 {
        *shape.last_mut().expect("rank >= 1") = 256 << rng.random_range(0..2);
    }
    (0..1 + rng.random_range(0..3))
        .map(|_| {
            let n: usize = shape.iter().product();
            (shape.clone(), (0..n).map(|_| (rng.random_range(0..4000) as f32 / 1000.0) - 2.0).collect())
        })
        .collect()
}

/// Every value of the program and the gradient of the sum of its last value by each input, on the default
/// device, as host floats.
fn evaluate(data: &[(Vec<usize>, Vec<f32>)], steps: &[Step], unfused: bool) -> Vec<Vec<f32>> {
    let xs: Vec<Tensor> = data.iter().map(|(s, d)| Tensor::from_slice(d, s.clone()).requires_grad_(true).clone()).collect();
    let v = run(&xs, steps, unfused);
    let loss = v.last().expect("a value").sum(..);
    loss.backward();
    let grads: Vec<Tensor> = xs.iter().map(|x| x.grad().unwrap_or_else(|| x.zeros_like())).collect();
    let all: Vec<&Tensor> = v[xs.len()..].iter().chain(&grads).collect();
    Tensor::realize_all(&all).expect("realize");
    all.iter().map(|t| t.to_vec::<f32>().expect("copyout")).collect()
}

/// Runs seed `seed`'s program fused on `dev` and unfused on PYTHON; panics with the program on a mismatch.
fn check(seed: u64, dev: &str) {
    let mut rng = StdRng::seed_from_u64(seed);
    let data = inputs(&mut rng);
    let steps = program(&mut rng, &data.iter().map(|(s, d)| Tensor::from_slice(d, s.clone())).collect::<Vec<_>>());
    let fused = {
        let _d = Context::new(&[]).dev(dev);
        evaluate(&data, &steps, false)
    };
    let reference = {
        let _d = Context::new(&[]).dev("PYTHON");
        evaluate(&data, &steps, true)
    };
    assert_eq!(fused.len(), reference.len(), "seed {seed} on {dev}: one value per step and input");
    for (i, (got, want)) in fused.iter().zip(&reference).enumerate() {
        assert_eq!(got.len(), want.len(), "seed {seed} on {dev}: value {i} has {} elements, want {}", got.len(), want.len());
        let what = if i < steps.len() { format!("value v{}", i + data.len()) } else { format!("gradient of input {}", i - steps.len()) };
        for (j, (g, w)) in got.iter().zip(want).enumerate() {
            let ok = g == w || (g - w).abs() <= 1e-4 + 1e-3 * w.abs() || (g.is_nan() && w.is_nan());
            assert!(
                ok,
                "seed {seed} on {dev}: {what}, element {j}: {g} (fused) vs {w} (unfused on PYTHON)\ninputs: {:?}\nprogram:\n{}",
                data.iter().map(|d| &d.0).collect::<Vec<_>>(),
                steps.iter().enumerate().map(|(k, s)| format!("  v{} = {s:?}", k + data.len())).collect::<Vec<_>>().join("\n")
            );
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("FUZZ_SEED") {
        return vec![s.parse().expect("FUZZ_SEED is an integer")];
    }
    (0..std::env::var("FUZZ_SEEDS").map_or(200, |n| n.parse().expect("FUZZ_SEEDS is an integer"))).collect()
}

#[test]
fn fused_on_the_cpu_matches_unfused_on_the_interpreter() {
    seeds().into_iter().for_each(|s| check(s, "CPU"));
}

#[test]
fn fused_on_the_cpu_under_gcc_checked_by_clang() {
    if common::have(&["gcc", "clang"], "the fuzzer under gcc and clang") {
        common::rerun("fused_on_the_cpu_matches_unfused_on_the_interpreter", &[("CC", "gcc"), ("CC_CHECK", "clang")]);
    }
}

#[test]
fn fused_on_the_cpu_under_beam_matches_unfused_on_the_interpreter() {
    // (each kernel BEAM-searched on its real inputs, width 1 and at most a second a kernel: a tenth of the seeds)
    let _beam = Context::new(&[(&tinygrad::helpers::BEAM, 1), (&tinygrad::codegen::opt::search::BEAM_MAX_SEC, 1)]);
    let seeds = seeds();
    seeds.iter().take(seeds.len().div_ceil(10)).for_each(|&s| check(s, "CPU"));
}

#[test]
fn fused_on_the_interpreter_matches_unfused() {
    seeds().into_iter().for_each(|s| check(s, "PYTHON"));
}

#[test]
fn fused_on_opencl_matches_unfused_on_the_interpreter() {
    match tinygrad::runtime::cl::device() {
        Ok(_) => seeds().into_iter().for_each(|s| check(s, "CL")),
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI must have an OpenCL device (.ci/run installs PoCL): {e}");
            eprintln!("skipping: {e}");
        }
    }
}

#[test]
fn fused_on_cuda_matches_unfused_on_the_interpreter() {
    match tinygrad::runtime::cuda::device() {
        Ok(_) => seeds().into_iter().for_each(|s| check(s, "CUDA")),
        Err(e) => eprintln!("skipping: {e}"),
    }
}
