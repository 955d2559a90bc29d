//! Expiry: bundles never downloaded within `--unused-ttl`, bundles older than
//! `--max-ttl`, and (with owner checks on) downloaded bundles whose owner pods are
//! gone. The sweeper runs the checks one at a time; downloads also expire a bundle
//! they find past its time.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::AppState;
use crate::stage::store::BundleMeta;
use crate::util::time::now_ms;

const SWEEP_MAX_INTERVAL: Duration = Duration::from_secs(60);
const SWEEP_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// How long bundles are kept.
pub(super) struct Policy {
    pub(super) unused_ttl: Duration,
    pub(super) max_ttl: Duration,
}

impl Policy {
    /// Which limit `meta` has passed at `now_ms`, if any.
    pub(super) fn expired(&self, meta: &BundleMeta, now_ms: u64) -> Option<&'static str> {
        let age = Duration::from_millis(now_ms.saturating_sub(meta.created_ms));
        if age >= self.max_ttl {
            Some("older than --max-ttl")
        } else if meta.first_download_ms.is_none() && age >= self.unused_ttl {
            Some("never downloaded within --unused-ttl")
        } else {
            None
        }
    }

    /// A quarter of the shorter TTL, between 100ms and 60s.
    fn sweep_interval(&self) -> Duration {
        (self.unused_ttl.min(self.max_ttl) / 4).clamp(SWEEP_MIN_INTERVAL, SWEEP_MAX_INTERVAL)
    }
}

/// Runs the TTL sweep every [`Policy::sweep_interval`] and, when on, the owner
/// check every `--owner-check-interval`, one at a time.
pub(super) async fn sweeper(state: Arc<AppState>) {
    use tokio::time::{interval, MissedTickBehavior};
    let mut ttl = interval(state.policy.sweep_interval());
    ttl.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut owner_tick = state.owners.as_ref().map(|owners| {
        let mut tick = interval(owners.interval());
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick
    });
    loop {
        tokio::select! {
            _ = ttl.tick() => sweep(&state).await,
            _ = async { owner_tick.as_mut().expect("guarded").tick().await }, if owner_tick.is_some() => {
                check_owners(&state).await;
            }
        }
    }
}

/// Expires the downloaded bundles whose owner pods are gone.
async fn check_owners(state: &AppState) {
    let Some(owners) = &state.owners else {
        return;
    };
    let all = match state.store.list().await {
        Ok(all) => all,
        Err(e) => {
            warn!("cannot list the store for the owner check: {e}");
            return;
        }
    };
    let outcome = owners.check(all, now_ms()).await;
    let metrics = &state.metrics;
    metrics
        .owner_checks
        .fetch_add(outcome.queries, Ordering::Relaxed);
    metrics
        .owner_check_errors
        .fetch_add(outcome.errors, Ordering::Relaxed);
    for (meta, why) in outcome.gone {
        expire(state, &meta, &why).await;
    }
}

async fn sweep(state: &AppState) {
    state.quotas.listing();
    let all = match state.store.list().await {
        Ok(all) => all,
        Err(e) => {
            warn!("cannot list the store for expiry: {e}");
            return;
        }
    };
    // Recount the use from the store (other replicas commit to a shared bucket).
    state.quotas.recount(&all);
    let now = now_ms();
    for meta in all {
        if let Some(why) = state.policy.expired(&meta, now) {
            expire(state, &meta, why).await;
        }
    }
}

pub(super) async fn expire(state: &AppState, meta: &BundleMeta, why: &str) {
    let _deleting = state.quotas.deleting();
    match state.store.delete(&meta.id).await {
        Ok(true) => {
            state.quotas.release(&meta.owner.namespace, meta.size);
            state.metrics.expirations.fetch_add(1, Ordering::Relaxed);
            info!("bundle {} expired ({why}); deleted", meta.id);
        }
        Ok(false) => {}
        Err(e) => warn!("cannot delete expired bundle {}: {e}", meta.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::api::ResourceOwner;
    use crate::stage::store::META_VERSION;

    fn meta(created_ms: u64, first_download_ms: Option<u64>) -> BundleMeta {
        BundleMeta {
            version: META_VERSION,
            id: "0".repeat(32),
            secret_sha256: String::new(),
            size: 0,
            sha256: String::new(),
            owner: ResourceOwner::parse(br#"{"namespace":"ns"}"#).unwrap(),
            created_ms,
            first_download_ms,
        }
    }

    #[test]
    fn expiry() {
        let policy = Policy {
            unused_ttl: Duration::from_secs(10),
            max_ttl: Duration::from_secs(100),
        };
        assert_eq!(policy.expired(&meta(0, None), 9_999), None);
        assert!(policy.expired(&meta(0, None), 10_000).is_some());
        assert_eq!(policy.expired(&meta(0, Some(5)), 99_999), None);
        assert!(policy.expired(&meta(0, Some(5)), 100_000).is_some());
        assert_eq!(policy.sweep_interval(), Duration::from_millis(2500));
        let long = Policy {
            unused_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(7200),
        };
        assert_eq!(long.sweep_interval(), SWEEP_MAX_INTERVAL);
    }
}
