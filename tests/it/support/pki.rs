//! A throwaway test CA (rcgen) and a leaf certificate for 127.0.0.1 / localhost
//! that it signed, in the forms rustls (DER) and nginx (PEM files) want.

use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub struct Pki {
    /// The CA certificate, what `--ca-cert` is given.
    pub ca_pem: String,
    /// The leaf certificate (signed by the CA) and its key.
    pub cert_pem: String,
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Pki {
    pub fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "spark-localizer test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        Pki {
            ca_pem: ca.pem(),
            cert_pem: leaf.pem(),
            key_pem: leaf_key.serialize_pem(),
            cert_der: leaf.der().clone(),
            key_der: leaf_key.serialize_der(),
        }
    }

    /// The leaf chain and key for a rustls server.
    pub fn server_identity(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.cert_der.clone()],
            PrivateKeyDer::Pkcs8(self.key_der.clone().into()),
        )
    }

    /// A rustls server configuration presenting the leaf (HTTP/1.1 over ALPN).
    pub fn server_config(&self) -> std::sync::Arc<rustls::ServerConfig> {
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let (chain, key) = self.server_identity();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        std::sync::Arc::new(config)
    }

    /// Writes `cert.pem` and `key.pem` (the leaf) into `dir`; returns their paths.
    pub fn write_leaf(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }
}
