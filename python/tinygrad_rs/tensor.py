"""tinygrad's ``Tensor`` (``tinygrad/tensor.py`` and its mixins) on the Rust engine: each method parses tinygrad's
arguments (varargs shapes, keywords, defaults, torch-style padding) and calls one op of the engine's ``RTensor``.
No math happens here: graphs, gradients, scheduling and kernels are the engine's."""
from __future__ import annotations
import math, contextlib
from typing import Any, Callable
import numpy as np
from . import _tinygrad_rs as _rs
from .dtype import DType, dtypes, to_dtype, ENGINE_NAME, FROM_ENGINE
from .helpers import argfix, prod, make_tuple, TRAINING

_R = _rs.RTensor
_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
       dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
       dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}
_FROM_NP = {np.dtype(v): k for k, v in _NP.items()}

def _to_np_dtype(dtype: DType) -> type | None:
  """The numpy type of a dtype; ``None`` where numpy has none (bfloat16)."""
  return _NP.get(dtype)
def _from_np_dtype(npdtype) -> DType: return _FROM_NP[np.dtype(npdtype)]

def _shape(shape) -> tuple[int, ...]:
  """A creation shape from varargs or one tuple; negative sizes raise ValueError, as in tinygrad."""
  s = tuple(int(x) for x in argfix(*shape))
  if any(x < 0 for x in s): raise ValueError(f"cannot create a tensor with negative dimension in {s=}")
  return s

def _axis(a: int, ndim: int) -> int:
  """``a`` checked against ``ndim`` dims (a 0-d tensor takes 0 and -1): IndexError where out of range."""
  if not -max(ndim, 1) <= a < max(ndim, 1): raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1)-1}], but got {a})")
  return a

def _axes(axis, ndim: int) -> list[int] | None:
  if axis is None: return None
  return [int(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]

def _rg(rt, requires_grad) -> Tensor:
  """``rt`` with tinygrad's ``requires_grad``: False also makes it no parameter (an optimizer's buffer)."""
  if requires_grad is not None: rt.set_requires_grad(requires_grad)
  if requires_grad is False: rt.set_is_param(False)
  return _w(rt)

def _w(rt) -> Tensor:
  t = Tensor.__new__(Tensor)
  t._t = rt
  return t

def _op(x):
  """An operand for the engine: the RTensor of a Tensor, a number as it is, a list as a tensor."""
  if isinstance(x, Tensor): return x._t
  if isinstance(x, (list, tuple)): return Tensor(x)._t
  if isinstance(x, np.generic): return x.item()
  if isinstance(x, Variable): return x.val
  return x

class Variable:
  """A named integer in ``[min_val, max_val]`` (tinygrad's ``Variable``). ``bind`` gives its value for one call; the
  engine compiles shapes with their bound values (symbolic shapes are not yet supported in tensors)."""
  def __init__(self, name: str, min_val: int, max_val: int, val: int | None = None):
    self.expr, self.min, self.max, self.val = name, min_val, max_val, val
  def bind(self, val: int) -> Variable:
    if not self.min <= val <= self.max: raise AssertionError(f"{val} not in [{self.min}, {self.max}]")
    return Variable(self.expr, self.min, self.max, val)
  def unbind(self): return Variable(self.expr, self.min, self.max), self.val
  def __index__(self):
    if self.val is None: raise TypeError(f"Variable {self.expr} is not bound")
    return self.val
  __int__ = __index__
  def __repr__(self): return f"Variable({self.expr!r}, {self.min}, {self.max}" + (f", {self.val})" if self.val is not None else ")")

class _Train(contextlib.ContextDecorator):
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self): self.prev, TRAINING.value = TRAINING.value, int(self.mode)
  def __exit__(self, *a): TRAINING.value = self.prev

class _TrainingFlag:
  def __get__(self, obj, cls): return bool(TRAINING.value)

