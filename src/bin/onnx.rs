//! `onnx`: runs an ONNX model and prints its outputs, or times it (tinygrad `examples/benchmark_onnx.py`).
//!
//! `cargo run --release --bin onnx -- MODEL [--input NAME=FILE.npy ...] [--dim NAME=N ...] [--out DIR]
//! [--benchmark N] [--seed S]`. Inputs not given are seeded random values of their declared dtype (symbolic dims 1
//! unless `--dim` sets them). Prints each output's name, shape, dtype and first values (`--out` also writes
//! `DIR/NAME.npy`); `--benchmark N` prints the load time, the first run's, the second's (which captures the kernels for
//! TinyJit replay), the mean of N more runs (replays), and peak memory.

use std::path::{Path, PathBuf};
use std::time::Instant;
use tinygrad::dtype::{dtypes, DType};
use tinygrad::onnx::{Dim, OnnxRunner};
use tinygrad::{Error, Tensor};

/// Run an ONNX model and print its outputs, or time it.
#[derive(clap::Parser)]
#[command(name = "onnx", version)]
struct Args {
    /// The .onnx file
    model: PathBuf,
    /// An input read from a .npy file (repeatable); inputs not given are seeded random values
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// The size of a symbolic dim of the inputs (repeatable; default 1)
    #[arg(long = "dim", value_name = "NAME=N")]
    dims: Vec<String>,
    /// Write each output to DIR/NAME.npy
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Time N runs after the first two (the second captures for TinyJit replay) and print load, first-run, capture and mean times and peak memory
    #[arg(long, value_name = "N")]
    benchmark: Option<usize>,
    /// Seed of the random inputs
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// `NAME=VALUE` split at the first `=`.
fn pair(s: &str, what: &str) -> Result<(String, String), Error> {
    s.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| Error::Context(format!("{what} {s:?} is not NAME=VALUE")))
}

/// A `.npy` file as a tensor (its dtype and shape).
fn read_npy(path: &Path) -> Result<Tensor, Error> {
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let bytes = std::fs::read(path).map_err(io)?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(io)?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let kind = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => format!("{other:?}"),
    };
    let bad = || Error::Format { path: path.into(), msg: format!("dtype {kind} is not one this reads (bool, ints, float16/32/64)") };
    macro_rules! read {
        ($t:ty) => {
            Tensor::from_slice(&npy.into_vec::<$t>().map_err(io)?, shape)
        };
    }
    Ok(match kind.trim_start_matches(['<', '|', '=']) {
        "f4" => read!(f32),
        "f8" => read!(f64),
        "i1" => read!(i8),
        "i2" => read!(i16),
        "i4" => read!(i32),
        "i8" => read!(i64),
        "u1" => read!(u8),
        "u2" => read!(u16),
        "u4" => read!(u32),
        "u8" => read!(u64),
        "b1" => Tensor::from_slice(&npy.into_vec::<u8>().map_err(io)?, shape).cast(dtypes::BOOL),
        "f2" => Tensor::from_slice(&npy.into_vec::<u16>().map_err(io)?, shape).bitcast(dtypes::FLOAT16),
        _ => return Err(bad()),
    })
}

/// Writes `t` to `path` as `.npy` (floats as float32/64, ints as int64, bools as bool).
fn write_npy(path: &Path, t: &Tensor) -> Result<(), Error> {
    use npyz::WriterBuilder;
    let io = |e: std::io::Error| Error::Io { path: path.into(), source: e };
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    macro_rules! write {
        ($t:ty, $dt:expr) => {{
            let mut w = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut file).begin_nd().map_err(io)?;
            w.extend(t.cast($dt).to_vec::<$t>()?).map_err(io)?;
            w.finish().map_err(io)
        }};
    }
    match t.dtype() {
        d if d == dtypes::FLOAT64 => write!(f64, dtypes::FLOAT64),
        d if d.is_float() => write!(f32, dtypes::FLOAT32),
        d if d.is_bool() => write!(bool, dtypes::BOOL),
        _ => write!(i64, dtypes::INT64),
    }
}

