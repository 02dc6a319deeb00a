//! TinyJit (tinygrad `engine/jit.py`): the first call runs the function normally, the second captures the
//! kernels it launches, later calls replay them with the new inputs' buffers swapped in, skipping scheduling
//! and codegen. Assigns inside (optimizer state, BatchNorm statistics) are captured kernels writing their
//! buffers, so they happen on every replay. JIT=0 always runs the function.
//!
//! Where tinygrad's replay silently differs from running the function, this one gives the function's result
//! or an [`Error::Jit`]: inputs are checked (shape, dtype, device, which of them share a buffer), each replay
//! writes its outputs to new buffers (an earlier call's outputs stay valid), pending assigns to any buffer the
//! kernels touch run first, non-tensor arguments select their own capture ([`TinyJit::call_with`]), nested
//! TinyJits are captured by the outer one, bound variables among the inputs ([`Tensor::bind_var`]) take their new
//! values at each replay (a KV-cache decoder's position: one capture serves every token), so do those in inputs'
//! symbolic dims ([`Tensor::shrink_sym`] of a buffer sized for the maximum: one capture serves every batch size
//! once a run at a second value made the same kernels on the same buffers; else other values run the function;
//! where a schedule baked a variable's value into the kernels, a GPU's launch grid, each value gets its own capture),
//! random draws take the RNG's next counters at each replay (written into the counter buffers the captured kernels
//! read), and reading tensor data while capturing (values that would be baked in) is an error.

use super::Tensor;
use crate::dtype::DType;
use crate::engine::{self, Kernels};
use crate::error::{Error, Result};
use crate::helpers::JIT;
use crate::schedule::{buffer_view_sym, contiguous_buffer};
use crate::uop::{Ops, Sint, UOp};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What an input must match at replay: shape (symbolic dims unbound), dtype, device.
#[derive(PartialEq, Debug, Clone)]
struct Spec {
    shape: Vec<Sint>,
    dtype: DType,
    device: String,
}

struct Captured {
    kernels: Kernels,
    /// The inputs' buffers at capture, replaced at replay.
    inputs: Vec<UOp>,
    specs: Vec<Spec>,
    /// For each input, the first input with the same buffer.
    aliases: Vec<usize>,
    /// Each output's buffer and shape (symbolic dims unbound).
    outputs: Vec<(UOp, Vec<Sint>)>,
    /// The variables (DEFINE_VAR) the inputs bound, in order: a replay must bind the same ones.
    vars: Vec<UOp>,
    /// Their values at capture.
    vals: Vec<(Arc<str>, i64)>,
    /// Whether a run at other values of variables in symbolic dims made the same kernels (`None`: not seen yet).
    general: Option<bool>,
    /// The variables whose values the schedules baked into the kernels: a call at other values of theirs captures
    /// anew.
    baked: Vec<Arc<str>>,
    /// The random draws made while capturing: each replay gives them the next counters.
    draws: Vec<super::random::Draw>,
    /// Each input's graph at the last replay where its spec matched and its dims were all numbers: the same graph
    /// again needs no check (a decoder's caches, passed at every step). Holds those inputs until the next replay.
    seen: Vec<Option<UOp>>,
}

/// One TinyJit's progress: calls so far and, from the second, the captured kernels. What [`TinyJit`] keeps per
/// argument value; a caller holding its function elsewhere (the ONNX runner, whose graph is `self`) keeps one
/// directly and passes the function to [`JitState::call`].
#[derive(Default)]
pub struct JitState {
    calls: usize,
    replays: usize,
    captured: Option<Captured>,
    /// Captures for other values of the variables the capture baked in, by those values (at most [`MAX_BAKED`]).
    others: Vec<(Vec<i64>, JitState)>,
}

/// The most captures a TinyJit keeps for other values of baked-in variables (a GPU decode step's spans) before it
/// drops them all.
const MAX_BAKED: usize = 64;