class Tensor:
  """A lazy tensor (tinygrad's ``Tensor``): ops build a graph, ``realize``/``numpy``/``tolist`` run it."""
  __slots__ = ("_t", "__weakref__")
  training = _TrainingFlag()
  train = _Train
  def __init__(self, data: Any, device: str | None = None, dtype: Any = None, requires_grad: bool | None = None):
    dt = to_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor): rt = data._t
    elif isinstance(data, _R): rt = data
    elif data is None: rt = _R.full([], 0.0, ENGINE_NAME[dt or dtypes.default_float])
    elif isinstance(data, (bool, int, float, np.generic)) and not isinstance(data, np.ndarray):
      v = data.item() if isinstance(data, np.generic) else data
      rt = _R.full([], v, ENGINE_NAME[dt or (_from_np_dtype(data.dtype) if isinstance(data, np.generic) else dtypes.from_py(v))])
    elif isinstance(data, Variable): rt = _R.full([], data.val, ENGINE_NAME[dt or dtypes.int32])
    elif isinstance(data, (bytes, bytearray, memoryview)): rt = _from_np(np.frombuffer(bytes(data), np.uint8), dt, device)
    elif isinstance(data, (list, tuple)):
      pdt = dt or dtypes.from_py(data)
      npdt = _NP.get(pdt, np.float32)
      try: arr = np.array(_flat_py(data), dtype=npdt)
      except OverflowError: arr = np.array(_flat_py(data)).astype(npdt)
      rt = _from_np(arr, pdt, device)
    elif isinstance(data, np.ndarray):
      if data.dtype not in _FROM_NP: raise RuntimeError(f"can't create Tensor from numpy dtype {data.dtype}")
      rt = _from_np(data, dt, device)
    else: raise RuntimeError(f"can't create Tensor from {data!r} with type {type(data)}")
    if dt is not None and FROM_ENGINE[rt.dtype] != dt: rt = rt.cast(ENGINE_NAME[dt])
    if device is not None and rt.device != _canon(device): rt = rt.to(_canon(device))
    self._t = _rg(rt, requires_grad)._t

  # ---- properties
  @property
  def shape(self) -> tuple[int, ...]: return tuple(self._t.shape)
  @property
  def dtype(self) -> DType: return FROM_ENGINE[self._t.dtype]
  @property
  def device(self) -> str | tuple[str, ...]:
    d = self._t.device
    return tuple(d.split(",")) if "," in d else d
  @property
  def ndim(self) -> int: return len(self._t.shape)
  def numel(self) -> int: return prod(self._t.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[dim]
  @property
  def T(self) -> Tensor: return self.transpose()
  @property
  def requires_grad(self) -> bool | None: return self._t.requires_grad
  @requires_grad.setter
  def requires_grad(self, v: bool | None): self._t.set_requires_grad(bool(v))
  def requires_grad_(self, requires_grad=True) -> Tensor:
    self._t.set_requires_grad(requires_grad)
    return self
  @property
  def grad(self) -> Tensor | None:
    g = self._t.grad
    return None if g is None else _w(g)
  @grad.setter
  def grad(self, g: Tensor | None): self._t.set_grad(None if g is None else g._t)
  @property
  def is_param(self) -> bool: return self._t.is_param()
  @is_param.setter
  def is_param(self, v: bool): self._t.set_is_param(v)
  @property
  def uop(self): return self._t
  lazydata = uop
  def __repr__(self): return f"<Tensor shape={self.shape} dtype={self.dtype} device={self.device!r}>"
  def __hash__(self): return id(self)
  def __bool__(self): raise TypeError("__bool__ on Tensor is not defined")
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]

  # ---- realization and data
  def realize(*lst: Tensor, do_update_stats=True) -> Tensor:
    """Runs the kernels that compute ``lst`` (the first is ``self``); returns ``self``."""
    if len(lst) > 1: _R.realize_all([t._t for t in lst])
    elif lst: lst[0]._t.realize()
    return lst[0] if lst else None
  def schedule(self, *lst): return []
  def numpy(self) -> np.ndarray:
    if self.dtype == dtypes.bfloat16: return self.float().numpy()
    return self._t.to_numpy_bytes().view(_NP[self.dtype]).reshape(self.shape)
  def data(self) -> memoryview:
    a = self.numpy()
    return memoryview(a if a.ndim else a.reshape(1)).cast(a.dtype.char, self.shape) if a.size else memoryview(a)
  def tolist(self):
    return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError("must have one element for item")
    return self.numpy().reshape(-1)[0].item()
  def __array__(self, dtype=None, copy=None): return self.numpy() if dtype is None else self.numpy().astype(dtype)
  def assign(self, x) -> Tensor:
    if isinstance(x, (list, tuple, np.ndarray)): x = Tensor(x, dtype=self.dtype)
    if isinstance(x, Tensor) and x.shape != self.shape: raise RuntimeError(f"assign shape mismatch {self.shape} != {x.shape}")
    self._t.assign(_op(x))
    return self
  def replace(self, x: Tensor) -> Tensor:
    self._t.replace(x._t)
    return self
  def detach(self) -> Tensor: return _w(self._t.unary("detach"))
  def contiguous(self, *args, **kwargs) -> Tensor: return _w(self._t.unary("contiguous"))
  def contiguous_backward(self) -> Tensor: return _w(self._t.unary("contiguous_backward"))
  def clone(self, device=None) -> Tensor:
    out = _w(self._t.unary("contiguous"))
    return out.to(device) if device is not None else out
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    return self if device is None or _canon(device) == self.device else _w(self._t.to(_joined(device)))
  def to_(self, device: str | tuple[str, ...] | None) -> Tensor:
    if device is not None and _canon(device) != self.device: self._t.replace(self._t.to(_joined(device)))
    return self
  def shard(self, devices: tuple[str, ...], axis: int | None = None) -> Tensor:
    return _w(self._t.shard([_canon(d) for d in devices], axis))
  def shard_(self, devices: tuple[str, ...], axis: int | None = None) -> Tensor:
    self._t.replace(self._t.shard([_canon(d) for d in devices], axis))
    return self
  def shard_like(self, y: Tensor) -> Tensor: return _w(self._t.shard_like(y._t))
  def cpu(self) -> Tensor: return self.to("CPU")

  # ---- creation
  @staticmethod
  def empty(*shape, device=None, dtype=None, requires_grad=None, **kwargs) -> Tensor:
    return _rg(_R.empty(list(_shape(shape)), ENGINE_NAME[to_dtype(dtype) if dtype else dtypes.default_float]), requires_grad)
  @staticmethod
  def full(shape, fill_value, device=None, dtype=None, requires_grad=None, **kwargs) -> Tensor:
    s = _shape((shape,) if isinstance(shape, int) else (tuple(shape),))
    dt = to_dtype(dtype) if dtype is not None else dtypes.from_py(fill_value)
    return _rg(_R.full(list(s), _pyconst(fill_value, dt), ENGINE_NAME[dt]), requires_grad)
  @staticmethod
  def zeros(*shape, **kwargs) -> Tensor: return Tensor.full(_shape(shape), 0.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def ones(*shape, **kwargs) -> Tensor: return Tensor.full(_shape(shape), 1.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def arange(start, stop=None, step=1, **kwargs) -> Tensor:
    if stop is None: start, stop = 0, start
    dt = to_dtype(kwargs["dtype"]) if kwargs.get("dtype") is not None else \
      (dtypes.default_int if all(isinstance(x, int) for x in (start, stop, step)) else dtypes.default_float)
    if step == 0: raise ValueError("arange step cannot be 0")
    n = max(math.ceil((stop - start) / step), 0)
    if n == 0: return Tensor.empty(0, dtype=dt)
    return _w(_R.arange(float(start), float(stop), float(step))).cast(dt) if not dtypes.is_int(dt) else \
      (Tensor.full((n,), step, dtype=dt).cumsum(0) + (start - step)).cast(dt)
  @staticmethod
  def linspace(start, stop, steps: int, **kwargs) -> Tensor:
    if steps < 0: raise ValueError("number of steps must be non-negative")
    dt = to_dtype(kwargs.get("dtype") or dtypes.default_float)
    if dt == dtypes.bool: raise ValueError("linspace with bool dtype is not supported")
    return _w(_R.linspace(float(start), float(stop), steps, ENGINE_NAME[dt]))
  @staticmethod
  def eye(n: int, m: int | None = None, requires_grad=None, **kwargs) -> Tensor:
    if n < 0 or (m is not None and m < 0): raise ValueError(f"cannot have negative {n=}, {m=}")
    return _rg(_R.eye(n, n if m is None else m, ENGINE_NAME[to_dtype(kwargs.get("dtype") or dtypes.default_float)]), requires_grad)
  def full_like(self, fill_value, **kwargs) -> Tensor:
    return Tensor.full(self.shape, fill_value, dtype=kwargs.get("dtype", self.dtype))
  def zeros_like(self, **kwargs) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs) -> Tensor: return self.full_like(1, **kwargs)
  @staticmethod
  def manual_seed(seed=0) -> None: _R.manual_seed(seed)
  @staticmethod
  def _random(kind, shape, dtype=None, a=0.0, b=1.0, requires_grad=None) -> Tensor:
    return _rg(_R.random(kind, list(_shape(shape)), ENGINE_NAME[to_dtype(dtype)] if dtype is not None else None, float(a), float(b)), requires_grad)
  @staticmethod
  def rand(*shape, device=None, dtype=None, contiguous=True, requires_grad=None, **kwargs) -> Tensor:
    return Tensor._random("rand", shape, dtype, requires_grad=requires_grad)
  @staticmethod
  def randn(*shape, dtype=None, requires_grad=None, **kwargs) -> Tensor: return Tensor._random("randn", shape, dtype, requires_grad=requires_grad)
  @staticmethod
  def randint(*shape, low=0, high=10, dtype=dtypes.int32, **kwargs) -> Tensor:
    if not isinstance(low, int) or not isinstance(high, int): raise TypeError(f"{low=} and {high=} must be integers")
    dt = to_dtype(dtype)
    if not dtypes.is_int(dt): raise TypeError(f"{dtype=} must be int")
    return Tensor._random("randint", shape, dt, low, high)
  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, requires_grad=None, **kwargs) -> Tensor:
    return Tensor._random("normal", shape, kwargs.get("dtype"), mean, std, requires_grad)
  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype=None, requires_grad=None, **kwargs) -> Tensor:
    return Tensor._random("uniform", shape, dtype, low, high, requires_grad)
  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> Tensor: return Tensor._random("scaled_uniform", shape, kwargs.get("dtype"))
  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> Tensor: return Tensor._random("glorot_uniform", shape, kwargs.get("dtype"))
  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kwargs) -> Tensor: return Tensor._random("kaiming_uniform", shape, kwargs.get("dtype"), a)
  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kwargs) -> Tensor: return Tensor._random("kaiming_normal", shape, kwargs.get("dtype"), a)
  @staticmethod
  def randperm(n: int, device=None, dtype=dtypes.int32, **kwargs) -> Tensor: return _w(_R.randperm(n, ENGINE_NAME[to_dtype(dtype)]))
  def rand_like(self, **kwargs) -> Tensor: return Tensor.rand(*self.shape, dtype=kwargs.get("dtype", self.dtype if dtypes.is_float(self.dtype) else None))
  def randn_like(self, **kwargs) -> Tensor: return Tensor.randn(*self.shape, dtype=kwargs.get("dtype", self.dtype if dtypes.is_float(self.dtype) else None))
  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor: return _w(self._t.multinomial(num_samples, replacement))
  def dropout(self, p=0.5) -> Tensor:
    if not 0 <= p <= 1: raise ValueError(f"{p=} is out of range [0, 1]")
    return self if not Tensor.training or p == 0 else _w(self._t.unary_f("dropout", p))

  # ---- autograd
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None, materialize_grads=False) -> list[Tensor]:
    return [_w(g) for g in self._t.gradient([t._t for t in targets], None if gradient is None else gradient._t)]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    self._t.backward(None if gradient is None else gradient._t)
    return self

  # ---- casts
  def cast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    return self if dt == self.dtype else _w(self._t.cast(ENGINE_NAME[dt]))
  def bitcast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    if self.requires_grad: raise RuntimeError("can't backprop through bitcast")
    if self.shape and (self.shape[-1]*self.dtype.itemsize) % dt.itemsize != 0: raise RuntimeError("unsupported size in bitcast")
    return self if dt == self.dtype else _w(self._t.bitcast(ENGINE_NAME[dt]))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def char(self) -> Tensor: return self.cast(dtypes.int8)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def type(self, dtype) -> Tensor: return self.cast(dtype)

  # ---- elementwise
  def _u(self, name) -> Tensor: return _w(self._t.unary(name))
  def _b(self, name, x, reverse=False) -> Tensor: return _w(self._t.binary(name, _op(x), reverse))
  def add(self, x, reverse=False) -> Tensor: return self._b("add", x, reverse)
  def sub(self, x, reverse=False) -> Tensor: return self._b("sub", x, reverse)
  def mul(self, x, reverse=False) -> Tensor: return self._b("mul", x, reverse)
  def div(self, x, reverse=False, rounding_mode=None) -> Tensor:
    if rounding_mode not in (None, "trunc", "floor"): raise RuntimeError(f"{rounding_mode=} is not supported")
    return self._b({None: "div", "trunc": "div_trunc", "floor": "floordiv"}[rounding_mode], x, reverse)
  def idiv(self, x, reverse=False) -> Tensor:
    """Division rounding toward zero (tinygrad 0.12's ``idiv``)."""
    return self._b("div_trunc", x, reverse)
  def mod(self, x, reverse=False) -> Tensor: return self._b("mod", x, reverse)
  def fmod(self, x) -> Tensor: return self._b("fmod", x)
  def pow(self, x, reverse=False) -> Tensor: return self._b("pow", x, reverse)
  def maximum(self, x) -> Tensor: return self._b("maximum", x)
  def minimum(self, x) -> Tensor: return self._b("minimum", x)
  def bitwise_and(self, x, reverse=False) -> Tensor: return self._b("bitwise_and", x, reverse)
  def bitwise_or(self, x, reverse=False) -> Tensor: return self._b("bitwise_or", x, reverse)
  def bitwise_xor(self, x, reverse=False) -> Tensor: return self._b("bitwise_xor", x, reverse)
  def lshift(self, x, reverse=False) -> Tensor: return self._b("lshift", x, reverse)
  def rshift(self, x, reverse=False) -> Tensor: return self._b("rshift", x, reverse)
  def copysign(self, x) -> Tensor: return self._b("copysign", x)
  def logaddexp(self, x) -> Tensor: return self._b("logaddexp", x)
  def where(self, x, y) -> Tensor: return _w(self._t.where_(_op(x), _op(y)))
  def lerp(self, end: Tensor, weight) -> Tensor: return _w(self._t.lerp(end._t, _op(weight)))
  def clip(self, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: raise RuntimeError("at least one of 'min_' or 'max_' must not be None")
    if max_ is None: return self._b("clamp_min", min_)
    if min_ is None: return self._b("clamp_max", max_)
    return _w(self._t.clamp(_op(min_), _op(max_)))
  clamp = clip
  def masked_fill(self, mask: Tensor, value) -> Tensor: return _w(self._t.masked_fill(mask._t, _op(value)))
  def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor: return _w(self._t.isclose(_op(other), rtol, atol, equal_nan))
  def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool: return bool(self.isclose(other, rtol, atol, equal_nan).all().item())
  def isinf(self, detect_positive=True, detect_negative=True) -> Tensor: return _w(self._t.isinf(detect_positive, detect_negative))
  def leaky_relu(self, neg_slope=0.01) -> Tensor: return _w(self._t.unary_f("leaky_relu", neg_slope))
  def elu(self, alpha=1.0) -> Tensor: return _w(self._t.unary_f("elu", alpha))
  def celu(self, alpha=1.0) -> Tensor: return _w(self._t.unary_f("celu", alpha))
  def softplus(self, beta=1.0) -> Tensor: return _w(self._t.unary_f("softplus", beta))
  def hardtanh(self, min_val=-1, max_val=1) -> Tensor: return _w(self._t.hardtanh(float(min_val), float(max_val)))
  def hardsigmoid(self, alpha: float = 1/6, beta: float = 0.5) -> Tensor: return _w(self._t.hardsigmoid(alpha, beta))
  def __neg__(self) -> Tensor: return self.neg()
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __floordiv__(self, x): return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x): return self.div(x, True, rounding_mode="floor")
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return self.matmul(x, True)
  def __and__(self, x): return self.bitwise_and(x)
  def __rand__(self, x): return self.bitwise_and(x, True)
  def __or__(self, x): return self.bitwise_or(x)
  def __ror__(self, x): return self.bitwise_or(x, True)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rxor__(self, x): return self.bitwise_xor(x, True)
  def __lshift__(self, x): return self.lshift(x)
  def __rlshift__(self, x): return self.lshift(x, True)
  def __rshift__(self, x): return self.rshift(x)
  def __rrshift__(self, x): return self.rshift(x, True)
  def __invert__(self): return self.bitwise_not()
  def __abs__(self): return self.abs()
  def __lt__(self, x): return self._b("lt", x)
  def __gt__(self, x): return self._b("gt", x)
  def __le__(self, x): return self._b("le", x)
  def __ge__(self, x): return self._b("ge", x)
  def __eq__(self, x): return self._b("eq", x)  # type: ignore[override]
  def __ne__(self, x): return self._b("ne", x)  # type: ignore[override]
  def eq(self, x): return self._b("eq", x)
  def ne(self, x): return self._b("ne", x)
  def lt(self, x): return self._b("lt", x)
  def gt(self, x): return self._b("gt", x)
  def le(self, x): return self._b("le", x)
  def ge(self, x): return self._b("ge", x)
  def _inplace(self, x: Tensor) -> Tensor: return self.assign(x)
  def __iadd__(self, x): return self._inplace(self + x)
  def __isub__(self, x): return self._inplace(self - x)
  def __imul__(self, x): return self._inplace(self * x)
  def __itruediv__(self, x): return self._inplace(self / x)
  def __ifloordiv__(self, x): return self._inplace(self // x)
  def __imod__(self, x): return self._inplace(self % x)
  def __ipow__(self, x): return self._inplace(self ** x)
  def __imatmul__(self, x): return self._inplace(self @ x)
  def __iand__(self, x): return self._inplace(self & x)
  def __ior__(self, x): return self._inplace(self | x)
  def __ixor__(self, x): return self._inplace(self ^ x)
  def __ilshift__(self, x): return self._inplace(self << x)
  def __irshift__(self, x): return self._inplace(self >> x)

  # ---- reductions
  def _r(self, name, axis, keepdim) -> Tensor:
    axes = _axes(axis, self.ndim)
    if axes is not None: axes = [_axis(a, self.ndim) for a in axes]
    if self.ndim == 0: return self if axes == [] else self.reshape(1)._r(name, 0, False)
    return _w(self._t.reduce(name, axes, keepdim))
  def sum(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    return (self.cast(dtype) if dtype is not None else self)._r("sum", axis, keepdim)
  def prod(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    return (self.cast(dtype) if dtype is not None else self)._r("prod", axis, keepdim)
  def max(self, axis=None, keepdim=False) -> Tensor: return self._r("max", axis, keepdim)
  def min(self, axis=None, keepdim=False) -> Tensor: return self._r("min", axis, keepdim)
  def mean(self, axis=None, keepdim=False) -> Tensor: return self._r("mean", axis, keepdim)
  def any(self, axis=None, keepdim=False) -> Tensor: return self._r("any", axis, keepdim)
  def all(self, axis=None, keepdim=False) -> Tensor: return self._r("all", axis, keepdim)
  def logsumexp(self, axis=None, keepdim=False) -> Tensor: return self._r("logsumexp", axis, keepdim)
  def var(self, axis=None, keepdim=False, correction=1) -> Tensor: return _w(self._t.var(_axes(axis, self.ndim), keepdim, correction, False, False)[0])
  def std(self, axis=None, keepdim=False, correction=1) -> Tensor: return _w(self._t.var(_axes(axis, self.ndim), keepdim, correction, True, False)[0])
  def var_mean(self, axis=None, keepdim=False, correction=1):
    return tuple(_w(t) for t in self._t.var(_axes(axis, self.ndim), keepdim, correction, False, True))
  def std_mean(self, axis=None, keepdim=False, correction=1):
    return tuple(_w(t) for t in self._t.var(_axes(axis, self.ndim), keepdim, correction, True, True))
  def argmax(self, axis=None, keepdim=False) -> Tensor: return _w(self._t.argmax(axis, keepdim, False))
  def argmin(self, axis=None, keepdim=False) -> Tensor: return _w(self._t.argmax(axis, keepdim, True))
  def _along(self, name, axis) -> Tensor:
    if self.ndim == 0 and name != "unsqueeze":
      _axis(axis, 0)
      return self.reshape(1)._along(name, 0).reshape(()) if name not in ("squeeze", "flatten") else self
    return _w(self._t.along(name, _axis(axis, self.ndim + (name == "unsqueeze"))))
  def softmax(self, axis=-1, dtype=None) -> Tensor: return (self.cast(dtype) if dtype else self)._along("softmax", axis)
  def log_softmax(self, axis=-1, dtype=None) -> Tensor: return (self.cast(dtype) if dtype else self)._along("log_softmax", axis)
  def softmin(self, axis=-1) -> Tensor: return self._along("softmin", axis)
  def cumsum(self, axis: int = 0) -> Tensor: return self._along("cumsum", axis)
  def cumprod(self, axis: int = 0) -> Tensor: return self._along("cumprod", axis)
  def logcumsumexp(self, axis=0) -> Tensor: return self._along("logcumsumexp", axis)
  def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]: return tuple(map(_w, self._t.cummax(axis, False)))
  def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]: return tuple(map(_w, self._t.cummax(axis, True)))
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]: return tuple(map(_w, self._t.sort(dim, descending)))
  def argsort(self, dim: int = -1, descending: bool = False) -> Tensor: return _w(self._t.argsort(dim, descending))
  def topk(self, k: int, dim: int = -1, largest=True, sorted_=True) -> tuple[Tensor, Tensor]:
    if not 0 <= k <= (self.shape[_axis(dim, self.ndim)] if self.ndim else 1): raise RuntimeError(f"selected index {k=} is out of range")
    return tuple(map(_w, self._t.topk(k, dim, largest)))
  def matmul(self, x: Tensor, reverse=False, dtype=None) -> Tensor:
    a, b = (x, self) if reverse else (self, x)
    if not isinstance(a, Tensor): a = Tensor(a)
    if not isinstance(b, Tensor): b = Tensor(b)
    out = _w(a._t.matmul(b._t))
    return out.cast(dtype) if dtype is not None else out
  def dot(self, w: Tensor, dtype=None) -> Tensor:
    out = _w(self._t.dot(w._t))
    return out.cast(dtype) if dtype is not None else out
  @staticmethod
  def einsum(formula: str, *operands, dtype=None) -> Tensor:
    ops = argfix(*operands)
    out = _w(_R.einsum(formula, [t._t for t in ops]))
    return out.cast(dtype) if dtype is not None else out

  # ---- movement
  def reshape(self, shape, *args) -> Tensor:
    s = [int(self.shape[i]) if x is None else int(x) for i, x in enumerate(argfix(shape, *args))]
    if (c := s.count(-1)) > 1: raise RuntimeError(f"only one dimension can be inferred using -1, getting {s}")
    if c == 0 and prod(s) != self.numel(): raise ValueError(f"size mismatch, can't reshape ({self.shape}) -> ({tuple(s)})")
    return _w(self._t.reshape(s))
  def view(self, shape, *args) -> Tensor: return self.reshape(shape, *args)
  def permute(self, order, *args) -> Tensor: return _w(self._t.permute(list(argfix(order, *args))))
  def expand(self, shape, *args) -> Tensor: return _w(self._t.expand([int(x) for x in argfix(shape, *args)]))
  def transpose(self, dim0=1, dim1=0) -> Tensor: return _w(self._t.transpose(dim0, dim1))
  def flatten(self, start_dim=0, end_dim=-1) -> Tensor:
    return self.reshape(1) if self.ndim == 0 else _w(self._t.flatten_range(start_dim, end_dim))
  def unflatten(self, dim: int, sizes) -> Tensor: return _w(self._t.unflatten(dim, list(sizes)))
  def squeeze(self, dim: int | None = None) -> Tensor: return _w(self._t.unary("squeeze_all") if dim is None else self._t.along("squeeze", dim))
  def unsqueeze(self, dim: int) -> Tensor: return self._along("unsqueeze", dim)
  def flip(self, axis, *args) -> Tensor:
    axes = [_axis(a, self.ndim) % max(self.ndim, 1) for a in argfix(axis, *args)]
    if len(axes) != len(set(axes)): raise RuntimeError(f"dim can appear at most once, getting {axes}")
    return self if self.ndim == 0 else _w(self._t.flip(axes))
  def pad(self, padding, mode: str = "constant", value=0.0) -> Tensor:
    if mode not in ("constant", "reflect", "replicate", "circular"): raise NotImplementedError(f"{mode=} is not supported")
    if (flat := all(isinstance(p, int) for p in padding)) and len(padding) % 2 != 0: raise ValueError("Flat padding must have even number of pads")
    pads = [(0, 0)] * (self.ndim - len(padding)//2) + [tuple(padding[i:i+2]) for i in range(0, len(padding), 2)][::-1] if flat else \
      [(0, 0) if p is None else tuple(p) for p in padding]
    if len(pads) != self.ndim: raise ValueError(f"padding length is improper, {padding=} {self.ndim=}")
    if mode != "constant" and value != 0: raise NotImplementedError("value is only used in constant mode")
    pads = [(int(a), int(b)) for a, b in pads]
    if mode == "constant" or all(a >= 0 and b >= 0 for a, b in pads): return _w(self._t.pad(pads, float(value), mode))
    if mode == "circular": raise NotImplementedError("negative pads with circular pads is not supported")
    # (the other modes pad the positive parts, then cut the negative ones off)
    x = _w(self._t.pad([(max(a, 0), max(b, 0)) for a, b in pads], 0.0, mode))
    return x.shrink(tuple((-min(a, 0), s + min(b, 0)) for (a, b), s in zip(pads, x.shape)))
  def shrink(self, arg) -> Tensor:
    return _w(self._t.shrink([(0, s) if a is None else (int(a[0]), int(a[1])) for a, s in zip(arg, self.shape)]))
  def pad_to(self, shape, *args) -> Tensor:
    s = argfix(shape, *args)
    return self.pad(tuple((0, 0) if n is None else (0, n - c) for c, n in zip(self.shape, s)))
  def shrink_to(self, shape, *args) -> Tensor:
    return self.shrink(tuple(None if n is None else (0, n) for n in argfix(shape, *args)))
  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    ts = _seq(self, args)
    return _w(ts[0]._t.cat([t._t for t in ts[1:]], dim))
  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    ts = _seq(self, args)
    return _w(ts[0]._t.stack([t._t for t in ts[1:]], dim))
  def split(self, sizes, dim: int = 0) -> tuple[Tensor, ...]:
    d = dim % self.ndim if self.ndim else 0
    if isinstance(sizes, int):
      if sizes <= 0: raise RuntimeError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, self.shape[d] - i) for i in range(0, max(1, self.shape[d]), max(1, sizes))]
    if sum(sizes) != self.shape[d]: raise RuntimeError(f"expect sizes to sum exactly to {self.shape[d]}, but got {sum(sizes)}")
    return tuple(_w(t) for t in self._t.split_sizes(list(sizes), dim))
  def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
    if chunks <= 0: raise RuntimeError(f"expect chunks to be greater than 0, got: {chunks}")
    d = self.shape[dim]
    return list(self.split(math.ceil(d / chunks) if d else [0] * chunks, dim=dim))
  def repeat(self, repeats, *args) -> Tensor:
    r = list(argfix(repeats, *args))
    if len(r) < self.ndim: raise ValueError(f"{len(r)} repeats for {self.ndim} dims: give at least one per dim")
    return _w(self._t.repeat(r))
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor: return _w(self._t.repeat_interleave(repeats, dim))
  def roll(self, shifts, dims=None) -> Tensor:
    if dims is None:
      if len(sh := make_tuple(shifts, 1)) != 1: raise RuntimeError(f"{shifts=} must be one shift when dims is None")
      return _w(self._t.roll_flat(sh[0]))
    return _w(self._t.roll(list(make_tuple(shifts, 1)), list(make_tuple(dims, 1))))
  def unfold(self, dim: int, size: int, step: int) -> Tensor:
    d = _axis(dim, self.ndim)
    if size < 0 or step <= 0: raise RuntimeError(f"{size=} must be non-negative and {step=} positive")
    if size > self.shape[d]: raise RuntimeError(f"{size=} is bigger than dim {d} of size {self.shape[d]}")
    return _w(self._t.unfold(d, size, step))
  def diagonal(self, offset=0, dim1=0, dim2=1) -> Tensor: return _w(self._t.diagonal(offset, dim1, dim2))
  def diag(self) -> Tensor: return self._u("diag")
  def meshgrid(self, *args: Tensor, indexing="ij") -> tuple[Tensor, ...]:
    if indexing not in ("ij", "xy"): raise RuntimeError(f"indexing must be in ('ij', 'xy'), got {indexing}")
    return tuple(map(_w, self._t.meshgrid([t._t for t in args], indexing)))
  def rearrange(self, formula: str, **sizes) -> Tensor: return _w(self._t.rearrange(formula, list(sizes.items())))
  def triu(self, diagonal: int = 0) -> Tensor: return _w(self._t.triu(diagonal, False))
  def tril(self, diagonal: int = 0) -> Tensor: return _w(self._t.triu(diagonal, True))
  def gather(self, dim: int, index: Tensor) -> Tensor: return _w(self._t.gather(dim, index._t))
  def scatter(self, dim: int, index: Tensor, src, reduce=None) -> Tensor:
    if reduce not in (None, "add", "multiply"): raise TypeError(f"{reduce=} must be one of None, 'multiply', or 'add'")
    if reduce is not None and isinstance(src, Tensor): raise TypeError("Tensor src is not supported with reduce arg. see scatter_reduce")
    return _w(self._t.scatter(dim, index._t, _op(src), reduce))
  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    if reduce not in ("sum", "prod", "mean", "amax", "amin"): raise RuntimeError(f"{reduce=} must be one of 'sum', 'prod', 'mean', 'amax', 'amin'")
    return _w(self._t.scatter_reduce(dim, index._t, src._t, reduce, include_self))
  def masked_select(self, mask: Tensor) -> Tensor: return _w(self._t.masked_select(mask._t))
  def one_hot(self, num_classes: int = -1) -> Tensor:
    if num_classes == -1: num_classes = int(self.max().item()) + 1
    return _w(self._t.one_hot(num_classes))
  def __getitem__(self, indices) -> Tensor:
    idx = _indices(indices)
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
    if self.ndim == 0 and any(isinstance(i, slice) for i in idx): raise IndexError("slice cannot be applied to a 0-dim tensor.")
    if (n := sum(1 for i in idx if i is not None and i is not Ellipsis)) > self.ndim: raise IndexError(f"too many {n} for {self.ndim}")
    for i in idx:
      if isinstance(i, _R) and not dtypes.is_int(FROM_ENGINE[i.dtype]): raise IndexError(f"index dtype {FROM_ENGINE[i.dtype]} is not supported")
    try: return _w(self._t.getitem(idx))
    except RuntimeError as e: raise IndexError(str(e)) from None
  def __setitem__(self, indices, v) -> None:
    if isinstance(v, (list, tuple, np.ndarray)): v = Tensor(v, dtype=self.dtype)
    self._t.setitem(_indices(indices), _op(v))
  def __iter__(self): return (self[i] for i in range(self.shape[0]))

  # ---- networks
  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups=1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
    out = _w(self._t.conv2d(weight._t, None if bias is None else bias._t, groups, list(make_tuple(stride, 1)),
                            list(make_tuple(dilation, 1)), list(make_tuple(padding, 1))))
    return out.cast(dtype) if dtype is not None else out
  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups=1, stride=1, dilation=1, padding=0, output_padding=0) -> Tensor:
    return _w(self._t.conv2d(weight._t, None if bias is None else bias._t, groups, list(make_tuple(stride, 1)), list(make_tuple(dilation, 1)),
                             list(make_tuple(padding, 1)), list(make_tuple(output_padding, 1)), True))
  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True) -> Tensor:
    _pool_padding(kernel_size, padding)
    return _w(self._t.pool(True, list(make_tuple(kernel_size, 2)), None if stride is None else list(make_tuple(stride, 1)),
                           list(make_tuple(dilation, 1)), list(make_tuple(padding, 1)), ceil_mode, count_include_pad, False)[0])
  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, return_indices=False):
    _pool_padding(kernel_size, padding)
    out = self._t.pool(False, list(make_tuple(kernel_size, 2)), None if stride is None else list(make_tuple(stride, 1)),
                       list(make_tuple(dilation, 1)), list(make_tuple(padding, 1)), ceil_mode, True, return_indices)
    return (_w(out[0]), _w(out[1])) if return_indices else _w(out[0])
  def max_unpool2d(self, indices: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Tensor:
    return _w(self._t.max_unpool2d(indices._t, list(make_tuple(kernel_size, 2)), None if stride is None else list(make_tuple(stride, 1)),
                                   list(make_tuple(dilation, 1)), list(make_tuple(padding, 1)), None if output_size is None else list(output_size)))
  def interpolate(self, size, mode: str = "linear", align_corners: bool = False) -> Tensor:
    if align_corners and mode not in ("linear",): raise ValueError("align_corners option can only be set with the interpolating mode")
    return _w(self._t.interpolate(list(size), mode, align_corners))
  def linear(self, weight: Tensor, bias: Tensor | None = None, dtype=None) -> Tensor:
    return _w(self._t.linear(weight._t, None if bias is None else bias._t))
  def sequential(self, ll: list[Callable[[Tensor], Tensor]]) -> Tensor:
    x = self
    for f in ll: x = f(x)
    return x
  def layernorm(self, axis=-1, eps: float = 1e-5) -> Tensor: return _w(self._t.layernorm(list(make_tuple(axis, 1)), eps))
  def batchnorm(self, weight, bias, mean: Tensor, invstd: Tensor, axis=1) -> Tensor:
    return _w(self._t.batchnorm(None if weight is None else weight._t, None if bias is None else bias._t, mean._t, invstd._t,
                                list(make_tuple(axis, 1))))
  def rms_norm(self, axis=-1, eps: float = 1e-6) -> Tensor: return self * (self.square().mean(axis, keepdim=True) + eps).rsqrt()
  def normalize(self, p=2.0, dim=1, eps=1e-12) -> Tensor: return _w(self._t.normalize(p, dim, eps))
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
    return _w(self._t.scaled_dot_product_attention(key._t, value._t, None if attn_mask is None else attn_mask._t,
                                                   dropout_p if Tensor.training else 0.0, is_causal, enable_gqa))
  def _loss(self, kind, Y, **kw) -> Tensor: return _w(self._t.loss(kind, Y._t, **kw))
  def cross_entropy(self, Y: Tensor, reduction="mean", label_smoothing=0.0) -> Tensor:
    return self._loss("cross_entropy", Y, reduction=reduction, label_smoothing=label_smoothing)
  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index=-1, label_smoothing=0.0, reduction="mean") -> Tensor:
    return self._loss("sparse_categorical_crossentropy", Y, reduction=reduction, label_smoothing=label_smoothing, ignore_index=ignore_index)
  def binary_crossentropy(self, Y: Tensor, reduction="mean") -> Tensor: return self._loss("binary_crossentropy", Y, reduction=reduction)
  def binary_crossentropy_logits(self, Y: Tensor, reduction="mean", pos_weight: Tensor | None = None) -> Tensor:
    return self._loss("binary_crossentropy_logits", Y, reduction=reduction, weight=None if pos_weight is None else pos_weight._t)
  def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None, reduction="mean") -> Tensor:
    return self._loss("nll_loss", Y, reduction=reduction, ignore_index=ignore_index, weight=None if weight is None else weight._t)

