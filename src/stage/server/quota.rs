//! How much the store may hold: `--max-store-bytes` and `--max-bundles` overall,
//! `--max-namespace-bytes` and `--max-namespace-bundles` per owner namespace.
//!
//! Use is counted from the store at start and kept up to date by every commit and
//! deletion; each sweep recounts it from the store (other replicas sharing an S3
//! store commit too). An upload reserves its size under one lock before it is
//! committed, so concurrent uploads never take the store past a quota; a
//! reservation whose commit fails is given back. Bytes over a quota answer 507,
//! bundles over one 429, each naming the quota and the current use.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use axum::http::StatusCode;

use super::auth::Refusal;
use crate::stage::store::BundleMeta;

/// The limits; `None` is unbounded.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Limits {
    pub store_bytes: Option<u64>,
    pub bundles: Option<u64>,
    pub namespace_bytes: Option<u64>,
    pub namespace_bundles: Option<u64>,
}

/// Bytes and bundles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Use {
    pub bytes: u64,
    pub bundles: u64,
}

#[derive(Default)]
struct Usage {
    total: Use,
    namespaces: BTreeMap<String, Use>,
    /// Bundles committed or deleted since the last recount started (a recount
    /// from an older listing must not forget them).
    changed_since_listing: bool,
    /// Reservations not yet committed nor given back, and deletions under way: a
    /// listing cannot show where they stand.
    pending: u64,
}

pub(super) struct Quotas {
    limits: Limits,
    usage: Mutex<Usage>,
}

/// Space held for one upload until its commit; given back when dropped uncommitted.
pub(super) struct Reservation<'a> {
    quotas: &'a Quotas,
    namespace: String,
    size: u64,
    kept: bool,
}

impl Reservation<'_> {
    /// The bundle is in the store: the space stays used.
    pub(super) fn keep(mut self) {
        self.kept = true;
        let mut usage = self.quotas.lock();
        usage.pending = usage.pending.saturating_sub(1);
        usage.changed_since_listing = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.kept {
            {
                let mut usage = self.quotas.lock();
                usage.pending = usage.pending.saturating_sub(1);
            }
            self.quotas.release(&self.namespace, self.size);
        }
    }
}

/// A deletion under way (see [`Quotas::deleting`]).
pub(super) struct Deleting<'a>(&'a Quotas);

impl Drop for Deleting<'_> {
    fn drop(&mut self) {
        let mut usage = self.0.lock();
        usage.pending = usage.pending.saturating_sub(1);
        usage.changed_since_listing = true;
    }
}

fn over(status: StatusCode, reason: &'static str, message: String) -> Refusal {
    Refusal {
        status,
        message,
        reason,
    }
}

