//! Where a `gs://` bucket's credentials and endpoint come from, and its
//! object_store client.
//!
//! Credentials, first match wins (the order `check` prints):
//! 1. `spark.hadoop.fs.gs.[bucket.<b>.]auth.type`, when set, decides:
//!    `UNAUTHENTICATED` (anonymous), `COMPUTE_ENGINE` (the metadata server),
//!    `SERVICE_ACCOUNT_JSON_KEYFILE` (the key file below), `APPLICATION_DEFAULT`
//!    (3, 5, then 6); otherwise:
//! 2. a service-account JSON key file: `spark.hadoop.fs.gs.bucket.<b>.auth.service.account.json.keyfile`,
//!    else `spark.hadoop.fs.gs.auth.service.account.json.keyfile`, else
//!    `spark.hadoop.google.cloud.auth.service.account.json.keyfile` (the Hadoop
//!    connector's keys; the first is the S3A-style per-bucket override);
//! 3. `GOOGLE_APPLICATION_CREDENTIALS` (a service-account key or an
//!    `authorized_user` file);
//! 4. a custom endpoint (an emulator, an on-prem store) with none of the above:
//!    anonymous;
//! 5. gcloud's application-default file (`gcloud auth application-default login`,
//!    under `CLOUDSDK_CONFIG` or `~/.config/gcloud`): a laptop;
//! 6. the metadata server (`GCE_METADATA_HOST`, else `metadata.google.internal`):
//!    GKE workload identity, or the node's service account.
//!
//! Endpoint: `spark.hadoop.fs.gs.[bucket.<b>.]storage.root.url`, else
//! `STORAGE_EMULATOR_HOST` (`host:port` means `http://host:port`, as Google's
//! clients read it), else `https://storage.googleapis.com`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::gcp::{GcpCredential, GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::StaticCredentialProvider;

use super::{per_bucket, Place, Traced};
use crate::fault::SourceError;
use crate::properties::Properties;

/// The prefix of the Hadoop GCS connector's keys in a Spark properties file.
pub(crate) const HADOOP_PREFIX: &str = "spark.hadoop.fs.gs.";
/// The connector's older key for the service-account JSON key file.
const GOOGLE_KEYFILE: &str = "spark.hadoop.google.cloud.auth.service.account.json.keyfile";
/// Google's endpoint.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

// The environment variables read (a snapshot, so `check` and `fetch` agree).
use crate::env_vars::gcs as env;

/// Everything GCS configuration is made of: the properties file's connector
/// keys and a snapshot of the environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct GcsSettings {
    hadoop: BTreeMap<String, String>,
    properties_path: PathBuf,
    env: BTreeMap<&'static str, String>,
}

/// How requests to one bucket are authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GcsCredentials {
    /// A service-account JSON key (a self-signed JWT, no token exchange).
    KeyFile(PathBuf),
    /// An application-default credentials file (service account or authorized user).
    ApplicationDefault(PathBuf),
    /// The metadata server.
    Metadata,
    /// Unsigned requests.
    Anonymous,
}

/// One bucket's configuration, with where each part came from.
#[derive(Debug, Clone)]
pub(crate) struct GcsBucketConfig {
    pub bucket: String,
    pub credentials: GcsCredentials,
    /// Where the credentials came from, as `check` prints it.
    pub credential_source: String,
    /// The XML API's base URL, without a trailing `/`.
    pub endpoint: String,
    pub endpoint_origin: String,
}

impl GcsSettings {
    /// Reads the connector's keys from `props` and the environment.
    pub(crate) fn new(props: Option<&Properties>) -> Self {
        let env = super::env_snapshot(env::ALL);
        Self::with_env(props, env)
    }

    pub(crate) fn with_env(
        props: Option<&Properties>,
        env: BTreeMap<&'static str, String>,
    ) -> Self {
        let hadoop = super::hadoop_keys(props, |k| {
            k.starts_with(HADOOP_PREFIX) || k == GOOGLE_KEYFILE
        });
        GcsSettings {
            hadoop,
            properties_path: props
                .and_then(Properties::path)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            env,
        }
    }

    fn key_origin(&self, key: &str) -> String {
        format!("{key} in {}", self.properties_path.display())
    }

