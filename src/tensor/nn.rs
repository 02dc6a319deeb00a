//! Tensor ops: reductions and scans, sorting, processing (einsum, convolution, pooling, interpolation) and nn
//! functions (normalization, attention, losses), following tinygrad `mixin/op.py`, `mixin/reduce.py` and
//! `mixin/rand.py`. Built from the primitive ops in `ops.rs` (convolution and pooling from movement ops plus
//! multiply and sum, sorting as a bitonic network), so each differentiates through the primitives' rules.

use super::Tensor;
use crate::dtype::{dtypes, sum_acc_dtype, ConstValue, DType};
use crate::helpers::ceildiv;
use crate::uop::{symbolic::identity_element, Ops};

/// `a` as an index into `ndim` dims (negative counts from the end).
fn dim(a: i64, ndim: usize, op: &str) -> usize {
    let n = ndim.max(1) as i64;
    assert!((-n..n).contains(&a), "{op}: dim {a} out of range for {ndim} dims");
    a.rem_euclid(n) as usize
}

/// `x` with a size-1 dim inserted at `d`.
fn unsq(x: &Tensor, d: usize) -> Tensor {
    let mut s = x.shape();
    s.insert(d, 1);
    x.reshape(s)
}

/// `x` without its size-1 dim `d`.
fn sq(x: &Tensor, d: usize) -> Tensor {
    let mut s = x.shape();
    s.remove(d);
    x.reshape(s)
}

/// `(0, 0)` pads except `p` on dim `d`.
fn pad_on(ndim: usize, d: usize, p: (i64, i64)) -> Vec<(i64, i64)> {
    (0..ndim).map(|i| if i == d { p } else { (0, 0) }).collect()
}

/// Padding with the constant `v` of `x`'s dtype (tinygrad `_pad_constant`); negative pads crop.
fn pad_const(x: &Tensor, pads: &[(i64, i64)], v: ConstValue) -> Tensor {
    if v.as_f64() == 0.0 {
        return x.pad(pads);
    }
    let mask = Tensor::full_dtype(x.shape(), true, dtypes::BOOL).pad(pads);
    mask.where_(x.pad(pads), Tensor::full_dtype((), v, x.dtype()))
}

/// `a` and `b` joined along `d`.
fn cat2(a: &Tensor, b: &Tensor, d: usize) -> Tensor {
    let (na, nb, n) = (a.shape()[d] as i64, b.shape()[d] as i64, a.ndim());
    a.pad(&pad_on(n, d, (0, nb))).add(b.pad(&pad_on(n, d, (na, 0))))
}

/// Elements `lo..hi` of dim `d`.
fn slice_dim(x: &Tensor, d: usize, lo: usize, hi: usize) -> Tensor {
    x.shrink(&x.shape().iter().enumerate().map(|(i, &n)| if i == d { (lo, hi) } else { (0, n) }).collect::<Vec<_>>())
}

/// The two halves of a size-2 dim `d`.
fn halves(x: &Tensor, d: usize) -> (Tensor, Tensor) {
    (slice_dim(x, d, 0, 1), slice_dim(x, d, 1, 2))
}

/// Windows over the last `k.len()` dims: `(..., i...)` becomes `(..., o..., k...)` (tinygrad `_pool`), built from
/// repeat, shrink and reshape so strides and dilations need no gather.
fn pool(x: &Tensor, k: &[usize], stride: &[usize], dilation: &[usize]) -> Tensor {
    let shape = x.shape();
    assert!(shape.len() >= k.len(), "pool: can't pool shape {shape:?} with kernel {k:?}");
    let noop = shape.len() - k.len();
    let [k, s, d, i]: [Vec<i64>; 4] = [k, stride, dilation, &shape[noop..]].map(|v| v.iter().map(|&x| x as i64).collect());
    assert!(
        (0..k.len()).all(|j| d[j] * (k[j] - 1) < i[j]),
        "pool: kernel {k:?} with dilation {d:?} is larger than the input dims of shape {shape:?}"
    );
    let o: Vec<i64> = (0..k.len()).map(|j| ceildiv(i[j] - d[j] * (k[j] - 1), s[j])).collect();
    let keep: Vec<i64> = shape[..noop].iter().map(|&x| x as i64).collect();
    let dims = |g: &dyn Fn(usize) -> Vec<i64>| [keep.clone(), (0..k.len()).flat_map(g).collect()].concat();
    if (0..k.len()).all(|j| k[j] <= s[j] && d[j] == 1) {
        // windows that don't overlap: each dim cut (or padded, past the last window) to o*s, split into (o, s),
        // and the first k of each s kept; its gradient is a pad, not a sum over shifted copies
        let x = x.pad_to(dims(&|j| vec![(o[j] * s[j]).max(i[j])])).shrink_to(dims(&|j| vec![o[j] * s[j]]));
        let x = x.reshape(dims(&|j| vec![o[j], s[j]])).shrink_to(dims(&|j| vec![o[j], k[j]]));
        let order: Vec<usize> = (0..noop).chain((0..k.len()).map(|j| noop + 2 * j)).chain((0..k.len()).map(|j| noop + 2 * j + 1)).collect();
        return x.permute(order);
    }
    let f: Vec<i64> = (0..k.len()).map(|j| ceildiv(o[j] * s[j] - d[j], i[j]).max(1)).collect();
    let to = |t: &Tensor, v: Vec<i64>| t.shrink_to(v);
    let reps: Vec<usize> = [vec![1; noop], (0..k.len()).map(|j| ceildiv(k[j] * (i[j] * f[j] + d[j]), i[j]) as usize).collect()].concat();
    let x = to(&x.repeat(reps), dims(&|j| vec![k[j] * (i[j] * f[j] + d[j])]));
    let x = x.reshape(dims(&|j| vec![k[j], i[j] * f[j] + d[j]]));
    let x = to(&x, dims(&|j| vec![k[j], o[j] * s[j]])).reshape(dims(&|j| vec![k[j], o[j], s[j]]));
    let x = to(&x, dims(&|j| vec![k[j], o[j], 1])).reshape(dims(&|j| vec![k[j], o[j]]));
    let order: Vec<usize> = (0..noop).chain((0..k.len()).map(|j| noop + 2 * j + 1)).chain((0..k.len()).map(|j| noop + 2 * j)).collect();
    x.permute(order)
}

/// `idx == arange(n)` along a new dim placed at `d` of the result (tinygrad `_one_hot_along_dim` on `idx`
/// with a size-1 dim at `d`).
fn one_hot_at(idx: &Tensor, n: usize, d: usize) -> Tensor {
    assert!(idx.dtype().is_int(), "one_hot: index tensor must be int, got {}", idx.dtype());
    let offset = idx.ndim() - d - 1;
    idx.eq(Tensor::arange(0.0, n as f64, 1.0).reshape([vec![n], vec![1; offset]].concat()))
}

/// Bool `(r, c)`: `j >= i + diagonal` (tinygrad `_tri`, the mask of `triu`).
fn tri(r: usize, c: usize, diagonal: i64) -> Tensor {
    let i = Tensor::arange(0.0, r as f64, 1.0).reshape([r, 1]);
    i.add(diagonal).le(Tensor::arange(0.0, c as f64, 1.0))
}

