//! `abfss://` and `wasbs://` (and `abfs://`, `wasb://`) through object_store's
//! Azure backend (the Blob API): one store per container, configured by
//! [`crate::cloud::azure`], sharing the HTTP source's client. object_store's own
//! retries are off: the engine retries and resumes with ranged, ETag-checked
//! requests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use object_store::path::Path as KeyPath;
use url::Url;

use super::{Body, FaultKind, OpenRequest, Probe, Source, SourceError};
use crate::cloud::azure::{locate, AzureContainer, AzureSettings};

#[derive(Default)]
pub(crate) struct AzureSource {
    containers: BTreeMap<String, AzureContainer>,
}

impl AzureSource {
    /// Configures every container the plan names; all problems are returned together.
    pub(crate) fn new<'a>(
        settings: &AzureSettings,
        client: &reqwest::Client,
        uris: impl IntoIterator<Item = &'a Url>,
    ) -> Result<Self, Vec<String>> {
        // URIs that do not parse are the plan's to report.
        let items = uris
            .into_iter()
            .filter_map(|uri| locate(uri).ok())
            .map(|at| (at.store_key(), at));
        let containers = super::object::configure_each(items, "azure container", |at| {
            let config = settings.resolve(&at)?;
            AzureContainer::open(config, client)
                .map_err(|e| vec![crate::util::redact::error_chain(&e)])
        })?;
        Ok(AzureSource { containers })
    }

    fn container(&self, uri: &Url) -> Result<(&AzureContainer, KeyPath, String), SourceError> {
        let at = locate(uri).map_err(|e| SourceError::new(FaultKind::Refused, e))?;
        let c = self.containers.get(&at.store_key()).ok_or_else(|| {
            SourceError::new(
                FaultKind::Refused,
                format!("azure container '{}' was not configured", at.store_key()),
            )
        })?;
        Ok((c, at.key, crate::util::redact::redact_url(uri.as_str())))
    }
}

#[async_trait]
impl Source for AzureSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (c, key, shown) = self.container(uri)?;
        c.credentials(&shown).await?;
        let classify = |e| crate::cloud::classify(&c.place(&shown), &e);
        super::object::open(&c.store, &key, uri, req, classify).await
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (c, key, shown) = self.container(uri)?;
        c.credentials(&shown).await?;
        let classify = |e| crate::cloud::classify(&c.place(&shown), &e);
        super::object::probe(&c.store, &key, classify).await
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    /// Every configured container: its credentials and endpoint, and where each came from.
    fn describe(&self) -> Vec<String> {
        self.containers
            .values()
            .map(|c| {
                let c = &c.config;
                format!(
                    "  azure container  {}@{}\n    credentials    {}\n    endpoint       {} ({})",
                    c.container, c.account, c.credential_source, c.endpoint, c.endpoint_origin
                )
            })
            .collect()
    }
}
