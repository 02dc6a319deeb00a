"""Python-side cost of tinygrad_rs beside tinygrad 0.14, in one sitting: building a 1,000-op lazy graph, calling a
TinyJit'd step, making a tensor of a 64 MiB numpy array (alone, and summed: its copy at first use included), and a 1024x1024 matmul from Python beside the same matmul from Rust (examples/bench.rs). (tinygrad's
matmul is not shown: it finds the repeated `m1 @ m2` graph already realized and runs nothing; bench/compare.py
times its kernels.)

  python3 bench/python_overhead.py [--ours PYTHON] [--runs 21]

tinygrad runs in the bench venv (bench/bench_python.py; its CPU device needs clang), tinygrad_rs in `--ours`
(default $TINYGRAD_PY_VENV/bin/python). Each figure is the median of `--runs`. Prints one JSON line per figure with
both values and their ratio (ours over the other: below 1 is faster); tinygrad runs twice, on its default device (on a
machine with an OpenCL runtime, CL) and with DEV=CPU.
"""
import argparse, json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python

CODE = r'''
import sys, time, json, statistics
mod, runs = sys.argv[1], int(sys.argv[2])
tg = __import__(mod)
Tensor, TinyJit = tg.Tensor, tg.TinyJit
def med(f):
  f(); ts = []
  for _ in range(runs):
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
x = Tensor.ones(64).contiguous().realize()
def build():
  y = x
  for _ in range(500): y = y * 1.0001 + 0.5
  return y
@TinyJit
def step(a, b): return (a @ b).relu().sum()
a, b = Tensor.ones(64, 64).contiguous().realize(), Tensor.ones(64, 64).contiguous().realize()
for _ in range(3): step(a, b)
def jit_calls():
  for _ in range(100): step(a, b)
import numpy as np
arr = np.random.default_rng(0).random(1 << 24, dtype=np.float32)
m1, m2 = Tensor.rand(1024, 1024).realize(), Tensor.rand(1024, 1024).realize()
out = {"graph_1000_ops_ms": med(build) * 1e3, "jit_step_call_us": med(jit_calls) * 1e4,
       "numpy_64mib_tensor_us": med(lambda: Tensor(arr)) * 1e6, "numpy_64mib_tensor_sum_ms": med(lambda: Tensor(arr).sum().realize()) * 1e3,
       "matmul_1024_gflops": 2 * 1024**3 / med(lambda: (m1 @ m2).realize()) / 1e9}
print("RESULT " + json.dumps(out))
'''

def run(py: str, module: str, runs: int, **env) -> dict:
  p = subprocess.run([py, "-c", CODE, module, str(runs)], capture_output=True, text=True, env={**os.environ, **env})
  line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
  if line is None: sys.exit(f"{module} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
  return json.loads(line[7:])

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--ours", default=os.path.join(os.environ.get("TINYGRAD_PY_VENV", os.path.expanduser("~/.cache/tinygrad/py-venv")), "bin", "python"))
  ap.add_argument("--runs", type=int, default=21)
  args = ap.parse_args()
  ours, theirs = run(args.ours, "tinygrad_rs", args.runs), run(bench_python.python(), "tinygrad", args.runs)
  theirs_cpu = run(bench_python.python(), "tinygrad", args.runs, DEV="CPU")
  rust = subprocess.run(["cargo", "run", "-q", "--release", "--example", "bench"], cwd=bench_python.ROOT, capture_output=True, text=True,
                        env={**os.environ, "FILTER": "matmul_1024", "RUNS": str(args.runs)})
  rust_gf = next(json.loads(l)["value"] for l in rust.stdout.splitlines() if '"matmul_1024"' in l)
  for k in ("graph_1000_ops_ms", "jit_step_call_us", "numpy_64mib_tensor_us", "numpy_64mib_tensor_sum_ms"):
    print(json.dumps({"figure": k, "tinygrad_rs": round(ours[k], 3), "tinygrad": round(theirs[k], 3), "ours_over_tinygrad": round(ours[k] / theirs[k], 3),
                      "tinygrad_dev_cpu": round(theirs_cpu[k], 3), "ours_over_tinygrad_dev_cpu": round(ours[k] / theirs_cpu[k], 3)}))
  print(json.dumps({"figure": "matmul_1024_gflops", "python": round(ours["matmul_1024_gflops"], 1), "rust": round(rust_gf, 1),
                    "python_over_rust": round(ours["matmul_1024_gflops"] / rust_gf, 3)}))
