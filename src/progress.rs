//! Progress goes through [`Reporter`], so the engine never knows whether bars or
//! log lines are on the other end.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

static BARS: std::sync::OnceLock<MultiProgress> = std::sync::OnceLock::new();

/// Runs `f` (which writes to stderr) with the progress bars, if any, hidden.
pub(crate) fn suspend<R>(f: impl FnOnce() -> R) -> R {
    match BARS.get() {
        Some(multi) => multi.suspend(f),
        None => f(),
    }
}

/// Receives transfer events from the engine. Calls are cheap and never block on I/O.
pub(crate) trait Reporter: Send + Sync {
    /// The engine knows how many transfers there will be.
    fn begin(&self, files: usize);
    /// The transfer of artifact `id` began; `size` is added to the total when known.
    fn start(&self, id: usize, name: &str, size: Option<u64>);
    /// `bytes` more arrived for `id`.
    fn advance(&self, id: usize, bytes: u64);
    /// `id` went back to `position` bytes (a retry that could not resume).
    fn rewind(&self, id: usize, lost: u64);
    /// `id` is done (successfully or not).
    fn finish(&self, id: usize);
}

/// Reports nothing.
pub(crate) struct Silent;

impl Reporter for Silent {
    fn begin(&self, _: usize) {}
    fn start(&self, _: usize, _: &str, _: Option<u64>) {}
    fn advance(&self, _: usize, _: u64) {}
    fn rewind(&self, _: usize, _: u64) {}
    fn finish(&self, _: usize) {}
}

/// Running totals shared by the reporters.
#[derive(Default)]
pub(crate) struct Totals {
    pub bytes: AtomicU64,
    pub done: AtomicUsize,
}

/// indicatif bars on a terminal: one total bar and one per active transfer.
pub(crate) struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    active: Mutex<std::collections::HashMap<usize, ProgressBar>>,
    files: AtomicUsize,
    done: AtomicUsize,
}

impl Bars {
    pub(crate) fn new() -> Self {
        let multi = BARS
            .get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
            .clone();
        let total = multi.add(ProgressBar::new(0));
        total.set_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        total.set_prefix("total");
        Bars {
            multi,
            total,
            active: Mutex::new(Default::default()),
            files: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        }
    }
}

impl Default for Bars {
    fn default() -> Self {
        Self::new()
    }
}

impl Reporter for Bars {
    fn begin(&self, files: usize) {
        self.files.store(files, Ordering::Relaxed);
        self.total.set_message(format!("0/{files} files"));
    }
    fn start(&self, id: usize, name: &str, size: Option<u64>) {
        self.total.inc_length(size.unwrap_or(0));
        let bar = self.multi.add(ProgressBar::new(size.unwrap_or(0)));
        bar.set_style(
            ProgressStyle::with_template("  {wide_msg} {bytes:>10}/{total_bytes:<10}")
                .expect("valid template"),
        );
        bar.set_message(name.to_owned());
        if let Some(old) = self.active.lock().expect("lock").insert(id, bar) {
            old.finish_and_clear();
        }
    }
    fn advance(&self, id: usize, bytes: u64) {
        self.total.inc(bytes);
        if let Some(bar) = self.active.lock().expect("lock").get(&id) {
            bar.inc(bytes);
        }
    }
    fn rewind(&self, id: usize, lost: u64) {
        self.total
            .set_position(self.total.position().saturating_sub(lost));
        if let Some(bar) = self.active.lock().expect("lock").get(&id) {
            bar.set_position(bar.position().saturating_sub(lost));
        }
    }
    fn finish(&self, id: usize) {
        if let Some(bar) = self.active.lock().expect("lock").remove(&id) {
            bar.finish_and_clear();
        }
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let files = self.files.load(Ordering::Relaxed);
        self.total.set_message(format!("{done}/{files} files"));
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.total.finish_and_clear();
    }
}

/// Plain progress lines every `interval` when stderr is not a terminal.
pub(crate) struct Lines {
    totals: Arc<Totals>,
    files: AtomicUsize,
    bytes: AtomicU64,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Lines {
    /// Starts the periodic line printer (needs a tokio runtime).
    pub(crate) fn start(interval: Duration) -> Arc<Self> {
        let totals = Arc::new(Totals::default());
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let lines = Arc::new(Lines {
            totals,
            files: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            stop,
        });
        let me = Arc::downgrade(&lines);
        let began = Instant::now();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => return,
                }
                let Some(l) = me.upgrade() else { return };
                let bytes = l.totals.bytes.load(Ordering::Relaxed);
                let secs = began.elapsed().as_secs_f64().max(1e-3);
                tracing::info!(
                    "progress: {}/{} files, {:.1}/{:.1} MiB, {:.1} MiB/s",
                    l.totals.done.load(Ordering::Relaxed),
                    l.files.load(Ordering::Relaxed),
                    mib(bytes),
                    mib(l.bytes.load(Ordering::Relaxed)),
                    mib(bytes) / secs
                );
            }
        });
        lines
    }
}

impl Reporter for Lines {
    fn begin(&self, files: usize) {
        self.files.store(files, Ordering::Relaxed);
    }
    fn start(&self, _: usize, _: &str, size: Option<u64>) {
        self.bytes.fetch_add(size.unwrap_or(0), Ordering::Relaxed);
    }
    fn advance(&self, _: usize, bytes: u64) {
        self.totals.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    fn rewind(&self, _: usize, lost: u64) {
        self.totals.bytes.fetch_sub(lost, Ordering::Relaxed);
    }
    fn finish(&self, _: usize) {
        self.totals.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Bytes to MiB.
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
