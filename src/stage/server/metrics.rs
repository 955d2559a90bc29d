//! `/metrics`: the server's counters in the Prometheus text exposition.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// The counters `/metrics` exposes, bumped by the handlers and the sweeper.
#[derive(Default)]
pub(super) struct Metrics {
    pub(super) uploads: AtomicU64,
    pub(super) downloads: AtomicU64,
    pub(super) upload_bytes: AtomicU64,
    pub(super) download_bytes: AtomicU64,
    pub(super) expirations: AtomicU64,
    pub(super) auth_failures: AtomicU64,
    pub(super) owner_checks: AtomicU64,
    pub(super) owner_check_errors: AtomicU64,
    /// Uploads refused, by reason (no_token, unknown_token, forbidden,
    /// api_unavailable, quota_*).
    refusals: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

/// Every reason an upload is refused for.
const REASONS: [&str; 8] = [
    "no_token",
    "unknown_token",
    "forbidden",
    "api_unavailable",
    "quota_bytes",
    "quota_bundles",
    "quota_namespace_bytes",
    "quota_namespace_bundles",
];

/// A Prometheus label value: `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Counts an upload refused for `reason`.
    pub(super) fn refused(&self, reason: &'static str) {
        let mut refusals = self
            .refusals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *refusals.entry(reason).or_default() += 1;
    }

    /// The refusals and the store's use per namespace (with the quotas).
    fn render_use(&self, quotas: &super::quota::Quotas) -> String {
        let mut out = String::new();
        let name = "spark_localizer_stage_upload_refusals_total";
        out.push_str(&format!(
            "# HELP {name} Uploads refused, by reason.\n# TYPE {name} counter\n"
        ));
        let mut refusals = self
            .refusals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // Every reason from the start, at 0: rates and alerts need the series.
        for reason in REASONS {
            refusals.entry(reason).or_default();
        }
        for (reason, n) in refusals {
            out.push_str(&format!("{name}{{reason=\"{reason}\"}} {n}\n"));
        }
        let (total, namespaces) = quotas.snapshot();
        let limits = quotas.limits();
        for (metric, help, value, limit) in [
            (
                "store_bytes",
                "Bytes of the bundles in the store.",
                total.bytes,
                limits.store_bytes,
            ),
            (
                "store_bundles",
                "Bundles in the store, as counted for the quotas.",
                total.bundles,
                limits.bundles,
            ),
        ] {
            let name = format!("spark_localizer_stage_{metric}");
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
            ));
            if let Some(limit) = limit {
                let name = format!("{name}_quota");
                out.push_str(&format!(
                    "# HELP {name} Its quota.\n# TYPE {name} gauge\n{name} {limit}\n"
                ));
            }
        }
        for (metric, help, pick) in [
            (
                "namespace_bytes",
                "Bytes of the bundles of each owner namespace.",
                true,
            ),
            (
                "namespace_bundles",
                "Bundles of each owner namespace.",
                false,
            ),
        ] {
            let name = format!("spark_localizer_stage_{metric}");
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
            for (ns, used) in &namespaces {
                let value = if pick { used.bytes } else { used.bundles };
                out.push_str(&format!("{name}{{namespace=\"{}\"}} {value}\n", label(ns)));
            }
        }
        out
    }

    /// Prometheus text exposition (version 0.0.4).
    fn render(&self, stored: usize) -> String {
        let counters = [
            ("uploads_total", "Bundles stored.", &self.uploads),
            (
                "downloads_total",
                "Bundle downloads started (GET).",
                &self.downloads,
            ),
            (
                "upload_bytes_total",
                "Bytes of bundles stored.",
                &self.upload_bytes,
            ),
            (
                "download_bytes_total",
                "Bundle bytes sent.",
                &self.download_bytes,
            ),
            (
                "expirations_total",
                "Bundles deleted by expiry.",
                &self.expirations,
            ),
            (
                "auth_failures_total",
                "Requests refused for a missing or wrong secret.",
                &self.auth_failures,
            ),
            (
                "owner_checks_total",
                "Owner queries (pods lists) sent to the Kubernetes API.",
                &self.owner_checks,
            ),
            (
                "owner_check_errors_total",
                "Owner checks that failed (token, transport, refused or malformed answer); nothing is deleted for them.",
                &self.owner_check_errors,
            ),
        ];
        let mut out = String::new();
        for (name, help, value) in counters {
            let name = format!("spark_localizer_stage_{name}");
            let value = value.load(Ordering::Relaxed);
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
        let name = "spark_localizer_stage_bundles_stored";
        out.push_str(&format!(
            "# HELP {name} Bundles in the store.\n# TYPE {name} gauge\n{name} {stored}\n"
        ));
        out
    }
}

/// `GET /metrics`: the counters and the number of bundles stored.
pub(super) async fn endpoint(State(state): State<Arc<AppState>>) -> Response {
    let stored = state.store.list().await.map_or(0, |l| l.len());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(stored) + &state.metrics.render_use(&state.quotas),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text() {
        let m = Metrics::default();
        m.uploads.fetch_add(2, Ordering::Relaxed);
        let text = m.render(1);
        assert!(
            text.contains("spark_localizer_stage_uploads_total 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE spark_localizer_stage_bundles_stored gauge\nspark_localizer_stage_bundles_stored 1\n"));
    }
}
