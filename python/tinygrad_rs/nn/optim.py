"""tinygrad's optimizers (``nn/optim.py``) on the engine's: ``zero_grad``, ``step`` and ``schedule_step`` (the updated
parameters and state, lazy, to realize with the loss). Tensors that are not parameters (``is_param`` False, as
BatchNorm's running statistics) are realized by each step, never updated."""
from __future__ import annotations
from .. import _tinygrad_rs as _rs
from ..tensor import Tensor, _w

class Optimizer:
  """An optimizer over ``params`` (the engine's ``Optimizer``): ``lr`` is a Tensor, as in tinygrad."""
  def __init__(self, kind: str, params: list[Tensor], lr: float, **kw):
    # (tensors that are not parameters, BatchNorm's running statistics, are the optimizer's buffers: realized by
    # each step, so a TinyJit'd step captures their updates)
    self.params, self.buffers = [p for p in params if p.is_param], [p for p in params if not p.is_param]
    self._o = _rs.ROptimizer(kind, [p._t for p in params], float(lr), **kw)
  @property
  def lr(self) -> Tensor: return _w(self._o.lr())
  def zero_grad(self): self._o.zero_grad()
  def step(self): self._o.step()
  def schedule_step(self) -> list[Tensor]: return [_w(t) for t in self._o.schedule_step()]

def SGD(params: list[Tensor], lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, fused=False) -> Optimizer:
  """Stochastic gradient descent with momentum, Nesterov and weight decay (tinygrad ``SGD``)."""
  return Optimizer("sgd", params, lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, classic=classic)
def LARS(params: list[Tensor], lr=0.001, momentum=0.9, weight_decay=1e-4, nesterov=False, classic=True, tcoef=0.001, fused=False) -> Optimizer:
  """Layer-wise adaptive rate scaling (You et al., 2017; tinygrad ``LARS``)."""
  return Optimizer("lars", params, lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, classic=classic, tcoef=tcoef)
def Muon(params: list[Tensor], lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315),
         nesterov=True, fused=False) -> Optimizer:
  """Muon: momentum, Newton-Schulz orthogonalization, decoupled weight decay (tinygrad ``Muon``)."""
  return Optimizer("muon", params, lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, ns_steps=ns_steps,
                   ns_coefficients=list(ns_coefficients))
def Adam(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, fused=False) -> Optimizer:
  """Adam (Kingma and Ba, 2014; tinygrad ``Adam``)."""
  return Optimizer("adam", params, lr, b1=b1, b2=b2, eps=eps)
def AdamW(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, fused=False) -> Optimizer:
  """Adam with decoupled weight decay (Loshchilov and Hutter, 2017; tinygrad ``AdamW``)."""
  return Optimizer("adamw", params, lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
def LAMB(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, fused=False) -> Optimizer:
  """LAMB (You et al., 2019; tinygrad ``LAMB``); ``adam=True`` is Adam with weight decay."""
  return Optimizer("adam" if adam and weight_decay == 0 else "lamb", params, lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
