"""Benchmark tinygrad's `graph_rewrite(sink, symbolic)` on a deterministic random index-expression graph.

The Rust benchmark builds the SAME graph with the same generator, so keep the two in sync.

Generator (seed s0, default 12345; all arithmetic on unsigned 64-bit):
  s = s0
  r(m): s = (s * 6364136223846793005 + 1442695040888963407) mod 2**64; return (s >> 33) % m
  variables: a = variable("a", 0, 15), b = variable("b", 0, 31), c = variable("c", -16, 63)
  pool = [a, b, c]
  repeat n times:
    p = pool[r(len(pool))]; q = pool[r(len(pool))]; k = r(7)+1; m = [4,16,64,256][r(4)]; t = r(8)   # in this order
    e = [p+q, p*k+q, (p*k+q)//k, (p+k)%k, (p//k)*k + p%k, (p%m)//k, (p*m + q%m)%m, p+(-k)][t]
    pool.append(e % 4096)
  sink = SINK(*pool[3:])

Ops that tinygrad 0.14.0 builds (checked by printing small graphs). All int nodes have dtype weakint, every Python
int becomes CONST(weakint, arg=int, src=()), nothing is folded or reordered at construction time (x*1, x+0, x+x all
stay as written, operand order is as written), and every node is hash-consed (identical (op,dtype,src,arg,tag) is
the same object, so toposort counts each unique node once):
  variable(name, lo, hi) = BUFFER(weakint, src=(STACK(void, src=(), arg=None),),
                                  arg=ParamArg(-1, weakint, vmin_vmax=(lo,hi), multiple_of=1, name=name, addrspace=ALU))
                           -> 2 nodes; the empty STACK is shared, so a,b,c add 4 nodes in total
  p + q          = ADD(p, q)
  p*k            = MUL(p, CONST k)
  x // k, x % k  = FLOORDIV(x, CONST k), FLOORMOD(x, CONST k)
  p + (-k)       = ADD(p, CONST -k)        (note: p - k would instead be ADD(p, MUL(CONST k, CONST -1)))
  so e.g. t=4 is ADD(MUL(FLOORDIV(p, K), K), FLOORMOD(p, K)) and each pool entry is FLOORMOD(e, CONST 4096).
  The sink is SINK(void, src=pool[3:], arg=None); duplicates in src are kept.

Timing: per rep, build the graph (untimed), clear tinygrad's global caches (fold_divmod_general), drop the previous
graph + gc.collect() so hash-consed nodes and their cached vmin/vmax are fresh, then time one graph_rewrite.
One untimed warm-up rewrite on a small graph first compiles the pattern matchers.

Run:  $(python3 bench/bench_python.py) bench/symbolic_rewrite.py [--n N] [--reps R] [--seed S]
Default n=30000 gives 99,496 input nodes. It is SLOW: ~150 s per rep (~13 min for 5 reps) on this machine. About 96% of
the time is in divandmod.fold_divmod_general, mostly the fold_divmod_congruence loop (itertools.product over remainder
choices), which is exponential in the number of tied terms for small moduli such as %2 and %4. A few long sums take
5-12 s each. For a quick check use --n 2000 --reps 3 (~1.2 s per rep).
"""
import argparse, gc, importlib.metadata, json, statistics, sys, time
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.uop.symbolic import symbolic
from tinygrad.uop import divandmod

MASK = (1 << 64) - 1

def build(n:int, seed:int) -> UOp:
  s = seed
  def r(m:int) -> int:
    nonlocal s
    s = (s * 6364136223846793005 + 1442695040888963407) & MASK
    return (s >> 33) % m
  pool = [UOp.variable("a", 0, 15), UOp.variable("b", 0, 31), UOp.variable("c", -16, 63)]
  for _ in range(n):
    p, q, k, m, t = pool[r(len(pool))], pool[r(len(pool))], r(7) + 1, [4, 16, 64, 256][r(4)], r(8)
    if t == 0: e = p + q
    elif t == 1: e = p*k + q
    elif t == 2: e = (p*k + q) // k
    elif t == 3: e = (p + k) % k
    elif t == 4: e = (p // k) * k + p % k
    elif t == 5: e = (p % m) // k
    elif t == 6: e = (p*m + q % m) % m
    else: e = p + (-k)
    pool.append(e % 4096)
  return UOp.sink(*pool[3:])

def clear_caches():
  divandmod.fold_divmod_general.cache_clear()
  gc.collect()

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--n", type=int, default=30000)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--seed", type=int, default=12345)
  args = ap.parse_args()

  graph_rewrite(build(200, args.seed), symbolic)  # warm-up: compile the UPat matchers (untimed)
  clear_caches()

  times, n_in, n_out = [], 0, 0
  for rep in range(args.reps):
    sink = build(args.n, args.seed)
    n_in = len(sink.toposort())
    clear_caches()
    t0 = time.perf_counter()
    out = graph_rewrite(sink, symbolic)
    times.append(time.perf_counter() - t0)
    n_out = len(out.toposort())
    print(f"rep {rep}: {times[-1]:.3f} s  input_nodes={n_in} output_nodes={n_out}", file=sys.stderr)
    if rep == 0:
      for i in range(5): print(f"  {sink.src[i].render(simplify=False)}  ->  {out.src[i].render(simplify=False)}", file=sys.stderr)
    del sink, out
  med = statistics.median(times)
  print(json.dumps({"impl": f"tinygrad {importlib.metadata.version('tinygrad')}", "input_nodes": n_in, "output_nodes": n_out, "median_s": med,
                    "nodes_per_s": n_in / med, "reps": args.reps}))

if __name__ == "__main__": main()
