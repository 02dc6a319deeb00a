//! Kernel throughput figures on the default device, one JSON line each:
//! `{"name": ..., "value": ..., "unit": ..., "runs": N}`, the median of N warm runs after one warm-up run (which
//! compiles). A run builds the lazy expression from realized inputs and realizes it (synchronous on CPU).
//!
//! `cargo run --release --example bench` (env: `FILTER=substring` keeps matching figures, `RUNS=n` overrides the
//! number of timed runs). `bench/compare.py` runs the same workloads with numpy, tinygrad and candle.

#[path = "beautiful_mnist/model.rs"]
#[allow(dead_code)]
mod model;

use std::time::Instant;
use tinygrad::codegen::full_rewrite;
use tinygrad::helpers::{getenv_int, getenv_str, Context, BEAM, IGNORE_BEAM_CACHE, TRAINING};
use tinygrad::nn::{optim, Module};
use tinygrad::renderer::{cstyle, Renderer};
use tinygrad::runtime::{check_env, run_main};
use tinygrad::schedule::create_schedule;
use tinygrad::tensor::{Conv2dOpts, Reduction};
use tinygrad::{Result, Tensor, UOp};

/// How a figure turns a median time in seconds into its value.
enum Unit {
    /// Floating-point operations per run, shown as GFLOP/s.
    Gflops(f64),
    /// Bytes moved per run, shown as GB/s.
    Gbs(f64),
    /// The time itself, in milliseconds.
    Ms,
    /// The time of each of this many items, in microseconds.
    UsEach(f64),
}

