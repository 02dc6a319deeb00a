//! Tensor ops: reductions beyond the primitives (variance, any/all, argmax), scans (cumulative sums, products,
//! maxima, `logcumsumexp`) and sorting (a bitonic network; `argsort`, `topk`). In: tensors. Out: lazy tensors built
//! from the primitive and movement ops, so each differentiates through their rules. Follows tinygrad
//! `mixin/reduce.py` and `mixin/op.py`.

use super::movement::{pad_const, pad_on, pool, slice_dim, sq, tri, unsq};
use super::Tensor;
use crate::dtype::{dtypes, sum_acc_dtype};
use crate::uop::{symbolic::identity_element, Ops};

/// `a` as an index into `ndim` dims (negative counts from the end).
fn dim(a: i64, ndim: usize, op: &str) -> usize {
    let n = ndim.max(1) as i64;
    assert!((-n..n).contains(&a), "{op}: dim {a} out of range for {ndim} dims");
    a.rem_euclid(n) as usize
}

/// `a` and `b` joined along `d`.
fn cat2(a: &Tensor, b: &Tensor, d: usize) -> Tensor {
    let (na, nb, n) = (a.shape()[d] as i64, b.shape()[d] as i64, a.ndim());
    a.pad(&pad_on(n, d, (0, nb))).add(b.pad(&pad_on(n, d, (na, 0))))
}

/// The two halves of a size-2 dim `d`.
fn halves(x: &Tensor, d: usize) -> (Tensor, Tensor) {
    (slice_dim(x, d, 0, 1), slice_dim(x, d, 1, 2))
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

impl Tensor {
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
}
