"""The Python interpreter the benchmarks run tinygrad, numpy and llama.cpp in: $PYTHON when set, else a venv under the
cache ($XDG_CACHE_HOME or ~/.cache, then tinygrad/bench-venv), made on first use with the pinned packages.

  python3 bench/bench_python.py                 # prints the interpreter's path, making the venv (tinygrad, numpy) if missing
  python3 bench/bench_python.py llama-cpp-python  # also installs these packages into it (llama.cpp builds for ~13 minutes)

As a module: `bench_python.python(*extra)` returns the path. Nothing here names a machine's own directories.
"""
import os, subprocess, sys

PINNED = ["tinygrad==0.14.0", "numpy"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the shared data beside the repository (../shared/datasets), where the tests read MNIST too
DATA_DIR = os.environ.get("TINYGRAD_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "datasets"))

def python(*extra):
  """$PYTHON, else the cache's bench venv (created with PINNED, plus `extra` packages, when missing)."""
  if os.environ.get("PYTHON"): return os.environ["PYTHON"]
  home = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad", "bench-venv")
  py = os.path.join(home, "bin", "python")
  if not os.path.exists(py): subprocess.run([sys.executable, "-m", "venv", home], check=True)
  missing = [p for p in PINNED + list(extra) if subprocess.run([py, "-m", "pip", "show", "-q", p.split("=")[0]], capture_output=True).returncode]
  if missing: subprocess.run([py, "-m", "pip", "install", "-q", *missing], check=True, stdout=sys.stderr)
  return py

if __name__ == "__main__": print(python(*sys.argv[1:]))
