"""tinygrad's dtypes (``tinygrad/dtype.py``): DType values named as tinygrad names them, promotion and numpy mapping.
The engine takes a dtype by its name (``DType.name``)."""
from __future__ import annotations
from dataclasses import dataclass
import math

@dataclass(frozen=True, eq=True)
class DType:
  """A scalar dtype: ``priority`` orders promotion, ``itemsize`` is in bytes, ``fmt`` is the struct format char."""
  priority: int
  itemsize: int
  name: str
  fmt: str | None
  count: int = 1
  def __repr__(self): return f"dtypes.{INVERSE[self.name]}"
  def __lt__(self, o: DType): return (self.priority, self.itemsize, self.name) < (o.priority, o.itemsize, o.name)
  @property
  def base(self): return self
  @property
  def bitsize(self): return self.itemsize * 8
  def vec(self, sz: int): raise NotImplementedError("vector dtypes are kernel-level: not reachable from Tensor")
  def scalar(self): return self
  @property
  def min(self): return dtypes.min(self)
  @property
  def max(self): return dtypes.max(self)

class dtypes:
  """tinygrad's ``dtypes`` namespace: the dtypes, their aliases, and the predicates over them."""
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "char", "b")
  uint8 = DType(2, 1, "uchar", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "ushort", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "uint", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "ulong", "Q")
  float16 = DType(11, 2, "half", "e")
  bfloat16 = DType(12, 2, "bfloat16", None)
  float32 = DType(13, 4, "float", "f")
  float64 = DType(14, 8, "double", "d")
  half, float, double = float16, float32, float64
  char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
  default_float = float32
  default_int = int32
  floats = (float16, bfloat16, float32, float64)
  uints = (uint8, uint16, uint32, uint64)
  sints = (int8, int16, int32, int64)
  ints = uints + sints
  all = (bool,) + ints + floats
  @staticmethod
  def is_float(x: DType) -> bool: return x in dtypes.floats
  @staticmethod
  def is_int(x: DType) -> bool: return x in dtypes.ints
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x in dtypes.uints
  @staticmethod
  def is_bool(x: DType) -> bool: return x == dtypes.bool
  @staticmethod
  def from_py(x) -> DType:
    if isinstance(x, (list, tuple)): return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
    if isinstance(x, float): return dtypes.default_float
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int): return dtypes.default_int
    raise RuntimeError(f"could not infer dtype of {x} with type {type(x)}")
  @staticmethod
  def as_const(val, dtype: DType):
    if isinstance(val, tuple): return tuple(dtypes.as_const(v, dtype) for v in val)
    return float(val) if dtypes.is_float(dtype) else (bool(val) if dtype == dtypes.bool else int(val))
  @staticmethod
  def min(dtype: DType):
    if dtypes.is_int(dtype): return 0 if dtypes.is_unsigned(dtype) else -2**(dtype.itemsize*8-1)
    return -math.inf if dtypes.is_float(dtype) else False
  @staticmethod
  def max(dtype: DType):
    if dtypes.is_int(dtype): return 2**(dtype.itemsize*8)-1+dtypes.min(dtype)
    return math.inf if dtypes.is_float(dtype) else True
  @staticmethod
  def finfo(dtype: DType) -> tuple[int, int]:
    return {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52)}[dtype]
  @staticmethod
  def fields() -> dict[str, DType]: return {k: v for k, v in vars(dtypes).items() if isinstance(v, DType)}

INVERSE = {"void": "void", "bool": "bool", "char": "char", "uchar": "uchar", "short": "short", "ushort": "ushort", "int": "int",
           "uint": "uint", "long": "long", "ulong": "ulong", "half": "half", "bfloat16": "bfloat16", "float": "float",
           "double": "double"}
# the engine's names of each dtype
ENGINE_NAME = {dtypes.bool: "bool", dtypes.int8: "int8", dtypes.uint8: "uint8", dtypes.int16: "int16", dtypes.uint16: "uint16",
               dtypes.int32: "int32", dtypes.uint32: "uint32", dtypes.int64: "int64", dtypes.uint64: "uint64",
               dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64"}
FROM_ENGINE = {v: k for k, v in ENGINE_NAME.items()}
DTYPES_DICT = {k: v for k, v in dtypes.fields().items() if k not in ("default_float", "default_int")}

def to_dtype(x) -> DType:
  """A DType from a DType or a name (``"float32"``, ``"int"``)."""
  if isinstance(x, DType): return x
  if isinstance(x, str):
    if x in DTYPES_DICT: return DTYPES_DICT[x]
    raise AttributeError(f"type object 'dtypes' has no attribute {x!r}")
  raise TypeError(f"not a dtype: {x!r}")

# tinygrad's promotion lattice: the dtypes each one promotes to
_PROMO = {dtypes.bool: [dtypes.int8, dtypes.uint8], dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32],
          dtypes.int32: [dtypes.int64], dtypes.int64: [dtypes.float16, dtypes.bfloat16], dtypes.uint8: [dtypes.int16, dtypes.uint16],
          dtypes.uint16: [dtypes.int32, dtypes.uint32], dtypes.uint32: [dtypes.int64, dtypes.uint64],
          dtypes.uint64: [dtypes.float16, dtypes.bfloat16], dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32],
          dtypes.float32: [dtypes.float64]}

def _lattice(d: DType) -> set[DType]:
  return {d}.union(*(_lattice(p) for p in _PROMO.get(d, [])))

def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every one of ``ds`` promotes to (tinygrad ``least_upper_dtype``)."""
  return min(set.intersection(*(_lattice(d) for d in ds)))

def least_upper_float(dt: DType) -> DType: return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)
