"""Sharded tensors from Python (tinygrad's `Tensor.shard`, `shard_`, `shard_like`, a tuple `device`), on two CPU
device instances, as tinygrad's test/test_multitensor.py uses them. Expected values are worked out by hand."""
import numpy as np
from tinygrad_rs import Tensor

DEVS = ("CPU", "CPU:1")
X = np.arange(12, dtype=np.float32).reshape(4, 3)

def test_a_sharded_tensor_names_its_devices_and_reduces_over_them():
  x = Tensor(X).shard(DEVS, axis=0)
  assert x.device == DEVS and x.shape == (4, 3)
  np.testing.assert_equal(x.sum(0).numpy(), [18, 22, 26])
  np.testing.assert_equal(x.sum(1).numpy(), [3, 12, 21, 30])
  np.testing.assert_equal((x * 2).to("CPU:1").numpy(), X * 2)
  assert (x * 2).to("CPU:1").device == "CPU:1"

def test_gradients_flow_through_shards_to_the_unsharded_tensor():
  w = Tensor(np.arange(6, dtype=np.float32).reshape(3, 2), requires_grad=True)
  x = Tensor(X).shard(DEVS, axis=0)
  (x @ w.shard(DEVS)).sum().backward()
  # d/dw sum(x @ w) = x^T @ ones: each row of w gets its column sum of x
  np.testing.assert_equal(w.grad.numpy(), np.repeat(X.sum(0)[:, None], 2, axis=1))

def test_shard_in_place_shard_like_and_slice_assign():
  t = Tensor(X).contiguous().realize()
  assert t.shard_(DEVS, axis=0) is t
  assert t.device == DEVS
  like = Tensor.ones(4, 3).shard_like(t * 2)
  assert like.device == DEVS
  np.testing.assert_equal((like + t).numpy(), X + 1)
  t.realize()
  t[1:3] = -1
  want = X.copy()
  want[1:3] = -1
  np.testing.assert_equal(t.numpy(), want)