def _unary(name):
  def f(self) -> Tensor: return _w(self._t.unary(name))
  f.__name__ = name
  return f
for _n in ("neg", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
           "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "sigmoid", "square", "sign", "abs", "floor", "ceil", "round", "trunc",
           "isnan", "isfinite", "bitwise_not", "logical_not", "relu", "relu6", "selu", "gelu", "quick_gelu", "swish", "silu", "hardswish",
           "mish", "softsign", "logsigmoid"):
  setattr(Tensor, _n, _unary(_n))

def _pool_padding(kernel_size, padding):
  k = len(make_tuple(kernel_size, 2))
  if not isinstance(padding, int) and len(padding) not in (1, k, 2*k): raise ValueError(f"Padding must be an int or a sequence of length {k} or {2*k}, but got {padding=}")

def _seq(first, rest) -> list[Tensor]:
  """The tensors of ``cat``/``stack``'s arguments: ``(a, b, c)`` or ``((a, b, c),)``."""
  if isinstance(first, (list, tuple)):
    if rest: raise ValueError("pass the tensors either as one sequence or as arguments, not both")
    return list(first)
  return [first, *rest]

def _canon(device: str | tuple[str, ...]):
  if isinstance(device, tuple): return tuple(_canon(d) for d in device)
  d = device.upper() if isinstance(device, str) else device
  return {"CLANG": "CPU", "LLVM": "CPU", "GPU": "CL", "OPENCL": "CL"}.get(d, d)

