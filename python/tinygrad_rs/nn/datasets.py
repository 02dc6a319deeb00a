"""tinygrad's ``nn.datasets``: MNIST read from the data dir (``TINYGRAD_DATA_DIR``, whose ``mnist/`` holds the four
gzipped IDX files), else downloaded, as uint8 tensors: X ``(N, 1, 28, 28)``, Y ``(N,)``."""
from __future__ import annotations
from .. import _tinygrad_rs as _rs
from ..tensor import _w

def mnist(device=None, fashion=False):
  """(X_train, Y_train, X_test, Y_test) of MNIST; ``fashion`` is not supported (raises NotImplementedError)."""
  if fashion: raise NotImplementedError("fashion MNIST is not supported yet")
  return tuple(_w(t) for t in _rs.mnist())
