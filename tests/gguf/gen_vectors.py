#!/usr/bin/env python3
"""Test data for tests/gguf.rs, made with llama.cpp's own `gguf` Python package (gguf-py).

    $(python3 bench/bench_python.py) tests/gguf/gen_vectors.py            # vectors/*.bin, small.gguf, split/*.gguf
    $(python3 bench/bench_python.py) tests/gguf/gen_vectors.py --models D # also vectors/models.json from the real files in D

vectors/<TYPE>.bin, one per ggml type, little endian:
    u32 ggml type id, u32 rows, u32 element count n, u32 byte count m, u32 block count b,
    m bytes of raw ggml data, n float32 values from gguf.quants.dequantize, b float32 tolerances (one per block).
A tolerance is 0 where the reference rounds once per value; for the affine types (`d*q + m`, `d*q - dm`) it is one
float32 spacing of the block's largest term, as a kernel compiled with FMA contraction rounds once where numpy rounds
twice.
"""
import json, pathlib, sys
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize, dequantize, Q4_K

HERE = pathlib.Path(__file__).resolve().parent
VEC = HERE / "vectors"
rng = np.random.default_rng(1234)

def f16_bytes(x): return np.asarray(x, dtype=np.float16).view(np.uint8).reshape(-1, 2)

def random_blocks(t, nblocks):
  """Random block bytes with finite, moderate fp16 scales (and e8m0 exponents near 1.0 for MXFP4)."""
  blck, size = gguf.GGML_QUANT_SIZES[t]
  b = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
  scale = lambda: f16_bytes(rng.uniform(-2, 2, nblocks) * 2.0 ** rng.integers(-12, 2, nblocks))
  if t in (T.Q4_0, T.Q5_0, T.Q8_0): b[:, 0:2] = scale()
  elif t in (T.Q4_1, T.Q5_1, T.Q4_K, T.Q5_K): b[:, 0:2], b[:, 2:4] = scale(), scale()
  elif t == T.Q6_K: b[:, -2:] = scale()
  elif t == T.MXFP4: b[:, 0] = rng.integers(100, 140, nblocks)
  return b

def tolerance(t, raw, y):
  """Per block: 0 for one rounding per value, else one float32 spacing of the largest term."""
  blck, size = gguf.GGML_QUANT_SIZES[t]
  nb = raw.size // size
  blocks, y = raw.reshape(nb, size), y.reshape(nb, -1).astype(np.float32)
  if t in (T.Q4_1, T.Q5_1):
    m = np.abs(blocks[:, 2:4].copy().view(np.float16).astype(np.float32)).reshape(nb)
  elif t in (T.Q4_K, T.Q5_K):
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    _, mn = Q4_K.get_scale_min(blocks[:, 4:16].copy())
    m = np.abs(dmin * mn.astype(np.float32)).max(axis=-1)
  else:
    return np.zeros(nb, dtype=np.float32)
  big = np.abs(y).max(axis=-1) + 2 * m
  return np.spacing(big.astype(np.float32)).astype(np.float32)

def write_vector(t, raw, rows):
  raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
  blck, size = gguf.GGML_QUANT_SIZES[t]
  y = dequantize(raw, t).astype(np.float32).reshape(-1)
  tol = tolerance(t, raw, y)
  head = np.array([int(t), rows, y.size, raw.size, tol.size], dtype="<u4")
  (VEC / f"{t.name}.bin").write_bytes(head.tobytes() + raw.tobytes() + y.astype("<f4").tobytes() + tol.astype("<f4").tobytes())

