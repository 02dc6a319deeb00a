"""Compare tinygrad-rs's kernel figures (examples/bench.rs) with numpy, tinygrad 0.14 (DEV=CPU) and candle.

Run from the repository (any python3; numpy and tinygrad run in subprocesses of bench/bench_python.py's interpreter):
  python3 bench/compare.py                                # everything, then a markdown table
  python3 bench/compare.py --filter matmul_256 --runs 3   # only figures whose name contains the filter
  python3 bench/compare.py --skip tinygrad,candle         # leave out some of: ours, numpy, tinygrad, candle
  python3 bench/compare.py --rounds 3                     # each runner 3 times, alternating; medians (the machine
                                                          # speeds up and slows down by half between minutes)
Env: PYTHON (the interpreter with tinygrad and numpy; default: bench/bench_python.py makes one under the cache), CARGO (the cargo command, default `cargo`; e.g.
CARGO="flock /tmp/cargo.lock nice -n 10 cargo" to serialize builds). candle's binary (bench/candle) is built when missing.

Every runner prints one JSON line per figure, {"name", "value", "unit", "runs"}: the median of N warm runs after one
warm-up. numpy runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its environment; its conv2d is im2col +
matmul. `python bench/compare.py --worker numpy|tinygrad` runs one Python runner alone.
"""
import argparse, json, os, shlex, statistics, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402  (bench/bench_python.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ["ours", "numpy", "tinygrad", "candle"]
CONV_FLOPS = 2 * 32 * 64 * 56 * 56 * 64 * 9

def figures():
  """(name, unit, work, default runs, make) for each figure; make(lib) returns the thunk timed by one run."""
  mm = lambda m, k, n, runs: ("GFLOP/s", 2 * m * k * n, runs, lambda L: L.matmul(L.rand(m, k), L.rand(k, n)))
  figs = {f"matmul_{n}": mm(n, n, n, 5) for n in (256, 512, 1000, 1024)}
  figs.update(matmul_2048=mm(2048, 2048, 2048, 3), matmul_odd=mm(509, 1021, 257, 5))
  # tall-skinny (8192x64 @ 64x64, 64x8192 @ 8192x64) and a matrix-vector product
  figs.update(matmul_tall=mm(8192, 64, 64, 5), matmul_wide_k=mm(64, 8192, 64, 5), matvec_4096=mm(1, 4096, 4096, 5))
  n = 1 << 24
  figs["mul_add_16M"] = ("GB/s", 12 * n, 5, lambda L: L.mul_add(L.rand(n), L.rand(n)))
  figs["sum_16M"] = ("GB/s", 4 * n, 5, lambda L: L.sum(L.rand(n)))
  figs["softmax_4096"] = ("ms", 0, 5, lambda L: L.softmax(L.rand(4096, 4096)))
  figs["conv2d"] = ("GFLOP/s", CONV_FLOPS, 3, lambda L: L.conv2d(L.rand(32, 64, 56, 56), L.rand(64, 64, 3, 3)))
  return figs

class Numpy:
  """numpy's workloads: eager, so a thunk computes the result."""
  def __init__(self):
    import numpy as np
    self.np, self.rng = np, np.random.default_rng(0)
  def rand(self, *shape): return self.rng.uniform(-1, 1, shape).astype(self.np.float32)
  def matmul(self, a, b): return lambda: a @ b
  def mul_add(self, a, b): return lambda: a * b + 1
  def sum(self, a): return lambda: a.sum()
  def softmax(self, x):
    def f():
      e = self.np.exp(x - x.max(-1, keepdims=True))
      return e / e.sum(-1, keepdims=True)
    return f
  def conv2d(self, x, w):
    """im2col of the padded input, one (N*H*W, C*9) @ (C*9, O) matmul, back to contiguous NCHW."""
    np = self.np
    def f():
      p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
      cols = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))  # N, C, H, W, 3, 3
      cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(-1, w[0].size)
      out = cols @ w.reshape(w.shape[0], -1).T
      return np.ascontiguousarray(out.reshape(x.shape[0], x.shape[2], x.shape[3], -1).transpose(0, 3, 1, 2))
    return f

class Tinygrad:
  """tinygrad's workloads: a thunk builds the lazy expression from realized inputs, realizes it and synchronizes."""
  def __init__(self):
    from tinygrad import Tensor, Device
    self.T, self.dev = Tensor, Device[Device.DEFAULT]
    Tensor.manual_seed(0)
  def rand(self, *shape): return (self.T.rand(*shape) * 2 - 1).realize()
  def run(self, f):
    def g():
      f().realize()
      self.dev.synchronize()
    return g
  def matmul(self, a, b): return self.run(lambda: a @ b)
  def mul_add(self, a, b): return self.run(lambda: a * b + 1)
  def sum(self, a): return self.run(lambda: a.sum())
  def softmax(self, x): return self.run(lambda: x.softmax(-1))
  def conv2d(self, x, w): return self.run(lambda: x.conv2d(w, padding=1))

def worker(impl):
  """Prints each figure's JSON line for one Python implementation (FILTER and RUNS from the environment)."""
  L = Numpy() if impl == "numpy" else Tinygrad()
  for name, (unit, work, runs, make) in figures().items():
    if os.environ.get("FILTER", "") not in name: continue
    runs, f = int(os.environ.get("RUNS") or runs), make(L)
    f()
    ts = []
    for _ in range(runs):
      st = time.perf_counter()
      f()
      ts.append(time.perf_counter() - st)
    t = statistics.median(ts)
    print(json.dumps({"name": name, "value": round(t * 1e3 if unit == "ms" else work / t / 1e9, 3), "unit": unit, "runs": runs}),
          flush=True)

