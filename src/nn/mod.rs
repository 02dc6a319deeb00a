//! Neural-network building blocks on top of [`Tensor`]: layers with tinygrad's defaults and initialization,
//! the [`Module`] trait (`#[derive(Module)]`) for state dicts and parameters, `optim`, `state` (safetensors)
//! and `datasets` (MNIST). Follows tinygrad `nn/__init__.py` and `nn/state.py`.

pub mod datasets;
pub mod gguf;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod optim;
pub mod state;

use crate::error::{Error, Result};
use crate::helpers::TRAINING;
use crate::tensor::{Conv2dOpts, RandOpts};
use crate::{dtypes, Tensor};
use std::collections::BTreeMap;
pub use tinygrad_derive::Module;

/// `prefix.name`, or `name` at the top level.
pub fn join_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Things holding named tensors: layers, models, and tensors themselves (tinygrad walks `__dict__`). Derive it
/// with `#[derive(Module)]`.
pub trait Module {
    /// Calls `f(name, tensor)` for every tensor inside, named by its path under `prefix`.
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor));

    /// Every tensor by name (`l1.weight`, `layers.0.bias`; tinygrad `get_state_dict`).
    fn get_state_dict(&self) -> BTreeMap<String, Tensor> {
        let mut out = BTreeMap::new();
        self.visit("", &mut |k, t| {
            out.insert(k, t.clone());
        });
        out
    }
    /// Every tensor, in field order (tinygrad `get_parameters`).
    fn get_parameters(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        self.visit("", &mut |_, t| out.push(t.clone()));
        out
    }
    /// Copies `sd` into this model's tensors, realized (tinygrad `load_state_dict`). With `strict`, keys that
    /// are missing from `sd` or unexpected in it are errors; a wrong shape is always an error.
    ///
    /// # Errors
    /// [`Error::StateDict`] listing the missing, unexpected and wrong-shaped keys; or a realize error.
    fn load_state_dict(&self, sd: &BTreeMap<String, Tensor>, strict: bool) -> Result<()> {
        let mine = self.get_state_dict();
        let missing: Vec<&String> = mine.keys().filter(|k| !sd.contains_key(*k)).collect();
        let unexpected: Vec<&String> = sd.keys().filter(|k| !mine.contains_key(*k)).collect();
        let shapes: Vec<String> = mine
            .iter()
            .filter_map(|(k, t)| {
                sd.get(k).filter(|v| v.shape() != t.shape()).map(|v| format!("{k}: model {:?}, file {:?}", t.shape(), v.shape()))
            })
            .collect();
        if !shapes.is_empty() || (strict && !(missing.is_empty() && unexpected.is_empty())) {
            return Err(Error::StateDict(format!("missing keys {missing:?}, unexpected keys {unexpected:?}, wrong shapes {shapes:?}")));
        }
        let targets: Vec<&Tensor> = mine.iter().filter_map(|(k, t)| sd.get(k).map(|v| t.assign(v))).collect();
        Tensor::realize_all(&targets)
    }
}

impl Module for Tensor {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        f(prefix.to_string(), self)
    }
}
impl<T: Module> Module for Vec<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.iter().enumerate().for_each(|(i, m)| m.visit(&join_name(prefix, &i.to_string()), f))
    }
}
impl<T: Module> Module for Option<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        if let Some(m) = self {
            m.visit(prefix, f)
        }
    }
}
macro_rules! no_tensors { ($($t:ty),*) => { $(impl Module for $t { fn visit(&self, _: &str, _: &mut dyn FnMut(String, &Tensor)) {} })* } }
no_tensors!(f32, f64, i32, i64, usize, bool, String);

/// A convolution's options with its bias, if any.
fn with_bias(opts: &Conv2dOpts, bias: &Option<Tensor>) -> Conv2dOpts {
    match bias {
        Some(b) => opts.clone().bias(b),
        None => opts.clone(),
    }
}

fn uniform(shape: Vec<usize>, bound: f64) -> Tensor {
    Tensor::uniform(shape, -bound, bound)
}

