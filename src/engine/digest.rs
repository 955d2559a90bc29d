//! The digests computed while an artifact's bytes arrive: sha256 always (pins,
//! records, the report), sha1 too when a Maven repository's checksum is to be
//! checked (`--packages` jars).

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// The running digests of one transfer.
#[derive(Clone)]
pub(crate) struct Hashes {
    sha256: Sha256,
    sha1: Option<Sha1>,
}

impl Hashes {
    pub(crate) fn new(with_sha1: bool) -> Self {
        Hashes {
            sha256: Sha256::new(),
            sha1: with_sha1.then(Sha1::new),
        }
    }

    /// The same digests, started over.
    pub(crate) fn fresh(&self) -> Self {
        Hashes::new(self.sha1.is_some())
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        self.sha256.update(data);
        if let Some(sha1) = &mut self.sha1 {
            sha1.update(data);
        }
    }

    /// The sha256, and the sha1 when it was asked for.
    pub(crate) fn finalize(self) -> ([u8; 32], Option<[u8; 20]>) {
        (
            self.sha256.finalize().into(),
            self.sha1.map(|s| s.finalize().into()),
        )
    }
}
