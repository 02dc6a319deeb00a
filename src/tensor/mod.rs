//! The user API. In: Rust calls. Out: a [`Tensor`] holding a lazy UOp graph; `realize` hands the graph to the
//! engine and swaps in the buffer it now lives in. Follows tinygrad `tensor.py` (and its mixins).

mod conv;
mod einsum;
mod functional;
mod gradient;
mod jit;
mod math;
mod movement;
mod multi;
mod ops;
mod random;
mod reduce;

pub use conv::{Conv2dOpts, InterpolateMode, Pool2dOpts};
pub use functional::{Reduction, SdpaOpts};
pub use jit::{JitState, TinyJit};
pub(crate) use movement::from_end;
pub use movement::Index;
pub use ops::{IntoAxes, IntoDims, IntoOperand};
pub use random::RandOpts;

use crate::dtype::{dtypes, ConstValue, DType, Element};
use crate::engine;
use crate::error::Result;
use crate::uop::{Arg, Ops, UOp};
use parking_lot::RwLock;
use std::sync::Arc;

/// A lazy n-dimensional array (tinygrad `Tensor`). `Clone` is cheap and gives the same tensor (like a Python
/// reference): realizing one clone realizes them all.
#[derive(Clone)]
pub struct Tensor(Arc<TensorInner>);

struct TensorInner {
    uop: RwLock<UOp>,
    requires_grad: std::sync::atomic::AtomicBool,
    /// False for state an optimizer must not update (running statistics): tinygrad's `is_param`.
    is_param: std::sync::atomic::AtomicBool,
    grad: RwLock<Option<Tensor>>,
}

/// The assigns of this process: those not run yet, by target BUFFER (the ASSIGN node and the tensor holding
/// it), and those already run (or being run) that some graph still holds.
#[derive(Default)]
struct Assigns {
    pending: rustc_hash::FxHashMap<UOp, (UOp, std::sync::Weak<TensorInner>)>,
    done: rustc_hash::FxHashSet<UOp>,
}

/// Realizing any graph that reads a buffer with a pending assign runs the assign first (tinygrad: pending
/// assigns are seen by every view of the buffer), and an ASSIGN node runs once however many graphs hold it.
static ASSIGNS: std::sync::LazyLock<parking_lot::Mutex<Assigns>> = std::sync::LazyLock::new(Default::default);

/// `roots` ready to realize (`target` None) or to become the value of an assign to the BUFFER `target`. ASSIGN
/// nodes that already ran read their target instead. A BUFFER read with a pending assign is read through that
/// assign, unless the assign is in `roots` anyway (then reads of the old value are ordered first, as tinygrad
/// orders a buffer's reads before its assign); an assign's value reads through only the pending assign to its
/// own target, reads of other buffers are resolved when it is realized (so Adam's updates, realized together,
/// all see the old weights). Realizing claims every ASSIGN in the graph as run (its tensor now holds the buffer),
/// so no other realize, on this thread or another, runs it again.
fn through_pending(roots: &[UOp], target: Option<&UOp>) -> Vec<UOp> {
    let mut st = ASSIGNS.lock();
    // (for one target with no pending assign, nothing to read through: assigns that ran are replaced when the graph
    // is realized)
    if (st.pending.is_empty() && st.done.is_empty()) || target.is_some_and(|t| !st.pending.contains_key(t)) {
        return roots.to_vec();
    }
    let mut sink = UOp::sink(roots.to_vec());
    let assigns_in = |sink: &UOp| -> rustc_hash::FxHashSet<UOp> { sink.toposort().into_iter().filter(|u| u.op == Ops::ASSIGN).collect() };
    let mut assigns = assigns_in(&sink);
    // assigns that ran: their targets
    let map: rustc_hash::FxHashMap<UOp, UOp> =
        assigns.iter().filter(|u| st.done.contains(*u)).map(|a| (a.clone(), a.src[0].clone())).collect();
    if !map.is_empty() {
        sink = sink.substitute(&map);
    }
    // buffers read (not written) through their pending assigns; an assign's target stays as it is
    let mut map: rustc_hash::FxHashMap<UOp, UOp> =
        assigns.iter().filter(|a| !st.done.contains(*a)).map(|a| (a.src[0].clone(), a.src[0].clone())).collect();
    let (mut seen, mut stack) = (rustc_hash::FxHashSet::default(), vec![sink.clone()]);
    while let Some(u) = stack.pop() {
        if !seen.insert(u.clone()) {
            continue;
        }
        match u.op {
            Ops::ASSIGN if target.is_some() => _ = map.insert(u.clone(), u),
            Ops::ASSIGN => stack.extend(u.src[1..].iter().cloned()),
            Ops::BUFFER if target.is_none_or(|t| *t == u) && !map.contains_key(&u) => {
                if let Some((a, _)) = st.pending.get(&u).filter(|(a, _)| !assigns.contains(a)) {
                    let size = u.shape().expect("a BUFFER has a shape").to_vec();
                    map.insert(u.clone(), crate::schedule::buffer_view(a, &size));
                }
            }
            _ => stack.extend(u.src.iter().cloned()),
        }
    }
    if map.iter().any(|(k, v)| k != v) {
        sink = sink.substitute(&map);
    }
    if target.is_none() {
        let st = &mut *st;
        st.done.retain(|a| Arc::strong_count(&a.0) > 1);
        // the assigns this realize runs (a pending one rebuilt without a finished one inside counts as run)
        assigns.extend(assigns_in(&sink));
        st.pending.retain(|_, (a, owner)| {
            if !assigns.contains(a) {
                return true;
            }
            if let Some(t) = owner.upgrade() {
                let mut u = t.uop.write();
                if *u == *a {
                    *u = a.src[0].clone();
                }
            }
            false
        });
        st.done.extend(assigns);
    }
    sink.src.to_vec()
}

