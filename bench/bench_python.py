"""The Python interpreter the benchmarks run tinygrad, numpy and llama.cpp in: $PYTHON when set, else a venv under the
cache ($XDG_CACHE_HOME or ~/.cache, then tinygrad/bench-venv), made on first use with the pinned packages.

  python3 bench/bench_python.py                 # prints the interpreter's path, making the venv (tinygrad, numpy) if missing
  python3 bench/bench_python.py llama-cpp-python  # also installs these packages into it (llama.cpp builds for ~13 minutes)

As a module: `bench_python.python(*extra)` returns the path. Nothing here names a machine's own directories.
"""
import hashlib, os, subprocess, sys

PINNED = ["tinygrad==0.14.0", "numpy"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# packages compiled from source for the machine's CPU (llama.cpp builds with -march=native): rebuilt when the cache
# moves to a CPU with other features, where the old build would die of SIGILL
NATIVE = {"llama-cpp-python"}
# the shared data beside the repository (../shared/datasets), where the tests read MNIST too
DATA_DIR = os.environ.get("TINYGRAD_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "datasets"))

def python(*extra):
  """$PYTHON, else the cache's bench venv (created with PINNED, plus `extra` packages, when missing; those in NATIVE
  rebuilt when the CPU's features differ from the ones they were built for)."""
  if os.environ.get("PYTHON"): return os.environ["PYTHON"]
  home = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinygrad", "bench-venv")
  py = os.path.join(home, "bin", "python")
  if not os.path.exists(py): subprocess.run([sys.executable, "-m", "venv", home], check=True)
  missing = [p for p in PINNED + list(extra) if subprocess.run([py, "-m", "pip", "show", "-q", p.split("=")[0]], capture_output=True).returncode]
  if plain := [p for p in missing if p.split("=")[0] not in NATIVE]: subprocess.run([py, "-m", "pip", "install", "-q", *plain], check=True, stdout=sys.stderr)
  for p in [p for p in extra if p.split("=")[0] in NATIVE]:
    stamp, cpu = os.path.join(home, f".{p.split('=')[0]}.cpu"), cpu_features()
    if p in missing or not os.path.exists(stamp) or open(stamp).read() != cpu:
      # (never a wheel pip cached on another machine)
      print(f"building {p} for this machine's CPU", file=sys.stderr)
      again = [] if p in missing else ["--force-reinstall", "--no-deps"]
      subprocess.run([py, "-m", "pip", "install", "-q", "--no-cache-dir", *again, p], check=True, stdout=sys.stderr)
      with open(stamp, "w") as f: f.write(cpu)
  return py

def cpu_features():
  """A digest of the CPU's feature flags (Linux /proc/cpuinfo; empty elsewhere)."""
  try: flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags"))
  except (OSError, StopIteration): flags = ""
  return hashlib.sha256(flags.encode()).hexdigest()[:16]

if __name__ == "__main__": print(python(*sys.argv[1:]))