/// Seeded random values of `dt` in `shape`: uniform [0, 1) floats, ints in [0, 10), bools.
fn random(dt: DType, shape: Vec<usize>) -> Tensor {
    if dt.is_float() {
        Tensor::rand(shape).cast(dt)
    } else if dt.is_bool() {
        Tensor::rand(shape).lt(0.5)
    } else {
        Tensor::randint(shape, 0, 10).cast(dt)
    }
}

/// Peak resident memory of this process (`VmHWM`), in MiB, where the system reports it.
fn peak_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn run(args: &Args) -> Result<(), Error> {
    let t0 = Instant::now();
    let runner = OnnxRunner::load(&args.model)?;
    let load = t0.elapsed();
    Tensor::manual_seed(args.seed);
    let mut given: Vec<(String, Tensor)> = Vec::new();
    for s in &args.inputs {
        let (name, file) = pair(s, "--input")?;
        given.push((name, read_npy(Path::new(&file))?));
    }
    let dims = args.dims.iter().map(|s| pair(s, "--dim")).collect::<Result<Vec<_>, _>>()?;
    for spec in runner.inputs() {
        if given.iter().any(|(n, _)| *n == spec.name) {
            continue;
        }
        let size = |d: &Dim| -> Result<usize, Error> {
            match d {
                Dim::Fixed(n) => Ok(*n),
                Dim::Symbolic(s) => dims
                    .iter()
                    .find(|(n, _)| n == s)
                    .map_or(Ok(1), |(_, v)| v.parse().map_err(|_| Error::Context(format!("--dim {s}={v}: the size is not a number")))),
            }
        };
        let shape = spec.dims.iter().flatten().map(size).collect::<Result<Vec<_>, _>>()?;
        let dt = spec
            .dtype
            .ok_or_else(|| Error::Context(format!("input {:?} is not a tensor of a supported dtype: pass it with --input", spec.name)))?;
        given.push((spec.name.clone(), random(dt, shape)));
    }
    let inputs: Vec<(&str, Tensor)> = given.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let once = || -> Result<Vec<(String, Tensor)>, Error> {
        let outs = runner.run(&inputs)?;
        Tensor::realize_all(&outs.iter().map(|(_, t)| t).collect::<Vec<_>>())?;
        Ok(outs)
    };
    let t1 = Instant::now();
    let outs = once()?;
    let first = t1.elapsed();
    for (name, t) in &outs {
        let vals = t.cast(dtypes::FLOAT64).to_vec::<f64>()?;
        let head: Vec<String> = vals.iter().take(8).map(|v| format!("{v:.6}")).collect();
        let more = if vals.len() > 8 { ", ..." } else { "" };
        println!("{name}: shape {:?} {} [{}{more}]", t.shape(), t.dtype().name(), head.join(", "));
        if let Some(dir) = &args.out {
            std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
            write_npy(&dir.join(format!("{}.npy", name.replace('/', "_"))), t)?;
        }
    }
    if let Some(n) = args.benchmark {
        // (the second run captures its kernels for TinyJit replay: the N runs timed after it replay them)
        let t1 = Instant::now();
        once()?;
        let capture = t1.elapsed();
        let t2 = Instant::now();
        for _ in 0..n {
            once()?;
        }
        let mean = t2.elapsed().as_secs_f64() / n.max(1) as f64;
        println!(
            "load {:.1} ms, first run {:.1} ms, capture run {:.1} ms, then {:.2} ms per run (mean of {n})",
            load.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3,
            capture.as_secs_f64() * 1e3,
            mean * 1e3
        );
        if let Some(mib) = peak_mib() {
            println!("peak memory {mib:.0} MiB");
        }
    }
    Ok(())
}

fn main() {
    let args: Args = clap::Parser::parse();
    if let Err(e) = tinygrad::runtime::check_env().and_then(|()| run(&args)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
