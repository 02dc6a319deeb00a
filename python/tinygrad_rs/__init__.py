"""tinygrad's Python API on tinygrad-rs, the Rust engine: ``from tinygrad_rs import Tensor, TinyJit, nn, dtypes, ...``
works as ``from tinygrad import ...`` does (see README: Python)."""
from .tensor import Tensor, Variable
from .engine.jit import TinyJit
from .dtype import dtypes, DType
from .device import Device
from .helpers import GlobalCounters, Context, getenv
from . import nn

def function(fxn=None, **kwargs):
  """tinygrad 0.14's ``@function`` (a call graph kept as one unit); here the function itself, its kernels fused as
  the engine's scheduler fuses any graph."""
  return fxn if fxn is not None else (lambda f: f)

__all__ = ["Tensor", "Variable", "TinyJit", "dtypes", "DType", "Device", "GlobalCounters", "Context", "getenv", "nn", "function"]
