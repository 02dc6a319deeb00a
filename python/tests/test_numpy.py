"""numpy arrays into tensors without a copy at construction, as tinygrad's `Tensor(ndarray)`: a writable array is
read at the first realize (tinygrad copies its NPY buffer then), a read-only one is the tensor's memory itself on
CPU. Expected values are worked out by hand from tinygrad 0.14's behaviour (DEV=CPU)."""
import gc
import numpy as np
from tinygrad_rs import Tensor, Device

HOST = Device.DEFAULT in ("CPU", "PYTHON")

def test_a_write_before_realize_shows_and_one_after_does_not():
  a = np.ones(4, np.float32)
  t = Tensor(a)
  a[0] = 5
  np.testing.assert_equal(t.numpy(), [5, 1, 1, 1])
  a[1] = 7
  np.testing.assert_equal(t.numpy(), [5, 1, 1, 1])
  assert not t._t.is_borrowed()

def test_a_read_only_array_is_the_memory_itself():
  a = np.arange(64, dtype=np.float32).reshape(8, 8)
  a.flags.writeable = False
  t = Tensor(a)
  np.testing.assert_equal((t * 2 + 1).numpy(), a * 2 + 1)
  assert t.realize()._t.is_borrowed() == HOST
  np.testing.assert_equal(t.numpy(), a)

def test_assign_to_a_read_only_array_moves_the_tensor_to_a_copy():
  a = np.arange(16, dtype=np.float32)
  a.flags.writeable = False
  t = Tensor(a).realize()
  t.assign(t + 1).realize()
  np.testing.assert_equal(t.numpy(), np.arange(16) + 1)
  np.testing.assert_equal(a, np.arange(16))
  s = Tensor(a)[4:8]
  s.assign(Tensor.full((4,), 9.0)).realize()
  np.testing.assert_equal(s.numpy(), [9, 9, 9, 9])

def test_the_tensor_keeps_the_array_alive():
  t = Tensor(np.arange(1 << 16, dtype=np.int32))
  gc.collect()
  assert t.sum().item() == (1 << 16) * ((1 << 16) - 1) // 2

def test_strided_arrays_are_copied_once():
  a = np.arange(24, dtype=np.float32).reshape(4, 6)
  t = Tensor(a[:, ::2])
  a[0, 0] = 100
  np.testing.assert_equal(t.numpy(), np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2])

def test_dtypes_round_trip():
  for dt in (np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64):
    a = (np.arange(-5, 6) % 3).astype(dt) if dt != np.bool_ else np.arange(11) % 2 == 0
    t = Tensor(a)
    assert t.numpy().dtype == a.dtype, dt
    np.testing.assert_equal(t.numpy(), a)

def test_bytes_and_empty_arrays():
  assert Tensor(b"\x01\x02\xff").tolist() == [1, 2, 255]
  assert Tensor(np.zeros((0, 3), np.float32)).shape == (0, 3)

def test_a_memory_mapped_file_is_read_in_place(tmp_path):
  p = tmp_path / "w.npy"
  np.save(p, np.arange(1024, dtype=np.float32))
  m = np.load(p, mmap_mode="r")
  t = Tensor(m)
  assert t.sum().item() == 1023 * 1024 // 2
  assert t._t.is_borrowed() == HOST
