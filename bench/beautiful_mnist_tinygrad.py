"""tinygrad 0.14's examples/beautiful_mnist.py recipe, timed, on the local MNIST files (no download).

Run (from the repository):
  DEV=CPU $(python3 bench/bench_python.py) bench/beautiful_mnist_tinygrad.py

Env: STEPS (default 70), BS (default 512), TINYGRAD_DATA_DIR (default ../shared/datasets beside the repository; reads <dir>/mnist/*.gz).
Same model, Adam, JIT'd train step (Tensor.randint sampling, uint8 pixels fed unnormalized, loss.realize(*opt.schedule_step()))
and test accuracy every 10 steps as upstream. tinygrad 0.14 has no Tensor.train(); training mode is Context(TRAINING=1).
Prints one JSON line; steady_ms_per_step is the mean of train steps 3.. (test-accuracy evaluation excluded).
"""
import time
T0 = time.perf_counter()
import gzip, json, os
from tinygrad import Tensor, TinyJit, nn, GlobalCounters
from tinygrad.helpers import getenv, Context

class Model:
  def __init__(self):
    self.layers = [
      nn.Conv2d(1, 32, 5), Tensor.relu,
      nn.Conv2d(32, 32, 5), Tensor.relu,
      nn.BatchNorm(32), Tensor.max_pool2d,
      nn.Conv2d(32, 64, 3), Tensor.relu,
      nn.Conv2d(64, 64, 3), Tensor.relu,
      nn.BatchNorm(64), Tensor.max_pool2d,
      lambda x: x.flatten(1), nn.Linear(576, 10)]

  def __call__(self, x:Tensor) -> Tensor: return x.sequential(self.layers)

def mnist():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  d = os.path.join(os.getenv("TINYGRAD_DATA_DIR", os.path.join(os.path.dirname(root), "shared", "datasets")), "mnist")
  def load(f, skip): return Tensor(gzip.open(os.path.join(d, f)).read()[skip:])  # uint8, like tinygrad's nn.datasets.mnist
  return (load("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28), load("train-labels-idx1-ubyte.gz", 8),
          load("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28), load("t10k-labels-idx1-ubyte.gz", 8))

if __name__ == "__main__":
  STEPS, BS = getenv("STEPS", 70), getenv("BS", 512)
  X_train, Y_train, X_test, Y_test = mnist()

  model = Model()
  opt = nn.optim.Adam(nn.state.get_parameters(model))

  @TinyJit
  @Context(TRAINING=1)
  def train_step() -> Tensor:
    opt.zero_grad()
    samples = Tensor.randint(BS, high=X_train.shape[0])
    loss = model(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]).backward()
    return loss.realize(*opt.schedule_step())

  @TinyJit
  def get_test_acc() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).mean()*100

  test_acc, times = float('nan'), []
  for i in range(STEPS):
    GlobalCounters.reset()
    st = time.perf_counter()
    loss = train_step().item()
    times.append(time.perf_counter() - st)
    if i%10 == 9: test_acc = get_test_acc().item()
    print(f"step {i+1:3d}  loss: {loss:6.2f}  test_accuracy: {test_acc:5.2f}%  {times[-1]*1000:8.1f} ms", flush=True)

  steady = times[2:]
  print(json.dumps({"impl": "tinygrad 0.14.0", "steps": STEPS, "bs": BS, "wall_s": round(time.perf_counter() - T0, 3),
                    "first_step_s": round(times[0], 3), "second_step_s": round(times[1], 3) if len(times) > 1 else None,
                    "steady_ms_per_step": round(sum(steady) / len(steady) * 1000, 2) if steady else None,
                    "test_accuracy": test_acc}))
