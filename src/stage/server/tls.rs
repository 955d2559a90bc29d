//! HTTPS for `stage serve`: a rustls server configuration from the PEM files of
//! `--tls-cert` and `--tls-key`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::util::fs::{read_regular, CONFIG_LIMIT};

/// Why `--tls-cert`/`--tls-key` cannot be used (a configuration error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsSetupError {
    #[error("{flag} {path}: cannot read")]
    Read {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--tls-cert {path}")]
    CertPem {
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("--tls-cert {path}: no CERTIFICATE block found")]
    NoCertificate { path: PathBuf },
    #[error("--tls-key {path}")]
    KeyPem {
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("--tls-cert")]
    Versions(#[source] rustls::Error),
    #[error("--tls-cert {cert} / --tls-key {key}")]
    CertAndKey {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// A rustls server configuration from PEM files (HTTP/1.1 over ALPN). Each file
/// must be a regular file (a fifo is refused rather than waited on).
pub(super) fn server_config(
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsSetupError> {
    let read = |flag: &'static str, path: &Path| {
        read_regular(path, CONFIG_LIMIT).map_err(|source| TlsSetupError::Read {
            flag,
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = read("--tls-cert", cert)?;
    let key_pem = read("--tls-key", key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsSetupError::CertPem {
            path: cert.to_owned(),
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            path: cert.to_owned(),
        });
    }
    let key_der =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| TlsSetupError::KeyPem {
            path: key.to_owned(),
            source,
        })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsSetupError::Versions)?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|source| TlsSetupError::CertAndKey {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