def _joined(device: str | tuple[str, ...]) -> str:
  return ",".join(_canon(device)) if isinstance(device, tuple) else _canon(device)

def _pyconst(v, dt: DType):
  if isinstance(v, Variable): v = v.val
  if isinstance(v, np.generic): v = v.item()
  return float(v) if dtypes.is_float(dt) else (bool(v) if dt == dtypes.bool else (int(v) if not isinstance(v, float) or math.isfinite(v) else v))

def _flat_py(data):
  """A nested list with Tensors and numpy scalars made Python values, for numpy."""
  if isinstance(data, Tensor): return data.tolist()
  if isinstance(data, (list, tuple)): return [_flat_py(d) for d in data]
  return data

def _from_np(a: np.ndarray, dt: DType | None, device):
  src, shape = _from_np_dtype(a.dtype), list(a.shape)
  flat = np.ascontiguousarray(a).reshape(-1)
  rt = _R.from_numpy(flat.view(np.uint8) if flat.size else np.zeros(0, np.uint8), ENGINE_NAME[src], shape, None)
  return rt if dt is None or dt == src else rt.cast(ENGINE_NAME[dt])

def _indices(indices) -> tuple:
  """tinygrad's index forms as the engine takes them: a tuple of ints, slices, None, Ellipsis and RTensors."""
  if not isinstance(indices, tuple): indices = (indices,)
  out = []
  for i in indices:
    if isinstance(i, Tensor): out.append(i._t)
    elif isinstance(i, (list, tuple, np.ndarray)): out.append(Tensor(list(i) if isinstance(i, tuple) else i)._t)
    elif isinstance(i, slice):
      if any(isinstance(x, Tensor) for x in (i.start, i.stop, i.step)): raise TypeError("a Tensor can't be a slice parameter")
      if i.step == 0: raise ValueError("slice step cannot be 0")
      out.append(slice(*(None if x is None else int(x) for x in (i.start, i.stop, i.step))))
    elif isinstance(i, (Variable, np.integer)): out.append(int(i))
    elif isinstance(i, float): raise IndexError(f"{type(i).__name__} indexing is not supported")
    else: out.append(i)
  return tuple(out)
