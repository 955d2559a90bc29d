//! Where staging bundles come from: the staging server's URL, the files holding
//! the bundles' secrets (by default where the original init container mounted
//! them) and the CA files trusted for the server.

use std::path::{Path, PathBuf};

use super::layers::{Found, Layers};
use super::table::{self, Setting};
use super::{ConfigError, Problems, Sourced, StagingSettings};
use crate::cli::FetchArgs;
use crate::net::CaFile;
use crate::stage::api::{FILES_SECRET_KEY, JARS_SECRET_KEY, SECRET_MOUNT_PATH};

/// The staging server's URL, the secret files and the staging CA files.
pub(super) fn settings(
    args: &FetchArgs,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> StagingSettings {
    let given = args
        .staging_uri
        .as_ref()
        .map(|value| value.trim().to_owned());
    let declared = match layers.find(&table::STAGING_URI, given) {
        Some(Found::Given(value) | Found::Property(value)) => Some(value),
        None => None,
    };
    let uri_given = declared.is_some();
    let uri = declared.and_then(|declared| match parse_staging_uri(&declared.value) {
        Ok(value) => Some(Sourced {
            value,
            origin: declared.origin,
        }),
        Err(reason) => {
            problems.push(ConfigError::Invalid {
                what: declared.origin.to_string(),
                reason,
            });
            None
        }
    });
    let secret = |setting: &Setting, given: &Option<PathBuf>, file: &str| {
        layers.value_or(setting, given.clone(), PathBuf::from, || {
            Path::new(SECRET_MOUNT_PATH).join(file)
        })
    };
    StagingSettings {
        uri_invalid: uri_given && uri.is_none(),
        uri,
        jars_secret: secret(
            &table::STAGING_JARS_SECRET,
            &args.staging_jars_secret_file,
            JARS_SECRET_KEY,
        ),
        files_secret: secret(
            &table::STAGING_FILES_SECRET,
            &args.staging_files_secret_file,
            FILES_SECRET_KEY,
        ),
        ca_files: ca_files(args, layers),
    }
}

/// `--staging-ca-cert` files, else the PEM file Spark's staging-server SSL keys name.
fn ca_files(args: &FetchArgs, layers: &Layers<'_>) -> Vec<CaFile> {
    let setting = &table::STAGING_CA_CERT;
    if args.staging_ca_cert.is_empty() {
        return setting
            .keys
            .iter()
            .find_map(|key| layers.property(key))
            .map(|value| {
                vec![CaFile {
                    path: PathBuf::from(value.value),
                    origin: value.origin.to_string(),
                }]
            })
            .unwrap_or_default();
    }
    let origin = layers.origin(setting).to_string();
    args.staging_ca_cert
        .iter()
        .map(|path| CaFile {
            path: path.clone(),
            origin: origin.clone(),
        })
        .collect()
}

/// A staging server URL: http(s), a host, no credentials, query or fragment.
fn parse_staging_uri(value: &str) -> Result<url::Url, String> {
    let shown = crate::util::redact::redact_url(value);
    let url = url::Url::parse(value)
        .map_err(|e| format!("{shown} is not a URL ({e}); e.g. http://spark-staging:10000"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!(
            "{shown} is not an http:// or https:// URL with a host; e.g. http://spark-staging:10000"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{shown} carries credentials; the staging server takes each bundle's secret from its secret file"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{shown} has a query or fragment; give the server's base URL"
        ));
    }
    Ok(url)
}
