"""tinygrad's ``nn.state``: a model's tensors by name (walking its attributes, lists and dicts), loading them back,
and safetensors files through the engine (written to a temporary file, then renamed)."""
from __future__ import annotations
from collections import OrderedDict
from .. import _tinygrad_rs as _rs
from ..tensor import Tensor, _w

def get_state_dict(obj, prefix: str = "", tensor_type=Tensor) -> dict[str, Tensor]:
  """Every Tensor reachable from ``obj`` by attribute, list index and dict key, named by its path (tinygrad's)."""
  if isinstance(obj, tensor_type): return {prefix.strip('.'): obj}
  if hasattr(obj, '_asdict'): return get_state_dict(obj._asdict(), prefix, tensor_type)
  if isinstance(obj, OrderedDict): return get_state_dict(dict(obj), prefix, tensor_type)
  if hasattr(obj, '__dict__'): return get_state_dict(obj.__dict__, prefix, tensor_type)
  state_dict = {}
  if isinstance(obj, (list, tuple)):
    for i, x in enumerate(obj): state_dict.update(get_state_dict(x, f"{prefix}{i}.", tensor_type))
  elif isinstance(obj, dict):
    for k, v in obj.items():
      if isinstance(k, str) and k.startswith("__"): continue
      state_dict.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
  return state_dict

def get_parameters(obj) -> list[Tensor]:
  """The tensors of ``get_state_dict(obj)``, each once."""
  seen, out = set(), []
  for t in get_state_dict(obj).values():
    if id(t) not in seen: seen.add(id(t)); out.append(t)
  return out

def load_state_dict(model, state_dict: dict[str, Tensor], strict=True, verbose=False, consume=False, realize=True) -> list[Tensor]:
  """Assigns each of ``model``'s tensors the one of its name in ``state_dict``; a missing one raises KeyError where
  ``strict``, a shape mismatch raises ValueError."""
  model_state_dict = get_state_dict(model)
  ret = []
  for k, v in model_state_dict.items():
    if k not in state_dict:
      if strict: raise KeyError(f"{k} is missing from the state_dict")
      continue
    if v.shape != state_dict[k].shape: raise ValueError(f"Shape mismatch in layer `{k}`: Expected shape {v.shape}, but found {state_dict[k].shape} in state dict.")
    v.replace(state_dict[k].to(v.device).cast(v.dtype)).realize()
    ret.append(v)
    if consume: del state_dict[k]
  return ret

def safe_load(fn) -> dict[str, Tensor]:
  """A safetensors file's tensors by name."""
  return {k: _w(v) for k, v in _rs.safe_load(str(fn))}

def safe_save(tensors: dict[str, Tensor], fn, metadata=None):
  """Writes ``tensors`` to a safetensors file."""
  _rs.safe_save([(k, v._t) for k, v in tensors.items()], str(fn))

def tar_extract(fn): raise NotImplementedError("tar_extract is not supported yet")
def torch_load(fn): raise NotImplementedError("torch_load is not supported yet")
def gguf_load(fn) -> tuple[dict, dict[str, Tensor]]:
  """A GGUF file's metadata and tensors by name (quantized ones dequantized lazily by the engine)."""
  kv, ts = _rs.gguf_load(str(fn))
  return dict(kv), {k: _w(v) for k, v in ts}
