//! The resource staging server (`stage serve`): holds the files spark-submit
//! uploads from the submitter's machine until the init containers fetch them.
//!
//! Wire-compatible with the v0 API of the apache-spark-on-k8s staging server (see
//! [`api`]). Beyond it: resource secrets are kept only as sha256 hashes and compared
//! in constant time; uploads stream to disk, are checked against the archive rules
//! of [`crate::archive`] and are committed atomically ([`store`]); size limits;
//! expiry of never-downloaded bundles (`--unused-ttl`) and of all bundles
//! (`--max-ttl`) and of downloaded bundles whose owner pods are gone ([`owners`],
//! Kubernetes API); `DELETE`, `HEAD` and `Range`; `/healthz` and `/metrics`; TLS from
//! PEM files. Bundles live in a local directory ([`store::LocalStore`]) or in an S3
//! bucket shared by several replicas ([`store_s3::S3Store`], `--store s3://…`),
//! both behind [`store::Store`].
//!
//! `stage upload` ([`upload`]) is the client: it streams local files to a server as
//! one flat tar.gz bundle and returns the id and secret (or a Secret manifest) to
//! print. The fetch side (`staging://`, in `crate::source`) shares the wire contract
//! of [`api`] with both.
//!
//! Nothing here knows exit codes, signals or stdout beyond the server's one
//! listening line: [`server::ServeError`] and [`upload::UploadError`] carry a kind
//! the command layer maps, and the server stops when the future it is given does.

pub(crate) mod api;
pub(crate) mod names;
pub(crate) mod owners;
pub(crate) mod server;
pub(crate) mod store;
pub(crate) mod store_s3;
pub(crate) mod upload;
