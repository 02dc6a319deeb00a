//! Sharded tensors (tinygrad `Tensor.shard`, `shard_`, `shard_like`): a tensor split over several devices, held as a
//! MULTI node over its per-device shards. Ops build on it as on any tensor; realize lowers the graph per device
//! (`schedule::multi`: shard by shard, allreduces, copies).

use super::Tensor;
use crate::runtime::canonicalize_device;
use crate::schedule::multi::multi_axis;
use crate::uop::{Arg, Ops, UOp};

impl Tensor {
    /// This tensor split over `devices` (tinygrad `shard`): along `axis` in equal blocks, block `j` on
    /// `devices[j]`, or (`None`) a whole copy on each. Each op on it then runs on every device on its shard; a
    /// reduction over `axis` is an allreduce (`RING` picks naive or ring), and [`Tensor::to`] one device gathers it.
    /// Gradients flow back to the unsharded tensor.
    ///
    /// # Panics
    /// If `devices` is empty, names a device twice or one this build does not have, `axis` is out of range, or the
    /// axis does not split into `devices.len()` equal blocks.
    pub fn shard(&self, devices: &[&str], axis: Option<i64>) -> Tensor {
        let devs: Vec<String> = devices.iter().map(|d| canonicalize_device(d)).collect();
        assert!(
            !devs.is_empty() && devs.iter().enumerate().all(|(i, d)| !devs[..i].contains(d)),
            "shard: devices {devs:?} must be distinct and not empty"
        );
        let shape = self.shape();
        let axis = axis.map(|a| super::ops::norm_axis(a, shape.len(), "shard"));
        if let Some(a) = axis {
            assert!(
                shape[a].is_multiple_of(devs.len()),
                "shard: axis {a} of shape {shape:?} does not split into {} equal blocks",
                devs.len()
            );
        }
        // (a sharded tensor is gathered on the first device, then split again)
        let whole = if self.is_sharded() { self.to(&devs[0]) } else { self.clone() };
        let parts: Vec<UOp> = (0..devs.len()).map(|j| whole.shard_part(j, &devs, axis).uop()).collect();
        Tensor::from_uop(UOp::new(Ops::MULTI, self.dtype(), parts, Arg::Int(axis.map_or(-1, |a| a as i64))))
    }
    /// Shards this tensor in place (tinygrad `shard_`): handles to it see the sharded tensor.
    ///
    /// # Panics
    /// As [`Tensor::shard`].
    pub fn shard_(&self, devices: &[&str], axis: Option<i64>) -> &Tensor {
        self.set_uop(self.shard(devices, axis).uop());
        self
    }
    /// This tensor sharded as `y` is (tinygrad `shard_like`): over its devices on its axis when `y` is sharded (the
    /// axis its graph has once lowered per device), else moved to `y`'s device.
    pub fn shard_like(&self, y: &Tensor) -> Tensor {
        let u = y.uop();
        let u = if u.op != Ops::MULTI && y.is_sharded() {
            crate::schedule::multi::lower(&[u], &crate::runtime::default_device()).remove(0)
        } else {
            u
        };
        match u.op {
            Ops::MULTI => {
                let devs: Vec<String> = u.src.iter().map(|s| Tensor::from_uop(s.clone()).device()).collect();
                self.shard(&devs.iter().map(String::as_str).collect::<Vec<_>>(), multi_axis(&u).map(|a| a as i64))
            }
            _ => self.to(&y.device()),
        }
    }
    /// The element-wise sum of this tensor over the processes of this thread's process group
    /// ([`crate::engine::set_collective`]: MPI ranks with `nn::mpi`), the same on every process; itself without a group.
    /// Realized as a schedule item (a TinyJit replays it); every process must realize the same sums in the same order.
    /// Its gradient is the sum over the processes of the output's gradient.
    pub fn allreduce_processes(&self) -> Tensor {
        let u = self.uop();
        Tensor::from_uop(UOp::new(Ops::ALLREDUCE, u.dtype, [u], Arg::Op(Ops::ADD)))
    }
    /// Whether this tensor's graph reads a sharded tensor (its [`Tensor::device`] lists several).
    pub fn is_sharded(&self) -> bool {
        // (no MULTI made yet: nothing to walk the graph for)
        crate::uop::multi_made() && self.device().contains(',')
    }
    /// Block `j` of this (unsharded) tensor along `axis` (the whole of it for `None`), on `devs[j]`: shard `j` of
    /// its [`Tensor::shard`] over `devs`. Also what a sharded tensor's shard `j` is assigned and its gradient.
    pub(super) fn shard_part(&self, j: usize, devs: &[String], axis: Option<usize>) -> Tensor {
        let t = match axis {
            Some(a) => {
                let shape = self.shape();
                let s = shape[a] / devs.len();
                self.shrink(&shape.iter().enumerate().map(|(i, &d)| if i == a { (j * s, (j + 1) * s) } else { (0, d) }).collect::<Vec<_>>())
            }
            None => self.clone(),
        };
        t.to(&devs[j])
    }
    /// The devices of a sharded tensor's MULTI root, and its axis.
    pub(super) fn multi_devices(u: &UOp) -> (Vec<String>, Option<usize>) {
        (u.src.iter().map(|s| Tensor::from_uop(s.clone()).device()).collect(), multi_axis(u))
    }
}