/// `y = x @ weight.T + bias` (tinygrad `nn.Linear`): weight `(out, in)` and bias `(out,)` uniform in
/// `±1/sqrt(in)`.
#[derive(Module)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}
impl Linear {
    /// A layer from `in_features` to `out_features`.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let b = 1.0 / (in_features as f64).sqrt();
        Linear { weight: uniform(vec![out_features, in_features], b), bias: bias.then(|| uniform(vec![out_features], b)) }
    }
    /// `x (..., in) -> (..., out)`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.linear(&self.weight.transpose(0, 1), self.bias.as_ref())
    }
}

/// A 1-D, 2-D or 3-D convolution (tinygrad `nn.Conv2d`; `Conv1d` is the same with one kernel dim): weight
/// `(out, in/groups, *kernel)` and bias uniform in `±1/sqrt(in*prod(kernel))`.
#[derive(Module)]
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    #[module(skip)]
    pub opts: Conv2dOpts,
}
impl Conv2d {
    /// A convolution with `kernel_size` (one size per spatial dim) and the options' stride, padding,
    /// dilation and groups.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: &[usize], opts: Conv2dOpts, bias: bool) -> Conv2d {
        let b = 1.0 / ((in_channels * kernel_size.iter().product::<usize>()) as f64).sqrt();
        let groups = opts.groups.max(1);
        let weight = uniform([vec![out_channels, in_channels / groups], kernel_size.to_vec()].concat(), b);
        Conv2d { weight, bias: bias.then(|| uniform(vec![out_channels], b)), opts }
    }
    /// `x (N, in, *spatial) -> (N, out, *spatial')`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.conv2d(&self.weight, with_bias(&self.opts, &self.bias))
    }
}

/// Transposed convolution (tinygrad `nn.ConvTranspose2d`): weight `(in, out/groups, *kernel)`.
#[derive(Module)]
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    #[module(skip)]
    pub opts: Conv2dOpts,
}
impl ConvTranspose2d {
    /// A transposed convolution; `opts` carries stride, padding, output_padding, dilation and groups.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: &[usize], opts: Conv2dOpts, bias: bool) -> ConvTranspose2d {
        let b = 1.0 / ((in_channels * kernel_size.iter().product::<usize>()) as f64).sqrt();
        let groups = opts.groups.max(1);
        let weight = uniform([vec![in_channels, out_channels / groups], kernel_size.to_vec()].concat(), b);
        ConvTranspose2d { weight, bias: bias.then(|| uniform(vec![out_channels], b)), opts }
    }
    /// `x (N, in, *spatial) -> (N, out, *spatial')`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.conv_transpose2d(&self.weight, with_bias(&self.opts, &self.bias))
    }
}

