//! Data-parallel training across processes and machines over MPI (`--features mpi`; rsmpi over the system's MPI
//! library). In: the model's parameters and, after each `backward()`, their gradients. Out: the same parameters on
//! every rank (broadcast from rank 0) and gradients averaged over the ranks (summed in a few large buckets), so each
//! rank trains on its part of every batch and all ranks take the same steps. While a [`DataParallel`] lives, an
//! ALLREDUCE node ([`Tensor::allreduce_processes`]) sums over the ranks, which BatchNorm uses for the statistics of the
//! whole batch. A collective that waits longer than `MPI_TIMEOUT` seconds (default 300: a rank died or hangs) ends
//! the process with an error, and `mpirun` then ends the others. PyTorch's `DistributedDataParallel` is the model;
//! tinygrad has no counterpart.

use crate::dtype::{dtypes, DType};
use crate::engine::{self, Collective};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A process group of every MPI rank (`MPI_COMM_WORLD`), installed as this thread's [`Collective`] while it lives.
pub struct DataParallel {
    world: SimpleCommunicator,
    /// Milliseconds since `epoch` at which the collective in progress began (0: none), for the watchdog.
    busy: Arc<AtomicU64>,
    epoch: Instant,
    /// Finalizes MPI on drop: the last field, dropped after the communicators.
    _universe: mpi::environment::Universe,
}

/// The [`Collective`] the engine calls: a duplicate of the world communicator and the watchdog's clock.
struct Group {
    comm: SimpleCommunicator,
    busy: Arc<AtomicU64>,
    epoch: Instant,
}

/// Runs collective `f`, marked busy (since now, `epoch`'s clock) for the watchdog meanwhile.
fn watched<T>(busy: &AtomicU64, epoch: Instant, f: impl FnOnce() -> T) -> T {
    busy.store(epoch.elapsed().as_millis() as u64 + 1, Ordering::SeqCst);
    let out = f();
    busy.store(0, Ordering::SeqCst);
    out
}

/// Sums `src` (elements of `T`) over `comm`'s ranks into `dst`: MPI reads and writes the bytes in place where they
/// are aligned to `T` (a device buffer is), else element copies.
fn sum_as<T: Equivalence + Copy + Default + bytemuck::Pod>(comm: &SimpleCommunicator, src: &[u8], dst: &mut [u8]) -> Result<()> {
    match (bytemuck::try_cast_slice::<u8, T>(src), bytemuck::try_cast_slice_mut::<u8, T>(dst)) {
        (Ok(s), Ok(d)) => comm.all_reduce_into(s, d, SystemOperation::sum()),
        _ => {
            let s: Vec<T> = bytemuck::pod_collect_to_vec(src);
            let mut d = vec![T::default(); s.len()];
            comm.all_reduce_into(&s[..], &mut d[..], SystemOperation::sum());
            dst.copy_from_slice(bytemuck::cast_slice(&d));
        }
    }
    Ok(())
}

impl Collective for Group {
    fn size(&self) -> usize {
        self.comm.size() as usize
    }
    fn allreduce_sum(&self, src: &[u8], dst: &mut [u8], dtype: DType) -> Result<()> {
        watched(&self.busy, self.epoch, || match dtype {
            d if d == dtypes::FLOAT32 => sum_as::<f32>(&self.comm, src, dst),
            d if d == dtypes::FLOAT64 => sum_as::<f64>(&self.comm, src, dst),
            d if d == dtypes::INT32 => sum_as::<i32>(&self.comm, src, dst),
            d if d == dtypes::INT64 => sum_as::<i64>(&self.comm, src, dst),
            d => {
                Err(Error::Device { device: "MPI".into(), msg: format!("an allreduce over MPI of {d}: cast to float32 (or int32) first") })
            }
        })
    }
}

