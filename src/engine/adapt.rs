//! Concurrency that finds its own level: start at the configured number of
//! streams, let twice as many in while the throughput grows with them (an origin
//! or a CDN that caps each connection), and stop growing at the first step that
//! does not pay (a saturated link, disk or CPU), never past the maximum.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::progress::Reporter;

/// How long a throughput sample lasts.
pub(super) const WINDOW: Duration = Duration::from_millis(200);
/// A step pays when the throughput after it is at least this much higher.
const GAIN: f64 = 1.10;
/// Busier than this (CPU seconds per second per core available), the process is
/// CPU-bound: more streams cannot help, so none are added (loopback, a fast LAN).
const CPU_BOUND: f64 = 0.80;

/// The hill climb: one sample per window.
#[derive(Debug)]
pub(super) struct HillClimb {
    limit: usize,
    max: usize,
    /// The throughput before the last step, to judge it by.
    baseline: Option<f64>,
    /// The last sample: when, bytes so far, CPU time so far.
    last: (Instant, u64, Duration),
    frozen: bool,
    cores: f64,
}

impl HillClimb {
    pub(super) fn new(initial: usize, max: usize, now: Instant) -> HillClimb {
        HillClimb {
            limit: initial.max(1),
            max: max.max(initial).max(1),
            baseline: None,
            last: (now, 0, cpu_time()),
            frozen: false,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        }
    }

    /// The limit now.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes a sample (`bytes` received in all so far; `saturated`: every slot
    /// is busy and work waits): the new, higher limit when the climb goes on.
    pub(super) fn sample(&mut self, now: Instant, bytes: u64, saturated: bool) -> Option<usize> {
        self.sample_with(now, bytes, saturated, cpu_time())
    }

    /// [`Self::sample`] with the process's CPU time so far given.
    fn sample_with(
        &mut self,
        now: Instant,
        bytes: u64,
        saturated: bool,
        cpu: Duration,
    ) -> Option<usize> {
        let (then, before, cpu_before) = self.last;
        let elapsed = now.saturating_duration_since(then);
        if elapsed < WINDOW {
            return None;
        }
        self.last = (now, bytes, cpu);
        if self.frozen || self.limit >= self.max || !saturated {
            return None;
        }
        let busy =
            cpu.saturating_sub(cpu_before).as_secs_f64() / elapsed.as_secs_f64() / self.cores;
        if busy > CPU_BOUND {
            return None;
        }
        let rate = bytes.saturating_sub(before) as f64 / elapsed.as_secs_f64();
        if let Some(base) = self.baseline {
            if rate < base * GAIN {
                self.frozen = true;
                return None;
            }
        }
        self.baseline = Some(rate);
        self.limit = (self.limit * 2).min(self.max);
        Some(self.limit)
    }
}

/// This process's CPU time so far (user + system, every thread).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A reporter that also counts the bytes received, for the climb.
pub(super) struct Counting {
    inner: Arc<dyn Reporter>,
    bytes: AtomicU64,
}

impl Counting {
    pub(super) fn new(inner: Arc<dyn Reporter>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            bytes: AtomicU64::new(0),
        })
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Reporter for Counting {
    fn begin(&self, files: usize) {
        self.inner.begin(files);
    }
    fn start(&self, id: usize, name: &str, size: Option<u64>) {
        self.inner.start(id, name, size);
    }
    fn advance(&self, id: usize, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.inner.advance(id, bytes);
    }
    fn rewind(&self, id: usize, lost: u64) {
        self.inner.rewind(id, lost);
    }
    fn finish(&self, id: usize) {
        self.inner.finish(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl HillClimb {
        /// A sample with an idle CPU.
        fn sample_with_idle(&mut self, now: Instant, bytes: u64, saturated: bool) -> Option<usize> {
            let cpu = self.last.2;
            self.sample_with(now, bytes, saturated, cpu)
        }
    }

    #[test]
    fn a_cpu_bound_process_adds_no_streams() {
        let t0 = Instant::now();
        let mut c = HillClimb::new(8, 32, t0);
        c.cores = 1.0;
        let cpu = c.last.2;
        // 190 ms of CPU in a 200 ms window on one core: CPU-bound.
        let busy = cpu + Duration::from_millis(190);
        assert_eq!(
            c.sample_with(t0 + Duration::from_millis(200), 20_000_000, true, busy),
            None
        );
        assert_eq!(c.limit(), 8);
        // 50 ms of CPU in the next 200 ms: room to grow.
        let idle = busy + Duration::from_millis(50);
        assert_eq!(
            c.sample_with(t0 + Duration::from_millis(400), 40_000_000, true, idle),
            Some(16)
        );
    }

    #[test]
    fn climbs_while_it_pays_and_stops_at_the_first_step_that_does_not() {
        let t0 = Instant::now();
        let mut c = HillClimb::new(8, 32, t0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Too soon: no sample.
        assert_eq!(c.sample_with_idle(at(100), 10, true), None);
        // 100 MB/s at 8: try 16.
        assert_eq!(c.sample_with_idle(at(200), 20_000_000, true), Some(16));
        // 200 MB/s at 16: it paid, try 32.
        assert_eq!(c.sample_with_idle(at(400), 60_000_000, true), Some(32));
        // At the maximum: stays.
        assert_eq!(c.sample_with_idle(at(600), 120_000_000, true), None);
        assert_eq!(c.limit(), 32);

        let mut c = HillClimb::new(8, 32, t0);
        assert_eq!(c.sample_with_idle(at(200), 20_000_000, true), Some(16));
        // No gain at 16 (a saturated link): frozen for good.
        assert_eq!(c.sample_with_idle(at(400), 40_500_000, true), None);
        assert_eq!(c.sample_with_idle(at(600), 100_000_000, true), None);
        assert_eq!(c.limit(), 16);

        // Not saturated (nothing waits): no step.
        let mut c = HillClimb::new(8, 32, t0);
        assert_eq!(c.sample_with_idle(at(200), 20_000_000, false), None);
        // A fixed --parallelism: never grows.
        let mut c = HillClimb::new(4, 4, t0);
        assert_eq!(c.sample_with_idle(at(200), 20_000_000, true), None);
    }
}
