//! The staging server's v0 upload (`POST /api/v0/resources`, multipart), in
//! process against a real store directory.

use axum::http::StatusCode;

use crate::archive::validate::list_tar_gz;
use crate::archive::Limits;
use crate::stage::server::upload_once;

/// The boundary the fuzzed bodies are sent with (the seeds use it).
const BOUNDARY: &str = "sparklocalizerfuzz";

/// Fuzz entry point: a multipart upload body. The answer is 201 with exactly
/// one bundle stored, a tar.gz the archive rules accept within the limits the
/// server was given, or a 4xx with nothing stored and nothing left in the
/// spool; never a 5xx.
pub fn upload(data: &[u8]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (status, stored) = upload_once(dir.path(), BOUNDARY, data.to_vec());
    assert!(!status.is_server_error(), "{status}");
    if status == StatusCode::CREATED {
        assert_eq!(stored.len(), 1, "201 with {} bundles stored", stored.len());
        let bundle = dir
            .path()
            .join("bundles")
            .join(&stored[0].id)
            .join("bundle.tar.gz");
        let limits = Limits {
            max_bytes: 1 << 20,
            max_entries: 64,
            ..Limits::default()
        };
        let listing = list_tar_gz(&bundle, &limits)
            .unwrap_or_else(|e| panic!("a stored bundle the rules refuse: {e}"));
        assert!(listing.unpacked.bytes <= limits.max_bytes);
        assert_eq!(std::fs::metadata(&bundle).unwrap().len(), stored[0].size);
    } else {
        assert!(status.is_client_error(), "{status}");
        assert!(stored.is_empty(), "{status} with a bundle stored");
    }
    let spool: Vec<_> = std::fs::read_dir(dir.path().join("tmp"))
        .expect("the spool directory")
        .map(|e| e.unwrap().path())
        .collect();
    assert!(spool.is_empty(), "left in the spool: {spool:?}");
}