/// Batch normalization over dim 1 (tinygrad `nn.BatchNorm`): batch statistics and running-statistics updates
/// (by `assign`) in training mode, running statistics otherwise.
#[derive(Module)]
pub struct BatchNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Option<Tensor>,
    pub running_var: Option<Tensor>,
    pub num_batches_tracked: Tensor,
    #[module(skip)]
    pub eps: f64,
    #[module(skip)]
    pub momentum: f64,
}
impl BatchNorm {
    /// tinygrad's defaults are `eps=1e-5, affine=true, track_running_stats=true, momentum=0.1`. The running
    /// statistics are buffers (not parameters) that training-mode [`forward`](Self::forward) updates in place;
    /// like every tensor made from host data they take device memory at their first realize, so construction
    /// cannot fail.
    pub fn new(size: usize, eps: f64, affine: bool, track_running_stats: bool, momentum: f64) -> BatchNorm {
        let state = |t: Tensor| {
            t.is_param_(false);
            t
        };
        BatchNorm {
            weight: affine.then(|| Tensor::ones([size])),
            bias: affine.then(|| Tensor::zeros([size])),
            running_mean: track_running_stats.then(|| state(Tensor::from_slice(&vec![0f32; size], [size]))),
            running_var: track_running_stats.then(|| state(Tensor::from_slice(&vec![1f32; size], [size]))),
            num_batches_tracked: state(Tensor::scalar(0i64)),
            eps,
            momentum,
        }
    }
    /// `x (N, C, ...) -> (N, C, ...)`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let training = TRAINING.value() != 0;
        let axes: Vec<i64> = (0..x.ndim() as i64).filter(|&a| a != 1).collect();
        let mask: Vec<i64> = (0..x.ndim() as i64).map(|a| if a == 1 { -1 } else { 1 }).collect();
        let (mean, var) = match (&self.running_mean, &self.running_var) {
            (Some(m), Some(v)) if !training => (m.clone(), v.clone()),
            // under a process group (data-parallel training over MPI) the statistics are of every process's batch
            _ if training && crate::engine::collective_size() > 1 => {
                let n = (x.numel() / x.shape()[1] * crate::engine::collective_size()) as f64;
                let mean = x.sum(axes.clone()).allreduce_processes() / n;
                let y = x - mean.detach().reshape(mask);
                (mean, (&y * &y).sum(axes).allreduce_processes() / n)
            }
            _ => {
                let mean = x.mean(axes.clone());
                let y = x - mean.detach().reshape(mask);
                (mean, (&y * &y).mean(axes))
            }
        };
        if let (Some(rm), Some(rv), true) = (&self.running_mean, &self.running_var, training) {
            let (n, c) = ((x.numel() * crate::engine::collective_size()) as f64, x.shape()[1] as f64);
            rm.assign(rm * (1.0 - self.momentum) + mean.detach() * self.momentum);
            rv.assign(rv * (1.0 - self.momentum) + var.detach() * (self.momentum * n / (n - c)));
            self.num_batches_tracked.assign(&self.num_batches_tracked + 1);
        }
        x.batchnorm(self.weight.as_ref(), self.bias.as_ref(), &mean, &(var + self.eps).rsqrt(), [1])
    }
}

/// Layer normalization over the last dims (tinygrad `nn.LayerNorm`).
#[derive(Module)]
pub struct LayerNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    #[module(skip)]
    pub shape: Vec<usize>,
    #[module(skip)]
    pub eps: f64,
}
impl LayerNorm {
    /// Normalizes over dims of `shape` (the last ones); tinygrad's defaults `eps=1e-5, elementwise_affine`.
    pub fn new(shape: &[usize], eps: f64, affine: bool) -> LayerNorm {
        LayerNorm {
            weight: affine.then(|| Tensor::ones(shape.to_vec())),
            bias: affine.then(|| Tensor::zeros(shape.to_vec())),
            shape: shape.to_vec(),
            eps,
        }
    }
    /// `x (..., *shape) -> same`.
    ///
    /// # Panics
    /// If `x`'s last dims are not `shape`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let s = x.shape();
        assert!(s.ends_with(&self.shape), "LayerNorm: last dims of {s:?} must be {:?}", self.shape);
        let axes: Vec<i64> = (0..self.shape.len() as i64).map(|i| -1 - i).collect();
        let x = x.layernorm(axes, self.eps);
        match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => x * w + b,
            _ => x,
        }
    }
}

/// Root-mean-square normalization over the last dim (tinygrad `nn.RMSNorm`, `eps=1e-6`).
#[derive(Module)]
pub struct RMSNorm {
    pub weight: Option<Tensor>,
    #[module(skip)]
    pub eps: f64,
}
impl RMSNorm {
    /// Over a last dim of `dim`.
    pub fn new(dim: usize, eps: f64, affine: bool) -> RMSNorm {
        RMSNorm { weight: affine.then(|| Tensor::ones([dim])), eps }
    }
    /// `x (..., dim) -> same`, computed in float32.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let xf = x.cast(dtypes::FLOAT32);
        let y = (&xf * (xf.square().mean_keepdim(-1) + self.eps).rsqrt()).cast(x.dtype());
        match &self.weight {
            Some(w) => y * w,
            None => y,
        }
    }
}

