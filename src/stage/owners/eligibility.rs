//! Which bundles are owner-checked, and against which owner (see the module
//! documentation of `owners`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::stage::api::OWNER_TYPE_POD;
use crate::stage::names::{check_dns_label, check_label_key, is_label_value};
use crate::stage::store::BundleMeta;

/// Who owns a bundle, as a pods query: the namespace and the label equalities.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct OwnerKey {
    pub(super) namespace: String,
    pub(super) labels: BTreeMap<String, String>,
}

impl OwnerKey {
    /// `k1=v1,k2=v2`, keys in order (the labels are valid, so nothing needs quoting).
    pub(super) fn selector(&self) -> String {
        let pairs: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.join(",")
    }
}

/// Why a bundle is not owner-checked this time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Skip {
    NotDownloaded,
    InGrace,
    NoLabels,
    OtherOwnerType(String),
    Invalid(String),
}

impl Skip {
    /// Worth one log line per bundle (the others are routine).
    pub(super) fn note(&self) -> Option<String> {
        match self {
            Skip::NotDownloaded | Skip::InGrace => None,
            Skip::NoLabels => Some(
                "its owner has no labels (that would match every pod): kept until --max-ttl"
                    .to_owned(),
            ),
            Skip::OtherOwnerType(t) => Some(format!(
                "its ownerType {t:?} is not {OWNER_TYPE_POD:?}: kept until --max-ttl"
            )),
            Skip::Invalid(why) => Some(format!("{why}: kept until --max-ttl")),
        }
    }
}

/// Whether `meta` is owner-checked at `now_ms`, and against which owner.
pub(super) fn eligibility(
    meta: &BundleMeta,
    now_ms: u64,
    grace: Duration,
) -> Result<OwnerKey, Skip> {
    let Some(first) = meta.first_download_ms else {
        return Err(Skip::NotDownloaded);
    };
    let owner = &meta.owner;
    if !owner.owner_type.eq_ignore_ascii_case(OWNER_TYPE_POD) {
        return Err(Skip::OtherOwnerType(owner.owner_type.clone()));
    }
    if owner.labels.is_empty() {
        return Err(Skip::NoLabels);
    }
    if check_dns_label(&owner.namespace).is_err() {
        return Err(Skip::Invalid(format!(
            "its owner namespace {:?} is not a valid namespace name",
            owner.namespace
        )));
    }
    if let Some((k, v)) = owner
        .labels
        .iter()
        .find(|(k, v)| check_label_key(k).is_err() || !is_label_value(v))
    {
        return Err(Skip::Invalid(format!(
            "its owner label {k:?}={v:?} is not a valid Kubernetes label"
        )));
    }
    if now_ms.saturating_sub(first) < grace.as_millis() as u64 {
        return Err(Skip::InGrace);
    }
    Ok(OwnerKey {
        namespace: owner.namespace.clone(),
        labels: owner.labels.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::api::ResourceOwner;
    use crate::stage::store::META_VERSION;

    fn key(ns: &str, labels: &[(&str, &str)]) -> OwnerKey {
        OwnerKey {
            namespace: ns.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn meta(owner: &str, first_download_ms: Option<u64>) -> BundleMeta {
        BundleMeta {
            version: META_VERSION,
            id: "0".repeat(32),
            secret_sha256: String::new(),
            size: 0,
            sha256: String::new(),
            owner: serde_json::from_str::<ResourceOwner>(owner).unwrap(),
            created_ms: 0,
            first_download_ms,
        }
    }

    #[test]
    fn who_is_checked() {
        let grace = Duration::from_secs(60);
        let pod = r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"Pod"}"#;
        assert_eq!(
            eligibility(&meta(pod, Some(1_000)), 61_000, grace),
            Ok(key("spark", &[("app", "a")]))
        );
        let cases = [
            (pod, None, 1_000_000, Skip::NotDownloaded),
            (pod, Some(1_000), 60_999, Skip::InGrace),
            (
                r#"{"namespace":"spark","labels":{}}"#,
                Some(0),
                1_000_000,
                Skip::NoLabels,
            ),
            (
                r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"Deployment"}"#,
                Some(0),
                1_000_000,
                Skip::OtherOwnerType("Deployment".into()),
            ),
        ];
        for (owner, first, now, want) in cases {
            assert_eq!(
                eligibility(&meta(owner, first), now, grace),
                Err(want),
                "{owner}"
            );
        }
        let lower = r#"{"namespace":"spark","labels":{"app":"a"},"ownerType":"pod"}"#;
        assert!(eligibility(&meta(lower, Some(0)), 1_000_000, grace).is_ok());
        for bad in [
            r#"{"namespace":"Spark","labels":{"app":"a"}}"#,
            r#"{"namespace":"spark","labels":{"app":"a,b=c"}}"#,
        ] {
            assert!(matches!(
                eligibility(&meta(bad, Some(0)), 1_000_000, grace),
                Err(Skip::Invalid(_))
            ));
        }
    }
}
