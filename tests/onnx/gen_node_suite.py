"""Writes onnx's backend node suite (1,884 cases in onnx 1.23.2) in onnx's standard test layout, with onnx's own
case generator and writer (`onnx.backend.test.cmd_tools.generate_data`, pointed at the node cases: the wheel ships
no node data and the tool writes only the model cases).

  $(python3 bench/bench_python.py onnx==1.23.2 ml_dtypes==0.6.0) tests/onnx/gen_node_suite.py [OUT]
  cargo run --release --example onnx_test -- OUT/node

OUT defaults to $XDG_CACHE_HOME (or ~/.cache)/tinygrad/onnx-suite. Each case is OUT/node/<name>/model.onnx with
test_data_set_N/{input,output}_M.pb. The "light" models the wheel ships (weights as ConstantOfShape nodes, with their
expected outputs for inputs arange(n)/n) are copied to OUT/light.
"""
import argparse, glob, os, shutil, sys, warnings
import ml_dtypes, onnx
import numpy as np
from onnx.backend.test import cmd_tools
from onnx.backend.test.case import node

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad", "onnx-suite")
# ml_dtypes 0.7 casts out-of-range floats to int4/int2 as 0 where onnx 1.23.2's releases wrapped them: 20 Cast and
# CastLike cases would expect other outputs than the suite this project is held to
assert tuple(map(int, ml_dtypes.__version__.split(".")[:2])) < (0, 7), f"ml_dtypes {ml_dtypes.__version__}: install ml_dtypes==0.6.0 (see above)"
warnings.simplefilter("ignore")  # the generators divide by zero on purpose (inf and nan cases)
np.random.seed(0)  # the cases draw their data at collection: the same suite on every machine
cmd_tools.model_test.collect_testcases = lambda: node.collect_testcases(None)
cmd_tools.generate_data(argparse.Namespace(output=out))
print(f"{len(os.listdir(os.path.join(out, 'node')))} node cases in {os.path.join(out, 'node')}")
light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
os.makedirs(os.path.join(out, "light"), exist_ok=True)
for f in glob.glob(os.path.join(light, "light_*")): shutil.copy(f, os.path.join(out, "light"))
print(f"{len(os.listdir(os.path.join(out, 'light')))} light model files in {os.path.join(out, 'light')}")
