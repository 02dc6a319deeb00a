//! Conformance op table: the movement ops (see dispatch.rs).

use crate::runner::{Args, R};
use tinygrad::Tensor;

/// `Some(outputs)` when `op` is one of this table's ops.
pub fn dispatch(op: &str, a: &Args) -> Option<R<Vec<Tensor>>> {
    run(op, a).transpose()
}

fn run(op: &str, a: &Args) -> R<Option<Vec<Tensor>>> {
    Ok(Some(match op {
        "flip" => vec![a.t(0)?.flip(a.ints(1)?)],
        _ => return Ok(None),
    }))
}
