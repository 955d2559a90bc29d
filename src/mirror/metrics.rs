//! `/metrics`: the mirror's counters in the Prometheus text exposition.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::Mirror;

/// A monotonic counter.
#[derive(Default)]
pub(super) struct Counter(AtomicU64);

impl Counter {
    pub(super) fn inc(&self) {
        self.add(1);
    }
    pub(super) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The counters, bumped by the handlers and the fills.
#[derive(Default)]
pub(super) struct Metrics {
    pub(super) hits: Counter,
    pub(super) misses: Counter,
    pub(super) coalesced: Counter,
    pub(super) revalidated: Counter,
    pub(super) refused: Counter,
    pub(super) origin_failures: Counter,
    pub(super) origin_bytes: Counter,
    pub(super) served_bytes: Counter,
    pub(super) corrupt: Counter,
    pub(super) passed_through: Counter,
}

/// The gauges, read when `/metrics` is asked.
pub(super) struct Gauges {
    blobs: usize,
    stored: u64,
    reserved: u64,
    transfers: usize,
}

impl Metrics {
    fn render(&self, gauges: &Gauges) -> String {
        let counters = [
            (
                "hits_total",
                "Requests served from a held blob without asking the origin (digest given).",
                &self.hits,
            ),
            (
                "revalidated_total",
                "Held blobs the origin confirmed unchanged (conditional request).",
                &self.revalidated,
            ),
            ("misses_total", "Transfers from an origin.", &self.misses),
            (
                "coalesced_total",
                "Requests that joined a transfer already in progress.",
                &self.coalesced,
            ),
            (
                "refused_total",
                "Requests refused (origin not allowed, bad request).",
                &self.refused,
            ),
            (
                "origin_failures_total",
                "Transfers or revalidations the origin failed.",
                &self.origin_failures,
            ),
            (
                "origin_bytes_total",
                "Bytes received from origins.",
                &self.origin_bytes,
            ),
            (
                "served_bytes_total",
                "Bytes sent to clients.",
                &self.served_bytes,
            ),
            (
                "corrupt_blobs_total",
                "Blobs found damaged on disk and dropped.",
                &self.corrupt,
            ),
            (
                "passed_through_total",
                "Answers streamed from the origin without storing (no room in the store).",
                &self.passed_through,
            ),
        ];
        let mut out = String::new();
        for (name, help, counter) in counters {
            out.push_str(&format!(
                "# HELP spark_localizer_mirror_{name} {help}\n# TYPE spark_localizer_mirror_{name} counter\nspark_localizer_mirror_{name} {}\n",
                counter.get()
            ));
        }
        let gauges = [
            ("blobs", "Blobs held.", gauges.blobs as u64),
            ("stored_bytes", "Bytes of the blobs held.", gauges.stored),
            (
                "reserved_bytes",
                "Bytes promised to transfers in progress (their temp files).",
                gauges.reserved,
            ),
            (
                "transfers",
                "Transfers in progress (until their blob is published).",
                gauges.transfers as u64,
            ),
        ];
        for (name, help, value) in gauges {
            out.push_str(&format!(
                "# HELP spark_localizer_mirror_{name} {help}\n# TYPE spark_localizer_mirror_{name} gauge\nspark_localizer_mirror_{name} {value}\n"
            ));
        }
        out
    }
}

pub(super) async fn endpoint(State(mirror): State<Arc<Mirror>>) -> Response {
    let (blobs, stored) = mirror.store.usage();
    let gauges = Gauges {
        blobs,
        stored,
        reserved: mirror.store.reserved(),
        transfers: mirror.fills.lock().expect("lock").len(),
    };
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        mirror.metrics.render(&gauges),
    )
        .into_response()
}