impl DataParallel {
    /// Initializes MPI (the process must have been started by `mpirun`, or runs as a group of one) and installs the
    /// group as this thread's collective; starts the watchdog.
    ///
    /// # Errors
    /// [`Error::Env`] when MPI was initialized already or `MPI_TIMEOUT` is not a number of seconds.
    pub fn init() -> Result<DataParallel> {
        let timeout = crate::helpers::getenv_int("MPI_TIMEOUT", 300, 1, 1 << 30)?;
        let universe = mpi::initialize().ok_or_else(|| Error::Env {
            var: "MPI".into(),
            value: "initialized".into(),
            allowed: "one DataParallel per process (MPI was initialized already)".into(),
        })?;
        let world = universe.world();
        let (busy, epoch) = (Arc::new(AtomicU64::new(0)), Instant::now());
        engine::set_collective(Some(Box::new(Group { comm: world.duplicate(), busy: busy.clone(), epoch })));
        let (watch, rank) = (busy.clone(), world.rank());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let since = watch.load(Ordering::SeqCst);
            if since != 0 && epoch.elapsed().as_millis() as u64 > since + timeout as u64 * 1000 {
                eprintln!("error: rank {rank}: a collective waited {timeout} s for the other ranks (one died or hangs; MPI_TIMEOUT sets the wait); exiting");
                std::process::exit(1);
            }
        });
        Ok(DataParallel { world, busy, epoch, _universe: universe })
    }
    /// This process's rank, in `0..size()`.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }
    /// The world communicator (every rank), for raw MPI calls beside the group's.
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }
    /// Whether this is rank 0, the one that prints and saves.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }
    /// Rows `[rank * n / size, (rank + 1) * n / size)` of a batch of `n` rows: this rank's part.
    ///
    /// # Panics
    /// If `n` does not split into `size()` equal parts.
    pub fn part(&self, n: usize) -> (usize, usize) {
        assert!(n.is_multiple_of(self.size()), "DataParallel: a batch of {n} rows does not split over {} ranks", self.size());
        let k = n / self.size();
        (self.rank() * k, (self.rank() + 1) * k)
    }
    /// Runs collective `f`, marked busy for the watchdog meanwhile.
    fn watched<T>(&self, f: impl FnOnce() -> T) -> T {
        watched(&self.busy, self.epoch, f)
    }
    /// Makes every tensor of `ts` rank 0's value: each realized, broadcast from rank 0 and written into its buffer.
    ///
    /// # Errors
    /// A failed realize or copy.
    pub fn broadcast(&self, ts: &[&Tensor]) -> Result<()> {
        Tensor::realize_all(ts)?;
        for t in ts {
            let t = t.contiguous();
            t.realize()?;
            let mut bytes = t.to_bytes()?;
            self.watched(|| self.world.process_at_rank(0).broadcast_into(&mut bytes[..]));
            if !self.is_root() {
                engine::copyin(&t.uop(), &bytes)?;
            }
        }
        Ok(())
    }
    /// Replaces each parameter's gradient by its mean over the ranks (the gradient of the whole batch when each rank's
    /// loss is the mean over its part): the gradients joined into buckets of at most `bucket_bytes` bytes, one
    /// ALLREDUCE each, so a model sends a few large messages. Lazy: the sums run when the optimizer step realizes.
    ///
    /// # Panics
    /// If a parameter that requires a gradient has none (call `backward()` first).
    pub fn allreduce_gradients(&self, params: &[Tensor], bucket_bytes: usize) {
        // (last parameter first: a backward pass makes the last layers' gradients first, so the first buckets' sums
        // can run while it computes the rest, as PyTorch's DDP orders its buckets)
        let grads: Vec<(&Tensor, Tensor)> = params
            .iter()
            .rev()
            .filter(|p| p.requires_grad())
            .map(|p| (p, p.grad().expect("allreduce_gradients: call backward() first")))
            .collect();
        let mut start = 0;
        while start < grads.len() {
            let (dtype, mut bytes, mut end) = (grads[start].1.dtype(), 0, start);
            while end < grads.len()
                && grads[end].1.dtype() == dtype
                && (end == start || bytes + grads[end].1.numel() * dtype.itemsize() <= bucket_bytes)
            {
                bytes += grads[end].1.numel() * dtype.itemsize();
                end += 1;
            }
            let bucket = &grads[start..end];
            let flats: Vec<Tensor> = bucket.iter().map(|(_, g)| g.flatten(0)).collect();
            let flat = flats[0].cat(&flats[1..].iter().collect::<Vec<_>>(), 0).allreduce_processes() / self.size() as f64;
            let mut at = 0;
            for (p, g) in bucket {
                p.set_grad(Some(flat.shrink(&[(at, at + g.numel())]).reshape(g.shape())));
                at += g.numel();
            }
            start = end;
        }
    }
    /// Checks that every tensor of `ts` holds the same bytes on every rank (a SHA-256 of them all, gathered).
    ///
    /// # Errors
    /// [`Error::Device`] naming the ranks whose bytes differ from rank 0's; a failed realize.
    pub fn check_equal(&self, ts: &[&Tensor]) -> Result<()> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for t in ts {
            h.update(t.to_bytes()?);
        }
        let digest: [u8; 32] = h.finalize().into();
        let mut all = vec![0u8; 32 * self.size()];
        self.watched(|| self.world.all_gather_into(&digest[..], &mut all[..]));
        let differ: Vec<usize> = (1..self.size()).filter(|&r| all[r * 32..(r + 1) * 32] != all[..32]).collect();
        match differ.is_empty() {
            true => Ok(()),
            false => Err(Error::Device { device: "MPI".into(), msg: format!("ranks {differ:?} hold other parameter values than rank 0") }),
        }
    }
}

impl Drop for DataParallel {
    fn drop(&mut self) {
        engine::set_collective(None);
    }
}