impl JitState {
    /// Runs (first call), captures (second) or replays (later) `f` on `inputs`, as [`TinyJit::call`].
    ///
    /// # Errors
    /// As [`TinyJit::call`].
    pub fn call(&mut self, inputs: &[Tensor], f: &mut dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<Vec<Tensor>> {
        step(self, inputs, f)
    }
    /// Calls so far (the next is the first: 0, the capture: 1, a replay: 2 or more).
    pub fn calls(&self) -> usize {
        self.calls
    }
    /// Calls that replayed the capture (no graph built, nothing scheduled but the inputs' copies).
    pub fn replays(&self) -> usize {
        self.replays
    }
    /// Whether the capture serves every value of the inputs' symbolic dims: `None` until a run at a second value
    /// (or without a capture), `Some(false)` where that run made other kernels (those values run the function) or
    /// where the schedules baked a variable's value in (other values get captures of their own).
    pub fn general(&self) -> Option<bool> {
        self.captured.as_ref().and_then(|c| if c.baked.is_empty() { c.general } else { Some(false) })
    }
}

/// A function of tensors compiled into a replayable list of kernels (tinygrad `TinyJit`). `A` holds the
/// function's non-tensor arguments ([`TinyJit::with_args`]); each distinct value gets its own capture.
pub struct TinyJit<F, A = ()> {
    f: F,
    states: Vec<(A, JitState)>,
}

fn buffer_of(t: &Tensor) -> Result<UOp> {
    t.realize()?;
    Ok(contiguous_buffer(&t.uop()).expect("a realized tensor is a buffer view").clone())
}

impl<F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>> TinyJit<F, ()> {
    /// Wraps `f`. Whatever `f` reads besides its inputs (captured tensors, Rust values) is read at capture:
    /// captured tensors' buffers are read again at each replay, Rust values are frozen (pass those that change
    /// through [`TinyJit::with_args`]).
    pub fn new(f: F) -> TinyJit<F, ()> {
        TinyJit { f, states: Vec::new() }
    }

    /// Runs (first call), captures (second) or replays (later) the function on `inputs`, realizing what it
    /// returns. The returned tensors are the caller's: later calls don't overwrite them.
    ///
    /// # Errors
    /// [`Error::Jit`] naming the input if an input's shape, dtype or device differs from the captured call's,
    /// or inputs share a buffer at capture and not now (or the other way); if the function captured no kernel or
    /// read tensor data while capturing; the function's errors; realize errors.
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let f = &mut self.f;
        if self.states.is_empty() {
            self.states.push(((), JitState::default()));
        }
        step(&mut self.states[0].1, inputs, &mut |x: &[Tensor]| f(x))
    }
}

impl<A: PartialEq + Clone, F: FnMut(&[Tensor], &A) -> Result<Vec<Tensor>>> TinyJit<F, A> {
    /// Wraps `f`, which also takes non-tensor arguments `A` (a scale, a flag choosing a branch): each distinct
    /// value is run, captured and replayed on its own.
    pub fn with_args(f: F) -> TinyJit<F, A> {
        TinyJit { f, states: Vec::new() }
    }

    /// As [`TinyJit::call`], with the non-tensor arguments `args`.
    ///
    /// # Errors
    /// As [`TinyJit::call`].
    pub fn call_with(&mut self, inputs: &[Tensor], args: A) -> Result<Vec<Tensor>> {
        let i = match self.states.iter().position(|(a, _)| *a == args) {
            Some(i) => i,
            None => {
                self.states.push((args, JitState::default()));
                self.states.len() - 1
            }
        };
        let (args, state) = &mut self.states[i];
        let f = &mut self.f;
        step(state, inputs, &mut |x: &[Tensor]| f(x, args))
    }
}

/// Realizes the function's outputs (still inside a capture, when capturing).
fn run_f(f: &mut dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>>, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let out = f(inputs)?;
    Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
    Ok(out)
}

/// The BINDs of `inputs`: tensors made by [`Tensor::bind_var`], then those in symbolic dims, each variable once.
fn input_binds(all: &[Tensor], seen: impl Fn(usize) -> bool) -> Vec<UOp> {
    let mut binds: Vec<UOp> = all.iter().map(Tensor::uop).filter(|u| u.op == Ops::BIND).collect();
    let inputs = all.iter().filter(|t| t.uop().op != Ops::BIND).enumerate();
    for d in inputs.filter(|(i, _)| !seen(*i)).flat_map(|(_, t)| t.sym_shape()) {
        if let Sint::Sym(u) = d {
            for b in u.toposort().into_iter().filter(|b| b.op == Ops::BIND) {
                if !binds.iter().any(|x| x.var_name() == b.var_name()) {
                    binds.push(b);
                }
            }
        }
    }
    binds
}

