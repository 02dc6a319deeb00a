"""tinygrad's ``nn.onnx.OnnxRunner`` on the engine's ONNX runner: load a ``.onnx`` file, call it with inputs by name."""
from __future__ import annotations
import pathlib
from .. import _tinygrad_rs as _rs
from ..tensor import Tensor, _w

class OnnxRunner:
  """An ONNX model: ``OnnxRunner(path)({"input": tensor}) -> {"output": tensor}``. Inputs are checked against the
  graph's declared dtypes and shapes (a mismatch raises RuntimeError naming the input); repeated calls with the same
  shapes replay captured kernels (TinyJit)."""
  def __init__(self, model_path: str | pathlib.Path):
    self._r = _rs.ROnnxRunner(str(model_path))
    self.graph_inputs = self._r.input_names()
  def __call__(self, inputs: dict, debug: int = 0) -> dict[str, Tensor]:
    given = [(k, (v if isinstance(v, Tensor) else Tensor(v))._t) for k, v in inputs.items()]
    return {k: _w(v) for k, v in self._r.run(given)}
