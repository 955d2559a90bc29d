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
pub const S3_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_S3_CREDENTIALS_DIR";
pub const HADOOP_CONF_DIR: &str = "SPARK_LOCALIZER_HADOOP_CONF_DIR";
pub const STAGING_URI: &str = "SPARK_LOCALIZER_STAGING_URI";
pub const STAGING_JARS_ID: &str = "SPARK_LOCALIZER_STAGING_JARS_ID";
pub const STAGING_FILES_ID: &str = "SPARK_LOCALIZER_STAGING_FILES_ID";
pub const STAGING_JARS_SECRET_FILE: &str = "SPARK_LOCALIZER_STAGING_JARS_SECRET_FILE";
pub const STAGING_FILES_SECRET_FILE: &str = "SPARK_LOCALIZER_STAGING_FILES_SECRET_FILE";
pub const STAGING_CA_CERT: &str = "SPARK_LOCALIZER_STAGING_CA_CERT";
pub const LOG_FORMAT: &str = "SPARK_LOCALIZER_LOG_FORMAT";
// `stage serve`.
pub const STAGE_LISTEN: &str = "SPARK_LOCALIZER_STAGE_LISTEN";
pub const STAGE_STORE: &str = "SPARK_LOCALIZER_STAGE_STORE";
pub const STAGE_TLS_CERT: &str = "SPARK_LOCALIZER_STAGE_TLS_CERT";
pub const STAGE_TLS_KEY: &str = "SPARK_LOCALIZER_STAGE_TLS_KEY";
pub const STAGE_MAX_UPLOAD_BYTES: &str = "SPARK_LOCALIZER_STAGE_MAX_UPLOAD_BYTES";
pub const STAGE_UNUSED_TTL: &str = "SPARK_LOCALIZER_STAGE_UNUSED_TTL";
pub const STAGE_MAX_TTL: &str = "SPARK_LOCALIZER_STAGE_MAX_TTL";
pub const STAGE_S3_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_STAGE_S3_CREDENTIALS_DIR";
pub const STAGE_OWNER_CHECK_INTERVAL: &str = "SPARK_LOCALIZER_STAGE_OWNER_CHECK_INTERVAL";
pub const STAGE_KUBE_API: &str = "SPARK_LOCALIZER_STAGE_KUBE_API";
pub const STAGE_KUBE_TOKEN_FILE: &str = "SPARK_LOCALIZER_STAGE_KUBE_TOKEN_FILE";
pub const STAGE_KUBE_CA_CERT: &str = "SPARK_LOCALIZER_STAGE_KUBE_CA_CERT";
// `stage upload`.
pub const STAGE_SERVER: &str = "SPARK_LOCALIZER_STAGE_SERVER";
pub const STAGE_CA_CERT: &str = "SPARK_LOCALIZER_STAGE_CA_CERT";
pub const STAGE_NAMESPACE: &str = "SPARK_LOCALIZER_STAGE_NAMESPACE";
pub const STAGE_LABELS: &str = "SPARK_LOCALIZER_STAGE_LABELS";
pub const STAGE_SECRET_MANIFEST: &str = "SPARK_LOCALIZER_STAGE_SECRET_MANIFEST";
pub const STAGE_KIND: &str = "SPARK_LOCALIZER_STAGE_KIND";
/// Extra trust anchors, honoured like OpenSSL and curl do (a PEM bundle).
pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";
/// Set by the kubelet in every pod: the API server's address (`stage serve` owner checks).
pub const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
pub const KUBERNETES_SERVICE_PORT: &str = "KUBERNETES_SERVICE_PORT";
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

/// The standard AWS variables the S3 source reads (see `source::s3::settings`).
pub mod aws {
    pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
    pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
    pub const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
    pub const REGION: &str = "AWS_REGION";
    pub const DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
    pub const ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
    pub const ENDPOINT_URL_S3: &str = "AWS_ENDPOINT_URL_S3";
    pub const ENDPOINT_URL_STS: &str = "AWS_ENDPOINT_URL_STS";
    pub const ALLOW_HTTP: &str = "AWS_ALLOW_HTTP";
    pub const VIRTUAL_HOSTED_STYLE_REQUEST: &str = "AWS_VIRTUAL_HOSTED_STYLE_REQUEST";
    pub const WEB_IDENTITY_TOKEN_FILE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";
    pub const ROLE_ARN: &str = "AWS_ROLE_ARN";
    pub const ROLE_SESSION_NAME: &str = "AWS_ROLE_SESSION_NAME";
    pub const CONTAINER_CREDENTIALS_FULL_URI: &str = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
    pub const CONTAINER_AUTHORIZATION_TOKEN_FILE: &str = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";
    pub const CONTAINER_CREDENTIALS_RELATIVE_URI: &str = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
    pub const EC2_METADATA_SERVICE_ENDPOINT: &str = "AWS_EC2_METADATA_SERVICE_ENDPOINT";

    /// Every variable above, for snapshots.
    pub const ALL: &[&str] = &[
        ACCESS_KEY_ID,
        SECRET_ACCESS_KEY,
        SESSION_TOKEN,
        REGION,
        DEFAULT_REGION,
        ENDPOINT_URL,
        ENDPOINT_URL_S3,
        ENDPOINT_URL_STS,
        ALLOW_HTTP,
        VIRTUAL_HOSTED_STYLE_REQUEST,
        WEB_IDENTITY_TOKEN_FILE,
        ROLE_ARN,
        ROLE_SESSION_NAME,
        CONTAINER_CREDENTIALS_FULL_URI,
        CONTAINER_AUTHORIZATION_TOKEN_FILE,
        CONTAINER_CREDENTIALS_RELATIVE_URI,
        EC2_METADATA_SERVICE_ENDPOINT,
    ];
}

/// `stage serve`: the archive limits uploads are checked against.
pub const STAGE_ARCHIVE_MAX_BYTES: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_BYTES";
pub const STAGE_ARCHIVE_MAX_ENTRIES: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_ENTRIES";
pub const STAGE_ARCHIVE_MAX_RATIO: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_RATIO";
