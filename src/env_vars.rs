//! Every environment variable spark-localizer reads, in one place.
//!
//! Each flag has a twin named `SPARK_LOCALIZER_<FLAG>`; flag beats env beats
//! the properties file. Secrets are only ever read from env or files.

pub(crate) const JARS: &str = "SPARK_LOCALIZER_JARS";
pub(crate) const FILES: &str = "SPARK_LOCALIZER_FILES";
pub(crate) const ARCHIVES: &str = "SPARK_LOCALIZER_ARCHIVES";
pub(crate) const ARCHIVE_CLASSPATH: &str = "SPARK_LOCALIZER_ARCHIVE_CLASSPATH";
pub(crate) const ARCHIVE_MAX_BYTES: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_BYTES";
pub(crate) const ARCHIVE_MAX_ENTRIES: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_ENTRIES";
pub(crate) const ARCHIVE_MAX_RATIO: &str = "SPARK_LOCALIZER_ARCHIVE_MAX_RATIO";
pub(crate) const PROPERTIES_FILE: &str = "SPARK_LOCALIZER_PROPERTIES_FILE";
pub(crate) const JARS_DIR: &str = "SPARK_LOCALIZER_JARS_DIR";
pub(crate) const FILES_DIR: &str = "SPARK_LOCALIZER_FILES_DIR";
pub(crate) const CHECKSUMS: &str = "SPARK_LOCALIZER_CHECKSUMS";
pub(crate) const PARALLELISM: &str = "SPARK_LOCALIZER_PARALLELISM";
pub(crate) const RETRIES: &str = "SPARK_LOCALIZER_RETRIES";
pub(crate) const RETRY_DELAY: &str = "SPARK_LOCALIZER_RETRY_DELAY";
pub(crate) const STALL_TIMEOUT: &str = "SPARK_LOCALIZER_STALL_TIMEOUT";
pub(crate) const CONNECT_TIMEOUT: &str = "SPARK_LOCALIZER_CONNECT_TIMEOUT";
pub(crate) const DEADLINE: &str = "SPARK_LOCALIZER_DEADLINE";
pub(crate) const CA_CERT: &str = "SPARK_LOCALIZER_CA_CERT";
pub(crate) const HTTP_HEADER_FILE: &str = "SPARK_LOCALIZER_HTTP_HEADER_FILE";
pub(crate) const FSYNC: &str = "SPARK_LOCALIZER_FSYNC";
pub(crate) const CLASSPATH_FILE: &str = "SPARK_LOCALIZER_CLASSPATH_FILE";
pub(crate) const ENV_FILE: &str = "SPARK_LOCALIZER_ENV_FILE";
pub(crate) const REPORT: &str = "SPARK_LOCALIZER_REPORT";
/// `--sbom`.
pub(crate) const SBOM: &str = "SPARK_LOCALIZER_SBOM";
/// `--no-sbom`.
pub(crate) const NO_SBOM: &str = "SPARK_LOCALIZER_NO_SBOM";
pub(crate) const TERMINATION_LOG: &str = "SPARK_LOCALIZER_TERMINATION_LOG";
pub(crate) const NO_PROGRESS: &str = "SPARK_LOCALIZER_NO_PROGRESS";
pub(crate) const PROGRESS_INTERVAL: &str = "SPARK_LOCALIZER_PROGRESS_INTERVAL";
/// `--spark-home` (the classpath doctor's image).
pub(crate) const SPARK_HOME: &str = "SPARK_LOCALIZER_SPARK_HOME";
/// `--spark-jars` (the classpath doctor's image jars directory).
pub(crate) const SPARK_JARS: &str = "SPARK_LOCALIZER_SPARK_JARS";
/// `--doctor-strict`.
pub(crate) const DOCTOR_STRICT: &str = "SPARK_LOCALIZER_DOCTOR_STRICT";
/// `check --output`.
pub(crate) const OUTPUT: &str = "SPARK_LOCALIZER_OUTPUT";
/// Spark's own: `check`'s default image when no --spark-home or --spark-jars is given.
pub(crate) const SPARK_HOME_DEFAULT: &str = "SPARK_HOME";
pub(crate) const S3_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_S3_CREDENTIALS_DIR";
/// `--azure-credentials-dir`.
pub(crate) const AZURE_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_AZURE_CREDENTIALS_DIR";
pub(crate) const HADOOP_CONF_DIR: &str = "SPARK_LOCALIZER_HADOOP_CONF_DIR";
pub(crate) const KERBEROS_KEYTAB: &str = "SPARK_LOCALIZER_KERBEROS_KEYTAB";
pub(crate) const KERBEROS_PRINCIPAL: &str = "SPARK_LOCALIZER_KERBEROS_PRINCIPAL";
pub(crate) const STAGING_URI: &str = "SPARK_LOCALIZER_STAGING_URI";
pub(crate) const STAGING_JARS_ID: &str = "SPARK_LOCALIZER_STAGING_JARS_ID";
pub(crate) const STAGING_FILES_ID: &str = "SPARK_LOCALIZER_STAGING_FILES_ID";
pub(crate) const STAGING_JARS_SECRET_FILE: &str = "SPARK_LOCALIZER_STAGING_JARS_SECRET_FILE";
pub(crate) const STAGING_FILES_SECRET_FILE: &str = "SPARK_LOCALIZER_STAGING_FILES_SECRET_FILE";
pub(crate) const STAGING_CA_CERT: &str = "SPARK_LOCALIZER_STAGING_CA_CERT";
pub(crate) const LOG_FORMAT: &str = "SPARK_LOCALIZER_LOG_FORMAT";
pub(crate) const PACKAGES: &str = "SPARK_LOCALIZER_PACKAGES";
pub(crate) const REPOSITORIES: &str = "SPARK_LOCALIZER_REPOSITORIES";
pub(crate) const EXCLUDE_PACKAGES: &str = "SPARK_LOCALIZER_EXCLUDE_PACKAGES";
pub(crate) const ONLY_REPOSITORIES: &str = "SPARK_LOCALIZER_ONLY_REPOSITORIES";
pub(crate) const IVY_SETTINGS: &str = "SPARK_LOCALIZER_IVY_SETTINGS";
pub(crate) const REPOSITORY_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_REPOSITORY_CREDENTIALS_DIR";
pub(crate) const RESOLUTION: &str = "SPARK_LOCALIZER_RESOLUTION";
pub(crate) const LOCK: &str = "SPARK_LOCALIZER_LOCK";
pub(crate) const VERIFY_SIGNATURES: &str = "SPARK_LOCALIZER_VERIFY_SIGNATURES";
pub(crate) const TRUSTED_KEYS: &str = "SPARK_LOCALIZER_TRUSTED_KEYS";
pub(crate) const REQUIRE_PINS: &str = "SPARK_LOCALIZER_REQUIRE_PINS";
pub(crate) const MOUNT_PATH: &str = "SPARK_LOCALIZER_MOUNT_PATH";
pub(crate) const MIRROR: &str = "SPARK_LOCALIZER_MIRROR";
pub(crate) const MIRROR_TIMEOUT: &str = "SPARK_LOCALIZER_MIRROR_TIMEOUT";
pub(crate) const REGISTRY_AUTH: &str = "SPARK_LOCALIZER_REGISTRY_AUTH";
pub(crate) const INSECURE_REGISTRY: &str = "SPARK_LOCALIZER_INSECURE_REGISTRY";
// `mirror serve`.
pub(crate) const MIRROR_LISTEN: &str = "SPARK_LOCALIZER_MIRROR_LISTEN";
pub(crate) const MIRROR_DIR: &str = "SPARK_LOCALIZER_MIRROR_DIR";
pub(crate) const MIRROR_MAX_BYTES: &str = "SPARK_LOCALIZER_MIRROR_MAX_BYTES";
pub(crate) const MIRROR_ALLOW_ORIGINS: &str = "SPARK_LOCALIZER_MIRROR_ALLOW_ORIGINS";
// `stage serve`.
pub(crate) const STAGE_LISTEN: &str = "SPARK_LOCALIZER_STAGE_LISTEN";
pub(crate) const STAGE_STORE: &str = "SPARK_LOCALIZER_STAGE_STORE";
pub(crate) const STAGE_TLS_CERT: &str = "SPARK_LOCALIZER_STAGE_TLS_CERT";
pub(crate) const STAGE_TLS_KEY: &str = "SPARK_LOCALIZER_STAGE_TLS_KEY";
pub(crate) const STAGE_MAX_UPLOAD_BYTES: &str = "SPARK_LOCALIZER_STAGE_MAX_UPLOAD_BYTES";
pub(crate) const STAGE_UPLOAD_IDLE_TIMEOUT: &str = "SPARK_LOCALIZER_STAGE_UPLOAD_IDLE_TIMEOUT";
pub(crate) const STAGE_UNUSED_TTL: &str = "SPARK_LOCALIZER_STAGE_UNUSED_TTL";
pub(crate) const STAGE_MAX_TTL: &str = "SPARK_LOCALIZER_STAGE_MAX_TTL";
pub(crate) const STAGE_S3_CREDENTIALS_DIR: &str = "SPARK_LOCALIZER_STAGE_S3_CREDENTIALS_DIR";
pub(crate) const STAGE_OWNER_CHECK_INTERVAL: &str = "SPARK_LOCALIZER_STAGE_OWNER_CHECK_INTERVAL";
pub(crate) const STAGE_KUBE_API: &str = "SPARK_LOCALIZER_STAGE_KUBE_API";
pub(crate) const STAGE_KUBE_TOKEN_FILE: &str = "SPARK_LOCALIZER_STAGE_KUBE_TOKEN_FILE";
pub(crate) const STAGE_KUBE_CA_CERT: &str = "SPARK_LOCALIZER_STAGE_KUBE_CA_CERT";
pub(crate) const STAGE_UPLOAD_AUTH: &str = "SPARK_LOCALIZER_STAGE_UPLOAD_AUTH";
pub(crate) const STAGE_UPLOAD_TOKEN_FILE: &str = "SPARK_LOCALIZER_STAGE_UPLOAD_TOKEN_FILE";
pub(crate) const STAGE_MAX_STORE_BYTES: &str = "SPARK_LOCALIZER_STAGE_MAX_STORE_BYTES";
pub(crate) const STAGE_MAX_BUNDLES: &str = "SPARK_LOCALIZER_STAGE_MAX_BUNDLES";
pub(crate) const STAGE_MAX_NAMESPACE_BYTES: &str = "SPARK_LOCALIZER_STAGE_MAX_NAMESPACE_BYTES";
pub(crate) const STAGE_MAX_NAMESPACE_BUNDLES: &str = "SPARK_LOCALIZER_STAGE_MAX_NAMESPACE_BUNDLES";
/// `stage upload`: the bearer token file and the kubeconfig to take a token from.
pub(crate) const STAGE_TOKEN_FILE: &str = "SPARK_LOCALIZER_STAGE_TOKEN_FILE";
pub(crate) const KUBECONFIG: &str = "KUBECONFIG";
// `stage upload`.
pub(crate) const STAGE_SERVER: &str = "SPARK_LOCALIZER_STAGE_SERVER";
pub(crate) const STAGE_CA_CERT: &str = "SPARK_LOCALIZER_STAGE_CA_CERT";
pub(crate) const STAGE_NAMESPACE: &str = "SPARK_LOCALIZER_STAGE_NAMESPACE";
pub(crate) const STAGE_LABELS: &str = "SPARK_LOCALIZER_STAGE_LABELS";
pub(crate) const STAGE_SECRET_MANIFEST: &str = "SPARK_LOCALIZER_STAGE_SECRET_MANIFEST";
pub(crate) const STAGE_KIND: &str = "SPARK_LOCALIZER_STAGE_KIND";
/// Extra trust anchors, honoured like OpenSSL and curl do (a PEM bundle).
pub(crate) const SSL_CERT_FILE: &str = "SSL_CERT_FILE";
/// The docker configuration directory: `$DOCKER_CONFIG/config.json` holds the
/// registry credentials of oci:// URIs when `--registry-auth` is not given.
pub(crate) const DOCKER_CONFIG: &str = "DOCKER_CONFIG";
/// Set by the kubelet in every pod: the API server's address (`stage serve` owner checks).
pub(crate) const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
/// Set by the kubelet in every pod: the API server's port (`stage serve` owner checks).
pub(crate) const KUBERNETES_SERVICE_PORT: &str = "KUBERNETES_SERVICE_PORT";
/// Log filter override: `target=level` directives (e.g. `warn,spark_localizer=debug`).
pub(crate) const LOG: &str = "SPARK_LOCALIZER_LOG";

