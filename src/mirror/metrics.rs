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
}

impl Metrics {
    fn render(&self, blobs: usize, bytes: u64) -> String {
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
        ];
        let mut out = String::new();
        for (name, help, counter) in counters {
            out.push_str(&format!(
                "# HELP spark_localizer_mirror_{name} {help}\n# TYPE spark_localizer_mirror_{name} counter\nspark_localizer_mirror_{name} {}\n",
                counter.get()
            ));
        }
        out.push_str(&format!(
            "# HELP spark_localizer_mirror_blobs Blobs held.\n# TYPE spark_localizer_mirror_blobs gauge\nspark_localizer_mirror_blobs {blobs}\n# HELP spark_localizer_mirror_stored_bytes Bytes of the blobs held.\n# TYPE spark_localizer_mirror_stored_bytes gauge\nspark_localizer_mirror_stored_bytes {bytes}\n"
        ));
        out
    }
}

pub(super) async fn endpoint(State(mirror): State<Arc<Mirror>>) -> Response {
    let (blobs, bytes) = mirror.store.usage();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        mirror.metrics.render(blobs, bytes),
    )
        .into_response()
}
