"""tinygrad's ``helpers``: settings read from the environment (``getenv``, ``ContextVar``, ``Context``), and small
utilities. Settings the engine reads (DEBUG, BEAM, NOOPT, JIT, ...) live in the engine: a ``Context`` sets them there."""
from __future__ import annotations
import os, sys, time, functools, platform, contextlib
from typing import Iterable, TypeVar, Any
from . import _tinygrad_rs as _rs

T = TypeVar("T")
OSX, WIN = platform.system() == "Darwin", sys.platform == "win32"

@functools.cache
def getenv(key: str, default: Any = 0):
  """The environment variable ``key`` as the type of ``default``."""
  return type(default)(os.getenv(key, default))

class ContextVar:
  """A setting: the engine's where it has one, else kept here; compares as its integer value."""
  _cache: dict[str, ContextVar] = {}
  def __init__(self, key: str, default: int):
    self.key, self._value = key, getenv(key, default)
    if key in ContextVar._cache: raise RuntimeError(f"attempt to recreate ContextVar {key}")
    ContextVar._cache[key] = self
  @property
  def value(self) -> int:
    v = _rs.context_get(self.key)
    return self._value if v is None else v
  @value.setter
  def value(self, v: int):
    self._value = v
    _rs.context_set(self.key, int(v))
  def __bool__(self): return bool(self.value)
  def __ge__(self, x): return self.value >= x
  def __gt__(self, x): return self.value > x
  def __lt__(self, x): return self.value < x
  def __le__(self, x): return self.value <= x
  def __eq__(self, x): return self.value == x
  def __hash__(self): return hash(self.key)
  def __int__(self): return int(self.value)
  def __repr__(self): return f"ContextVar({self.key}={self.value})"

DEBUG, BEAM, NOOPT, JIT, IMAGE = ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0), ContextVar("JIT", 1), ContextVar("IMAGE", 0)
CACHELEVEL, IGNORE_BEAM_CACHE, TRAINING = ContextVar("CACHELEVEL", 2), ContextVar("IGNORE_BEAM_CACHE", 0), ContextVar("TRAINING", 0)
SPLIT_REDUCEOP, TC, SPEC = ContextVar("SPLIT_REDUCEOP", 1), ContextVar("TC", 1), ContextVar("SPEC", 0)
CI, CPU_LLVM, AMD_LLVM, EMULATE = bool(getenv("CI", "")), ContextVar("CPU_LLVM", 0), ContextVar("AMD_LLVM", 0), ContextVar("EMULATE", 0)
WINO, CAPTURING, PROFILE = ContextVar("WINO", 0), ContextVar("CAPTURING", 1), ContextVar("PROFILE", 0)

class Context(contextlib.ContextDecorator):
  """Sets settings for a block (``with Context(BEAM=2): ...``), restoring them after."""
  def __init__(self, **kwargs): self.kwargs = kwargs
  def __enter__(self):
    self.old = {}
    for k, v in self.kwargs.items():
      var = ContextVar._cache[k] if k in ContextVar._cache else ContextVar(k, 0)
      self.old[k], var.value = var.value, v
  def __exit__(self, *args):
    for k, v in self.old.items(): ContextVar._cache[k].value = v

class GlobalCounters:
  """Kernel statistics since the last reset, read from the engine."""
  @classmethod
  def _get(cls, i): return _rs.global_counters()[i]
  @classmethod
  def reset(cls): _rs.global_counters(True)
class _Counter:
  def __init__(self, i): self.i = i
  def __get__(self, obj, cls): return _rs.global_counters()[self.i]
GlobalCounters.kernel_count, GlobalCounters.global_ops = _Counter(0), _Counter(1)
GlobalCounters.global_mem, GlobalCounters.time_sum_s = _Counter(2), _Counter(3)

def prod(x: Iterable):
  out = 1
  for v in x: out *= v
  return out
def all_same(items) -> bool: return all(x == items[0] for x in items)
def all_int(t) -> bool: return all(isinstance(s, int) for s in t)
def flatten(l: Iterable[Iterable[T]]) -> list[T]: return [item for sublist in l for item in sublist]
def argfix(*x):
  """Varargs or one tuple/list, as a tuple."""
  if x and x[0].__class__ in (tuple, list):
    if len(x) != 1: raise ValueError(f"bad arg {x}")
    return tuple(x[0])
  return x
def argsort(x): return type(x)(sorted(range(len(x)), key=x.__getitem__))
def make_tuple(x, cnt: int) -> tuple: return (x,)*cnt if isinstance(x, int) else tuple(x)
def round_up(num: int, amt: int) -> int: return (num+amt-1)//amt*amt
def ceildiv(num, amt): return -(num//-amt)
def dedup(x): return list(dict.fromkeys(x))
def colored(st, color: str | None = None, background=False) -> str:
  if color is None: return st
  colors = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white']
  return f"\u001b[{10*background+60*(color.upper() == color)+30+colors.index(color.lower())}m{st}\u001b[0m"
def ansilen(s: str) -> int:
  import re
  return len(re.sub('\x1b\\[(K|.*?m)', '', s))
class tqdm:
  """A progress bar on stderr (tinygrad's own ``tqdm``): iterate it, ``set_description`` names what it shows."""
  def __init__(self, iterable=None, desc: str = "", disable: bool = False, total: int | None = None, **kwargs):
    self.iterable, self.desc, self.disable, self.n = iterable, desc, disable, 0
    self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
    self.st = time.perf_counter()
  def set_description(self, desc: str): self.desc = desc; self._show()
  def _show(self):
    if self.disable: return
    el = time.perf_counter() - self.st
    rate = f"{self.n/el:.2f} it/s" if el > 0 and self.n else "?"
    print(f"\r{self.desc}{': ' if self.desc else ''}{self.n}/{self.total if self.total is not None else '?'} [{el:.1f}s, {rate}]",
          end="", file=sys.stderr, flush=True)
  def update(self, n: int = 1): self.n += n; self._show()
  def __iter__(self):
    for x in self.iterable:
      yield x
      self.update()
    if not self.disable: print(file=sys.stderr)

def trange(n: int, **kwargs) -> tqdm:
  """``tqdm(range(n))``."""
  return tqdm(range(n), **kwargs)

class Timing(contextlib.ContextDecorator):
  def __init__(self, prefix="", on_exit=None, enabled=True): self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self): self.st = time.perf_counter_ns()
  def __exit__(self, *exc):
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms"+(self.on_exit(self.et) if self.on_exit else ""))
