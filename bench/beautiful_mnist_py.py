"""tinygrad's examples/beautiful_mnist.py (../shared/external/tinygrad/, 0.14's API), run unchanged but for its imports,
under tinygrad 0.14 and under tinygrad_rs in one sitting: per-step times side by side.

  python3 bench/beautiful_mnist_py.py [--steps 70] [--ours PYTHON]

tinygrad runs in the bench venv (bench/bench_python.py; its CPU device needs clang) with its MNIST download cache
filled from ../shared/datasets; tinygrad_rs in `--ours` (default $TINYGRAD_PY_VENV/bin/python, with the package
installed). Each run's steps are timed by wrapping the script's `trange`; prints one JSON line per implementation
(median step and steady mean of steps 3.., excluding the every-10th steps that also evaluate) and their ratio.
"""
import argparse, gzip, json, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python

SCRIPT = os.path.join(os.path.dirname(bench_python.ROOT), "shared", "external", "tinygrad", "beautiful_mnist.py")
# runs the script with `trange` timed; `module` is tinygrad or tinygrad_rs
DRIVER = r'''
import sys, time, json, statistics
module, path = sys.argv[1], sys.argv[2]
helpers = __import__(module + ".helpers", fromlist=["trange"])
stamps, orig = [], helpers.trange
def trange(n, **kw):
  t = orig(n, **kw)
  class Timed:
    def __iter__(self):
      for i in t:
        stamps.append(time.perf_counter()); yield i
      stamps.append(time.perf_counter())
    def __getattr__(self, k): return getattr(t, k)
  return Timed()
helpers.trange = trange
src = open(path).read().replace("from tinygrad", "from " + module)
t0 = time.perf_counter()
exec(compile(src, path, "exec"), {"__name__": "__main__"})
steps = [b - a for a, b in zip(stamps, stamps[1:])]
train = [s for i, s in enumerate(steps) if i >= 2 and i % 10 != 9]
print("RESULT " + json.dumps({"impl": module, "steps": len(steps), "wall_s": round(time.perf_counter() - t0, 2),
  "first_step_s": round(steps[0], 3), "median_ms": round(statistics.median(steps) * 1e3, 1),
  "steady_ms_per_step": round(sum(train) / len(train) * 1e3, 1)}))
'''

def fill_tinygrad_cache(py: str):
  """Writes the four MNIST files where tinygrad's `fetch` looks for its gunzipped downloads."""
  code = ("import hashlib, gzip, sys, os; from tinygrad.helpers import _ensure_downloads_dir\n"
          "for f in ['train-images-idx3-ubyte.gz','train-labels-idx1-ubyte.gz','t10k-images-idx3-ubyte.gz','t10k-labels-idx1-ubyte.gz']:\n"
          "  p = _ensure_downloads_dir() / (hashlib.md5(('https://storage.googleapis.com/cvdf-datasets/mnist/' + f).encode()).hexdigest() + '.gunzip')\n"
          "  p.parent.mkdir(parents=True, exist_ok=True)\n"
          "  p.exists() or p.write_bytes(gzip.open(os.path.join(sys.argv[1], 'mnist', f)).read())\n")
  subprocess.run([py, "-c", code, bench_python.DATA_DIR], check=True)

def run(py: str, module: str, steps: int) -> dict:
  env = {**os.environ, "STEPS": str(steps), "TINYGRAD_DATA_DIR": bench_python.DATA_DIR}
  with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([py, "-c", DRIVER, module, SCRIPT], env=env, cwd=d, capture_output=True, text=True)
  line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
  if line is None: sys.exit(f"{module} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
  return json.loads(line[7:])

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--steps", type=int, default=70)
  ap.add_argument("--ours", default=os.path.join(os.environ.get("TINYGRAD_PY_VENV", os.path.expanduser("~/.cache/tinygrad/py-venv")), "bin", "python"))
  args = ap.parse_args()
  tg = bench_python.python()
  fill_tinygrad_cache(tg)
  rows = [run(args.ours, "tinygrad_rs", args.steps), run(tg, "tinygrad", args.steps)]
  for r in rows: print(json.dumps(r))
  print(json.dumps({"ours_over_tinygrad_steady": round(rows[0]["steady_ms_per_step"] / rows[1]["steady_ms_per_step"], 3)}))
