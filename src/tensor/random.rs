//! Tensor ops: random (tinygrad `tensor.py` and its mixins). Built from the primitive ops in `ops.rs`, so each
//! differentiates through the primitives' gradient rules.

use super::Tensor;

impl Tensor {}