/// `-x` for floats, `~x` for ints and bools: an order-reversing map (tinygrad `_inverse`).
fn inverse(x: &Tensor) -> Tensor {
    if x.dtype().is_float() {
        x.neg()
    } else {
        x.bitwise_not()
    }
}

/// `op` elementwise: ADD, MUL or MAX.
fn alu2(a: &Tensor, op: Ops, b: &Tensor) -> Tensor {
    match op {
        Ops::ADD => a.add(b),
        Ops::MUL => a.mul(b),
        _ => a.maximum(b),
    }
}

/// Loss reduction (tinygrad `ReductionStr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Per-element losses.
    None,
    /// Their sum.
    Sum,
    /// Their mean.
    #[default]
    Mean,
}

impl Reduction {
    /// The reduction named `"none"`, `"sum"` or `"mean"`.
    pub fn from_name(s: &str) -> Option<Reduction> {
        Some(match s {
            "none" => Reduction::None,
            "sum" => Reduction::Sum,
            "mean" => Reduction::Mean,
            _ => return None,
        })
    }
    fn apply(self, x: &Tensor) -> Tensor {
        match self {
            Reduction::None => x.clone(),
            Reduction::Sum => x.sum(..),
            Reduction::Mean => x.mean(..),
        }
    }
}

/// Options of [`Tensor::conv2d`] and [`Tensor::conv_transpose2d`] (tinygrad's keyword arguments). Per-dim
/// fields take one value for every spatial dim or one per dim.
#[derive(Clone, Debug)]
pub struct Conv2dOpts {
    /// Added per output channel.
    pub bias: Option<Tensor>,
    /// Channel groups: input and output channels split into `groups` independent convolutions.
    pub groups: usize,
    /// Window step per spatial dim.
    pub stride: Vec<usize>,
    /// Spacing of kernel taps per spatial dim.
    pub dilation: Vec<usize>,
    /// `[p]` for every side, one value per spatial dim (both sides), or `2*dims` values in torch order (last
    /// dim first: left, right, top, bottom, ...). Negative values crop.
    pub padding: Vec<i64>,
    /// `conv_transpose2d` only: extra output size after each spatial dim.
    pub output_padding: Vec<usize>,
    /// `conv2d` only: the accumulation dtype (tinygrad `dtype`); default the inputs' sum dtype.
    pub dtype: Option<DType>,
}

impl Default for Conv2dOpts {
    fn default() -> Self {
        Conv2dOpts { bias: None, groups: 1, stride: vec![1], dilation: vec![1], padding: vec![0], output_padding: vec![0], dtype: None }
    }
}

fn usizes(v: impl super::IntoDims) -> Vec<usize> {
    v.into_dims().into_iter().map(|x| usize::try_from(x).expect("expected non-negative values")).collect()
}

impl Conv2dOpts {
    /// With a bias.
    pub fn bias(mut self, b: &Tensor) -> Self {
        self.bias = Some(b.clone());
        self
    }
    /// With `g` groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    /// With a stride (one value or one per spatial dim).
    pub fn stride(mut self, s: impl super::IntoDims) -> Self {
        self.stride = usizes(s);
        self
    }
    /// With a dilation (one value or one per spatial dim).
    pub fn dilation(mut self, d: impl super::IntoDims) -> Self {
        self.dilation = usizes(d);
        self
    }
    /// With padding in one of tinygrad's forms (see the `padding` field).
    pub fn padding(mut self, p: impl super::IntoDims) -> Self {
        self.padding = p.into_dims();
        self
    }
    /// With output padding (conv_transpose2d).
    pub fn output_padding(mut self, p: impl super::IntoDims) -> Self {
        self.output_padding = usizes(p);
        self
    }
    /// With an accumulation dtype (conv2d).
    pub fn dtype(mut self, dt: DType) -> Self {
        self.dtype = Some(dt);
        self
    }
}

/// Options of the pooling ops [`Tensor::avg_pool2d`], [`Tensor::max_pool2d`] and [`Tensor::max_unpool2d`]
/// (tinygrad's keyword arguments). They pool over as many trailing dims as `kernel_size` has.
#[derive(Clone, Debug)]
pub struct Pool2dOpts {
    /// Window size per pooled dim (default `[2, 2]`).
    pub kernel_size: Vec<usize>,
    /// Window step (one value or one per dim); `None` is the kernel size.
    pub stride: Option<Vec<usize>>,
    /// Spacing of window taps (one value or one per dim).
    pub dilation: Vec<usize>,
    /// Padding in the forms of the `padding` field of [`Conv2dOpts`].
    pub padding: Vec<i64>,
    /// Output size rounded up: a last window may start in the input and run past it.
    pub ceil_mode: bool,
    /// `avg_pool2d` only: whether padded zeros count in the mean.
    pub count_include_pad: bool,
}

impl Default for Pool2dOpts {
    fn default() -> Self {
        Pool2dOpts { kernel_size: vec![2, 2], stride: None, dilation: vec![1], padding: vec![0], ceil_mode: false, count_include_pad: true }
    }
}

impl Pool2dOpts {
    /// With a kernel size (one entry per pooled dim).
    pub fn kernel_size(mut self, k: impl super::IntoDims) -> Self {
        self.kernel_size = usizes(k);
        self
    }
    /// With a stride.
    pub fn stride(mut self, s: impl super::IntoDims) -> Self {
        self.stride = Some(usizes(s));
        self
    }
    /// With a dilation.
    pub fn dilation(mut self, d: impl super::IntoDims) -> Self {
        self.dilation = usizes(d);
        self
    }
    /// With padding.
    pub fn padding(mut self, p: impl super::IntoDims) -> Self {
        self.padding = p.into_dims();
        self
    }
    /// With ceil mode.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }
    /// With or without padding counted in averages.
    pub fn count_include_pad(mut self, on: bool) -> Self {
        self.count_include_pad = on;
        self
    }
}

/// One value per dim from one value or one per dim (tinygrad `make_tuple`).
fn per_dim(v: &[usize], n: usize, what: &str, op: &str) -> Vec<usize> {
    match v.len() {
        1 => vec![v[0]; n],
        l if l == n => v.to_vec(),
        _ => panic!("{op}: {what} {v:?} needs 1 or {n} values"),
    }
}

/// `(before, after)` per spatial dim from tinygrad's padding forms (`resolve_pool_pads` + `flat_to_grouped`).
fn resolve_pads(p: &[i64], n: usize, op: &str) -> Vec<(i64, i64)> {
    match p.len() {
        1 => vec![(p[0], p[0]); n],
        l if l == 2 * n => (0..n).map(|d| (p[2 * (n - 1 - d)], p[2 * (n - 1 - d) + 1])).collect(),
        l if l == n => p.iter().map(|&x| (x, x)).collect(),
        _ => panic!("{op}: padding {p:?} needs 1, {n} or {} values", 2 * n),
    }
}

