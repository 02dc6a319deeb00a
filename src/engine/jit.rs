//! TinyJit (tinygrad `engine/jit.py`): the first call runs the function normally, the second captures the
//! kernels it launches, later calls replay them with the new inputs' buffers swapped in, skipping scheduling
//! and codegen. Assigns inside (optimizer state, BatchNorm statistics) are captured kernels writing their
//! buffers, so they happen on every replay. JIT=0 always runs the function.

use super::ExecItem;
use crate::error::{Error, Result};
use crate::helpers::JIT;
use crate::schedule::{buffer_view, contiguous_buffer};
use crate::uop::UOp;
use crate::{DType, Tensor};
use std::cell::RefCell;

thread_local! {
    /// The kernels launched on this thread while a TinyJit captures.
    static CAPTURING: RefCell<Option<Vec<ExecItem>>> = const { RefCell::new(None) };
}

/// Records `ei` if this thread is capturing.
pub(super) fn record(ei: &ExecItem) {
    CAPTURING.with(|c| {
        if let Some(v) = c.borrow_mut().as_mut() {
            v.push(ei.clone());
        }
    })
}

struct Captured {
    items: Vec<ExecItem>,
    /// The inputs' buffers at capture, replaced at replay.
    inputs: Vec<UOp>,
    specs: Vec<(Vec<usize>, DType)>,
    outputs: Vec<(UOp, Vec<usize>)>,
}

/// A function of tensors compiled into a replayable list of kernels (tinygrad `TinyJit`).
pub struct TinyJit<F> {
    f: F,
    calls: usize,
    captured: Option<Captured>,
}

fn buffer_of(t: &Tensor) -> Result<UOp> {
    t.realize()?;
    Ok(contiguous_buffer(&t.uop()).expect("a realized tensor is a buffer view").clone())
}

impl<F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>> TinyJit<F> {
    /// Wraps `f`, which must realize what it returns.
    pub fn new(f: F) -> TinyJit<F> {
        TinyJit { f, calls: 0, captured: None }
    }

    /// Runs (first call), captures (second) or replays (later) the function on `inputs`.
    ///
    /// # Errors
    /// [`Error::Jit`] if the inputs' shapes or dtypes differ from the captured call's; or a realize error.
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.calls += 1;
        if JIT.value() == 0 || self.calls == 1 {
            return (self.f)(inputs);
        }
        let bufs = inputs.iter().map(buffer_of).collect::<Result<Vec<_>>>()?;
        let specs: Vec<(Vec<usize>, DType)> = inputs.iter().map(|t| (t.shape(), t.dtype())).collect();
        let Some(cap) = &self.captured else {
            CAPTURING.with(|c| *c.borrow_mut() = Some(Vec::new()));
            let out = (self.f)(inputs);
            let items = CAPTURING.with(|c| c.borrow_mut().take()).unwrap_or_default();
            let out = out?;
            let outputs = out.iter().map(|t| Ok((buffer_of(t)?, t.shape()))).collect::<Result<Vec<_>>>()?;
            self.captured = Some(Captured { items, inputs: bufs, specs, outputs });
            return Ok(out);
        };
        if cap.specs != specs {
            return Err(Error::Jit(format!("inputs {specs:?} differ from the captured {:?}; make a new TinyJit for these", cap.specs)));
        }
        for ei in &cap.items {
            let mut ei = ei.clone();
            for b in ei.bufs.iter_mut() {
                if let Some(i) = cap.inputs.iter().position(|x| x == b) {
                    *b = bufs[i].clone();
                }
            }
            ei.run()?;
        }
        Ok(cap.outputs.iter().map(|(b, shape)| Tensor::from_uop(buffer_view(b, shape))).collect())
    }
}
