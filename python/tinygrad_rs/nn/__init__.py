"""tinygrad's ``nn`` layers: each holds its parameters as Tensors (``weight``, ``bias``, ...) initialised as tinygrad
initialises them, and calls the engine's ops on them."""
from __future__ import annotations
import math
from ..tensor import Tensor
from ..dtype import dtypes
from ..helpers import prod, make_tuple
from . import optim, state, datasets, onnx  # noqa: F401

class BatchNorm:
  """Batch normalization over dim 1 (tinygrad ``nn.BatchNorm``): batch statistics while ``Tensor.training``, updating
  the running ones; the running ones otherwise."""
  def __init__(self, sz: int, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = Tensor.ones(sz) if affine else None
    self.bias: Tensor | None = Tensor.zeros(sz) if affine else None
    self.num_batches_tracked = Tensor.zeros(1, dtype=dtypes.long, requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = Tensor.zeros(sz, requires_grad=False), Tensor.ones(sz, requires_grad=False)
  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    shape_mask: list[int] = [1, -1, *([1]*(x.ndim-2))]
    if self.track_running_stats and not Tensor.training: return self.running_mean, self.running_var
    reduce_axes = tuple(i for i in range(x.ndim) if i != 1)
    batch_mean = x.mean(axis=reduce_axes)
    y = x - batch_mean.detach().reshape(shape=shape_mask)
    return batch_mean, (y*y).mean(axis=reduce_axes)
  def __call__(self, x: Tensor) -> Tensor:
    batch_mean, batch_var = self.calc_stats(x)
    if self.track_running_stats and Tensor.training:
      self.running_mean.assign((1-self.momentum) * self.running_mean + self.momentum * batch_mean.detach().cast(self.running_mean.dtype))
      n = x.numel() // x.shape[1]
      self.running_var.assign((1-self.momentum) * self.running_var + self.momentum * n / max(n-1, 1) * batch_var.detach().cast(self.running_var.dtype))
      self.num_batches_tracked += 1
    return x.batchnorm(self.weight, self.bias, batch_mean, batch_var.add(self.eps).rsqrt())
BatchNorm2d = BatchNorm3d = BatchNorm

class Conv2d:
  """A 2-D (or n-D) convolution (tinygrad ``nn.Conv2d``): weight ``(out, in/groups, *kernel)`` and bias ``(out,)``
  uniform in +-1/sqrt(fan_in)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
    self.kernel_size = make_tuple(kernel_size, 2)
    if isinstance(padding, str):
      if padding.lower() != "same": raise ValueError(f"Invalid padding string {padding!r}, only 'same' is supported")
      if stride != 1: raise ValueError("padding='same' is not supported for strided convolutions")
      pad = [(d*(k-1)//2, d*(k-1) - d*(k-1)//2) for d, k in zip(make_tuple(dilation, len(self.kernel_size)), self.kernel_size[::-1])]
      padding = tuple(p for pair in pad for p in pair)
    self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
    scale = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = Tensor.uniform(out_channels, in_channels//groups, *self.kernel_size, low=-scale, high=scale)
    self.bias: Tensor | None = Tensor.uniform(out_channels, low=-scale, high=scale) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)

def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, dilation=1, groups=1, bias=True) -> Conv2d:
  """A 1-D convolution: a Conv2d with one kernel dim."""
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)

class ConvTranspose2d(Conv2d):
  """A transposed convolution (tinygrad ``nn.ConvTranspose2d``): weight ``(in, out/groups, *kernel)``."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups=1, bias=True):
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    scale = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = Tensor.uniform(in_channels, out_channels//groups, *self.kernel_size, low=-scale, high=scale)
    self.output_padding = output_padding
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding)

def ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups=1, bias=True):
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)

class Linear:
  """``x @ weight.T + bias`` (tinygrad ``nn.Linear``): weight ``(out, in)``, both uniform in +-1/sqrt(in)."""
  def __init__(self, in_features: int, out_features: int, bias=True):
    bound = 1 / math.sqrt(in_features)
    self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound)
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class GroupNorm:
  """Group normalization (tinygrad ``nn.GroupNorm``) over ``(N, C, ...)``."""
  def __init__(self, num_groups: int, num_channels: int, eps=1e-5, affine=True):
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = Tensor.ones(num_channels) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_channels) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return x
    return x * self.weight.reshape(1, -1, *[1]*(x.ndim-2)) + self.bias.reshape(1, -1, *[1]*(x.ndim-2))

class InstanceNorm(GroupNorm):
  """Instance normalization (tinygrad ``nn.InstanceNorm``): group normalization with one channel per group."""
  def __init__(self, num_features: int, eps=1e-5, affine=True):
    super().__init__(num_features, num_features, eps, affine)
    self.num_features = num_features

class LayerNorm:
  """Layer normalization over the last ``len(normalized_shape)`` dims (tinygrad ``nn.LayerNorm``)."""
  def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
    self.normalized_shape = make_tuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1-i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
    self.bias = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if self.normalized_shape != x.shape[-len(self.normalized_shape):]: raise AssertionError(f"last dimensions of {x.shape} must match {self.normalized_shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    return x if not self.elementwise_affine else x * self.weight + self.bias

class LayerNorm2d(LayerNorm):
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class RMSNorm:
  """Root-mean-square normalization (tinygrad ``nn.RMSNorm``)."""
  def __init__(self, dim: int, eps=1e-6, elementwise_affine=True):
    self.eps = eps
    self.weight = Tensor.ones(dim) if elementwise_affine else None
  def _norm(self, x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
  def __call__(self, x: Tensor) -> Tensor:
    x = self._norm(x.float()).cast(x.dtype)
    return x if self.weight is None else x * self.weight

class Embedding:
  """A lookup table ``(vocab_size, embed_size)`` (tinygrad ``nn.Embedding``)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz, self.weight = vocab_size, embed_size, Tensor.glorot_uniform(vocab_size, embed_size)
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Expected integer dtype for index in embedding, got {idx.dtype}")
    return self.weight[idx]

class LSTMCell:
  """One LSTM step (tinygrad ``nn.LSTMCell``): ``(x, (h, c)) -> (h, c)``."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    stdv = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = Tensor.uniform(hidden_size*4, input_size, low=-stdv, high=stdv)
    self.weight_hh = Tensor.uniform(hidden_size*4, hidden_size, low=-stdv, high=stdv)
    self.bias_ih: Tensor | None = Tensor.zeros(hidden_size*4) if bias else None
    self.bias_hh: Tensor | None = Tensor.zeros(hidden_size*4) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.weight_hh.shape[1], dtype=x.dtype),) * 2
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    new_c = f * hc[1] + i * g
    return (o * new_c.tanh()).contiguous(), new_c.contiguous()