impl Quotas {
    pub(super) fn new(limits: Limits) -> Quotas {
        Quotas {
            limits,
            usage: Mutex::new(Usage::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an upload of `size` bytes for `namespace` would pass a quota now
    /// (`size` 0: whether one more bundle would); the error names the quota and
    /// the use. Nothing is reserved.
    pub(super) fn check(&self, namespace: Option<&str>, size: u64) -> Result<(), Refusal> {
        let usage = self.lock();
        self.fits(&usage, namespace, size, "at least ")
    }

    fn fits(
        &self,
        usage: &Usage,
        namespace: Option<&str>,
        size: u64,
        bound: &str,
    ) -> Result<(), Refusal> {
        let l = &self.limits;
        let total = usage.total;
        if let Some(max) = l.bundles.filter(|&max| total.bundles >= max) {
            return Err(over(
                StatusCode::TOO_MANY_REQUESTS,
                "quota_bundles",
                format!("the store holds {} bundles, its quota (--max-bundles {max}): try again when bundles expire", total.bundles),
            ));
        }
        if let Some(max) = l
            .store_bytes
            .filter(|&max| total.bytes.saturating_add(size) > max)
        {
            return Err(over(
                StatusCode::INSUFFICIENT_STORAGE,
                "quota_bytes",
                format!(
                    "the store holds {} bytes and this bundle has {bound}{size}: over its quota (--max-store-bytes {max})",
                    total.bytes
                ),
            ));
        }
        let Some(ns) = namespace else {
            return Ok(());
        };
        let used = usage.namespaces.get(ns).copied().unwrap_or_default();
        let shown = ns.escape_debug();
        if let Some(max) = l.namespace_bundles.filter(|&max| used.bundles >= max) {
            return Err(over(
                StatusCode::TOO_MANY_REQUESTS,
                "quota_namespace_bundles",
                format!("namespace {shown} holds {} bundles, its quota (--max-namespace-bundles {max}): try again when its bundles expire", used.bundles),
            ));
        }
        if let Some(max) = l
            .namespace_bytes
            .filter(|&max| used.bytes.saturating_add(size) > max)
        {
            return Err(over(
                StatusCode::INSUFFICIENT_STORAGE,
                "quota_namespace_bytes",
                format!(
                    "namespace {shown} holds {} bytes and this bundle has {bound}{size}: over its quota (--max-namespace-bytes {max})",
                    used.bytes
                ),
            ));
        }
        Ok(())
    }

    /// Reserves `size` bytes and one bundle for `namespace`, or refuses.
    pub(super) fn reserve(&self, namespace: &str, size: u64) -> Result<Reservation<'_>, Refusal> {
        let mut usage = self.lock();
        self.fits(&usage, Some(namespace), size, "")?;
        add(&mut usage, namespace, size, 1);
        usage.changed_since_listing = true;
        usage.pending += 1;
        Ok(Reservation {
            quotas: self,
            namespace: namespace.to_owned(),
            size,
            kept: false,
        })
    }

    /// Marks a deletion under way until the guard drops (a recount meanwhile could
    /// see the bundle gone and then have its release counted twice).
    pub(super) fn deleting(&self) -> Deleting<'_> {
        self.lock().pending += 1;
        Deleting(self)
    }

    /// A bundle left the store.
    pub(super) fn release(&self, namespace: &str, size: u64) {
        let mut usage = self.lock();
        sub(&mut usage, namespace, size);
        usage.changed_since_listing = true;
    }

    /// Marks the start of a listing that [`Quotas::recount`] will use.
    pub(super) fn listing(&self) {
        self.lock().changed_since_listing = false;
    }

    /// Counts the use from the store's bundles (at start, and after each sweep's
    /// listing unless a commit or deletion happened meanwhile or an upload is
    /// between its reservation and its commit: the listing may not show it).
    pub(super) fn recount(&self, bundles: &[BundleMeta]) {
        let mut fresh = Usage::default();
        for b in bundles {
            add(&mut fresh, &b.owner.namespace, b.size, 1);
        }
        let mut usage = self.lock();
        if !usage.changed_since_listing && usage.pending == 0 {
            *usage = fresh;
        }
    }

    /// The use, overall and per namespace.
    pub(super) fn snapshot(&self) -> (Use, BTreeMap<String, Use>) {
        let usage = self.lock();
        (usage.total, usage.namespaces.clone())
    }

    pub(super) fn limits(&self) -> Limits {
        self.limits
    }
}

fn add(usage: &mut Usage, namespace: &str, bytes: u64, bundles: u64) {
    for u in [
        &mut usage.total,
        usage.namespaces.entry(namespace.to_owned()).or_default(),
    ] {
        u.bytes = u.bytes.saturating_add(bytes);
        u.bundles = u.bundles.saturating_add(bundles);
    }
}

fn sub(usage: &mut Usage, namespace: &str, bytes: u64) {
    usage.total.bytes = usage.total.bytes.saturating_sub(bytes);
    usage.total.bundles = usage.total.bundles.saturating_sub(1);
    if let Some(u) = usage.namespaces.get_mut(namespace) {
        u.bytes = u.bytes.saturating_sub(bytes);
        u.bundles = u.bundles.saturating_sub(1);
        if u.bundles == 0 {
            usage.namespaces.remove(namespace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_pass_a_quota_and_are_given_back_uncommitted() {
        let q = Quotas::new(Limits {
            store_bytes: Some(100),
            bundles: Some(3),
            namespace_bytes: Some(60),
            namespace_bundles: Some(2),
        });
        let a = q.reserve("a", 50).unwrap();
        a.keep();
        let e = q.reserve("a", 20).err().unwrap();
        assert_eq!(e.status, StatusCode::INSUFFICIENT_STORAGE);
        assert!(
            e.message.contains("namespace a holds 50 bytes")
                && e.message.contains("--max-namespace-bytes 60"),
            "{}",
            e.message
        );
        {
            let _dropped = q.reserve("b", 40).unwrap();
            assert!(q.reserve("c", 20).is_err(), "100 bytes reserved");
        }
        q.reserve("c", 20).unwrap().keep();
        q.reserve("b", 10).unwrap().keep();
        let e = q.reserve("d", 1).err().unwrap();
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(e.message.contains("holds 3 bundles") && e.message.contains("--max-bundles 3"));
        q.release("a", 50);
        assert_eq!(
            q.snapshot().0,
            Use {
                bytes: 30,
                bundles: 2
            }
        );
        assert!(!q.snapshot().1.contains_key("a"));
    }
}