def vectors():
  VEC.mkdir(exist_ok=True)
  # plain floats, with the special values: zeros of both signs, infinities, NaN, subnormals, the extremes
  special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3.4e38, 65504.0, 6e-8, 1.0, -2.5], dtype=np.float32)
  x = np.concatenate([special, rng.standard_normal(52).astype(np.float32) * 10]).astype(np.float32)
  write_vector(T.F32, x.view(np.uint8), 4)
  write_vector(T.F16, x.astype(np.float16).view(np.uint8), 4)
  write_vector(T.BF16, quantize(x, T.BF16).view(np.uint8), 4)
  # quantizable types: random floats (with a constant block and a zero block) quantized by gguf-py, then random bytes
  for t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4):
    blck, _ = gguf.GGML_QUANT_SIZES[t]
    x = (rng.standard_normal((6, blck)) * rng.uniform(0.01, 30, (6, 1))).astype(np.float32)
    x[4], x[5] = 0.75, 0.0
    q = quantize(x, t).reshape(6, -1)
    write_vector(t, np.concatenate([q, random_blocks(t, 10)]), 4)
  # the k-quants (gguf-py can't quantize them): random bytes with sane scales
  for t in (T.Q4_K, T.Q5_K, T.Q6_K):
    write_vector(t, random_blocks(t, 4), 2)

def small_files():
  """small.gguf: metadata of every value type (nested arrays too) and tensors of several types; split/: 3 parts."""
  w = gguf.GGUFWriter(HERE / "small.gguf", "testarch")
  V = gguf.GGUFValueType
  w.add_uint8("t.u8", 200); w.add_int8("t.i8", -100); w.add_uint16("t.u16", 60000); w.add_int16("t.i16", -30000)
  w.add_uint32("t.u32", 4000000000); w.add_int32("t.i32", -2000000000); w.add_float32("t.f32", 1.5)
  w.add_bool("t.bool", True); w.add_string("t.str", "héllo gguf"); w.add_uint64("t.u64", 2**63 + 5)
  w.add_int64("t.i64", -(2**62)); w.add_float64("t.f64", -0.125)
  w.add_array("t.arr_i32", [1, -2, 3])
  w.add_key_value("t.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
  w.add_array("t.arr_str", ["a", "", "ccc"])
  w.add_array("t.arr_f32", [0.5, -1.0])
  w.add_array("t.nested", [[1, 2], [3], [4, 5, 6]])
  w.add_array("t.nested2", [[["x"]], [["y", "z"]]])
  w.add_uint32("testarch.embedding_length", 64)
  x = np.arange(64 * 2, dtype=np.float32).reshape(2, 64) / 8 - 3
  w.add_tensor("f32", x)
  w.add_tensor("f16", x.astype(np.float16))
  w.add_tensor("q8_0", quantize(x, T.Q8_0), raw_dtype=T.Q8_0)
  w.add_tensor("q4_0", quantize(x, T.Q4_0), raw_dtype=T.Q4_0)
  w.add_tensor("scalar3d", np.arange(24, dtype=np.float32).reshape(2, 3, 4))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

  split = HERE / "split"
  split.mkdir(exist_ok=True)
  w = gguf.GGUFWriter(split / "tiny.gguf", "testarch", split_max_tensors=1)
  w.add_uint32("testarch.embedding_length", 8)
  for i in range(3): w.add_tensor(f"t{i}", np.full((2, 8), i, dtype=np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def models(d):
  """models.json: per real model file its architecture and tensor count, and for the first tensor of each ggml
  type, the dequantized values of the first 64 and last 64 columns of its first and last rows."""
  out = {}
  for fn in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"):
    r = gguf.GGUFReader(pathlib.Path(d) / fn)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    seen, checks = set(), []
    for t in r.tensors:
      if t.tensor_type in seen: continue
      seen.add(t.tensor_type)
      y = dequantize(t.data, t.tensor_type).astype(np.float32)
      y = y.reshape(-1, y.shape[-1])
      for row in sorted({0, y.shape[0] - 1}):
        for c0 in sorted({0, max(y.shape[1] - 64, 0)}):
          checks.append({"tensor": t.name, "type": t.tensor_type.name, "shape": [int(s) for s in reversed(t.shape)],
                         "row": int(row), "col": int(c0), "values": " ".join(str(v) for v in y[row, c0:c0 + 64])})
    out[fn] = {"architecture": arch, "tensor_count": len(r.tensors), "checks": checks}
  (VEC / "models.json").write_text(json.dumps(out, indent=1))

if __name__ == "__main__":
  vectors()
  small_files()
  if "--models" in sys.argv: models(sys.argv[sys.argv.index("--models") + 1])