/// Kernel, stride, dilation and `(before, after)` padding per pooled dim.
struct Window {
    k: Vec<usize>,
    s: Vec<usize>,
    d: Vec<usize>,
    pads: Vec<(i64, i64)>,
}

impl Window {
    /// The windows of `x` (already padded): `(..., o..., k...)`.
    fn apply(&self, x: &Tensor) -> Tensor {
        pool(x, &self.k, &self.s, &self.d)
    }
    /// The kernel dims of the pooled tensor (the last ones).
    fn axes(&self) -> Vec<i64> {
        (1..=self.k.len() as i64).map(|i| -i).collect()
    }
}

/// Interpolation modes of [`Tensor::interpolate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// Linear in each resized dim (bilinear, trilinear, ...).
    Linear,
    /// The source element at `floor(i * in / out)`.
    Nearest,
    /// The source element at `floor((i + 0.5) * in / out)`.
    NearestExact,
}

/// Options of [`Tensor::scaled_dot_product_attention`] (tinygrad's keyword arguments).
#[derive(Clone, Debug, Default)]
pub struct SdpaOpts {
    /// Added to the scores (float) or selecting allowed positions (bool); broadcast to `(..., Lq, Lk)`.
    pub attn_mask: Option<Tensor>,
    /// Dropout on the attention weights (only in training mode, as [`Tensor::dropout`]).
    pub dropout_p: f64,
    /// Mask out keys after each query (lower-triangular mask); exclusive with `attn_mask`.
    pub is_causal: bool,
    /// Grouped-query attention: repeat each key/value head for `heads_q / heads_kv` query heads.
    pub enable_gqa: bool,
}

/// `x` zero-padded by `pads` on its spatial dims. A large padded CPU input is copied into a buffer first: the
/// convolution kernel then reads it without a bounds check per element, so its loads along a row are vector loads
/// (tinygrad pads lazily inside the kernel).
fn padded_for_conv(x: &Tensor, pads: &[(i64, i64)]) -> Tensor {
    let padded = x.pad(&[vec![(0, 0); 2], pads.to_vec()].concat());
    if pads.iter().any(|&(a, b)| a != 0 || b != 0) && x.numel() >= 1 << 16 && x.device() == "CPU" {
        padded.contiguous()
    } else {
        padded
    }
}

impl Tensor {
    // ***** reductions and scans *****