def run(impl, cmd, env):
  """Runs one implementation's command and returns {name: figure} parsed from its JSON lines."""
  print(f"[compare] {impl}: {' '.join(cmd)}", file=sys.stderr, flush=True)
  st = time.perf_counter()
  p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  figs = {}
  for line in p.stdout.splitlines():
    if line.startswith("{"):
      try: d = json.loads(line)
      except json.JSONDecodeError: continue
      if "name" in d and "value" in d: figs[d["name"]] = d
  print(f"[compare] {impl}: {len(figs)} figures in {time.perf_counter() - st:.1f} s" +
        (f", exit {p.returncode}:\n{p.stderr[-2000:]}" if p.returncode else ""), file=sys.stderr, flush=True)
  return figs

def commands(args):
  """impl -> (command, environment) for the implementations not skipped."""
  base = {**os.environ, "FILTER": args.filter or ""}
  if args.runs: base["RUNS"] = str(args.runs)
  py, cargo = None, shlex.split(os.environ.get("CARGO", "cargo"))
  if not {"numpy", "tinygrad"} <= set(args.skip): py = bench_python.python()
  me = os.path.abspath(__file__)
  np_env = {k: v for k, v in base.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
  cmds = {"ours": (cargo + ["run", "-q", "--release", "--example", "bench"], base),
          "numpy": ([py, me, "--worker", "numpy"], np_env),
          "tinygrad": ([py, me, "--worker", "tinygrad"], {**base, "DEV": "CPU"}),
          "candle": ([os.path.join(ROOT, "bench/candle/target/release/candle-bench")], base)}
  return {k: v for k, v in cmds.items() if k not in args.skip}

def cpu_busy(secs=1.0):
  """The fraction of CPU time not idle over `secs` (from /proc/stat; 0 where it is missing)."""
  def sample():
    with open("/proc/stat") as f: v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4]
  try:
    (t0, i0), _, (t1, i1) = sample(), time.sleep(secs), sample()
  except OSError: return 0.0
  return 1 - (i1 - i0) / max(t1 - t0, 1)

def median_figures(runs):
  """{name: figure} with each figure's value the median over `runs` (a list of {name: figure})."""
  names = dict.fromkeys(n for r in runs for n in r)
  return {n: {**next(r[n] for r in runs if n in r), "value": statistics.median(r[n]["value"] for r in runs if n in r)} for n in names}

def fmt(d): return "—" if d is None else f"{d['value']:.4g} {d['unit']}"

def ratio(ours, other):
  """ours ÷ other: a speed ratio for throughput figures, a time ratio (marked) for ms figures."""
  if ours is None or other is None or not other["value"]: return "—"
  r = ours["value"] / other["value"]
  return f"{r:.2f} (time)" if ours["unit"] == "ms" else f"{r:.2f}"

def table(results):
  """The markdown table: one row per figure, values and ours ÷ theirs ratios."""
  others = [i for i in IMPLS if i != "ours"]
  names = list(dict.fromkeys(n for i in IMPLS for n in results.get(i, {})))
  rows = ["| workload | " + " | ".join(IMPLS) + " | " + " | ".join(f"ours/{o}" for o in others) + " |",
          "|---" * (len(IMPLS) + len(others) + 1) + "|"]
  for n in names:
    get = lambda i: results.get(i, {}).get(n)
    rows.append(f"| {n} | " + " | ".join(fmt(get(i)) for i in IMPLS) + " | " + " | ".join(ratio(get("ours"), get(o)) for o in others) + " |")
  rows.append("\nRatios are ours ÷ theirs: for GFLOP/s and GB/s rows >1 means ours is faster; "
              "for ms rows (marked `time`) <1 means ours is faster.")
  return "\n".join(rows)

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--skip", type=lambda s: [x for x in s.split(",") if x], default=[], help="comma list of " + ",".join(IMPLS))
  ap.add_argument("--filter", default="", help="run only figures whose name contains this")
  ap.add_argument("--runs", type=int, default=0, help="timed runs per figure (default per figure: 5, or 3 for the big ones)")
  ap.add_argument("--rounds", type=int, default=1, help="run the implementations this many times in turn; report medians")
  ap.add_argument("--worker", choices=["numpy", "tinygrad"], help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker)
  if bad := set(args.skip) - set(IMPLS): ap.error(f"unknown in --skip: {', '.join(sorted(bad))}")
  cmds = commands(args)
  if (busy := cpu_busy()) > 0.2:
    print(f"[compare] warning: CPU {busy:.0%} busy before starting; other work skews these timings", file=sys.stderr)
  candle = os.path.join(ROOT, "bench/candle/target/release/candle-bench")
  if "candle" in cmds and not os.path.exists(candle):
    cargo = shlex.split(os.environ.get("CARGO", "cargo"))
    subprocess.run(cargo + ["build", "--release", "--manifest-path", os.path.join(ROOT, "bench/candle/Cargo.toml")], cwd=ROOT, check=True)
  rounds = [{impl: run(impl, cmd, env) for impl, (cmd, env) in cmds.items()} for _ in range(max(args.rounds, 1))]
  print(table({impl: median_figures([r[impl] for r in rounds]) for impl in cmds}))

if __name__ == "__main__":
  main()
