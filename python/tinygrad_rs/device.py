"""tinygrad's ``Device``: the default device's name (``Device.DEFAULT``, settable) and per-device handles."""
from __future__ import annotations
from . import _tinygrad_rs as _rs
from .dtype import DType, dtypes

class _DeviceHandle:
  def __init__(self, name: str): self.device = name
  def synchronize(self): pass
  def __repr__(self): return f"<Device {self.device}>"

class _Device:
  """``Device.DEFAULT`` is the engine's default device (``DEV`` or the first that works); ``Device[name]`` a handle."""
  _devices = ("CPU", "PYTHON", "CL", "CUDA")
  @property
  def DEFAULT(self) -> str: return _rs.default_device()
  @DEFAULT.setter
  def DEFAULT(self, dev: str): _rs.set_default_device(dev)
  def canonicalize(self, device: str | None) -> str: return self.DEFAULT if device is None else device.split(":")[0].upper()
  def __getitem__(self, name: str) -> _DeviceHandle: return _DeviceHandle(self.canonicalize(name))
  def get_available_devices(self): yield self.DEFAULT

Device = _Device()

def is_dtype_supported(dtype: DType, device: str | None = None) -> bool:
  """Whether tensors of ``dtype`` run on ``device`` (every dtype runs on CPU and PYTHON)."""
  dev = Device.canonicalize(device)
  if dev in ("CPU", "PYTHON"): return True
  return dtype not in (dtypes.bfloat16,) if dev == "CL" else True