    /// The variance over `axis` with `correction` subtracted from the count (tinygrad `var`; 1 is Bessel's
    /// correction). Ints give float32; like tinygrad, int inputs sum their squared deviations as ints.
    pub fn var(&self, axis: impl super::IntoAxes, keepdim: bool, correction: f64) -> Tensor {
        let axes = axis.into_axes(self.ndim());
        let out = if self.dtype().is_float() { self.dtype() } else { dtypes::FLOAT32 };
        let squares = self.sub(self.mean_keepdim(axes.clone())).square();
        let n: usize = axes.iter().map(|&a| self.shape()[a]).product();
        let s = squares.cast(sum_acc_dtype(self.dtype()));
        let num = if keepdim { s.sum_keepdim(axes) } else { s.sum(axes) };
        num.div((n as f64 - correction).max(0.0)).cast(out)
    }
    /// The standard deviation over `axis` (tinygrad `std`): `sqrt(var)`.
    pub fn std(&self, axis: impl super::IntoAxes, keepdim: bool, correction: f64) -> Tensor {
        self.var(axis, keepdim, correction).sqrt()
    }
    /// `(var, mean)` over `axis` (tinygrad `var_mean`).
    pub fn var_mean(&self, axis: impl super::IntoAxes, keepdim: bool, correction: f64) -> (Tensor, Tensor) {
        let axes = axis.into_axes(self.ndim());
        let m = if keepdim { self.mean_keepdim(axes.clone()) } else { self.mean(axes.clone()) };
        (self.var(axes, keepdim, correction), m)
    }
    /// `(std, mean)` over `axis` (tinygrad `std_mean`).
    pub fn std_mean(&self, axis: impl super::IntoAxes, keepdim: bool, correction: f64) -> (Tensor, Tensor) {
        let (v, m) = self.var_mean(axis, keepdim, correction);
        (v.sqrt(), m)
    }
    /// Whether any element over `axis` is nonzero (bool; tinygrad `any`).
    pub fn any(&self, axis: impl super::IntoAxes, keepdim: bool) -> Tensor {
        let b = self.cast(dtypes::BOOL);
        if keepdim {
            b.max_keepdim(axis)
        } else {
            b.max(axis)
        }
    }
    /// Whether every element over `axis` is nonzero (bool; tinygrad `all`).
    pub fn all(&self, axis: impl super::IntoAxes, keepdim: bool) -> Tensor {
        let b = self.cast(dtypes::BOOL);
        if keepdim {
            b.prod_keepdim(axis)
        } else {
            b.prod(axis)
        }
    }
    /// The int32 index of the first maximum along `axis`, or in the flattened tensor for `None` (where
    /// `keepdim` is ignored, as in tinygrad `argmax`).
    pub fn argmax(&self, axis: Option<i64>, keepdim: bool) -> Tensor {
        let Some(axis) = axis else { return self.flatten(0).argmax(Some(0), false) };
        let a = dim(axis, self.ndim(), "argmax");
        let n = self.shape().get(a).copied().unwrap_or(1);
        let m = self.eq(self.max_keepdim(a));
        let idx = m.mul(Tensor::arange(n as f64, 0.0, -1.0).reshape([vec![n], vec![1; self.ndim().saturating_sub(a + 1)]].concat()));
        let best = if keepdim { idx.max_keepdim(a) } else { idx.max(a) };
        best.neg().add(n as i64).cast(dtypes::INT32)
    }
    /// The int32 index of the first minimum along `axis` (tinygrad `argmin`).
    pub fn argmin(&self, axis: Option<i64>, keepdim: bool) -> Tensor {
        inverse(self).argmax(axis, keepdim)
    }
    /// The running `op` (ADD, MUL, MAX) along `axis`: each output is the reduce of a window over the padded
    /// input (tinygrad `_cumalu`).
    fn cumalu(&self, axis: usize, op: Ops) -> Tensor {
        let n = self.shape()[axis];
        let x = self.transpose(axis as i64, -1);
        let pooled =
            pool(&pad_const(&x, &pad_on(x.ndim(), x.ndim() - 1, (n as i64 - 1, 0)), identity_element(op, self.dtype())), &[n], &[1], &[1]);
        let r = match op {
            Ops::ADD => pooled.sum(-1),
            Ops::MUL => pooled.prod(-1),
            _ => pooled.max(-1),
        };
        r.transpose(axis as i64, -1)
    }
    /// The running `op` along `axis`; axes longer than 512 run as two stages over chunks of 256 (tinygrad
    /// `_split_cumalu`).
    fn split_cumalu(&self, axis: i64, op: Ops) -> Tensor {
        const SPLIT: usize = 256;
        if self.ndim() == 0 || self.numel() == 0 {
            return if op == Ops::ADD { self.cast(sum_acc_dtype(self.dtype())) } else { self.clone() };
        }
        let axis = dim(axis, self.ndim(), "cumulative op");
        let s = self.shape()[axis];
        if s <= SPLIT * 2 {
            return self.cumalu(axis, op);
        }
        let v = identity_element(op, self.dtype());
        let x = self.transpose(axis as i64, -1);
        let nd = x.ndim();
        let x = pad_const(&x, &pad_on(nd, nd - 1, ((s.div_ceil(SPLIT) * SPLIT - s) as i64, 0)), v);
        let mut cs = x.shape();
        cs.pop();
        cs.extend([x.shape()[nd - 1] / SPLIT, SPLIT]);
        let chunks = x.reshape(cs.clone()).cumalu(nd, op);
        let last = sq(&slice_dim(&chunks, nd, SPLIT - 1, SPLIT), nd);
        let base = pad_const(&last.cumalu(nd - 1, op), &pad_on(nd, nd - 1, (1, -1)), identity_element(op, last.dtype()));
        let full = alu2(&chunks, op, &unsq(&base, nd)).flatten(nd as i64 - 1);
        let n = full.shape()[nd - 1];
        slice_dim(&full, nd - 1, n - s, n).transpose(axis as i64, -1)
    }
    /// The running sum along `axis` (tinygrad `cumsum`; ints accumulate in int32 or wider).
    pub fn cumsum(&self, axis: i64) -> Tensor {
        self.split_cumalu(axis, Ops::ADD)
    }
    /// The running product along `axis` (tinygrad `cumprod`).
    pub fn cumprod(&self, axis: i64) -> Tensor {
        self.split_cumalu(axis, Ops::MUL)
    }
    /// The running maximum along `axis` and the int32 index where each was first reached (tinygrad `cummax`).
    pub fn cummax(&self, axis: i64) -> (Tensor, Tensor) {
        let values = self.split_cumalu(axis, Ops::MAX);
        if self.ndim() == 0 {
            return (values, Tensor::full_dtype((), 0, dtypes::INT32));
        }
        let a = dim(axis, self.ndim(), "cummax") as i64;
        let n = self.shape()[a as usize];
        let (x, vt) = (self.transpose(a, -1), values.transpose(a, -1));
        let hit = unsq(&x, x.ndim()).eq(unsq(&vt, vt.ndim() - 1)).mul(tri(n, n, 0));
        let first = hit.mul(Tensor::arange(n as f64, 0.0, -1.0).reshape([n, 1])).max(-2);
        (values, first.neg().add(n as i64).cast(dtypes::INT32).transpose(-1, a))
    }
    /// The running minimum along `axis` and the int32 index where each was first reached (tinygrad `cummin`).
    pub fn cummin(&self, axis: i64) -> (Tensor, Tensor) {
        let (v, i) = inverse(self).cummax(axis);
        (inverse(&v), i)
    }
    /// `log(cumsum(exp(self)))` along `axis`, computed stably (tinygrad `logcumsumexp`).
    pub fn logcumsumexp(&self, axis: i64) -> Tensor {
        if self.ndim() == 0 {
            return self.clone();
        }
        let a = dim(axis, self.ndim(), "logcumsumexp") as i64;
        let x = self.transpose(a, -1);
        let n = x.shape()[x.ndim() - 1];
        let m = x.cummax(-1).0.detach();
        let low = tri(n, n, 1).logical_not();
        let d = unsq(&x, x.ndim() - 1).sub(unsq(&m, m.ndim()));
        low.where_(d, Tensor::full_dtype((), self.dtype().min(), self.dtype())).exp().sum(-1).log().add(m).transpose(-1, a)
    }
    /// The values sorted along `dim` and their int32 source indices (tinygrad `sort`). A bitonic network of
    /// min/max over the axis padded to a power of two; equal values keep their order.
    pub fn sort(&self, dim_: i64, descending: bool) -> (Tensor, Tensor) {
        let d = dim(dim_, self.ndim(), "sort");
        let len = self.shape().get(d).copied().unwrap_or(1);
        if len <= 1 {
            return (self.clone(), Tensor::full_dtype(self.shape(), 0, dtypes::INT32));
        }
        let stages = (usize::BITS - (len - 1).leading_zeros()) as usize;
        let fill = if descending { self.dtype().min() } else { self.dtype().max() };
        let x = pad_const(self, &pad_on(self.ndim(), d, (0, ((1 << stages) - len) as i64)), fill);
        let mut bits = x.shape();
        bits.splice(d..=d, vec![2; stages]);
        let mut x = x.reshape(bits);
        for stage in 1..=stages {
            // flip the second half of each block so every compare box points the same way
            let cross = d + stages - stage - 1;
            let flips: Vec<i64> = (1..=(stage + self.ndim() - d) as i64).map(|i| -i).collect();
            let crossover = |x: &Tensor| {
                let (blue, green) = halves(x, cross);
                cat2(&blue, &green.flip(flips.clone()), cross)
            };
            if stage != stages {
                x = crossover(&x).contiguous().contiguous_backward();
            }
            for sub in (0..stage).rev() {
                let p = d + stages - sub - 1;
                let (top, bottom) = halves(&x, p);
                // the minimum as ~max(~a, ~b), which holds for unsigned ints too (tinygrad `minimum`)
                let (hi, lo) = (top.maximum(&bottom), inverse(&inverse(&top).maximum(inverse(&bottom))));
                // the gradient is materialized at the same boundaries: left lazy, each stage's gradient reads the
                // next stage's at four index maps, and the fused kernel grows as 4^stages
                x = if descending { cat2(&hi, &lo, p) } else { cat2(&lo, &hi, p) }.contiguous().contiguous_backward();
            }
            if stage != stages {
                x = crossover(&x);
            }
        }
        let mut padded = self.shape();
        padded[d] = 1 << stages;
        let x = x.reshape(padded).shrink_to(self.shape());
        // the k-th occurrence of a value in the input goes to its k-th occurrence in the output
        let mask = tri(len, len, 1).logical_not().reshape([vec![len, len], vec![1; self.ndim() - d - 1]].concat());
        let counts = |t: &Tensor| mask.where_(unsq(t, d).eq(unsq(t, d + 1)), false).sum(d as i64 + 1);
        let (co, cs) = (counts(self), counts(&x));
        let same = unsq(self, d + 1).eq(unsq(&x, d)).mul(unsq(&co, d + 1).eq(unsq(&cs, d)));
        let idx = Tensor::arange(0.0, len as f64, 1.0).reshape((0..self.ndim()).map(|i| if i == d { len } else { 1 }).collect::<Vec<_>>());
        (x, same.mul(unsq(&idx, d + 1)).sum(d as i64))
    }
    /// The int32 indices that sort `self` along `dim` (tinygrad `argsort`).
    pub fn argsort(&self, dim_: i64, descending: bool) -> Tensor {
        self.sort(dim_, descending).1
    }
    /// The `k` largest (or smallest) values along `dim`, sorted, and their int32 indices (tinygrad `topk`).
    ///
    /// # Panics
    /// If `k` exceeds the dim.
    pub fn topk(&self, k: usize, dim_: i64, largest: bool) -> (Tensor, Tensor) {
        let d = dim(dim_, self.ndim(), "topk");
        let n = self.shape().get(d).copied().unwrap_or(1);
        assert!(k <= n, "topk: k={k} is out of range for dim {d} of shape {:?}", self.shape());
        let (x, idx) = self.sort(dim_, largest);
        let cut: Vec<usize> = x.shape().iter().enumerate().map(|(i, &s)| if i == d { k } else { s }).collect();
        (x.shrink_to(&cut), idx.shrink_to(&cut))
    }

