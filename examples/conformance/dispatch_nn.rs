//! Conformance op table: the nn ops (see dispatch.rs).

use crate::runner::{Args, R};
use tinygrad::Tensor;

/// `Some(outputs)` when `op` is one of this table's ops.
pub fn dispatch(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).transpose()
}

fn run(op: &str, a: &Args) -> R<Option<Vec<Tensor>>> {
    Ok(Some(match op {
        "softmax" => vec![a.t(0)?.softmax(a.kw_i64("axis", -1))],
        _ => return Ok(None),
    }))
}
