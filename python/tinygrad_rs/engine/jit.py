"""tinygrad's ``TinyJit`` on the engine's: the first call runs the function, the second captures its kernels, later
calls replay them on the new inputs (the tensors among the arguments). A function that draws random numbers or reads
tensor data while capturing is not replayable: it runs as it is at every call, with a warning."""
from __future__ import annotations
import functools, warnings
from typing import Any, Callable
from .. import _tinygrad_rs as _rs
from ..tensor import Tensor, _w

def _flatten(ret) -> tuple[list, Any]:
  """The tensors in ``ret`` (a Tensor, or tuples, lists and dicts of them) and a tree to rebuild it from them."""
  if isinstance(ret, Tensor): return [ret._t], ("T",)
  if isinstance(ret, (tuple, list)):
    parts = [_flatten(r) for r in ret]
    return [t for p in parts for t in p[0]], (type(ret), [p[1] for p in parts])
  if isinstance(ret, dict):
    parts = {k: _flatten(v) for k, v in ret.items()}
    return [t for p in parts.values() for t in p[0]], (dict, {k: p[1] for k, p in parts.items()})
  return [], ("C", ret)

def _rebuild(tree, ts: list):
  if tree[0] == "T": return _w(ts.pop(0))
  if tree[0] == "C": return tree[1]
  if tree[0] is dict: return {k: _rebuild(v, ts) for k, v in tree[1].items()}
  return tree[0](_rebuild(t, ts) for t in tree[1])

class TinyJit:
  """Wraps ``fxn``; call it with tensors (and other values, frozen at capture) as tinygrad's ``TinyJit``."""
  def __init__(self, fxn: Callable | None = None, captured=None, prune=False, optimize=False):
    self.fxn, self._jit, self._tree, self._plain = fxn, _rs.RJit(), None, False
    if fxn is not None: functools.update_wrapper(self, fxn)
  @property
  def cnt(self) -> int: return self._jit.calls()
  def reset(self):
    self._jit.reset()
    self._tree, self._plain = None, False
  def __get__(self, obj, objtype=None):
    if obj is None: return self
    jits = obj.__dict__.setdefault("__tinyjits__", {})
    if id(self) not in jits:
      bound = TinyJit(self.fxn.__get__(obj, objtype))
      jits[id(self)] = bound
    return jits[id(self)]
  def __call__(self, *args, **kwargs):
    tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)] + [(k, v) for k, v in kwargs.items() if isinstance(v, Tensor)]
    if self._plain: return self.fxn(*args, **kwargs)
    ran = []
    def run(xs):
      a, kw = list(args), dict(kwargs)
      for (key, _), x in zip(tensors, xs):
        if isinstance(key, int): a[key] = _w(x)
        else: kw[key] = _w(x)
      ran.append(ret := self.fxn(*a, **kw))
      ts, self._tree = _flatten(ret)
      return ts
    try: out = self._jit.call([t._t for _, t in tensors], run)
    except RuntimeError as e:
      if not any(m in str(e) for m in ("read tensor data", "read while capturing", "no kernel")): raise
      # (the capture ran the function: its result stands, and it runs as it is from now on)
      warnings.warn(f"TinyJit: {getattr(self.fxn, '__name__', 'function')} runs without capture: {e}")
      self._plain = True
      return ran[-1] if ran else self.fxn(*args, **kwargs)
    return _rebuild(self._tree, list(out))