    // ***** processing *****

    /// Einstein summation over `operands` (tinygrad `einsum`): `"ij,jk->ik"`, implicit outputs (`"ij,jk"`: the
    /// letters seen once, sorted), `...` for broadcast dims, and letters repeated in one operand (diagonals, so
    /// `"ii->i"` and `"ii->"` are the diagonal and the trace).
    ///
    /// # Panics
    /// If the operand count or a dim size doesn't match the formula.
    pub fn einsum(formula: &str, operands: &[&Tensor]) -> Tensor {
        let mut formula: String = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs0, arrow) = formula.split_once("->").map_or((formula.clone(), None), |(l, r)| (l.to_string(), Some(r.to_string())));
        if formula.contains("...") {
            let ell: String = ('a'..='z').chain('A'..='Z').filter(|&c| !formula.contains(c)).collect();
            let parts: Vec<&str> = lhs0.split(',').collect();
            let n: Vec<usize> = parts
                .iter()
                .zip(operands)
                .map(|(s, x)| if s.contains("...") { (x.ndim() + 3).saturating_sub(s.len()) } else { 0 })
                .collect();
            let most = n.iter().copied().max().unwrap_or(0);
            let lhs: Vec<String> = parts.iter().zip(&n).map(|(s, &k)| s.replace("...", &ell[most - k..most])).collect();
            let rhs = match &arrow {
                Some(r) => r.replace("...", &ell[..most]),
                None => {
                    let mut auto: Vec<char> = lhs0.chars().filter(|&c| c.is_alphabetic() && lhs0.matches(c).count() == 1).collect();
                    auto.sort();
                    format!("{}{}", &ell[..most], auto.into_iter().collect::<String>())
                }
            };
            formula = format!("{}->{rhs}", lhs.join(","));
        }
        let (lhs, rhs) = match formula.split_once("->") {
            Some((l, r)) => (l.to_string(), r.to_string()),
            None => {
                let mut once: Vec<char> = formula.chars().filter(|&c| c.is_alphabetic() && formula.matches(c).count() == 1).collect();
                once.sort();
                (formula.clone(), once.into_iter().collect())
            }
        };
        let inputs: Vec<&str> = lhs.split(',').collect();
        assert_eq!(inputs.len(), operands.len(), "einsum: {formula:?} takes {} operands, got {}", inputs.len(), operands.len());
        let mut sz: std::collections::BTreeMap<char, usize> = Default::default();
        let mut xs = Vec::new();
        for (s, &x) in inputs.iter().zip(operands) {
            let (mut s, mut x): (Vec<char>, Tensor) = (s.chars().collect(), x.clone());
            assert_eq!(s.len(), x.ndim(), "einsum: {:?} doesn't fit an operand of shape {:?}", s.iter().collect::<String>(), x.shape());
            // a letter repeated in one operand: its diagonal, moved to the last dim
            while let Some((j, k)) = (0..s.len()).find_map(|j| s[j + 1..].iter().position(|&c| c == s[j]).map(|p| (j, j + 1 + p))) {
                let (shape, c) = (x.shape(), s[j]);
                let n = shape[j];
                assert_eq!(n, shape[k], "einsum: letter {c} has sizes {n} and {}", shape[k]);
                let perm: Vec<usize> = (0..x.ndim()).filter(|&i| i != j && i != k).chain([j, k]).collect();
                let flat = x.permute(perm).flatten(x.ndim() as i64 - 2);
                let nd = flat.ndim();
                let mut unflat = flat.shape();
                unflat.splice(nd - 1.., [n, n + 1]);
                x = sq(&slice_dim(&flat.pad(&pad_on(nd, nd - 1, (0, n as i64))).reshape(unflat), nd, 0, 1), nd);
                s = s.iter().enumerate().filter(|&(i, _)| i != j && i != k).map(|(_, &c)| c).chain([c]).collect();
            }
            for (&c, &n) in s.iter().zip(&x.shape()) {
                let old = *sz.entry(c).or_insert(n);
                assert!(old == n || old == 1 || n == 1, "einsum: letter {c} has sizes {old} and {n}");
                sz.insert(c, old.max(n));
            }
            xs.push((s, x));
        }
        let alpha: Vec<char> = sz.keys().copied().collect();
        let aligned: Vec<Tensor> = xs
            .iter()
            .map(|(s, x)| {
                let mut sorted = s.clone();
                sorted.sort();
                let perm: Vec<usize> = sorted.iter().map(|c| s.iter().position(|d| d == c).unwrap()).collect();
                let shape: Vec<usize> =
                    alpha.iter().map(|c| if s.contains(c) { x.shape()[s.iter().position(|d| d == c).unwrap()] } else { 1 }).collect();
                if s.is_empty() {
                    x.clone()
                } else {
                    x.permute(perm).reshape(shape)
                }
            })
            .collect();
        let prod = aligned[1..].iter().fold(aligned[0].clone(), |acc, x| acc.mul(x));
        let summed: Vec<usize> = alpha.iter().enumerate().filter(|(_, c)| !rhs.contains(**c)).map(|(i, _)| i).collect();
        let out = prod.sum(summed);
        let mut kept: Vec<char> = rhs.chars().collect();
        kept.sort();
        out.permute(
            rhs.chars().map(|c| kept.iter().position(|&k| k == c).expect("einsum: output letter not in inputs")).collect::<Vec<_>>(),
        )
    }
    /// `self @ weight + bias` with tinygrad's weight layout `(in, out)`; a 1-D weight scales elementwise
    /// (tinygrad `linear`).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
        let x = if weight.ndim() == 1 { self.mul(weight) } else { self.dot(weight) };
        bias.map_or(x.clone(), |b| x.add(b))
    }
    /// Convolution over the spatial dims of `self` `(N, Cin, *spatial)` with `weight` `(Cout, Cin/groups,
    /// *kernel)`: 1-D, 2-D, 3-D, ... (tinygrad `conv2d`). Built as windows of the padded input (movement ops),
    /// multiplied by the weight and summed.
    ///
    /// # Panics
    /// If the shapes don't fit together; the message names both shapes.
    pub fn conv2d(&self, weight: &Tensor, opts: Conv2dOpts) -> Tensor {
        let (xs, ws) = (self.shape(), weight.shape());
        assert!(xs.len() >= 3 && xs.len() == ws.len(), "conv2d: input shape {xs:?} doesn't match weight shape {ws:?}");
        let hw = ws[2..].len();
        let pads = resolve_pads(&opts.padding, hw, "conv2d");
        self.conv(weight, &opts, &pads)
    }
    fn conv(&self, weight: &Tensor, opts: &Conv2dOpts, pads: &[(i64, i64)]) -> Tensor {
        let (xs, ws, g) = (self.shape(), weight.shape(), opts.groups);
        let (bs, cin, cout, hw) = (xs[0], ws[1], ws[0], ws[2..].to_vec());
        assert!(
            g > 0 && g * cin == xs[1] && cout % g == 0,
            "conv2d: input shape {xs:?} doesn't match weight shape {ws:?} with {g} groups ({} vs {} channels)",
            g * cin,
            xs[1]
        );
        let (stride, dilation) =
            (per_dim(&opts.stride, hw.len(), "stride", "conv2d"), per_dim(&opts.dilation, hw.len(), "dilation", "conv2d"));
        let x = pool(&padded_for_conv(self, pads), &hw, &stride, &dilation);
        let (rcout, oyx) = (cout / g, x.shape()[2..2 + hw.len()].to_vec());
        let n = oyx.len();
        let x = x
            .reshape([vec![bs, g, cin, 1], oyx.clone(), hw.clone()].concat())
            .expand([vec![bs, g, cin, rcout], oyx.clone(), hw.clone()].concat())
            .permute([vec![0, 1, 3], (4..4 + n).collect(), vec![2], (4 + n..4 + 2 * n).collect()].concat());
        let prod = x.mul(weight.reshape([vec![1, g, rcout], vec![1; n], vec![cin], hw].concat()));
        let axes: Vec<i64> = (0..=n as i64).map(|i| -1 - i).collect();
        let summed = match opts.dtype {
            Some(dt) => prod.cast(dt).sum_keepdim(axes),
            None => prod.sum_keepdim(axes),
        };
        let ret = summed.reshape([vec![bs, cout], oyx].concat());
        match &opts.bias {
            Some(b) => ret.add(b.reshape([vec![1, cout], vec![1; n]].concat())),
            None => ret,
        }
    }
    /// Transposed convolution (the gradient of `conv2d` with respect to its input) of `self` `(N, Cin,
    /// *spatial)` with `weight` `(Cin, Cout/groups, *kernel)`, honouring stride, padding, output padding,
    /// dilation and groups (tinygrad `conv_transpose2d`).
    ///
    /// # Panics
    /// If the shapes don't fit together.
    pub fn conv_transpose2d(&self, weight: &Tensor, opts: Conv2dOpts) -> Tensor {
        let (xs, ws, g) = (self.shape(), weight.shape(), opts.groups);
        assert!(
            xs.len() >= 3 && xs.len() == ws.len() && g > 0 && ws[0] % g == 0 && ws[0] == xs[1],
            "conv_transpose2d: input shape {xs:?} doesn't match weight shape {ws:?} with {g} groups"
        );
        let hw = ws[2..].to_vec();
        let nd = hw.len();
        let w = weight.reshape([vec![g, ws[0] / g], ws[1..].to_vec()].concat()).transpose(1, 2).flip((3..3 + nd).collect::<Vec<_>>());
        let w = w.reshape([vec![g * ws[1], ws[0] / g], hw.clone()].concat());
        let pads = resolve_pads(&opts.padding, nd, "conv_transpose2d");
        let [stride, dilation, outpad] = [("stride", &opts.stride), ("dilation", &opts.dilation), ("output_padding", &opts.output_padding)]
            .map(|(n, v)| per_dim(v, nd, n, "conv_transpose2d"));
        let mut x = self.clone();
        if stride.iter().any(|&s| s > 1) {
            // zeros between the input elements: (k) -> (k, 1) -> pad to (k, s) -> (k*s) -> shrink to k*s-(s-1)
            let sp = &xs[2..];
            x = x.reshape([xs[..2].to_vec(), sp.iter().flat_map(|&k| [k, 1]).collect()].concat());
            x = x.pad(&[vec![(0, 0); 2], stride.iter().flat_map(|&s| [(0, 0), (0, s as i64 - 1)]).collect()].concat());
            x = x.reshape([xs[..2].to_vec(), sp.iter().zip(&stride).map(|(&k, &s)| k * s).collect()].concat());
            x = x.shrink_to([xs[..2].to_vec(), sp.iter().zip(&stride).map(|(&k, &s)| k * s - (s - 1)).collect()].concat());
        }
        let pads: Vec<(i64, i64)> = (0..nd)
            .map(|i| {
                let e = ((hw[i] - 1) * dilation[i]) as i64;
                (e - pads[i].0, e - pads[i].1 + outpad[i] as i64)
            })
            .collect();
        x.conv(&w, &Conv2dOpts { stride: vec![1], dilation, dtype: None, ..opts }, &pads)
    }
    /// The pooling window of `opts` over the trailing dims of `self`, with ceil mode's extra padding if
    /// `ceil` (tinygrad `_apply_ceil_mode`: a last window may start in the input and run past it).
    fn window(&self, opts: &Pool2dOpts, ceil: bool, op: &str) -> Window {
        let k = opts.kernel_size.clone();
        assert!(!k.is_empty() && k.len() <= self.ndim(), "{op}: kernel {k:?} doesn't fit shape {:?}", self.shape());
        let s = per_dim(opts.stride.as_ref().unwrap_or(&k), k.len(), "stride", op);
        let d = per_dim(&opts.dilation, k.len(), "dilation", op);
        let mut pads = resolve_pads(&opts.padding, k.len(), op);
        if ceil {
            let sh = self.shape();
            for (j, (pb, pa)) in pads.iter_mut().enumerate() {
                let (i, k, s, d) = (sh[sh.len() - k.len() + j] as i64, k[j] as i64, s[j] as i64, d[j] as i64);
                let o = ceildiv(i + *pb + *pa - (d * (k - 1) + 1), s) + 1;
                *pa += s * (o - 1) + (d * (k - 1) + 1) - (i + *pb + *pa) - (s * (o - 1) - (*pb + i - 1)).max(0);
            }
        }
        Window { k, s, d, pads }
    }
    /// Average pooling over the trailing `kernel_size.len()` dims (tinygrad `avg_pool2d`).
    pub fn avg_pool2d(&self, opts: Pool2dOpts) -> Tensor {
        let w = self.window(&opts, opts.ceil_mode, "avg_pool2d");
        let reg = self.window(&opts, false, "avg_pool2d").pads;
        let axes = w.axes();
        let lead = vec![(0, 0); self.ndim() - w.k.len()];
        let pooled = |x: &Tensor, p: &[(i64, i64)]| w.apply(&x.pad(&[lead.clone(), p.to_vec()].concat()));
        if !opts.count_include_pad {
            return pooled(self, &w.pads).sum(axes.clone()).div(pooled(&self.ones_like(), &w.pads).sum(axes));
        }
        if !opts.ceil_mode {
            return pooled(self, &w.pads).mean(axes);
        }
        // the extra ceil-mode padding doesn't count; the regular padding does
        let extra: Vec<(i64, i64)> = w.pads.iter().zip(&reg).map(|(c, r)| (c.0 - r.0, c.1 - r.1)).collect();
        let ones = self.pad(&[lead.clone(), reg].concat()).ones_like();
        pooled(self, &w.pads).sum(axes.clone()).div(pooled(&ones, &extra).sum(axes))
    }
    /// Max pooling over the trailing `kernel_size.len()` dims (tinygrad `max_pool2d`); padding is `-inf` (the
    /// dtype's minimum).
    pub fn max_pool2d(&self, opts: Pool2dOpts) -> Tensor {
        let (w, pooled) = self.max_pool_windows(&opts);
        pooled.max(w.axes())
    }
    /// Max pooling and, for each output, the int32 flat index of its first maximum within the input's pooled
    /// dims (tinygrad `max_pool2d(..., return_indices=True)`), as [`Tensor::max_unpool2d`] takes them.
    pub fn max_pool2d_with_indices(&self, opts: Pool2dOpts) -> (Tensor, Tensor) {
        let (w, pooled) = self.max_pool_windows(&opts);
        let spatial = self.shape()[self.ndim() - w.k.len()..].to_vec();
        let n: usize = spatial.iter().product();
        let idx = pad_const(&Tensor::arange(n as f64, 0.0, -1.0).reshape(spatial), &w.pads, dtypes::INT32.min());
        let m = pooled.eq(pooled.max_keepdim(w.axes()));
        let first = m.mul(w.apply(&idx)).max(w.axes());
        (pooled.max(w.axes()), first.neg().add(n as i64))
    }
    fn max_pool_windows(&self, opts: &Pool2dOpts) -> (Window, Tensor) {
        let w = self.window(opts, opts.ceil_mode, "max_pool2d");
        let padded = pad_const(self, &[vec![(0, 0); self.ndim() - w.k.len()], w.pads.clone()].concat(), self.dtype().min());
        let pooled = w.apply(&padded);
        (w, pooled)
    }
    /// The partial inverse of `max_pool2d`: each value of `self` `(N, C, *pooled)` written at its flat index
    /// from `indices` in a zero output of `output_size` (or the size the pooling options imply) (tinygrad
    /// `max_unpool2d`).
    ///
    /// # Panics
    /// If `self` has fewer than 3 dims, `indices` has another shape, or the pooling options are malformed.
    pub fn max_unpool2d(&self, indices: &Tensor, opts: Pool2dOpts, output_size: Option<&[usize]>) -> Tensor {
        let sh = self.shape();
        assert!(sh.len() >= 3 && indices.shape() == sh, "max_unpool2d: indices shape {:?} doesn't match shape {sh:?}", indices.shape());
        let (bs, c, spatial) = (sh[0], sh[1], &sh[2..]);
        let out: Vec<usize> = match output_size {
            Some(o) => o[o.len() - spatial.len()..].to_vec(),
            None => {
                let nd = spatial.len();
                let k = per_dim(&opts.kernel_size, nd, "kernel_size", "max_unpool2d");
                let s = per_dim(opts.stride.as_ref().unwrap_or(&k), nd, "stride", "max_unpool2d");
                let d = per_dim(&opts.dilation, nd, "dilation", "max_unpool2d");
                let p = resolve_pads(&opts.padding, nd, "max_unpool2d");
                (0..nd)
                    .map(|j| ((spatial[j] - 1) * s[j]) as i64 - (p[j].0 + p[j].1) + (d[j] * (k[j] - 1) + 1) as i64)
                    .map(|v| v as usize)
                    .collect()
            }
        };
        let n: usize = out.iter().product();
        let hot = one_hot_at(&indices.reshape([bs as i64, c as i64, 1, -1]), n, 2);
        hot.where_(self.reshape([bs as i64, c as i64, 1, -1]), 0).sum(3).reshape([vec![bs, c], out].concat())
    }
    /// Resizes the trailing `size.len()` dims to `size` (tinygrad `interpolate`): `Linear` (bilinear,
    /// trilinear, ...; `align_corners` maps the corner elements onto each other), `Nearest` or `NearestExact`.
    ///
    /// # Panics
    /// If `size` is empty or longer than the dims, or `align_corners` is set with a non-linear mode.
    pub fn interpolate(&self, size: &[usize], mode: InterpolateMode, align_corners: bool) -> Tensor {
        let nd = self.ndim();
        assert!(!size.is_empty() && size.len() <= nd, "interpolate: size {size:?} doesn't fit shape {:?}", self.shape());
        assert!(!align_corners || mode == InterpolateMode::Linear, "interpolate: align_corners needs mode Linear");
        let (mut x, mut expand) = (self.clone(), self.shape());
        for j in 0..size.len() {
            let (d, out) = (nd - 1 - j, size[size.len() - 1 - j]);
            let in_sz = self.shape()[d];
            expand[d] = out;
            let fit = |t: Tensor| t.reshape((0..nd).map(|i| if i == d { out } else { 1 }).collect::<Vec<_>>()).expand(expand.clone());
            let arr = Tensor::arange(0.0, out as f64, 1.0);
            x = if mode == InterpolateMode::Linear {
                let (num, den) = if align_corners {
                    (arr.mul((in_sz - 1) as i64), out as i64 - 1)
                } else {
                    (arr.mul(2).add(1).mul(in_sz as i64).sub(out as i64), out as i64 * 2)
                };
                let num = num.maximum(0).minimum((in_sz as i64 - 1) * den);
                let low = num.div_floor(den);
                let (high, perc) = (num.add(den - 1).div_floor(den), num.sub(low.mul(den)).cast(dtypes::FLOAT32).div(den));
                x.gather(d as i64, &fit(low)).lerp(&x.gather(d as i64, &fit(high)), fit(perc))
            } else {
                let scale = in_sz as f64 / out as f64;
                let pos = arr.cast(dtypes::FLOAT32);
                let pos = if mode == InterpolateMode::NearestExact { pos.add(0.5) } else { pos };
                x.gather(d as i64, &fit(pos.mul(scale).cast(dtypes::INT32)))
            };
        }
        x.cast(self.dtype())
    }

    // ***** nn functions *****

    /// `softmax(-self)` over `axis` (tinygrad `softmin`).
    pub fn softmin(&self, axis: i64) -> Tensor {
        self.neg().softmax(axis)
    }
    /// `self` divided by its `p`-norm over `dim` (at least `eps`); `p = 0` counts nonzeros (tinygrad
    /// `normalize`).
    pub fn normalize(&self, p: f64, dim_: i64, eps: f64) -> Tensor {
        let den = if p == 0.0 { self.ne(0).sum_keepdim(dim_) } else { self.abs().pow_tensor(p).sum_keepdim(dim_).pow_tensor(1.0 / p) };
        self.div(den.maximum(eps))
    }
    /// `(x - mean) / sqrt(var + eps)` over `axis`, with the biased variance (tinygrad `layernorm`).
    pub fn layernorm(&self, axis: impl super::IntoAxes, eps: f64) -> Tensor {
        let axes = axis.into_axes(self.ndim());
        let y = self.sub(self.mean_keepdim(axes.clone()));
        y.mul(y.mul(&y).mean_keepdim(axes).add(eps).rsqrt())
    }
    /// `(x - mean) * weight * invstd + bias` with the per-channel tensors laid along `axis` (tinygrad
    /// `batchnorm`). An `invstd` with fewer dims than `axis` broadcasts as it is.
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axis: impl super::IntoAxes,
    ) -> Tensor {
        let axes = axis.into_axes(self.ndim());
        let shape: Vec<usize> = self.shape().iter().enumerate().map(|(i, &s)| if axes.contains(&i) { s } else { 1 }).collect();
        let x = self.sub(mean.reshape(shape.clone()));
        let x = weight.map_or(x.clone(), |w| x.mul(w.reshape(shape.clone())));
        let x = x.mul(if invstd.ndim() == axes.len() { invstd.reshape(shape.clone()) } else { invstd.clone() });
        bias.map_or(x.clone(), |b| x.add(b.reshape(shape)))
    }
    /// `softmax(q @ kᵀ / sqrt(d) + mask) @ v` with `self` the queries `(..., Lq, d)` (tinygrad
    /// `scaled_dot_product_attention`). Scores are computed in at least float32.
    ///
    /// # Panics
    /// If `is_causal` is set with a mask.
    pub fn scaled_dot_product_attention(&self, key: &Tensor, value: &Tensor, opts: SdpaOpts) -> Tensor {
        let (mut key, mut value) = (key.clone(), value.clone());
        if opts.enable_gqa {
            let rep = |t: &Tensor| {
                let s = t.shape();
                let h = s.len() - 3;
                let r = self.shape()[h] / s[h];
                let mut e = s.clone();
                e.insert(h + 1, r);
                let out = [s[..h].to_vec(), vec![s[h] * r], s[h + 1..].to_vec()].concat();
                unsq(t, h + 1).expand(e).reshape(out)
            };
            (key, value) = (rep(&key), rep(&value));
        }
        let dt = crate::dtype::least_upper_dtype(&[self.dtype(), key.dtype(), dtypes::FLOAT32]);
        let qk = self.cast(dt).matmul(&key.cast(dt).transpose(-2, -1)).div((self.shape()[self.ndim() - 1] as f64).sqrt());
        let mask = if opts.is_causal {
            assert!(opts.attn_mask.is_none(), "scaled_dot_product_attention: can't set attn_mask with is_causal");
            let s = qk.shape();
            Some(tri(s[s.len() - 2], s[s.len() - 1], 1).logical_not())
        } else {
            opts.attn_mask
        };
        let qk = match mask {
            Some(m) if m.dtype().is_bool() => qk.add(m.where_(0.0, f64::NEG_INFINITY)),
            Some(m) => qk.add(m),
            None => qk,
        };
        qk.cast(self.dtype()).softmax(-1).dropout(opts.dropout_p).matmul(&value)
    }
    /// Binary cross-entropy of probabilities `self` against targets `y` (tinygrad `binary_crossentropy`).
    pub fn binary_crossentropy(&self, y: &Tensor, reduction: Reduction) -> Tensor {
        let one_minus = |t: &Tensor| t.neg().add(1);
        reduction.apply(&y.neg().mul(self.log()).sub(one_minus(y).mul(one_minus(self).log())))
    }
    /// Binary cross-entropy of logits `self` against targets `y`, computed with `logsigmoid`; `pos_weight`
    /// scales the positive term (tinygrad `binary_crossentropy_logits`).
    pub fn binary_crossentropy_logits(&self, y: &Tensor, reduction: Reduction, pos_weight: Option<&Tensor>) -> Tensor {
        let pos = y.mul(self.logsigmoid());
        let pos = pos_weight.map_or(pos.clone(), |w| pos.mul(w));
        reduction.apply(&pos.add(y.neg().add(1).mul(self.neg().logsigmoid())).neg())
    }
    /// Cross-entropy of logits `self` `(N, C, ...)` (or `(C,)`) against class indices `(N, ...)` or
    /// probabilities shaped like `self`, with label smoothing (tinygrad `cross_entropy`).
    ///
    /// # Panics
    /// If the target shape fits neither form, or `label_smoothing` is outside `[0, 1]`.
    pub fn cross_entropy(&self, y: &Tensor, reduction: Reduction, label_smoothing: f64) -> Tensor {
        assert!((0.0..=1.0).contains(&label_smoothing), "cross_entropy: label_smoothing {label_smoothing} is outside [0, 1]");
        let cd = if self.ndim() == 1 { 0 } else { 1 };
        let mut y = y.clone();
        if self.shape() != y.shape() {
            let mut s = self.shape();
            s.remove(cd);
            assert_eq!(s, y.shape(), "cross_entropy: shapes {:?} and {:?} don't match", self.shape(), y.shape());
            y = one_hot_at(&unsq(&y, cd), self.shape()[cd], cd);
        }
        let n = y.shape()[cd] as f64;
        let y = y.mul(1.0 - label_smoothing).add(label_smoothing / n);
        reduction.apply(&self.log_softmax(cd as i64).mul(y).sum(cd as i64).neg())
    }
    /// Cross-entropy of logits `self` `(..., C)` against int class labels `y` `(...)` (tinygrad
    /// `sparse_categorical_crossentropy`). Labels equal to `ignore_index` don't count, unless it is -1 (then a
    /// label -1 still counts in the mean as a zero loss); `label_smoothing` mixes in the uniform distribution.
    ///
    /// # Panics
    /// If `label_smoothing` is outside `[0, 1]`.
    pub fn sparse_categorical_crossentropy(&self, y: &Tensor, ignore_index: i64, label_smoothing: f64, reduction: Reduction) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&label_smoothing),
            "sparse_categorical_crossentropy: label_smoothing {label_smoothing} is outside [0, 1]"
        );
        let log_probs = self.log_softmax(-1);
        let mask = if ignore_index != -1 { y.ne(ignore_index) } else { Tensor::full_dtype(y.shape(), true, dtypes::BOOL) };
        let hot = one_hot_at(&unsq(y, y.ndim()), self.shape()[self.ndim() - 1], y.ndim()).mul(unsq(&mask, mask.ndim()));
        let smoothing = log_probs.mean(-1).mul(&mask).mul(label_smoothing);
        let unreduced = log_probs.mul(hot).sum(-1).mul(1.0 - label_smoothing).add(smoothing);
        match reduction {
            Reduction::Mean => unreduced.sum(..).neg().div(mask.sum(..)),
            r => r.apply(&unreduced).neg(),
        }
    }
    /// Negative log likelihood of log-probabilities `self` `(N, C, ...)` at int labels `y` `(N, ...)`, with
    /// per-class `weight`s and an ignored label; the mean is weighted (tinygrad `nll_loss`).
    pub fn nll_loss(&self, y: &Tensor, weight: Option<&Tensor>, ignore_index: Option<i64>, reduction: Reduction) -> Tensor {
        let w = match weight {
            Some(w) => w.gather(0, &y.flatten(0)).reshape(y.shape()),
            None => y.ones_like(),
        };
        let w = ignore_index.map_or(w.clone(), |i| w.mul(y.ne(i)));
        let nll = sq(&self.gather(1, &unsq(y, 1)), 1).neg().mul(&w);
        match reduction {
            Reduction::Mean => nll.sum(..).div(w.sum(..)),
            r => r.apply(&nll),
        }
    }
}