/// Normalization over channel groups (tinygrad `nn.GroupNorm`; `InstanceNorm` is one group per channel).
#[derive(Module)]
pub struct GroupNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    #[module(skip)]
    pub groups: usize,
    #[module(skip)]
    pub eps: f64,
}
impl GroupNorm {
    /// `groups` groups over `channels` channels (tinygrad defaults `eps=1e-5, affine`).
    pub fn new(groups: usize, channels: usize, eps: f64, affine: bool) -> GroupNorm {
        GroupNorm { weight: affine.then(|| Tensor::ones([channels])), bias: affine.then(|| Tensor::zeros([channels])), groups, eps }
    }
    /// tinygrad `nn.InstanceNorm`: one group per channel.
    pub fn instance_norm(channels: usize, eps: f64, affine: bool) -> GroupNorm {
        GroupNorm::new(channels, channels, eps, affine)
    }
    /// `x (N, C, ...) -> same`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let s = x.shape();
        let y = x.reshape([s[0] as i64, self.groups as i64, -1]).layernorm([-1], self.eps).reshape(s.clone());
        let mask: Vec<i64> = (0..s.len() as i64).map(|a| if a == 1 { -1 } else { 1 }).collect();
        match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => y * w.reshape(mask.clone()) + b.reshape(mask),
            _ => y,
        }
    }
}

/// A lookup table (tinygrad `nn.Embedding`): weight `(vocab, embed)`, Glorot-uniform.
#[derive(Module)]
pub struct Embedding {
    pub weight: Tensor,
}
impl Embedding {
    /// `vocab_size` rows of `embed_size`.
    pub fn new(vocab_size: usize, embed_size: usize) -> Embedding {
        Embedding { weight: Tensor::glorot_uniform([vocab_size, embed_size], RandOpts::default()) }
    }
    /// `idx (...) int -> (..., embed)`, as a one-hot product (tinygrad's default path).
    ///
    /// # Panics
    /// If `idx` is not an int tensor.
    pub fn forward(&self, idx: &Tensor) -> Tensor {
        assert!(idx.dtype().is_int(), "Embedding: index must be int, got {}", idx.dtype());
        let vocab = self.weight.shape()[0];
        let hot = Tensor::arange(0.0, vocab as f64, 1.0).eq(idx.unsqueeze(-1)).unsqueeze(-1);
        hot.where_(&self.weight, 0.0).sum(-2).cast(self.weight.dtype())
    }
}

/// An LSTM cell (tinygrad `nn.LSTMCell`).
#[derive(Module)]
pub struct LSTMCell {
    pub weight_ih: Tensor,
    pub weight_hh: Tensor,
    pub bias_ih: Option<Tensor>,
    pub bias_hh: Option<Tensor>,
}
impl LSTMCell {
    /// Weights uniform in `±1/sqrt(hidden)`, zero biases.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        let b = 1.0 / (hidden_size as f64).sqrt();
        LSTMCell {
            weight_ih: uniform(vec![hidden_size * 4, input_size], b),
            weight_hh: uniform(vec![hidden_size * 4, hidden_size], b),
            bias_ih: bias.then(|| Tensor::zeros([hidden_size * 4])),
            bias_hh: bias.then(|| Tensor::zeros([hidden_size * 4])),
        }
    }
    /// `x (N, input)`, state `(h, c)` each `(N, hidden)` (zeros when `None`) -> the new `(h, c)`.
    pub fn forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        let zeros = Tensor::full_dtype([x.shape()[0], self.weight_hh.shape()[1]], 0.0, x.dtype());
        let (h, c) = hc.map(|(h, c)| (h.clone(), c.clone())).unwrap_or((zeros.clone(), zeros));
        let gates = x.linear(&self.weight_ih.transpose(0, 1), self.bias_ih.as_ref())
            + h.linear(&self.weight_hh.transpose(0, 1), self.bias_hh.as_ref());
        let g = gates.chunk(4, 1);
        let (i, f, gg, o) = (g[0].sigmoid(), g[1].sigmoid(), g[2].tanh(), g[3].sigmoid());
        let c = f * &c + i * gg;
        (o * c.tanh(), c)
    }
}