/// `dims` with each BIND replaced by its variable (`vals`: None), or each variable bound to its value in `vals`.
fn rebind(dims: Vec<Sint>, vals: Option<&[(Arc<str>, i64)]>) -> Vec<Sint> {
    let one = |u: &UOp| {
        let map: FxHashMap<UOp, UOp> = u
            .toposort()
            .into_iter()
            .filter_map(|x| match (x.op, vals) {
                (Ops::BIND, None) => Some((x.clone(), x.src[0].clone())),
                (Ops::DEFINE_VAR, Some(v)) => {
                    v.iter().find(|(n, _)| **n == *x.var_name()).map(|(_, val)| (x.clone(), x.bind(*val as i128)))
                }
                _ => None,
            })
            .collect();
        Sint::from_uop(&u.substitute(&map))
    };
    dims.into_iter().map(|d| if let Sint::Sym(u) = &d { one(u) } else { d }).collect()
}

fn step(state: &mut JitState, all: &[Tensor], f: &mut dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<Vec<Tensor>> {
    state.calls += 1;
    if JIT.value() == 0 || state.calls == 1 {
        return run_f(f, all);
    }
    // bound variables among the inputs are not buffers: each replay passes their new values to the kernels
    let inputs: Vec<Tensor> = all.iter().filter(|t| t.uop().op != Ops::BIND).cloned().collect();
    // (those not realized already, in one schedule, as tinygrad's `Tensor.realize(*inputs)`: a lazy input reading a
    // buffer that another input assigns sees its old value; a realize each cost 0.5 us apiece over a batched decode
    // step's 246 caches)
    let lazy = super::unrealized(&inputs);
    if !lazy.is_empty() {
        Tensor::realize_all(&lazy)?;
    }
    let uops: Vec<UOp> = inputs.iter().map(Tensor::uop).collect();
    let bufs: Vec<UOp> = uops.iter().map(|u| contiguous_buffer(u).expect("a realized tensor is a buffer view").clone()).collect();
    // inputs that are the very graphs the last replay checked (a KV cache at every step): their specs as then, and no
    // variables in their dims
    let seen = |i: usize| state.captured.as_ref().is_some_and(|c| c.seen.get(i).is_some_and(|s| s.as_ref() == Some(&uops[i])));
    let binds = input_binds(all, seen);
    let vars: Vec<(Arc<str>, i64)> =
        binds.iter().map(|b| (b.var_name().into(), b.src[1].const_int().expect("BIND of a constant") as i64)).collect();
    let var_specs: Vec<UOp> = binds.iter().map(|b| b.src[0].clone()).collect();
    let spec = |t: &Tensor| Spec { shape: rebind(t.sym_shape(), None), dtype: t.dtype(), device: t.device() };
    let mut first: FxHashMap<&UOp, usize> = FxHashMap::default();
    let aliases: Vec<usize> = bufs.iter().enumerate().map(|(i, b)| *first.entry(b).or_insert(i)).collect();
    let Some(cap) = &state.captured else {
        let specs: Vec<Spec> = inputs.iter().map(spec).collect();
        let outer = super::random::start_recording();
        let before = crate::schedule::take_baked_vars();
        let (out, mut kernels) = engine::capture(|| run_f(f, all));
        let baked = crate::schedule::take_baked_vars();
        // (an enclosing capture's too)
        crate::schedule::restore_baked_vars(before.into_iter().chain(baked.iter().cloned()));
        let draws = super::random::stop_recording(outer);
        let out = out?;
        if kernels.is_empty() {
            return Err(Error::Jit("the function ran no kernel while capturing: there is nothing to replay".into()));
        }
        let outputs = out.iter().map(|t| Ok((buffer_of(t)?, rebind(t.sym_shape(), None)))).collect::<Result<Vec<_>>>()?;
        let general = specs.iter().all(|s| s.shape.iter().all(|d| d.int().is_some())).then_some(true);
        kernels.adopt(&outputs.iter().map(|(b, _)| b.clone()).collect::<Vec<_>>());
        if general == Some(true) {
            kernels.plan_memory(&bufs.iter().chain(outputs.iter().map(|(b, _)| b)).cloned().collect::<Vec<_>>());
        }
        state.captured = Some(Captured {
            kernels,
            inputs: bufs,
            specs,
            aliases,
            outputs,
            vars: var_specs,
            vals: vars,
            draws,
            general,
            baked,
            seen: vec![],
        });
        return Ok(out);
    };
    // values baked into the kernels changed (a symbolic dim on a GPU): those values have a capture of their own
    let value = |vals: &[(Arc<str>, i64)], n: &Arc<str>| vals.iter().find(|(m, _)| m == n).map(|(_, v)| *v);
    if cap.baked.iter().any(|n| value(&vars, n) != value(&cap.vals, n)) {
        let key: Vec<i64> = cap.baked.iter().map(|n| value(&vars, n).unwrap_or(0)).collect();
        if state.others.len() >= MAX_BAKED {
            state.others.clear();
        }
        let i = state.others.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
            state.others.push((key, JitState::default()));
            state.others.len() - 1
        });
        return step(&mut state.others[i].1, all, f);
    }
    // the same variables (name and bounds: the kernels were simplified with those bounds) in the same places
    if var_specs != cap.vars {
        let names = |v: &[UOp]| v.iter().map(|x| format!("{:?}", x.arg)).collect::<Vec<_>>().join(", ");
        return Err(Error::Jit(format!("bound variables [{}], the captured call had [{}]", names(&var_specs), names(&cap.vars))));
    }
    if inputs.len() != cap.specs.len() {
        return Err(Error::Jit(format!("{} inputs, the captured call had {}", inputs.len(), cap.specs.len())));
    }
    let mut checked: Vec<Option<UOp>> = Vec::with_capacity(inputs.len());
    for (i, t) in inputs.iter().enumerate() {
        if seen(i) {
            checked.push(Some(uops[i].clone()));
            continue;
        }
        let (s, c) = (spec(t), &cap.specs[i]);
        checked.push(s.shape.iter().all(|d| d.int().is_some()).then(|| uops[i].clone()));
        if s != *c {
            return Err(Error::Jit(format!(
                "input {i} is {:?} {} on {}, the captured call's was {:?} {} on {}; make a new TinyJit for these",
                s.shape, s.dtype, s.device, c.shape, c.dtype, c.device
            )));
        }
    }
    if let Some(i) = (0..aliases.len()).find(|&i| aliases[i] != cap.aliases[i]) {
        let (now, then) = (aliases[i], cap.aliases[i]);
        let say = |j: usize| if j == i { "its own buffer".to_string() } else { format!("input {j}'s buffer") };
        return Err(Error::Jit(format!(
            "input {i} is {} but was {} at capture: the kernels were captured for that aliasing; pass distinct tensors (.contiguous()) or make a new TinyJit",
            say(now),
            say(then)
        )));
    }
    // other values of variables in symbolic dims: the first such run is captured too, and if it made the same
    // kernels on the same buffers the capture serves them all; if not, such values run the function
    if vars != cap.vals && cap.general != Some(true) {
        if cap.general == Some(false) {
            return run_f(f, all);
        }
        let (out, kernels) = engine::capture(|| run_f(f, all));
        let out = out?;
        let cap = state.captured.as_mut().expect("captured");
        cap.general = Some(kernels.same_as(&bufs, &cap.kernels, &cap.inputs));
        if cap.general == Some(true) {
            let keep: Vec<UOp> = cap.inputs.iter().chain(cap.outputs.iter().map(|(b, _)| b)).cloned().collect();
            cap.kernels.plan_memory(&keep);
        }
        return Ok(out);
    }
    // pending assigns to buffers the kernels read (tensors the function captured) run first
    super::realize_pending(cap.kernels.buffers())?;
    let mut swap: Vec<(UOp, UOp)> = cap.inputs.iter().cloned().zip(bufs).collect();
    for (o, _) in &cap.outputs {
        // outputs the capture created: each replay writes new ones (an input stays the caller's buffer)
        if cap.kernels.created(o) && !swap.iter().any(|(k, _)| k == o) {
            swap.push((o.clone(), engine::new_buffer_like(o)));
        }
    }
    for d in &cap.draws {
        super::random::redraw(d)?;
    }
    // (an enclosing capture holds these kernels too: their baked values are its as well)
    crate::schedule::restore_baked_vars(cap.baked.iter().cloned());
    cap.kernels.replay(&swap, &vars)?;
    let out = cap
        .outputs
        .iter()
        .map(|(b, shape)| {
            Tensor::from_uop(buffer_view_sym(swap.iter().find(|(k, _)| k == b).map_or(b, |(_, v)| v), &rebind(shape.clone(), Some(&vars))))
        })
        .collect();
    state.replays += 1;
    state.captured.as_mut().expect("captured").seen = checked;
    Ok(out)
}
