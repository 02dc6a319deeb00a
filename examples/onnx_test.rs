//! Runs ONNX test cases in onnx's standard layout (a case: `model.onnx` and `test_data_set_N/{input,output}_M.pb`)
//! and compares the outputs as onnx's backend runner does (`rtol` 1e-3, `atol` 1e-7; NaN equals NaN; ints and bools
//! exactly).
//!
//!   cargo run --release --example onnx_test -- DIR [--expected FILE]
//!
//! DIR is one case or a directory of cases (`tests/onnx/gen_node_suite.py` writes onnx's node suite). One line per
//! failure (case, reason; DIR itself written as `DIR`), then `N passed, M failed`. With `--expected FILE` (lines
//! `case: reason`, as this prints them; `tests/onnx/expected_failures.txt`) it also fails, with exit status 1, on a
//! case that fails and is not listed, or is listed and now passes (then the list must shrink).

use prost::Message;
use std::path::Path;
use tinygrad::dtype::dtypes;
use tinygrad::onnx::data_proto::{OptionalProto, SequenceProto};
use tinygrad::onnx::proto::TensorProto;
use tinygrad::onnx::{tensor_from_proto, value_from_proto, OnnxRunner, Value, ValueKind};
use tinygrad::Tensor;

fn main() -> std::process::ExitCode {
    tinygrad::runtime::run_main(|| {
        tinygrad::runtime::check_env()?;
        let args: Vec<String> = std::env::args().skip(1).collect();
        let usage = || tinygrad::Error::Context("usage: onnx_test DIR [--expected FILE]".into());
        let dir = Path::new(args.first().ok_or_else(usage)?);
        let expected: Option<Vec<String>> = match args.get(1).map(String::as_str) {
            Some("--expected") => {
                let file = args.get(2).ok_or_else(usage)?;
                let text = std::fs::read_to_string(file).map_err(|e| tinygrad::Error::Io { path: file.into(), source: e })?;
                Some(text.lines().filter_map(|l| l.split(':').next()).map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect())
            }
            Some(_) => return Err(usage()),
            None => None,
        };
        let mut cases: Vec<_> = if dir.join("model.onnx").exists() {
            vec![dir.to_path_buf()]
        } else {
            let entries = std::fs::read_dir(dir).map_err(|e| tinygrad::Error::Io { path: dir.into(), source: e })?;
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("model.onnx").exists()).collect()
        };
        cases.sort();
        let (mut passed, mut failed, mut surprises) = (0, 0, Vec::new());
        let listed = |name: &str| expected.as_ref().map(|e| e.iter().any(|n| n == name));
        for case in &cases {
            let name = case.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            // (a panic in a handler is that case's failure, not the run's end)
            let outcome = match std::panic::catch_unwind(|| run_case(case)) {
                Ok(r) => r,
                Err(p) => {
                    let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                    Err(format!("panic: {}", msg.unwrap_or_default().lines().next().unwrap_or("")))
                }
            };
            match outcome {
                Ok(()) => {
                    passed += 1;
                    if listed(&name) == Some(true) {
                        surprises.push(format!("{name}: passes now; remove it from the expected failures"));
                    }
                }
                Err(why) => {
                    failed += 1;
                    println!("{name}: {}", why.replace(&dir.display().to_string(), "DIR"));
                    if listed(&name) == Some(false) {
                        surprises.push(format!("{name}: fails and is not an expected failure"));
                    }
                }
            }
        }
        println!("{passed} passed, {failed} failed");
        if !surprises.is_empty() {
            return Err(tinygrad::Error::Context(format!(
                "{} cases differ from the expected failures:\n{}",
                surprises.len(),
                surprises.join("\n")
            )));
        }
        Ok(())
    })
}

/// Reads a `.pb` file as the message `M`.
fn read_pb<M: Message + Default>(path: &Path) -> Result<M, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    M::decode(bytes.as_slice()).map_err(|e| format!("{}: not a {} ({e})", path.display(), std::any::type_name::<M>()))
}

