"""tinygrad 0.14's examples/beautiful_mnist.py recipe in PyTorch (eager, CPU), timed, on the local MNIST files: the
anchor for our replayed train step (issue 32).

Run (from the repository; PyTorch from the Python-bindings venv, tests/python_suite.rs):
  ~/.cache/tinygrad/py-venv/bin/python bench/beautiful_mnist_torch.py
  cargo run --release --example beautiful_mnist     # ours, same STEPS and BS: "replayed steps N ms"

Env: STEPS (default 70), BS (default 512), THREADS (default: the machine's cores), TINYGRAD_DATA_DIR (default
../shared/datasets beside the repository; reads <dir>/mnist/*.gz).
Same model (conv 5x5 32, conv 5x5 32, BatchNorm, maxpool, conv 3x3 64, conv 3x3 64, BatchNorm, maxpool, linear 576->10),
Adam (lr 0.001), batches of BS rows drawn at random from the training set, uint8 pixels fed unnormalized, test accuracy
every 10 steps. Prints one JSON line; steady_ms_per_step is the mean of train steps 3.. (evaluation excluded), as
bench/beautiful_mnist_tinygrad.py's.
"""
import gzip, json, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

def mnist():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  d = os.path.join(os.getenv("TINYGRAD_DATA_DIR", os.path.join(os.path.dirname(root), "shared", "datasets")), "mnist")
  def load(f, skip): return torch.from_numpy(np.frombuffer(gzip.open(os.path.join(d, f)).read()[skip:], dtype=np.uint8).copy())
  return (load("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28), load("train-labels-idx1-ubyte.gz", 8).long(),
          load("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28), load("t10k-labels-idx1-ubyte.gz", 8).long())

class Model(nn.Module):
  def __init__(self):
    super().__init__()
    self.c1, self.c2, self.b1 = nn.Conv2d(1, 32, 5), nn.Conv2d(32, 32, 5), nn.BatchNorm2d(32)
    self.c3, self.c4, self.b2 = nn.Conv2d(32, 64, 3), nn.Conv2d(64, 64, 3), nn.BatchNorm2d(64)
    self.l = nn.Linear(576, 10)
  def forward(self, x):
    x = F.max_pool2d(self.b1(F.relu(self.c2(F.relu(self.c1(x))))), 2)
    x = F.max_pool2d(self.b2(F.relu(self.c4(F.relu(self.c3(x))))), 2)
    return self.l(x.flatten(1))

if __name__ == "__main__":
  steps, bs = int(os.getenv("STEPS", 70)), int(os.getenv("BS", 512))
  torch.set_num_threads(int(os.getenv("THREADS", os.cpu_count())))
  torch.manual_seed(0)
  x_train, y_train, x_test, y_test = mnist()
  model = Model()
  opt = torch.optim.Adam(model.parameters(), lr=0.001)
  test_acc, times = float("nan"), []
  for i in range(steps):
    st = time.perf_counter()
    model.train()
    samples = torch.randint(0, x_train.shape[0], (bs,))
    opt.zero_grad()
    loss = F.cross_entropy(model(x_train[samples].float()), y_train[samples])
    loss.backward()
    opt.step()
    loss = loss.item()
    times.append(time.perf_counter() - st)
    if i % 10 == 9:
      model.eval()
      with torch.no_grad(): test_acc = (model(x_test.float()).argmax(1) == y_test).float().mean().item() * 100
  train = times[2:]
  print(json.dumps({"impl": "pytorch " + torch.__version__, "threads": torch.get_num_threads(), "steps": steps, "bs": bs,
                    "loss": round(loss, 3), "test_acc": round(test_acc, 2), "steady_ms_per_step": round(sum(train) / len(train) * 1e3, 1)}))