/// Runs the pending assigns to `bufs` (BUFFER nodes), so kernels launched on them directly (a TinyJit replay)
/// see the values.
///
/// # Errors
/// As [`Tensor::realize`].
pub(crate) fn realize_pending<'a>(bufs: impl IntoIterator<Item = &'a UOp>) -> Result<()> {
    let assigns: Vec<Tensor> = {
        let st = ASSIGNS.lock();
        if st.pending.is_empty() {
            return Ok(());
        }
        bufs.into_iter().filter_map(|b| st.pending.get(b)).map(|(a, _)| Tensor::from_uop(a.clone())).collect()
    };
    Tensor::realize_all(&assigns.iter().collect::<Vec<_>>())
}

/// Those of `ts` a realize would change: not a realized contiguous buffer, or one with a pending assign.
pub(crate) fn unrealized(ts: &[Tensor]) -> Vec<&Tensor> {
    let st = ASSIGNS.lock();
    ts.iter().filter(|t| crate::schedule::contiguous_buffer(&t.uop()).is_none_or(|b| st.pending.contains_key(b))).collect()
}

/// For a view (SHRINK, RESHAPE, PERMUTE, FLIP) of a realized contiguous buffer, or of a sharded tensor whose shards
/// are: that buffer view (or MULTI), and the view ops from the outermost in.
fn view_of_buffer(u: &UOp) -> Option<(UOp, Vec<UOp>)> {
    let (mut u, mut views) = (u.clone(), Vec::new());
    while matches!(u.op, Ops::SHRINK | Ops::RESHAPE | Ops::PERMUTE | Ops::FLIP) && !engine::is_contiguous_buffer(&u) {
        views.push(u.clone());
        u = u.src[0].clone();
    }
    let sharded_buffers = u.op == Ops::MULTI && u.src.iter().all(engine::is_contiguous_buffer);
    (sharded_buffers || engine::is_contiguous_buffer(&u)).then_some((u, views))
}

/// `t`, shaped like view `w`'s output, placed where `w` reads from its source (zeros, or false, elsewhere).
fn undo_view(w: &UOp, t: &Tensor) -> Tensor {
    let Arg::Ints(a) = &w.arg else { panic!("assign: view {} has arg {:?}", w.op, w.arg) };
    let src_shape = w.src[0].shape().expect("a view has a shape").to_vec();
    match w.op {
        Ops::SHRINK => t.pad(&src_shape.iter().enumerate().map(|(i, &n)| (a[2 * i], n as i64 - a[2 * i + 1])).collect::<Vec<_>>()),
        Ops::RESHAPE => t.reshape(src_shape),
        Ops::PERMUTE => {
            let mut inv = vec![0i64; a.len()];
            a.iter().enumerate().for_each(|(i, &p)| inv[p as usize] = i as i64);
            t.permute(inv)
        }
        _ => t.flip(a.iter().enumerate().filter(|(_, &f)| f != 0).map(|(i, _)| i as i64).collect::<Vec<_>>()),
    }
}

/// Tensors with `requires_grad` set, which `backward` fills the `grad` of (tinygrad's `all_tensors`).
static GRAD_TENSORS: parking_lot::Mutex<Vec<std::sync::Weak<TensorInner>>> = parking_lot::Mutex::new(Vec::new());

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "<Tensor {:?} {} on {}>", self.shape(), self.dtype(), self.device())
    }
}