/// The value in `path`, written as onnx writes a value of `kind` (a TensorProto, SequenceProto or OptionalProto).
fn read_value(path: &Path, kind: ValueKind) -> Result<Value, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tensor = |t: &TensorProto| tensor_from_proto(t, dir, path).map_err(|e| e.to_string());
    let value = |t: &TensorProto| value_from_proto(t, dir, path).map_err(|e| e.to_string());
    let sequence = |s: &SequenceProto| s.tensor_values.iter().map(tensor).collect::<Result<Vec<_>, _>>().map(Value::Sequence);
    match kind {
        ValueKind::Tensor => value(&read_pb::<TensorProto>(path)?),
        ValueKind::Sequence => sequence(&read_pb::<SequenceProto>(path)?),
        ValueKind::Optional => {
            let o: OptionalProto = read_pb(path)?;
            match (&o.tensor_value, &o.sequence_value) {
                (Some(t), _) => tensor(t).map(Value::Tensor),
                (None, Some(s)) => sequence(s),
                (None, None) => Ok(Value::None),
            }
        }
    }
}

/// `got` against `want` as onnx's backend runner compares them: shapes equal, floats within its tolerances, NaN
/// equal to NaN, everything else exactly.
fn compare(name: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("output {name}: shape {:?}, expected {:?}", got.shape(), want.shape()));
    }
    let (float, dt) = (want.dtype().is_float(), want.dtype());
    let as_f64 = |t: &Tensor| t.cast(dtypes::FLOAT64).to_vec::<f64>().map_err(|e| e.to_string());
    let (g, w) = (as_f64(got)?, as_f64(want)?);
    let bad =
        g.iter().zip(&w).position(|(g, w)| !(g == w || (g.is_nan() && w.is_nan()) || (float && (g - w).abs() <= 1e-7 + 1e-3 * w.abs())));
    match bad {
        Some(k) => Err(format!("output {name} ({dt}): element {k} is {}, expected {}", g[k], w[k])),
        None => Ok(()),
    }
}

/// Runs every data set of the case in `dir`; the first mismatch or error, as one line.
fn run_case(dir: &Path) -> Result<(), String> {
    let runner = OnnxRunner::load(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let (inputs, outputs) = (runner.inputs(), runner.outputs());
    let mut sets: Vec<_> =
        std::fs::read_dir(dir).map_err(|e| e.to_string())?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    sets.sort();
    for set in sets {
        let file = |kind: &str, i: usize| set.join(format!("{kind}_{i}.pb"));
        let given = inputs
            .iter()
            .enumerate()
            .take_while(|&(i, _)| file("input", i).exists())
            .map(|(i, spec)| Ok((spec.name.as_str(), read_value(&file("input", i), spec.kind)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let outs = runner.run_values(&given).map_err(|e| e.to_string())?;
        for (i, (name, got)) in outs.iter().enumerate() {
            let want = read_value(&file("output", i), outputs[i].kind)?;
            match (got, &want) {
                (Value::Tensor(g), Value::Tensor(w)) => compare(name, g, w)?,
                (Value::Sequence(g), Value::Sequence(w)) if g.len() == w.len() => {
                    g.iter().zip(w).try_for_each(|(g, w)| compare(name, g, w))?;
                }
                (Value::None, Value::None) => {}
                (Value::Strings(g), Value::Strings(w)) if g == w => {}
                (g, w) => return Err(format!("output {name}: {} expected, got {}", kind(w), kind(g))),
            }
        }
    }
    Ok(())
}

/// A value's kind and size, for a mismatch's message.
fn kind(v: &Value) -> String {
    match v {
        Value::Tensor(t) => format!("a tensor {:?}", t.shape()),
        Value::Sequence(s) => format!("a sequence of {}", s.len()),
        Value::Strings(s) => format!("strings {:?} {:?}", s.shape, &s.data[..s.data.len().min(4)]),
        Value::None => "an empty optional".into(),
    }
}