    /// The endpoint of `bucket` and where it came from.
    fn endpoint(&self, bucket: &str) -> Result<(String, String, bool), String> {
        if let Some((value, key)) =
            per_bucket(&self.hadoop, HADOOP_PREFIX, bucket, "storage.root.url")
        {
            let origin = self.key_origin(&key);
            return parse_endpoint(value)
                .map(|e| (e, origin.clone(), true))
                .map_err(|e| format!("{origin}: {e}"));
        }
        if let Some(host) = self.env.get(env::STORAGE_EMULATOR_HOST) {
            return parse_endpoint(host)
                .map(|e| (e, env::STORAGE_EMULATOR_HOST.to_owned(), true))
                .map_err(|e| format!("{}: {e}", env::STORAGE_EMULATOR_HOST));
        }
        Ok((DEFAULT_ENDPOINT.to_owned(), "default".to_owned(), false))
    }

    /// `bucket`'s configuration; every problem found is returned.
    pub(crate) fn resolve(&self, bucket: &str) -> Result<GcsBucketConfig, Vec<String>> {
        let (endpoint, endpoint_origin, custom) = self.endpoint(bucket).map_err(|e| vec![e])?;
        let (credentials, credential_source) = self.credentials(bucket, custom)?;
        Ok(GcsBucketConfig {
            bucket: bucket.to_owned(),
            credentials,
            credential_source,
            endpoint,
            endpoint_origin,
        })
    }

    fn credentials(
        &self,
        bucket: &str,
        custom_endpoint: bool,
    ) -> Result<(GcsCredentials, String), Vec<String>> {
        let keyfile = self.keyfile(bucket).map_err(|e| vec![e])?;
        let Some((auth_type, key)) = per_bucket(&self.hadoop, HADOOP_PREFIX, bucket, "auth.type")
        else {
            if let Some(found) = keyfile {
                return Ok(found);
            }
            if let Some(found) = self.application_default().map_err(|e| vec![e])? {
                return Ok(found);
            }
            if custom_endpoint {
                return Ok((
                    GcsCredentials::Anonymous,
                    "anonymous (a custom endpoint and no credentials given)".to_owned(),
                ));
            }
            return Ok(self.metadata(None));
        };
        let origin = self.key_origin(&key);
        match auth_type.to_ascii_uppercase().as_str() {
            "UNAUTHENTICATED" => Ok((GcsCredentials::Anonymous, format!("anonymous ({origin})"))),
            "COMPUTE_ENGINE" => Ok(self.metadata(Some(&origin))),
            "SERVICE_ACCOUNT_JSON_KEYFILE" => keyfile.ok_or_else(|| {
                vec![format!(
                    "{origin} is SERVICE_ACCOUNT_JSON_KEYFILE but no {HADOOP_PREFIX}auth.service.account.json.keyfile is set"
                )]
            }),
            "APPLICATION_DEFAULT" => Ok(self
                .application_default()
                .map_err(|e| vec![e])?
                .unwrap_or_else(|| self.metadata(Some(&origin)))),
            other => Err(vec![format!(
                "{origin}: auth type '{other}' is not one spark-localizer reads (UNAUTHENTICATED, COMPUTE_ENGINE, SERVICE_ACCOUNT_JSON_KEYFILE, APPLICATION_DEFAULT)"
            )]),
        }
    }

    /// The service-account key file the connector's keys name, checked.
    fn keyfile(&self, bucket: &str) -> Result<Option<(GcsCredentials, String)>, String> {
        let keyfile = per_bucket(
            &self.hadoop,
            HADOOP_PREFIX,
            bucket,
            "auth.service.account.json.keyfile",
        )
        .or_else(|| {
            self.hadoop
                .get(GOOGLE_KEYFILE)
                .map(|v| (v.as_str(), GOOGLE_KEYFILE.to_owned()))
        });
        let Some((path, key)) = keyfile else {
            return Ok(None);
        };
        let origin = self.key_origin(&key);
        check_key_file(Path::new(path), &["service_account"])
            .map_err(|e| format!("{origin}: {e}"))?;
        Ok(Some((
            GcsCredentials::KeyFile(PathBuf::from(path)),
            format!("service-account key {path} ({origin})"),
        )))
    }

    /// `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's application-default file.
    fn application_default(&self) -> Result<Option<(GcsCredentials, String)>, String> {
        if let Some(path) = self.env.get(env::APPLICATION_CREDENTIALS) {
            check_key_file(Path::new(path), &["service_account", "authorized_user"])
                .map_err(|e| format!("{}: {e}", env::APPLICATION_CREDENTIALS))?;
            return Ok(Some((
                GcsCredentials::ApplicationDefault(PathBuf::from(path)),
                format!("{path} ({})", env::APPLICATION_CREDENTIALS),
            )));
        }
        // Present but not a regular file (a fifo): said, never skipped silently.
        let Some(path) = self.gcloud_file().filter(|p| p.symlink_metadata().is_ok()) else {
            return Ok(None);
        };
        check_key_file(&path, &["service_account", "authorized_user"])
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let shown = path.display().to_string();
        Ok(Some((
            GcsCredentials::ApplicationDefault(path),
            format!("{shown} (gcloud auth application-default login)"),
        )))
    }