/// Things usable as a shape: arrays, slices and `Vec`s of `usize`, and `()` for a scalar.
pub trait IntoShape {
    /// The dims.
    fn into_shape(self) -> Vec<usize>;
}
impl<const N: usize> IntoShape for [usize; N] {
    fn into_shape(self) -> Vec<usize> {
        self.to_vec()
    }
}
impl IntoShape for &[usize] {
    fn into_shape(self) -> Vec<usize> {
        self.to_vec()
    }
}
impl IntoShape for Vec<usize> {
    fn into_shape(self) -> Vec<usize> {
        self
    }
}
impl IntoShape for &Vec<usize> {
    fn into_shape(self) -> Vec<usize> {
        self.clone()
    }
}
impl IntoShape for () {
    fn into_shape(self) -> Vec<usize> {
        vec![]
    }
}
impl IntoShape for usize {
    fn into_shape(self) -> Vec<usize> {
        vec![self]
    }
}

pub use crate::runtime::default_device;

impl Tensor {
    /// The tensor holding `u`.
    ///
    /// # Panics
    /// If `u` has no shape (a kernel-level node, not a tensor graph).
    pub fn from_uop(u: UOp) -> Tensor {
        assert!(u.shape().is_some(), "Tensor: {} has no shape", u.op);
        Tensor(Arc::new(TensorInner { uop: RwLock::new(u), requires_grad: false.into(), is_param: true.into(), grad: RwLock::new(None) }))
    }
    /// A scalar (shape `[]`, dtype `weakint`) holding symbolic variable `name` (in `[min, max]`) bound to `value`
    /// (tinygrad `Tensor(Variable(name, min, max).bind(value))`). Kernels read the variable, not the value: graphs
    /// that differ only in `value` share their schedule and compiled kernels, and a TinyJit given it as an input
    /// replays with each call's value.
    ///
    /// # Panics
    /// If `value` is outside `[min, max]` or `name` is not an identifier.
    pub fn bind_var(name: &str, min: i64, max: i64, value: i64) -> Tensor {
        Tensor::from_uop(UOp::variable(name, min.into(), max.into()).bind(value.into()))
    }
    /// The UOp graph this tensor is now.
    pub fn uop(&self) -> UOp {
        self.0.uop.read().clone()
    }
    /// Replaces the graph (realize, assign).
    pub(crate) fn set_uop(&self, u: UOp) {
        *self.0.uop.write() = u;
    }
    /// Makes this tensor `other`'s graph (tinygrad `replace`): handles to `self` see `other`'s values.
    ///
    /// # Panics
    /// If the shapes differ.
    pub fn replace(&self, other: &Tensor) -> &Tensor {
        assert_eq!(self.shape(), other.shape(), "replace: shape {:?} with shape {:?}", self.shape(), other.shape());
        self.set_uop(other.uop());
        self
    }
    /// Whether `backward` computes this tensor's gradient.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Sets whether `backward` computes this tensor's gradient (tinygrad `requires_grad_`).
    pub fn requires_grad_(&self, on: bool) -> &Tensor {
        if on && !self.0.requires_grad.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let mut reg = GRAD_TENSORS.lock();
            reg.retain(|w| w.strong_count() > 0);
            reg.push(Arc::downgrade(&self.0));
        }
        self.0.requires_grad.store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }
    /// Whether optimizers update this tensor (tinygrad `is_param`; false for running statistics).
    pub fn is_param(&self) -> bool {
        self.0.is_param.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Sets [`Tensor::is_param`] (tinygrad `is_param_`).
    pub fn is_param_(&self, on: bool) -> &Tensor {
        self.0.is_param.store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }
    /// The gradient `backward` left here, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.read().clone()
    }
    /// Replaces (or clears) the gradient.
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.write() = g;
    }
    /// The gradients of `self` (weighted by `gradient`, default ones; its shape is `self`'s) with respect to
    /// `targets` (tinygrad `gradient`). A target `self` doesn't depend on gets zeros.
    ///
    /// # Panics
    /// If `gradient` is `None` and `self` is not a scalar.
    pub fn gradient(&self, targets: &[&Tensor], gradient: Option<&Tensor>) -> Vec<Tensor> {
        let g = match gradient {
            Some(g) => g.clone(),
            None => {
                assert_eq!(self.numel(), 1, "gradient: implicit gradient needs a scalar, got shape {:?}", self.shape());
                self.ones_like()
            }
        };
        let tu: Vec<UOp> = targets.iter().map(|t| t.uop()).collect();
        let grads = gradient::compute_gradient(&self.uop(), &g.uop(), &tu);
        targets.iter().zip(grads).map(|(t, g)| g.map_or_else(|| t.zeros_like(), Tensor::from_uop)).collect()
    }
    /// Fills `grad` of every tensor with `requires_grad` that `self` depends on, adding to what is there
    /// (tinygrad `backward`).
    ///
    /// # Panics
    /// If `self` is not a scalar.
    pub fn backward(&self) -> &Tensor {
        self.backward_with(None)
    }
    /// [`Tensor::backward`] weighted by `gradient` (shaped as `self`; default ones, for a scalar `self`): tinygrad
    /// `backward(gradient)`.
    ///
    /// # Panics
    /// If `gradient` is `None` and `self` is not a scalar.
    pub fn backward_with(&self, gradient: Option<&Tensor>) -> &Tensor {
        let topo: rustc_hash::FxHashSet<UOp> = self.uop().toposort().into_iter().collect();
        let live: Vec<Tensor> = GRAD_TENSORS.lock().iter().filter_map(|w| w.upgrade()).map(Tensor).collect();
        let need: Vec<&Tensor> = live.iter().filter(|t| t.requires_grad() && topo.contains(&t.uop())).collect();
        for (t, g) in need.iter().zip(self.gradient(&need, gradient)) {
            let g = match t.grad() {
                Some(old) => old.add(g),
                None => g,
            };
            t.set_grad(Some(g));
        }
        self
    }
    /// The same values, cut off from autograd (tinygrad `detach`).
    pub fn detach(&self) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(UOp::new(Ops::DETACH, u.dtype, [u], Arg::None))
    }
    /// The dims.
    pub fn shape(&self) -> Vec<usize> {
        self.uop().shape().expect("tensor has a shape").to_vec()
    }
    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.uop().shape().unwrap().len()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.uop().shape().unwrap().iter().product()
    }
    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.uop().dtype
    }
    /// The device this tensor lives on: the target of the [`Tensor::to`] nearest its root, else the device of the
    /// buffers it reads, else (constants) the default device. A sharded tensor's ([`Tensor::shard`]) devices
    /// joined by commas (tinygrad's tuple): `CPU,CPU:1`.
    pub fn device(&self) -> String {
        // (a graph that reads a sharded tensor anywhere above a COPY is sharded)
        let (mut stack, mut seen, mut found) = (vec![self.uop()], rustc_hash::FxHashSet::default(), None);
        while let Some(u) = stack.pop() {
            match &u.arg {
                _ if u.op == Ops::MULTI => return Tensor::multi_devices(&u).0.join(","),
                Arg::Str(d) if u.op == Ops::COPY => _ = found.get_or_insert_with(|| d.to_string()),
                Arg::Buffer(b) => _ = found.get_or_insert_with(|| crate::runtime::canonicalize_device(&b.device)),
                _ => stack.extend(u.src.iter().filter(|s| seen.insert((*s).clone())).cloned()),
            }
        }
        found.unwrap_or_else(default_device)
    }

    /// This tensor on `device` (tinygrad `Tensor.to`): itself when it is there already, else a lazy copy (COPY) that
    /// realize makes through the host. Gradients flow back to the source's device. A sharded tensor is gathered on
    /// `device`; a comma-separated list of devices replicates the tensor on each ([`Tensor::shard`] with no axis).
    ///
    /// # Panics
    /// If `device` is not a device of this build ([`crate::runtime::DEVICES`]).
    pub fn to(&self, device: &str) -> Tensor {
        if device.contains(',') {
            return self.shard(&device.split(',').collect::<Vec<_>>(), None);
        }
        let d = crate::runtime::canonicalize_device(device);
        assert!(
            crate::runtime::parse_device(device).is_some(),
            "to: unknown device {device:?}; this build has {}",
            crate::runtime::device_names()
        );
        if d == self.device() {
            return self.clone();
        }
        let u = self.uop();
        Tensor::from_uop(UOp::new(Ops::COPY, u.dtype, [u], Arg::Str(d.into())))
    }

    /// A tensor of `shape` holding `data` (row-major), on the default device. The data is copied to the device at
    /// the first realize, so an allocation failure is that realize's error.
    ///
    /// # Panics
    /// If `data.len()` is not the product of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: impl IntoShape) -> Tensor {
        let shape = shape.into_shape();
        assert_eq!(data.len(), shape.iter().product::<usize>(), "Tensor::from_slice: {} values for shape {shape:?}", data.len());
        let mut bytes = Vec::with_capacity(data.len() * T::DTYPE.itemsize());
        data.iter().for_each(|x| x.write_bytes(&mut bytes));
        Tensor::from_uop(engine::buffer_from_bytes(&bytes, T::DTYPE, data.len(), &default_device())).reshape(shape)
    }
    /// A tensor of `shape` and `dtype` holding `bytes` (native endian, row-major); copied to the device at the
    /// first realize, as [`Tensor::from_slice`].
    ///
    /// # Panics
    /// If the byte count doesn't match.
    pub fn from_bytes(bytes: &[u8], dtype: DType, shape: impl IntoShape) -> Tensor {
        let shape = shape.into_shape();
        let n: usize = shape.iter().product();
        assert_eq!(bytes.len(), n * dtype.itemsize(), "Tensor::from_bytes: {} bytes for {n} x {dtype}", bytes.len());
        Tensor::from_uop(engine::buffer_from_bytes(bytes, dtype, n, &default_device())).reshape(shape)
    }
    /// A tensor of `dtype` and `shape` whose elements are the first bytes of `bytes` (native endian, row-major), not
    /// copied now (tinygrad `Tensor.from_blob`): on the CPU and PYTHON devices the tensor's buffer is that memory
    /// itself, read-only, where it is aligned to `dtype` and the 64 bytes past the elements are readable (in
    /// `bytes`, which may run on past the elements, or in the last element's page); else the elements are copied
    /// once, on first use ([`engine::buffer_from_blob`]). A slice of a memory-mapped file thus costs no memory until
    /// read. [`Tensor::is_borrowed`] says which happened.
    ///
    /// # Panics
    /// If `bytes` holds fewer than `shape`'s elements of `dtype`. An [`Tensor::assign`] to it (or to a view of it)
    /// first moves the tensor to a copy of the bytes, which are never written.
    pub fn from_blob(bytes: bytes::Bytes, dtype: DType, shape: impl IntoShape) -> Tensor {
        let shape = shape.into_shape();
        let n: usize = shape.iter().product();
        assert!(bytes.len() >= n * dtype.itemsize(), "Tensor::from_blob: {} bytes for {n} x {dtype}", bytes.len());
        Tensor::from_uop(engine::buffer_from_blob(bytes, dtype, n, &default_device())).reshape(shape)
    }
    /// A tensor of `dtype` and `shape` whose elements are the first bytes of `bytes` (native endian, row-major),
    /// held without copying: they are copied to the device at the first realize, as tinygrad copies the `NPY`
    /// buffer of `Tensor(numpy_array)`. Memory written before then (a numpy array the bytes view) is read as it
    /// is at that realize; later writes don't show. [`Tensor::from_blob`] instead reads the bytes in place.
    ///
    /// # Panics
    /// If `bytes` holds fewer than `shape`'s elements of `dtype`.
    pub fn from_host(bytes: bytes::Bytes, dtype: DType, shape: impl IntoShape) -> Tensor {
        let shape = shape.into_shape();
        let n: usize = shape.iter().product();
        assert!(bytes.len() >= n * dtype.itemsize(), "Tensor::from_host: {} bytes for {n} x {dtype}", bytes.len());
        Tensor::from_uop(engine::buffer_from_host(bytes, dtype, n, &default_device())).reshape(shape)
    }
    /// Whether this tensor is a realized buffer that is the host bytes it was made from by [`Tensor::from_blob`]
    /// (no copy was made). False before its first realize.
    pub fn is_borrowed(&self) -> bool {
        engine::is_borrowed(&self.uop())
    }
    /// The elements' bytes (native endian, row-major), after realizing.
    ///
    /// # Errors
    /// As [`Tensor::realize`]; [`crate::Error::Jit`] while a TinyJit captures (the value would be baked in).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        engine::jit_check_read()?;
        if self.is_sharded() {
            return self.to(self.device().split(',').next().expect("a device")).to_bytes();
        }
        self.realize()?;
        let mut bytes = engine::copyout(&self.uop())?;
        // (a symbolic tensor's buffer is allocated for the variables' maxima; its elements are the front)
        bytes.truncate(self.numel() * self.dtype().itemsize());
        Ok(bytes)
    }
    /// A 0-d tensor holding `v`.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_slice(&[v], ())
    }
    /// An uninitialized tensor (tinygrad `Tensor.empty`).
    pub fn empty(shape: impl IntoShape, dtype: DType) -> Tensor {
        let shape = shape.into_shape();
        Tensor::from_uop(engine::new_buffer(dtype, shape.iter().product(), &default_device())).reshape(shape)
    }
    /// A tensor of `shape` filled with `v`, of `v`'s dtype (tinygrad `Tensor.full`). Lazy: a broadcast constant.
    pub fn full<T: Element>(shape: impl IntoShape, v: T) -> Tensor {
        Tensor::full_dtype(shape, v.to_const(), T::DTYPE)
    }
    /// A tensor of `shape` filled with `v` converted to `dtype`.
    pub fn full_dtype(shape: impl IntoShape, v: impl Into<ConstValue>, dtype: DType) -> Tensor {
        let shape = shape.into_shape();
        let c = Tensor::from_uop(UOp::const_(dtype, v));
        c.reshape(vec![1; shape.len()]).expand(shape)
    }
    /// float32 zeros (tinygrad `Tensor.zeros`).
    pub fn zeros(shape: impl IntoShape) -> Tensor {
        Tensor::full_dtype(shape, 0.0, dtypes::FLOAT32)
    }
    /// float32 ones (tinygrad `Tensor.ones`).
    pub fn ones(shape: impl IntoShape) -> Tensor {
        Tensor::full_dtype(shape, 1.0, dtypes::FLOAT32)
    }
    /// A tensor like `self` (shape and dtype) filled with `v`.
    pub fn full_like(&self, v: impl Into<ConstValue>) -> Tensor {
        Tensor::full_dtype(self.shape(), v, self.dtype())
    }
    /// Zeros like `self`.
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0)
    }
    /// Ones like `self`.
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1)
    }
    /// `[start, start+step, ...)` below `stop` (tinygrad `Tensor.arange`): int32 for whole-number arguments,
    /// else float32. Built lazily as a cumulative sum of `step`s, as tinygrad does.
    ///
    /// # Panics
    /// If `step` is 0.
    pub fn arange(start: f64, stop: f64, step: f64) -> Tensor {
        assert!(step != 0.0, "arange: step is 0");
        let dtype = if [start, stop, step].iter().all(|x| x.fract() == 0.0) { dtypes::INT32 } else { dtypes::FLOAT32 };
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        // tinygrad: full(n, step).cumsum() + (start - step); here the index itself: i*step + start
        let idx = Tensor::from_uop(UOp::new(Ops::RANGE, dtypes::INT32, [], Arg::Int(n as i64)));
        (idx.cast(dtype) * step + start).cast(dtype)
    }

    /// Computes this tensor's graph, after which it lives in a buffer (tinygrad `realize`).
    ///
    /// # Errors
    /// If a kernel fails to compile or a device fails.
    pub fn realize(&self) -> Result<&Tensor> {
        Tensor::realize_all(&[self])?;
        Ok(self)
    }
    /// Realizes several tensors in one schedule (tinygrad `Tensor.realize(*lst)`).
    ///
    /// # Errors
    /// As [`Tensor::realize`].
    ///
    /// A buffer with a pending [`Tensor::assign`] is read through it: realizing any view of the buffer runs the
    /// assign first, and the assigned tensor then holds the buffer.
    pub fn realize_all(ts: &[&Tensor]) -> Result<()> {
        let roots = through_pending(&ts.iter().map(|t| t.uop()).collect::<Vec<_>>(), None);
        let done = engine::realize(&roots)?;
        ts.iter().zip(done).for_each(|(t, u)| t.set_uop(u));
        Ok(())
    }
    /// The elements, row-major (tinygrad `tolist`, flattened).
    ///
    /// # Panics
    /// If `T` is not this tensor's dtype.
    ///
    /// # Errors
    /// As [`Tensor::realize`]; [`crate::Error::Jit`] while a TinyJit captures (the value would be baked in).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        assert_eq!(T::DTYPE, self.dtype(), "to_vec: tensor is {}, asked for {}", self.dtype(), T::DTYPE);
        let bytes = self.to_bytes()?;
        Ok(bytes.chunks_exact(T::DTYPE.itemsize()).map(T::from_bytes).collect())
    }
    /// The elements, row-major, into `out` (resized to the tensor's element count, its allocation reused): as
    /// [`Tensor::to_vec`], without new memory each call, so a decode loop reading its logits every token copies them
    /// once into pages already mapped (`to_vec` copies twice, into fresh pages: 2.4 ms for 4 MB on a 2-core Xeon,
    /// against 0.3). A symbolic tensor, whose buffer is sized for its variables' maxima, still goes through a
    /// temporary copy of the whole buffer. tinygrad has no counterpart (its `numpy()` and `tolist()` copy into new
    /// memory each call).
    ///
    /// # Panics
    /// If `T` is not this tensor's dtype.
    ///
    /// # Errors
    /// As [`Tensor::to_vec`].
    pub fn read_into<T: Element + bytemuck::Pod>(&self, out: &mut Vec<T>) -> Result<()> {
        assert_eq!(T::DTYPE, self.dtype(), "read_into: tensor is {}, asked for {}", self.dtype(), T::DTYPE);
        engine::jit_check_read()?;
        if self.is_sharded() {
            return self.to(self.device().split(',').next().expect("a device")).read_into(out);
        }
        self.realize()?;
        out.resize(self.numel(), T::zeroed());
        engine::copyout_into(&self.uop(), bytemuck::cast_slice_mut(out))
    }
    /// The one element of a 1-element tensor (tinygrad `item`).
    ///
    /// # Panics
    /// If the tensor has more than one element or `T` is not its dtype.
    ///
    /// # Errors
    /// As [`Tensor::realize`].
    pub fn item<T: Element>(&self) -> Result<T> {
        assert_eq!(self.numel(), 1, "item: tensor has {} elements", self.numel());
        Ok(self.to_vec::<T>()?[0])
    }
    /// Writes `v` (cast to this tensor's dtype) into this tensor's buffer at the next realize (tinygrad
    /// `assign`): the tensor keeps its buffer, so everything holding it sees the new values. Until then the
    /// assign is pending on the buffer: realizing any graph that reads the buffer (another view of it, a graph
    /// built before the assign) runs it first and reads the new values. Reads in `v` itself, in other assigns'
    /// values, and in graphs realized together with this tensor see the old values (those kernels run first). An unrealized tensor
    /// simply becomes `v`. A view of a realized buffer (slice, reshape, transpose, flip) writes through to the
    /// buffer's elements it reaches (tinygrad's slice assign).
    ///
    /// # Panics
    /// If the shapes differ.
    pub fn assign(&self, v: impl ops::IntoOperand) -> &Tensor {
        let v = v.into_operand().cast(self.dtype());
        let (s, vs) = (self.shape(), v.shape());
        let v = if vs.is_empty() && !s.is_empty() { v.reshape(vec![1; s.len()]).expand(s.clone()) } else { v };
        assert_eq!(s, v.shape(), "assign: shapes {s:?} and {vs:?} differ");
        let u = self.uop();
        // an unsharded tensor reads a sharded value gathered on its device
        let v = if u.op != Ops::MULTI && v.is_sharded() { v.to(&self.device()) } else { v };
        // a sharded tensor: each shard is assigned its block of the value, on its device
        if u.op == Ops::MULTI {
            let (devs, axis) = Tensor::multi_devices(&u);
            let parts: Vec<UOp> =
                u.src.iter().enumerate().map(|(j, s)| Tensor::from_uop(s.clone()).assign(v.shard_part(j, &devs, axis)).uop()).collect();
            self.set_uop(u.with_src(parts));
            return self;
        }
        let target = if u.op == Ops::ASSIGN { u.src[0].clone() } else { u };
        // host bytes from_blob borrows are read-only: the tensor (or the view) moves to a copy of them first
        let blob = target.toposort().into_iter().find(|b| b.op == Ops::BUFFER && engine::borrowed_bytes(b).is_some());
        if let Some((blob, bytes)) = blob.and_then(|b| Some((b.clone(), engine::borrowed_bytes(&b)?))) {
            let Arg::Buffer(info) = &blob.arg else { unreachable!("a BUFFER") };
            let copy = engine::buffer_from_host(bytes, blob.dtype, info.size, &info.device);
            self.set_uop(self.uop().substitute(&[(blob, copy)].into_iter().collect()));
            return self.assign(v);
        }
        if !engine::is_contiguous_buffer(&target) {
            match view_of_buffer(&target) {
                // a view of a realized buffer (a slice, a transpose): assign the whole buffer, new values where
                // the view reaches and the old ones elsewhere; this tensor stays the view and reads it through
                Some((base, views)) => {
                    let (mut full, mut mask) = (v, Tensor::full_dtype(self.shape(), true, crate::dtype::dtypes::BOOL));
                    for w in views.iter() {
                        let undo = |t: &Tensor| undo_view(w, t);
                        (full, mask) = (undo(&full), undo(&mask));
                    }
                    let base_t = Tensor::from_uop(base.clone());
                    base_t.assign(mask.where_(&full, &base_t));
                    let shards = if base.op == Ops::MULTI { base.src.to_vec() } else { vec![base.clone()] };
                    for shard in &shards {
                        let buf = crate::schedule::contiguous_buffer(shard).expect("a buffer view");
                        if let Some((_, owner)) = ASSIGNS.lock().pending.get_mut(buf) {
                            *owner = std::sync::Weak::new();
                        }
                    }
                }
                None => self.set_uop(v.uop()),
            }
            return self;
        }
        // the value reads the target through its pending assign
        let buf = crate::schedule::contiguous_buffer(&target).expect("checked above").clone();
        let v = Tensor::from_uop(through_pending(&[v.uop()], Some(&buf)).remove(0));
        // a value that reads the target at other elements (through a movement op or a reduction) must be
        // computed into its own buffer first: the assign kernel writes while it reads
        let elementwise = |u: &UOp| crate::uop::GroupOp::ELEMENTWISE.contains(u.op) || matches!(u.op, Ops::ASSIGN | Ops::DETACH);
        let writes_buf = |s: &UOp| s.op == Ops::ASSIGN && crate::schedule::contiguous_buffer(&s.src[0]) == Some(&buf);
        let reads = |s: &UOp| *s == target || *s == buf || writes_buf(s);
        // (not below a CONTIGUOUS or another ASSIGN: those are kernels of their own, run before this one, so a read
        // there sees the old values; a KV-cache write's check then stops at its layer's realized inputs)
        let root = v.uop();
        let (mut stack, mut seen, mut hazard) = (vec![root.clone()], rustc_hash::FxHashSet::default(), false);
        while let Some(u) = stack.pop() {
            if hazard || !seen.insert(u.clone()) {
                continue;
            }
            hazard = !elementwise(&u) && !reads(&u) && u.src.iter().any(reads);
            if !matches!(u.op, Ops::CONTIGUOUS | Ops::ASSIGN) || u == root {
                stack.extend(u.src.iter().cloned());
            }
        }
        let v = if hazard { v.contiguous() } else { v };
        let a = UOp::new(Ops::ASSIGN, target.dtype, [target.clone(), v.uop()], Arg::None);
        // the buffer's previous pending assign (its value may be part of this one's): its tensor now reads the
        // buffer, which realizes through this assign
        let prev = {
            let mut st = ASSIGNS.lock();
            // under the lock: a thread that reads this tensor's new node finds it pending (else it could run the
            // assign unclaimed, and this thread again)
            self.set_uop(a.clone());
            // the same node as an assign that ran (same target and value): this one runs again
            st.done.remove(&a);
            st.pending.insert(buf, (a, Arc::downgrade(&self.0)))
        };
        if let Some((prev_a, Some(prev))) = prev.map(|(a, w)| (a, w.upgrade())) {
            let mut pu = prev.uop.write();
            if *pu == prev_a {
                *pu = prev_a.src[0].clone();
            }
        }
        self
    }
    /// A tensor that is realized into its own buffer (tinygrad `contiguous`).
    pub fn contiguous(&self) -> Tensor {
        let u = self.uop();
        if engine::is_contiguous_buffer(&u) {
            return self.clone();
        }
        Tensor::from_uop(UOp::new(Ops::CONTIGUOUS, u.dtype, [u], Arg::None))
    }
    /// The same values, whose gradient is realized into its own buffer in the backward pass (tinygrad
    /// `contiguous_backward`): a boundary that keeps a gradient read many times from being recomputed per read.
    pub fn contiguous_backward(&self) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(UOp::new(Ops::CONTIGUOUS_BACKWARD, u.dtype, [u], Arg::None))
    }
}

macro_rules! from_arrays {
    ($($t:ty),*) => {$(
        impl From<$t> for Tensor { fn from(v: $t) -> Tensor { Tensor::scalar(v) } }
        impl<const A: usize> From<[$t; A]> for Tensor { fn from(v: [$t; A]) -> Tensor { Tensor::from_slice(&v, [A]) } }
        impl<const A: usize, const B: usize> From<[[$t; B]; A]> for Tensor {
            fn from(v: [[$t; B]; A]) -> Tensor { Tensor::from_slice(v.as_flattened(), [A, B]) }
        }
        impl<const A: usize, const B: usize, const C: usize> From<[[[$t; C]; B]; A]> for Tensor {
            fn from(v: [[[$t; C]; B]; A]) -> Tensor { Tensor::from_slice(v.as_flattened().as_flattened(), [A, B, C]) }
        }
        impl From<Vec<$t>> for Tensor { fn from(v: Vec<$t>) -> Tensor { let n = v.len(); Tensor::from_slice(&v, [n]) } }
    )*};
}
from_arrays!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool, half::f16, half::bf16);
