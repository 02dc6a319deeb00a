"""tinygrad's optimizers (``nn/optim.py``) on the engine's: ``zero_grad``, ``step`` and ``schedule_step`` (the updated
parameters and state, lazy, to realize with the loss). Parameters whose ``requires_grad`` is False are left out."""
from __future__ import annotations
from .. import _tinygrad_rs as _rs
from ..tensor import Tensor, _w

class Optimizer:
  """An optimizer over ``params`` (the engine's ``Optimizer``): ``lr`` is a Tensor, as in tinygrad."""
  def __init__(self, kind: str, params: list[Tensor], lr: float, **kw):
    for p in params:
      if p.requires_grad is None or not p.requires_grad and p.is_param: p.requires_grad_(True)
    self.params = [p for p in params if p.is_param]
    self._o = _rs.ROptimizer(kind, [p._t for p in self.params], float(lr), **kw)
  @property
  def lr(self) -> Tensor: return _w(self._o.lr())
  def zero_grad(self): self._o.zero_grad()
  def step(self): self._o.step()
  def schedule_step(self) -> list[Tensor]: return [_w(t) for t in self._o.schedule_step()]

def SGD(params: list[Tensor], lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, fused=False) -> Optimizer:
  """Stochastic gradient descent with momentum, Nesterov and weight decay (tinygrad ``SGD``)."""
  return Optimizer("sgd", params, lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, classic=classic)
def Adam(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, fused=False) -> Optimizer:
  """Adam (Kingma and Ba, 2014; tinygrad ``Adam``)."""
  return Optimizer("adam", params, lr, b1=b1, b2=b2, eps=eps)
def AdamW(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, fused=False) -> Optimizer:
  """Adam with decoupled weight decay (Loshchilov and Hutter, 2017; tinygrad ``AdamW``)."""
  return Optimizer("adamw", params, lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
def LAMB(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, fused=False) -> Optimizer:
  """LAMB (You et al., 2019; tinygrad ``LAMB``); ``adam=True`` is Adam with weight decay."""
  return Optimizer("adam" if adam and weight_decay == 0 else "lamb", params, lr, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