/// Realized float32 values in `[-1, 1)` from a cheap deterministic hash of the index.
fn data(shape: &[usize], seed: u64) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n as u64)
        .map(|i| {
            let h = (i ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
            ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let t = Tensor::from_slice(&v, shape.to_vec());
    t.realize()?;
    Ok(t)
}

/// The figures: FILTER, RUNS and the timing loop.
struct Bench {
    filter: String,
    runs: Option<usize>,
}

impl Bench {
    /// Whether figure `name` passes FILTER.
    fn want(&self, name: &str) -> bool {
        name.contains(&self.filter)
    }
    /// Times `f` (warm-up calls for at least 3 calls and 50 ms, then the median of `runs` calls) and prints figure
    /// `name`'s JSON line. (One warm-up call left a process's first figure at half speed under gcc: matmul_256 0.46x
    /// numpy in `bench/compare.py`'s gcc pass, 1.0x when run again.)
    fn time(&self, name: &str, unit: Unit, runs: usize, f: impl Fn() -> Result<()>) -> Result<()> {
        let runs = self.runs.unwrap_or(runs).max(1);
        // (a GPU's launches return before its kernels end)
        let dev = tinygrad::runtime::open_device(&tinygrad::runtime::default_device())?;
        let f = || f().and_then(|()| dev.synchronize());
        let warm = Instant::now();
        for i in 0.. {
            f()?;
            if i >= 2 && warm.elapsed().as_secs_f64() >= 0.05 {
                break;
            }
        }
        let mut ts: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                f().map(|()| t.elapsed().as_secs_f64())
            })
            .collect::<Result<_>>()?;
        ts.sort_by(f64::total_cmp);
        let t = if runs % 2 == 1 { ts[runs / 2] } else { (ts[runs / 2 - 1] + ts[runs / 2]) / 2.0 };
        let (value, unit) = match unit {
            Unit::Gflops(w) => (w / t / 1e9, "GFLOP/s"),
            Unit::Gbs(b) => (b / t / 1e9, "GB/s"),
            Unit::Ms => (t * 1e3, "ms"),
            Unit::UsEach(n) => (t * 1e6 / n, "us"),
        };
        println!(r#"{{"name": "{name}", "value": {value:.3}, "unit": "{unit}", "runs": {runs}}}"#);
        Ok(())
    }
    /// `(m, k) @ (k, n)` in GFLOP/s.
    fn matmul(&self, name: &str, m: usize, k: usize, n: usize, runs: usize) -> Result<()> {
        if !self.want(name) {
            return Ok(());
        }
        let (a, b) = (data(&[m, k], 1)?, data(&[k, n], 2)?);
        self.time(name, Unit::Gflops(2.0 * (m * k * n) as f64), runs, || a.matmul(&b).realize().map(drop))
    }
}

/// Seconds the first realize of a 1024x1024 matmul takes under BEAM=2 with IGNORE_BEAM_CACHE=1: a cold BEAM search
/// of its kernels, their compile and one run. One JSON line, `beam2_search_matmul_1024`. (IGNORE_BEAM_CACHE=0 in the
/// environment times a warm start instead: the winners from the disk cache, no search.)
fn beam_search_time(b: &Bench) -> Result<()> {
    let name = "beam2_search_matmul_1024";
    if !b.want(name) {
        return Ok(());
    }
    let (x, y) = (data(&[1024, 1024], 9)?, data(&[1024, 1024], 10)?);
    let _g = Context::new(&[(&BEAM, 2), (&IGNORE_BEAM_CACHE, getenv_int("IGNORE_BEAM_CACHE", 1, 0, 1)?)]);
    let t = Instant::now();
    x.matmul(&y).realize()?;
    println!(r#"{{"name": "{name}", "value": {:.3}, "unit": "s", "runs": 1}}"#, t.elapsed().as_secs_f64());
    Ok(())
}

/// Microseconds of scheduling plus codegen (optimize, expand, lower, linearize, render; no C compiler) per kernel,
/// over the kernels of one beautiful_mnist training step (forward, backward, Adam) with cold caches. One JSON line,
/// `schedule_codegen_us_per_kernel`.
fn codegen_per_kernel(b: &Bench) -> Result<()> {
    let name = "schedule_codegen_us_per_kernel";
    if !b.want(name) {
        return Ok(());
    }
    let model = model::Model::new();
    let opt = optim::adam_with(&model.get_parameters(), optim::AdamOpts::default());
    let _training = Context::new(&[(&TRAINING, 1)]);
    let (x, y) = (data(&[512, 1, 28, 28], 11)?, Tensor::from_slice(&(0..512).map(|i: i32| i % 10).collect::<Vec<_>>(), [512]));
    opt.zero_grad();
    let loss = model.forward(&x).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
    loss.backward();
    let roots: Vec<UOp> = std::iter::once(loss).chain(opt.schedule_step()).map(|t| t.uop()).collect();
    let t = Instant::now();
    let sched = create_schedule(&roots, &Renderer::cpu());
    for item in &sched.items {
        std::hint::black_box(cstyle::render(&full_rewrite(&item.ast, &Renderer::cpu(), None)?));
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / sched.items.len() as f64;
    println!(r#"{{"name": "{name}", "value": {us:.1}, "unit": "us", "runs": 1, "kernels": {}}}"#, sched.items.len());
    Ok(())
}

/// Microseconds a TinyJit replay spends per kernel, over a captured chain of 1,000 kernels of 16 float32 elements each
/// (each launch's own work is a few nanoseconds: what is left is the replay's bookkeeping and the launch). One JSON
/// line, `jit_replay_us_per_kernel`.
fn jit_replay_per_kernel(b: &Bench) -> Result<()> {
    let name = "jit_replay_us_per_kernel";
    if !b.want(name) {
        return Ok(());
    }
    let n = 1000;
    let mut jit = tinygrad::TinyJit::new(|x: &[Tensor]| {
        let mut y = x[0].clone();
        for _ in 0..n {
            y = (y + 1.0f32).contiguous();
        }
        Ok(vec![y])
    });
    let x = data(&[getenv_int("JIT_N", 16, 1, 1 << 30).unwrap() as usize], 12)?;
    // (run, then capture: the timed calls replay)
    for _ in 0..2 {
        jit.call(std::slice::from_ref(&x))?;
    }
    let jit = std::cell::RefCell::new(jit);
    b.time(name, Unit::UsEach(n as f64), 20, || jit.borrow_mut().call(std::slice::from_ref(&x)).map(drop))
}

/// A decode step's product: a float32 row times a 4096 x 4096 Q4_1 or Q8_0 matrix (10.5 or 17.8 MB, past L2), as
/// GB/s of the matrix's bytes: dequantized to float in the kernel (`gguf::dequantize`) and by integer dot products
/// of the row quantized to int8 (`QuantMatrix`, its quantizing kernels included).
fn quant_matvec(b: &Bench) -> Result<()> {
    use tinygrad::nn::gguf::{dequantize, GgmlType, QuantMatrix, QuantRows};
    for (ty, name) in [(GgmlType::Q4_1, "q4_1"), (GgmlType::Q8_0, "q8_0")] {
        let n = 4096;
        let (nbytes, size) = (ty.nbytes(n * n).expect("whole blocks"), ty.type_size());
        // blocks of d = 2^-7 (and Q4_1's m = -2^-4; float16 bits), then hashed quants
        let bytes: Vec<u8> = (0..nbytes)
            .map(|i| match (i % size, ty) {
                (0, _) | (2, GgmlType::Q4_1) => 0,
                (1, _) => 0x20,
                (3, GgmlType::Q4_1) => 0xAC,
                _ => ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8,
            })
            .collect();
        let raw = Tensor::from_slice(&bytes, [nbytes]);
        raw.realize()?;
        let x = data(&[1, n], 9)?;
        let figure = format!("{name}_matvec_dequant");
        if b.want(&figure) {
            let w = dequantize(&raw, ty, &[n, n]);
            b.time(&figure, Unit::Gbs(nbytes as f64), 10, || x.matmul(&w.transpose(0, 1)).realize().map(drop))?;
        }
        let figure = format!("{name}_matvec_dp4a");
        if b.want(&figure) {
            let lanes = tinygrad::renderer::CpuFeatures::host().vector_bytes() / 4;
            let mut w = QuantMatrix::new(&raw, ty, &[n, n], lanes).expect("repacks");
            w.realize()?;
            b.time(&figure, Unit::Gbs(nbytes as f64), 10, || w.matmul_t(&QuantRows::new(&x)).realize().map(drop))?;
        }
    }
    Ok(())
}

/// A decode step's attention over 1,024 rows of float16 KV caches (each of 2,048 rows; 48 layers, the step reading 38
/// or 50 MB of them, so they come from memory as in a model, whose weights stream between layers), replayed by a
/// TinyJit, as GB/s of the keys and values read: the query heads of a group share their key-value head (`llm`'s
/// model: scores, softmax, weights times values). SmolLM2-135M's shape (9 heads over 3, 64 wide) and Gemma 3 270M's
/// (4 over 1, 256 wide).
fn decode_attention(b: &Bench) -> Result<()> {
    use tinygrad::dtype::dtypes;
    for (name, nh, nkv, hd) in [("attention_decode_smollm2", 9, 3, 64), ("attention_decode_gemma3", 4, 1, 256)] {
        if !b.want(name) {
            continue;
        }
        let (span, g, layers) = (1024, nh / nkv, 48);
        let mut args = vec![data(&[1, nh * hd], 21)?];
        for l in 0..2 * layers {
            let c = data(&[2048, nkv * hd], 22 + l as u64)?.cast(dtypes::FLOAT16);
            c.realize()?;
            args.push(c);
        }
        let mut jit = tinygrad::TinyJit::new(move |x: &[Tensor]| {
            let rows = |c: &Tensor| c.shrink(&[(0, span), (0, nkv * hd)]).reshape([span, nkv, hd]).cast(dtypes::FLOAT32);
            let qh = x[0].reshape([nkv, g, 1, hd]);
            let attend = |k: &Tensor, v: &Tensor| {
                let kh = rows(k).permute([1, 2, 0]).reshape([nkv, 1, hd, span]);
                let vh = rows(v).permute([1, 0, 2]).reshape([nkv, 1, span, hd]);
                let scores = qh.matmul(&kh) * (1.0 / (hd as f32).sqrt());
                scores.softmax(-1).matmul(&vh).permute([2, 0, 1, 3]).reshape([1, nh * hd])
            };
            Ok(x[1..].chunks(2).map(|kv| attend(&kv[0], &kv[1])).collect())
        });
        for _ in 0..2 {
            jit.call(&args)?;
        }
        let jit = std::cell::RefCell::new(jit);
        let bytes = (layers * 2 * span * nkv * hd * 2) as f64;
        b.time(name, Unit::Gbs(bytes), 30, || jit.borrow_mut().call(&args).map(drop))?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    run_main(figures)
}

fn figures() -> Result<()> {
    check_env()?;
    let runs = getenv_int("RUNS", 0, 0, 1_000_000)?;
    let b = Bench { filter: getenv_str("FILTER", ""), runs: (runs > 0).then_some(runs as usize) };
    // first: a BEAM=2 search of its own (later figures reuse kernels already compiled in this process)
    beam_search_time(&b)?;
    for n in [256, 512, 1000, 1024] {
        b.matmul(&format!("matmul_{n}"), n, n, n, 5)?;
    }
    b.matmul("matmul_2048", 2048, 2048, 2048, 3)?;
    b.matmul("matmul_odd", 509, 1021, 257, 5)?;
    b.matmul("matmul_tall", 8192, 64, 64, 5)?;
    b.matmul("matmul_wide_k", 64, 8192, 64, 5)?;
    b.matmul("matvec_4096", 1, 4096, 4096, 5)?;
    let n = 1 << 24;
    if b.want("mul_add_16M") {
        let (x, y) = (data(&[n], 3)?, data(&[n], 4)?);
        b.time("mul_add_16M", Unit::Gbs(3.0 * 4.0 * n as f64), 5, || (&x * &y + 1.0f32).realize().map(drop))?;
    }
    if b.want("sum_16M") {
        let x = data(&[n], 5)?;
        b.time("sum_16M", Unit::Gbs(4.0 * n as f64), 5, || x.sum(..).realize().map(drop))?;
    }
    if b.want("softmax_4096") {
        let x = data(&[4096, 4096], 6)?;
        b.time("softmax_4096", Unit::Ms, 5, || x.softmax(-1).realize().map(drop))?;
    }
    quant_matvec(&b)?;
    decode_attention(&b)?;
    codegen_per_kernel(&b)?;
    jit_replay_per_kernel(&b)?;
    if b.want("conv2d") {
        let (x, w) = (data(&[32, 64, 56, 56], 7)?, data(&[64, 64, 3, 3], 8)?);
        let flops = 2.0 * 32.0 * 64.0 * 56.0 * 56.0 * 64.0 * 9.0;
        b.time("conv2d", Unit::Gflops(flops), 3, || x.conv2d(&w, Conv2dOpts::default().padding([1])).realize().map(drop))?;
    }
    Ok(())
}