/// Proxy variables honoured by every HTTP client (values may hold credentials: never
/// printed); `NO_PROXY` lists hosts reached directly.
pub(crate) const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Where Kubernetes mounts the file whose content `kubectl describe pod` shows (a
/// path, not a variable).
pub(crate) const DEFAULT_TERMINATION_LOG: &str = "/dev/termination-log";

/// The standard AWS variables the S3 source reads (see `s3::settings`).
pub(crate) mod aws {
    /// Static S3 credentials: the access key id.
    pub(crate) const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
    /// Static S3 credentials: the secret key (redacted everywhere).
    pub(crate) const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
    /// Static S3 credentials: the session token of temporary keys.
    pub(crate) const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
    /// The S3 region (else `AWS_DEFAULT_REGION`, else `us-east-1`).
    pub(crate) const REGION: &str = "AWS_REGION";
    /// The S3 region when `AWS_REGION` is unset.
    pub(crate) const DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
    /// An S3-compatible endpoint for every AWS service (MinIO, Ceph, SeaweedFS).
    pub(crate) const ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
    /// An S3-compatible endpoint for S3 only (beats `AWS_ENDPOINT_URL`).
    pub(crate) const ENDPOINT_URL_S3: &str = "AWS_ENDPOINT_URL_S3";
    /// The STS endpoint used for web identity (IRSA).
    pub(crate) const ENDPOINT_URL_STS: &str = "AWS_ENDPOINT_URL_STS";
    /// `true` allows a plain-HTTP S3 endpoint.
    pub(crate) const ALLOW_HTTP: &str = "AWS_ALLOW_HTTP";
    /// `true` addresses buckets as `bucket.endpoint` instead of `endpoint/bucket`.
    pub(crate) const VIRTUAL_HOSTED_STYLE_REQUEST: &str = "AWS_VIRTUAL_HOSTED_STYLE_REQUEST";
    /// IRSA: the projected service-account token exchanged with STS.
    pub(crate) const WEB_IDENTITY_TOKEN_FILE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";
    /// IRSA: the role assumed with the web identity token.
    pub(crate) const ROLE_ARN: &str = "AWS_ROLE_ARN";
    /// IRSA: the session name (default `spark-localizer`).
    pub(crate) const ROLE_SESSION_NAME: &str = "AWS_ROLE_SESSION_NAME";
    /// EKS Pod Identity / ECS: the credentials endpoint.
    pub(crate) const CONTAINER_CREDENTIALS_FULL_URI: &str = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
    /// EKS Pod Identity: the token file sent to the credentials endpoint.
    pub(crate) const CONTAINER_AUTHORIZATION_TOKEN_FILE: &str =
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";
    /// ECS: the credentials path on the task metadata endpoint.
    pub(crate) const CONTAINER_CREDENTIALS_RELATIVE_URI: &str =
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
    /// The EC2 instance metadata endpoint (IMDSv2), the last credential source.
    pub(crate) const EC2_METADATA_SERVICE_ENDPOINT: &str = "AWS_EC2_METADATA_SERVICE_ENDPOINT";
    /// The profile of the shared config files (default `default`).
    pub(crate) const PROFILE: &str = "AWS_PROFILE";
    /// The shared credentials file (default `~/.aws/credentials`).
    pub(crate) const SHARED_CREDENTIALS_FILE: &str = "AWS_SHARED_CREDENTIALS_FILE";
    /// The shared config file (default `~/.aws/config`).
    pub(crate) const CONFIG_FILE: &str = "AWS_CONFIG_FILE";
    /// The home directory the shared files are found in (`$HOME/.aws/`).
    pub(crate) const HOME: &str = "HOME";

    /// Every variable above, for snapshots.
    pub(crate) const ALL: &[&str] = &[
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
        PROFILE,
        SHARED_CREDENTIALS_FILE,
        CONFIG_FILE,
        HOME,
    ];
}

/// The Google variables the GCS source reads (see `cloud::gcs`).
pub(crate) mod gcs {
    /// GCS: a service-account key or `authorized_user` JSON file (application-default credentials).
    pub(crate) const APPLICATION_CREDENTIALS: &str = "GOOGLE_APPLICATION_CREDENTIALS";
    /// GCS: an emulator or other endpoint (`host:port` means `http://host:port`); anonymous unless credentials are given.
    pub(crate) const STORAGE_EMULATOR_HOST: &str = "STORAGE_EMULATOR_HOST";
    /// GCS: the metadata server (GKE workload identity), else `metadata.google.internal`.
    pub(crate) const METADATA_HOST: &str = "GCE_METADATA_HOST";
    /// GCS: gcloud's configuration directory (`application_default_credentials.json`), else `~/.config/gcloud`.
    pub(crate) const CLOUDSDK_CONFIG: &str = "CLOUDSDK_CONFIG";

    /// Every variable above, and `HOME`, for snapshots.
    pub(crate) const ALL: &[&str] = &[
        APPLICATION_CREDENTIALS,
        STORAGE_EMULATOR_HOST,
        METADATA_HOST,
        CLOUDSDK_CONFIG,
        crate::env_vars::aws::HOME,
    ];
}

/// The Azure variables the Azure source reads (see `cloud::azure`).
pub(crate) mod azure {
    /// Azure: a connection string as the Azure SDKs read it (`AccountName`, `AccountKey`, `SharedAccessSignature`, `BlobEndpoint`, …; redacted everywhere).
    pub(crate) const CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";
    /// Azure: an account key (redacted everywhere).
    pub(crate) const ACCOUNT_KEY: &str = "AZURE_STORAGE_ACCOUNT_KEY";
    /// Azure: a SAS token (redacted everywhere).
    pub(crate) const SAS_TOKEN: &str = "AZURE_STORAGE_SAS_TOKEN";
    /// AKS workload identity: the projected ServiceAccount token exchanged at Entra ID.
    pub(crate) const FEDERATED_TOKEN_FILE: &str = "AZURE_FEDERATED_TOKEN_FILE";
    /// AKS workload identity: the client id of the identity.
    pub(crate) const CLIENT_ID: &str = "AZURE_CLIENT_ID";
    /// AKS workload identity: the tenant.
    pub(crate) const TENANT_ID: &str = "AZURE_TENANT_ID";
    /// AKS workload identity: Entra ID's host (other clouds), else the public cloud's.
    pub(crate) const AUTHORITY_HOST: &str = "AZURE_AUTHORITY_HOST";

    /// Every variable above, for snapshots.
    pub(crate) const ALL: &[&str] = &[
        CONNECTION_STRING,
        ACCOUNT_KEY,
        SAS_TOKEN,
        FEDERATED_TOKEN_FILE,
        CLIENT_ID,
        TENANT_ID,
        AUTHORITY_HOST,
    ];
    /// The variables whose values are secrets.
    pub(crate) const SECRET: &[&str] = &[CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN];
}

/// The Hadoop variables the HDFS source reads (hdfs-native reads the token file and
/// the ticket cache itself; they are checked here first).
pub(crate) mod hadoop {
    /// The Hadoop configuration directory (`core-site.xml`, `hdfs-site.xml`) when
    /// `--hadoop-conf-dir` is not given.
    pub(crate) const CONF_DIR: &str = "HADOOP_CONF_DIR";
    /// Without `HADOOP_CONF_DIR`: `$HADOOP_HOME/etc/hadoop` is the configuration directory.
    pub(crate) const HOME: &str = "HADOOP_HOME";
    /// A Hadoop delegation-token file (`Credentials` storage), as a Secret mounts it.
    pub(crate) const TOKEN_FILE_LOCATION: &str = "HADOOP_TOKEN_FILE_LOCATION";
    /// The user of simple authentication (else the OS user), as hdfs-native reads it.
    pub(crate) const USER_NAME: &str = "HADOOP_USER_NAME";
    /// The Kerberos ticket cache (the glibc image variant only), when no keytab is given.
    pub(crate) const KRB5CCNAME: &str = "KRB5CCNAME";
}

/// `stage serve`: the archive limits uploads are checked against.
pub(crate) const STAGE_ARCHIVE_MAX_BYTES: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_BYTES";
pub(crate) const STAGE_ARCHIVE_MAX_ENTRIES: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_ENTRIES";
pub(crate) const STAGE_ARCHIVE_MAX_RATIO: &str = "SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_RATIO";
