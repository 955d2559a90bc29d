//! The rustls client configuration every HTTPS client builds on: aws-lc-rs, the
//! safe default protocol versions, HTTP/2 and HTTP/1.1 over ALPN, and the trust
//! roots it is given (the bundled and system roots, or a cluster's CA alone).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// Mozilla's roots bundled with the binary (no system store needed, so an empty
/// chroot works), plus the system store when there is one.
pub(crate) fn default_roots() -> RootCertStore {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    // The system store is a bonus: images without one are fine.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    roots
}

/// Adds every certificate of the PEM text `pem` to `roots`; returns how many were
/// added (0: the file holds no usable certificate).
pub(crate) fn add_pem_certificates(roots: &mut RootCertStore, pem: &[u8]) -> usize {
    CertificateDer::pem_slice_iter(pem)
        .flatten()
        .filter_map(|cert| roots.add(cert).ok())
        .count()
}

/// A client configuration trusting `roots`, offering HTTP/2 and HTTP/1.1.
pub(crate) fn client_config(roots: RootCertStore) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
