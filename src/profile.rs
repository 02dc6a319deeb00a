//! The profiler (tinygrad `PROFILE=1`, its `ProfileRangeEvent`s; on with `VIZ`). In: ranges and marks the
//! engine opens around schedules, compiles, launches and copies, and allocations and frees, per device. Out: the
//! recorded [`Event`]s ([`events`]) and their Chrome trace JSON ([`chrome_trace`], which Perfetto opens). Off, each
//! hook costs one setting read.

use crate::helpers::{PROFILE, VIZ};
use parking_lot::Mutex;
use std::sync::LazyLock;
use std::time::Instant;

/// One profiled thing: a range (`dur_ns` > 0 or a zero-length range) or a memory event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// The device it ran on (`CPU`, `CL`, ...), or `TINY` for host-side work that no device runs (schedules).
    pub device: String,
    /// `schedule`, `compile`, `launch`, `copy`, `alloc` or `free`.
    pub kind: &'static str,
    /// The kernel's name, or what a schedule or copy did.
    pub name: String,
    /// Start, in nanoseconds since the profiler's first event.
    pub start_ns: u64,
    /// Length in nanoseconds (0 for allocations and frees).
    pub dur_ns: u64,
    /// Bytes moved or allocated (0 where none).
    pub bytes: u64,
}

static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());
static T0: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Whether events are being recorded: `PROFILE` or `VIZ` nonzero (this thread's setting).
pub fn enabled() -> bool {
    PROFILE.value() != 0 || VIZ.value() != 0
}

fn since_start(t: Instant) -> u64 {
    t.saturating_duration_since(*T0).as_nanos() as u64
}

/// An open range, recorded when dropped (tinygrad `cpu_profile`).
pub struct Range {
    event: Event,
    start: Instant,
}

impl Range {
    /// Sets the bytes the range moved.
    pub fn bytes(mut self, bytes: u64) -> Range {
        self.event.bytes = bytes;
        self
    }
    /// Renames the range (a kernel whose name is known only once it is built).
    pub fn rename(&mut self, name: impl Into<String>) {
        self.event.name = name.into();
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        self.event.start_ns = since_start(self.start);
        self.event.dur_ns = self.start.elapsed().as_nanos() as u64;
        EVENTS.lock().push(std::mem::take(&mut self.event));
    }
}

/// A range of `kind` on `device` named `name` (made only when recording), recorded when the value drops.
pub fn range(device: &str, kind: &'static str, name: impl FnOnce() -> String) -> Option<Range> {
    enabled().then(|| {
        LazyLock::force(&T0);
        let event = Event { device: device.into(), kind, name: name(), start_ns: 0, dur_ns: 0, bytes: 0 };
        Range { event, start: Instant::now() }
    })
}

/// Records a memory event (`alloc` or `free` of `bytes` on `device`) now, when recording.
pub fn mark(device: &str, kind: &'static str, bytes: u64) {
    if enabled() {
        let start_ns = since_start(Instant::now());
        EVENTS.lock().push(Event { device: device.into(), kind, name: kind.into(), start_ns, dur_ns: 0, bytes });
    }
}

/// The events recorded so far, in the order they ended.
pub fn events() -> Vec<Event> {
    EVENTS.lock().clone()
}

/// `events` as Chrome's trace event format (`{"traceEvents": [...]}`, times in microseconds): a process per
/// device, ranges as complete (`X`) events on one thread per kind, and each device's memory in use as a counter.
pub fn chrome_trace(events: &[Event]) -> serde_json::Value {
    use serde_json::json;
    let mut devices: Vec<&str> = events.iter().map(|e| e.device.as_str()).collect();
    devices.sort_unstable();
    devices.dedup();
    let pid = |d: &str| devices.iter().position(|x| *x == d).unwrap_or(0);
    let tid = |k: &str| ["schedule", "compile", "launch", "copy"].iter().position(|x| *x == k).unwrap_or(4);
    let mut out: Vec<serde_json::Value> =
        devices.iter().enumerate().map(|(i, d)| json!({"ph": "M", "name": "process_name", "pid": i, "args": {"name": d}})).collect();
    let mut used = vec![0i64; devices.len()];
    for e in events {
        let (p, ts) = (pid(&e.device), e.start_ns as f64 / 1e3);
        match e.kind {
            "alloc" | "free" => {
                used[p] += if e.kind == "alloc" { e.bytes as i64 } else { -(e.bytes as i64) };
                out.push(json!({"ph": "C", "name": "memory", "pid": p, "ts": ts, "args": {"bytes": used[p]}}));
            }
            k => out.push(json!({"ph": "X", "name": e.name, "cat": k, "pid": p, "tid": tid(k), "ts": ts,
                                 "dur": e.dur_ns as f64 / 1e3, "args": {"bytes": e.bytes}})),
        }
    }
    json!({ "traceEvents": out, "displayTimeUnit": "ns" })
}
