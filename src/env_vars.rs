//! Every environment variable spark-localizer reads, in one place.
//!
//! Each flag has a twin named `SPARK_LOCALIZER_<FLAG>`; flag beats env beats
//! the properties file. Secrets are only ever read from env or files.

pub const JARS: &str = "SPARK_LOCALIZER_JARS";
pub const FILES: &str = "SPARK_LOCALIZER_FILES";
pub const ARCHIVES: &str = "SPARK_LOCALIZER_ARCHIVES";
pub const ARCHIVE_CLASSPATH: &str = "SPARK_LOCALIZER_ARCHIVE_CLASSPATH";
pub const ARCHIVE_MAX_BYTES: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_BYTES";
pub const ARCHIVE_MAX_ENTRIES: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_ENTRIES";
pub const ARCHIVE_MAX_RATIO: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_RATIO";
pub const PROPERTIES_FILE: &str = "SPARK_LOCALIZER_PROPERTIES_FILE";
pub const JARS_DIR: &str = "SPARK_LOCALIZER_JARS_DIR";
pub const FILES_DIR: &str = "SPARK_LOCALIZER_FILES_DIR";
pub const CHECKSUMS: &str = "SPARK_LOCALIZER_CHECKSUMS";
pub const PARALLELISM: &str = "SPARK_LOCALIZER_PARALLELISM";
pub const RETRIES: &str = "SPARK_LOCALIZER_RETRIES";
pub const RETRY_DELAY: &str = "SPARK_LOCALIZER_RETRY_DELAY";
pub const STALL_TIMEOUT: &str = "SPARK_LOCALIZER_STALL_TIMEOUT";
pub const CONNECT_TIMEOUT: &str = "SPARK_LOCALIZER_CONNECT_TIMEOUT";
pub const DEADLINE: &str = "SPARK_LOCALIZER_DEADLINE";
pub const CA_CERT: &str = "SPARK_LOCALIZER_CA_CERT";
pub const HTTP_HEADER_FILE: &str = "SPARK_LOCALIZER_HTTP_HEADER_FILE";
pub const FSYNC: &str = "SPARK_LOCALIZER_FSYNC";
pub const CLASSPATH_FILE: &str = "SPARK_LOCALIZER_CLASSPATH_FILE";
pub const ENV_FILE: &str = "SPARK_LOCALIZER_ENV_FILE";
pub const REPORT: &str = "SPARK_LOCALIZER_REPORT";
pub const TERMINATION_LOG: &str = "SPARK_LOCALIZER_TERMINATION_LOG";
pub const NO_PROGRESS: &str = "SPARK_LOCALIZER_NO_PROGRESS";
pub const PROGRESS_INTERVAL: &str = "SPARK_LOCALIZER_PROGRESS_INTERVAL";
pub const LOG_FORMAT: &str = "SPARK_LOCALIZER_LOG_FORMAT";
/// Extra trust anchors, honoured like OpenSSL and curl do (a PEM bundle).
pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";
/// Tracing filter override (e.g. `spark_localizer=debug`).
pub const LOG: &str = "SPARK_LOCALIZER_LOG";

/// Proxy variables honoured (values may hold credentials: never printed).
pub const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Where Kubernetes mounts the file whose content `kubectl describe pod` shows.
pub const DEFAULT_TERMINATION_LOG: &str = "/dev/termination-log";