    /// The metadata server, as `check` names it.
    fn metadata(&self, origin: Option<&str>) -> (GcsCredentials, String) {
        let host = self
            .env
            .get(env::METADATA_HOST)
            .map(|h| format!("{h} ({})", env::METADATA_HOST))
            .unwrap_or_else(|| "metadata.google.internal".to_owned());
        let why = origin.map_or_else(
            || "GKE workload identity or the node's service account".to_owned(),
            |o| format!("chosen by {o}"),
        );
        (
            GcsCredentials::Metadata,
            format!("the metadata server at {host}: {why}"),
        )
    }

    /// gcloud's application-default credentials file.
    fn gcloud_file(&self) -> Option<PathBuf> {
        let dir = match self.env.get(env::CLOUDSDK_CONFIG) {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(self.env.get("HOME")?).join(".config/gcloud"),
        };
        Some(dir.join("application_default_credentials.json"))
    }
}

/// An endpoint as Google's clients take it: a URL, or `host:port` for plain HTTP.
fn parse_endpoint(value: &str) -> Result<String, String> {
    let text = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let url = url::Url::parse(&text).map_err(|e| format!("'{value}' is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "'{value}' is not an http(s) endpoint (write https://host[:port] or host:port)"
        ));
    }
    if url.query().is_some() || !url.username().is_empty() {
        return Err(format!("'{value}' may not hold a query or credentials"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// A JSON key file that can be read and is of one of `types`; nothing of its
/// content is ever shown.
fn check_key_file(path: &Path, types: &[&str]) -> Result<(), String> {
    // Never a fifo or a device (a mounted Secret is a regular file).
    let text = crate::util::fs::read_config_text(path)
        .map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        format!(
            "{} is not a JSON key file (create one with gcloud iam service-accounts keys create)",
            path.display()
        )
    })?;
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
    if !types.contains(&kind) {
        return Err(format!(
            "{} holds credentials of type '{kind}'; spark-localizer reads {} (for workload identity federation, use GKE workload identity through the metadata server)",
            path.display(),
            types.join(" or ")
        ));
    }
    if kind == "service_account" {
        for field in ["private_key", "client_email"] {
            if value.get(field).and_then(|v| v.as_str()).is_none() {
                return Err(format!("{} has no '{field}'", path.display()));
            }
        }
        if let Some(key) = value.get("private_key").and_then(|v| v.as_str()) {
            crate::util::redact::register_secret(key);
        }
    }
    Ok(())
}

/// A bucket's store and how it was configured.
pub(crate) struct GcsBucket {
    pub store: GoogleCloudStorage,
    pub config: GcsBucketConfig,
}

impl GcsBucket {
    /// The bucket's store; object_store's own retries are off (the engine retries).
    pub(crate) fn open(
        config: GcsBucketConfig,
        client: &reqwest::Client,
    ) -> object_store::Result<GcsBucket> {
        let mut b = GoogleCloudStorageBuilder::new()
            .with_bucket_name(&config.bucket)
            .with_base_url(&config.endpoint)
            .with_retry(super::no_retries())
            .with_http_connector(Traced::new(client, None));
        b = match &config.credentials {
            GcsCredentials::KeyFile(path) => {
                b.with_service_account_path(path.to_string_lossy().into_owned())
            }
            GcsCredentials::ApplicationDefault(path) => {
                b.with_application_credentials(path.to_string_lossy().into_owned())
            }
            GcsCredentials::Metadata => b,
            GcsCredentials::Anonymous => b.with_skip_signature(true).with_credentials(Arc::new(
                StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                }),
            )),
        };
        Ok(GcsBucket {
            store: b.build()?,
            config,
        })
    }

    /// Where a request for `shown` went, for [`super::classify`].
    pub(crate) fn place<'a>(&'a self, shown: &'a str) -> Place<'a> {
        Place {
            shown,
            service: "GCS",
            endpoint: &self.config.endpoint,
            bucket: &self.config.bucket,
            credentials: &self.config.credential_source,
            auth_hint: "give the bucket's reader role (roles/storage.objectViewer) to the service account, or other credentials: spark.hadoop.fs.gs.auth.service.account.json.keyfile, GOOGLE_APPLICATION_CREDENTIALS or GKE workload identity",
        }
    }

    /// Gets a token before the first request, so a credential failure is
    /// reported as such (within its time limit), not as the endpoint's.
    pub(crate) async fn credentials(&self, shown: &str) -> Result<(), SourceError> {
        let (limit, hint) = match self.config.credentials {
            GcsCredentials::Anonymous => return Ok(()),
            GcsCredentials::Metadata => (
                super::METADATA_TIMEOUT,
                "inside GKE, workload identity needs the Kubernetes ServiceAccount annotated with iam.gke.io/gcp-service-account and the node pool's GKE metadata server; outside Google Cloud, give a key: spark.hadoop.fs.gs.auth.service.account.json.keyfile or GOOGLE_APPLICATION_CREDENTIALS",
            ),
            _ => (super::TOKEN_TIMEOUT, ""),
        };
        let what = &self.config.credential_source;
        let token = self.store.credentials().get_credential();
        let bearer = |c: &Arc<GcpCredential>| Some(c.bearer.clone());
        super::token_within(shown, what, limit, hint, token, bearer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(props: &str, env: &[(&'static str, &str)]) -> GcsSettings {
        let props = Properties::parse(props).unwrap();
        GcsSettings::with_env(
            Some(&props),
            env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        )
    }

    #[test]
    fn the_emulator_host_is_plain_http_and_anonymous() {
        let s = settings("", &[(env::STORAGE_EMULATOR_HOST, "127.0.0.1:4443")]);
        let c = s.resolve("b").unwrap();
        assert_eq!(c.endpoint, "http://127.0.0.1:4443");
        assert_eq!(c.credentials, GcsCredentials::Anonymous);
        assert_eq!(c.endpoint_origin, env::STORAGE_EMULATOR_HOST);
    }

    #[test]
    fn the_root_url_key_beats_the_emulator_and_may_be_per_bucket() {
        let s = settings(
            "spark.hadoop.fs.gs.storage.root.url=https://gcs.example:8443/\nspark.hadoop.fs.gs.bucket.special.storage.root.url=http://10.0.0.1:80",
            &[(env::STORAGE_EMULATOR_HOST, "127.0.0.1:4443")],
        );
        assert_eq!(s.resolve("b").unwrap().endpoint, "https://gcs.example:8443");
        assert_eq!(s.resolve("special").unwrap().endpoint, "http://10.0.0.1:80");
    }

    #[test]
    fn without_anything_the_metadata_server_is_asked() {
        let s = settings("", &[("HOME", "/nonexistent")]);
        let c = s.resolve("b").unwrap();
        assert_eq!(c.credentials, GcsCredentials::Metadata);
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
    }

    #[test]
    fn unauthenticated_is_anonymous_even_on_google() {
        let s = settings("spark.hadoop.fs.gs.auth.type=UNAUTHENTICATED", &[]);
        assert_eq!(
            s.resolve("b").unwrap().credentials,
            GcsCredentials::Anonymous
        );
    }

    #[test]
    fn a_bad_key_file_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.json");
        std::fs::write(
            &path,
            "{\"type\":\"external_account\",\"secret\":\"s3cr3t\"}",
        )
        .unwrap();
        let s = settings(
            &format!(
                "spark.hadoop.fs.gs.auth.service.account.json.keyfile={}",
                path.display()
            ),
            &[],
        );
        let problems = s.resolve("b").unwrap_err().join("\n");
        assert!(problems.contains("external_account"), "{problems}");
        assert!(
            problems.contains("auth.service.account.json.keyfile"),
            "{problems}"
        );
        assert!(!problems.contains("s3cr3t"), "{problems}");
        let missing = settings("", &[(env::APPLICATION_CREDENTIALS, "/nope/key.json")]);
        let problems = missing.resolve("b").unwrap_err().join("\n");
        assert!(
            problems.contains("GOOGLE_APPLICATION_CREDENTIALS"),
            "{problems}"
        );
    }

    #[test]
    fn a_gcloud_file_that_is_a_fifo_is_refused_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("application_default_credentials.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            return;
        }
        let d = dir.path().display().to_string();
        let s = settings("", &[(env::CLOUDSDK_CONFIG, d.as_str())]);
        let problems = s.resolve("bkt").unwrap_err().join("\n");
        assert!(problems.contains("not a regular file"), "{problems}");
    }

    #[test]
    fn endpoints_that_are_not_http_are_refused() {
        assert!(parse_endpoint("ftp://x").is_err());
        assert!(parse_endpoint("https://u:p@x").is_err());
        assert_eq!(parse_endpoint("https://x/").unwrap(), "https://x");
    }
}
