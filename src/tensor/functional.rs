//! Tensor ops for networks (torch's `nn.functional`): `linear`, normalization (`layernorm`, `batchnorm`,
//! `normalize`), `scaled_dot_product_attention` ([`SdpaOpts`]) and the losses ([`Reduction`]). In: tensors. Out:
//! lazy tensors built from the other ops. Follows tinygrad `tensor.py`'s nn functions.

use super::movement::{one_hot_at, sq, tri, unsq};
use super::Tensor;
use crate::dtype::dtypes;

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

impl Tensor {
    /// `self @ weight + bias` with tinygrad's weight layout `(in, out)`; a 1-D weight scales elementwise
    /// (tinygrad `linear`).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
        let x = if weight.ndim() == 1 { self.mul(weight) } else { self.dot(weight) };
        bias.map_or(x.clone(), |b| x.add(b))
    }

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
