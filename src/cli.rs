//! Command-line interface: flags, their environment twins and defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::util::duration::{bounded_duration, positive_duration};

/// A progress interval: at least 100ms (anything shorter floods the logs).
fn progress_interval(s: &str) -> Result<Duration, String> {
    let d = positive_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err(format!("'{s}' is less than the minimum of 100ms"));
    }
    Ok(d)
}

/// An `http://` or `https://` URL.
fn http_url(s: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(s).map_err(|e| format!("'{s}' is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!("'{s}' is not an http:// or https:// URL"));
    }
    Ok(url)
}

use crate::env_vars as env;

/// Localize Spark jars, files and archives into a pod's volumes before the JVM starts.
#[derive(Debug, Parser)]
#[command(name = "spark-localizer", version, about, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// More log output (-v: debug, -vv: trace).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Only warnings and errors.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Log line format when stderr is not a terminal (text on a terminal always shows bars).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = env::LOG_FORMAT, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Fetch, verify and publish every artifact, then write the classpath fragment (the initContainer job).
    Fetch(FetchArgs),
    /// Resolve the same plan, show where each value came from and probe every URI; with an
    /// image's jars (--spark-home, default SPARK_HOME), run the classpath doctor. Writes nothing.
    Check(CheckArgs),
    /// Resolve --packages with their dependencies and write a lockfile (--lock, default
    /// stdout) that `fetch --lock` fetches: every jar pinned by sha256.
    Resolve(FetchArgs),
    /// Localize and verify as `fetch` does, then push the result as an OCI image that pods
    /// mount as an image volume (no init container); prints its digest reference.
    Bundle(BundleArgs),
    /// The resource staging server: holds files uploaded by spark-submit for the init containers.
    Stage(StageArgs),
    /// The node-local mirror: each byte leaves the origin once per node.
    Mirror(MirrorArgs),
}

/// `bundle`: `fetch`'s inputs, where pods mount the image, and where it goes.
#[derive(Debug, Args)]
pub(crate) struct BundleArgs {
    /// Where to push the image: a tag, e.g. oci://registry.example.com/spark/deps:1.
    #[arg(value_name = "oci://REGISTRY/REPO:TAG")]
    pub target: String,

    /// Where pods mount the image: the classpath outputs in it name the jars under this path.
    #[arg(long, env = env::MOUNT_PATH, default_value = "/opt/spark/extra-jars", value_name = "PATH")]
    pub mount_path: PathBuf,

    #[command(flatten)]
    pub fetch: FetchArgs,
}

/// `stage` and its subcommands.
#[derive(Debug, Args)]
pub(crate) struct StageArgs {
    #[command(subcommand)]
    pub command: StageCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum StageCommand {
    /// Run the staging server (v0 API of the apache-spark-on-k8s resource staging server).
    Serve(ServeArgs),
    /// Upload local files as one tar.gz bundle to a staging server; prints its id and secret.
    Upload(UploadArgs),
}

/// How conflicting versions of `--packages` are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Resolution {
    /// As Spark's `--packages` (Ivy): the latest revision requested wins.
    Spark,
    /// As Maven: the nearest wins.
    Maven,
}

/// Whether the OpenPGP signatures of `--packages` artifacts are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum VerifySignatures {
    /// Not checked.
    Off,
    /// Checked; a missing or bad signature is a warning, counted.
    Warn,
    /// Checked; a missing or bad signature fails the run (exit 4) before anything is
    /// published.
    Require,
}

/// What an uploaded bundle holds: decides the Secret key and the Spark properties shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StageKind {
    Jars,
    Files,
}

/// `stage serve --upload-auth`: who may upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum UploadAuthMode {
    /// Anyone who reaches the server may upload.
    None,
    /// A bearer token listed in --upload-token-file.
    Token,
    /// The submitter's Kubernetes token (TokenReview, SubjectAccessReview).
    Kubernetes,
}

/// Inputs of `stage upload`.
#[derive(Debug, Args, Clone)]
pub(crate) struct UploadArgs {
    /// The staging server's base URL (what spark.kubernetes.resourceStagingServer.uri holds).
    #[arg(long, env = env::STAGE_SERVER, value_name = "URL")]
    pub server: String,

    /// Extra trusted CA certificates (PEM; repeatable). SSL_CERT_FILE is honoured too.
    #[arg(long, env = env::STAGE_CA_CERT, value_name = "PEM", action = ArgAction::Append, value_delimiter = ',')]
    pub ca_cert: Vec<PathBuf>,

    /// A file whose first line is the bearer token to upload with (Authorization:
    /// Bearer) [default: the kubeconfig's token, when the server asks for one].
    #[arg(long, env = env::STAGE_TOKEN_FILE, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// The kubeconfig to take the upload token from (its current context's user:
    /// token, tokenFile or an exec plugin) [default: KUBECONFIG, else ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context whose user uploads [default: its current-context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Namespace of the pods that will fetch the bundle [default: default].
    #[arg(long, env = env::STAGE_NAMESPACE, value_name = "NS")]
    pub namespace: Option<String>,

    /// A label of the pods that will fetch the bundle (repeatable; env: comma-separated).
    #[arg(long = "label", env = env::STAGE_LABELS, value_name = "KEY=VALUE", action = ArgAction::Append, value_delimiter = ',')]
    pub labels: Vec<String>,

    /// Print a Kubernetes Secret manifest with this name (and the properties to set)
    /// instead of JSON.
    #[arg(long, env = env::STAGE_SECRET_MANIFEST, value_name = "NAME")]
    pub secret_manifest: Option<String>,

    /// Whether the bundle of FILES holds the application's jars or its files.
    #[arg(long, value_enum, env = env::STAGE_KIND, default_value_t = StageKind::Jars)]
    pub kind: StageKind,

    /// Upload these as the jars bundle (comma-separated, repeatable); with --files, both
    /// bundles in one run (one Secret with both keys).
    #[arg(long, value_name = "PATHS", action = ArgAction::Append, value_delimiter = ',', conflicts_with_all = ["files", "kind"])]
    pub jars: Vec<PathBuf>,

    /// Upload these as the files bundle (comma-separated, repeatable).
    #[arg(long = "files", id = "files_bundle", value_name = "PATHS", action = ArgAction::Append, value_delimiter = ',', conflicts_with_all = ["files", "kind"])]
    pub files_bundle: Vec<PathBuf>,

    /// The regular files to bundle (one bundle of --kind); each goes in flat, under its file name.
    #[arg(required_unless_present_any = ["jars", "files_bundle"], value_name = "FILES")]
    pub files: Vec<PathBuf>,

    /// Time allowed to open a TCP/TLS connection to the server.
    #[arg(long, env = env::CONNECT_TIMEOUT, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub connect_timeout: Duration,

    /// The upload fails (exit 3) when the server takes no byte and answers nothing for
    /// this long (after the whole bundle is sent, plus 1s per 16 MiB sent to store it).
    #[arg(long, env = env::STALL_TIMEOUT, default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub stall_timeout: Duration,
}

/// Inputs of `stage serve`.
#[derive(Debug, Args, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the bound address is printed on stdout).
    #[arg(long, env = env::STAGE_LISTEN, default_value = "0.0.0.0:10000", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,

    /// Where bundles live: a directory (created 0700 if missing), or an S3 bucket and
    /// key prefix, s3://bucket/prefix (or s3a://), shared by several replicas.
    #[arg(long, env = env::STAGE_STORE, default_value = "/var/lib/spark-localizer/staging", value_name = "DIR|s3://BUCKET/PREFIX")]
    pub store: PathBuf,

    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, env = env::STAGE_TLS_CERT, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, env = env::STAGE_TLS_KEY, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Refuse (413) an upload whose bundle is larger than this.
    #[arg(long, env = env::STAGE_MAX_UPLOAD_BYTES, default_value_t = 1 << 30, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_upload_bytes: u64,

    /// Answer 408 to an upload whose body sends nothing for this long.
    #[arg(long, env = env::STAGE_UPLOAD_IDLE_TIMEOUT, default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub upload_idle_timeout: Duration,

    /// Refuse (400) an upload whose bundle unpacks to more than this many bytes
    /// (fetch needs the same --archive-max-bytes to unpack it).
    #[arg(long, env = env::STAGE_ARCHIVE_MAX_BYTES, default_value_t = 8 << 30, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_bytes: u64,

    /// Refuse (400) an upload whose bundle has more entries than this.
    #[arg(long, env = env::STAGE_ARCHIVE_MAX_ENTRIES, default_value_t = 200_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_entries: u64,

    /// Refuse (400) an upload whose bundle unpacks to more than this many times its size.
    #[arg(long, env = env::STAGE_ARCHIVE_MAX_RATIO, default_value_t = 200, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_ratio: u64,

    /// Delete a bundle that nobody downloaded within this long after its upload.
    #[arg(long, env = env::STAGE_UNUSED_TTL, default_value = "30m", value_parser = positive_duration, value_name = "DURATION")]
    pub unused_ttl: Duration,

    /// Delete any bundle this long after its upload.
    #[arg(long, env = env::STAGE_MAX_TTL, default_value = "168h", value_parser = positive_duration, value_name = "DURATION")]
    pub max_ttl: Duration,

    /// How often to ask the Kubernetes API whether the owner pods of downloaded
    /// bundles still exist (a bundle whose owner pods are gone is deleted).
    #[arg(long, env = env::STAGE_OWNER_CHECK_INTERVAL, default_value = "1m", value_parser = positive_duration, value_name = "DURATION")]
    pub owner_check_interval: Duration,

    /// The Kubernetes API server for owner checks [default: in a pod,
    /// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; elsewhere owner checks are off].
    #[arg(long, env = env::STAGE_KUBE_API, value_parser = http_url, value_name = "URL")]
    pub kube_api: Option<url::Url>,

    /// Bearer token for the Kubernetes API, re-read before every check
    /// [default: /var/run/secrets/kubernetes.io/serviceaccount/token].
    #[arg(long, env = env::STAGE_KUBE_TOKEN_FILE, value_name = "PATH")]
    pub kube_token_file: Option<PathBuf>,

    /// CA certificate(s) the Kubernetes API's certificate must chain to (PEM)
    /// [default: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt].
    #[arg(long, env = env::STAGE_KUBE_CA_CERT, value_name = "PEM")]
    pub kube_ca_cert: Option<PathBuf>,

    /// Who may upload: a bearer token listed in --upload-token-file (token; the default
    /// when that file is given), the submitter's Kubernetes token allowed to create pods
    /// in the upload's namespace (kubernetes), or anyone (none: only behind a
    /// NetworkPolicy). Required: there is no silent default.
    #[arg(long, env = env::STAGE_UPLOAD_AUTH, value_enum, value_name = "none|token|kubernetes")]
    pub upload_auth: Option<UploadAuthMode>,

    /// Bearer tokens allowed to upload, one per line (a mounted Secret); re-read when
    /// it changes, so a rotated Secret takes effect without a restart.
    #[arg(long, env = env::STAGE_UPLOAD_TOKEN_FILE, value_name = "FILE")]
    pub upload_token_file: Option<PathBuf>,

    /// The most bytes all bundles may hold; an upload past it is refused (507).
    #[arg(long, env = env::STAGE_MAX_STORE_BYTES, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_store_bytes: Option<u64>,

    /// The most bundles the store may hold; an upload past it is refused (429).
    #[arg(long, env = env::STAGE_MAX_BUNDLES, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_bundles: Option<u64>,

    /// The most bytes the bundles of one owner namespace may hold (507 past it).
    #[arg(long, env = env::STAGE_MAX_NAMESPACE_BYTES, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_namespace_bytes: Option<u64>,

    /// The most bundles one owner namespace may hold (429 past it).
    #[arg(long, env = env::STAGE_MAX_NAMESPACE_BUNDLES, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_namespace_bundles: Option<u64>,

    /// With --store s3://…: a mounted Secret with the bucket's keys (files access-key,
    /// secret-key, optional session-token), re-read on every request [default: AWS_*,
    /// IRSA, Pod Identity or instance metadata, as for fetch].
    #[arg(long, env = env::STAGE_S3_CREDENTIALS_DIR, value_name = "DIR")]
    pub s3_credentials_dir: Option<PathBuf>,
}

/// Inputs shared by `fetch` and `check`.
#[derive(Debug, Args, Clone)]
pub(crate) struct FetchArgs {
    /// Jars to fetch and put on the classpath, comma-separated (repeatable).
    #[arg(long, env = env::JARS, value_name = "URIS", action = ArgAction::Append)]
    pub jars: Vec<String>,

    /// Files to fetch into --files-dir, comma-separated (repeatable).
    #[arg(long, env = env::FILES, value_name = "URIS", action = ArgAction::Append)]
    pub files: Vec<String>,

    /// Archives to fetch and unpack into <files-dir>/<name> (.zip, .jar, .tar, .tar.gz, .tgz),
    /// comma-separated (repeatable).
    #[arg(long, env = env::ARCHIVES, value_name = "URIS", action = ArgAction::Append)]
    pub archives: Vec<String>,

    /// Also put the jars at the top level of unpacked archives on the classpath.
    #[arg(long, env = env::ARCHIVE_CLASSPATH, value_parser = BoolishValueParser::new())]
    pub archive_classpath: bool,

    /// Refuse an archive that unpacks to more than this many bytes.
    #[arg(long, env = env::ARCHIVE_MAX_BYTES, default_value_t = 8 << 30, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_bytes: u64,

    /// Refuse an archive with more entries than this.
    #[arg(long, env = env::ARCHIVE_MAX_ENTRIES, default_value_t = 200_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_entries: u64,

    /// Refuse an archive that unpacks to more than this many times its size (zip bombs).
    #[arg(long, env = env::ARCHIVE_MAX_RATIO, default_value_t = 200, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_max_ratio: u64,

    /// A Java properties file (spark-defaults.conf, Spark's mounted spark.properties).
    #[arg(long, env = env::PROPERTIES_FILE, value_name = "PATH")]
    pub properties_file: Option<PathBuf>,

    /// Where jars go [default: /var/spark-data/spark-jars].
    #[arg(long, env = env::JARS_DIR, value_name = "DIR")]
    pub jars_dir: Option<PathBuf>,

    /// Where files go [default: /var/spark-data/spark-files].
    #[arg(long, env = env::FILES_DIR, value_name = "DIR")]
    pub files_dir: Option<PathBuf>,

    /// sha256 pins in `sha256sum` format, keyed by destination name or by URI.
    #[arg(long, env = env::CHECKSUMS, value_name = "FILE")]
    pub checksums: Option<PathBuf>,

    /// Every artifact must be pinned (--checksums, --lock, an oci:// digest
    /// reference) and every pin must match an artifact, or nothing is fetched.
    #[arg(long, env = env::REQUIRE_PINS, value_parser = BoolishValueParser::new())]
    pub require_pins: bool,

    /// Maven coordinates groupId:artifactId:version, comma-separated (repeatable):
    /// resolved with their dependencies, as Spark's --packages
    /// [default: spark.jars.packages].
    #[arg(long, env = env::PACKAGES, value_name = "COORDINATES", action = ArgAction::Append)]
    pub packages: Vec<String>,

    /// Maven repositories for --packages, comma-separated, tried after Maven Central
    /// and spark-packages as Spark does (see --only-repositories)
    /// [default: spark.jars.repositories].
    #[arg(long, env = env::REPOSITORIES, value_name = "URLS", action = ArgAction::Append)]
    pub repositories: Vec<String>,

    /// groupId:artifactId of dependencies --packages leaves out, comma-separated
    /// (`*` matches anything) [default: spark.jars.excludes].
    #[arg(long, env = env::EXCLUDE_PACKAGES, value_name = "COORDINATES", action = ArgAction::Append)]
    pub exclude_packages: Vec<String>,

    /// Use only --repositories for --packages: no Maven Central, no spark-packages
    /// (closed networks).
    #[arg(long, env = env::ONLY_REPOSITORIES, value_parser = BoolishValueParser::new())]
    pub only_repositories: bool,

    /// A mounted Secret directory with repository credentials for --packages: a file
    /// named after each repository's host, holding `username:password` (sent to that
    /// host only).
    #[arg(long, env = env::REPOSITORY_CREDENTIALS_DIR, value_name = "DIR")]
    pub repository_credentials_dir: Option<PathBuf>,

    /// An Ivy settings file naming the repositories for --packages (ibiblio and
    /// m2-compatible url resolvers, chains, credentials per host), used instead of
    /// Maven Central and spark-packages [default: spark.jars.ivySettings].
    #[arg(long, env = env::IVY_SETTINGS, value_name = "FILE")]
    pub ivy_settings: Option<PathBuf>,

    /// How conflicting versions of --packages are decided: `spark` gives what
    /// Spark's --packages gives (the latest revision wins), `maven` Maven's nearest-wins.
    #[arg(long, env = env::RESOLUTION, value_enum, default_value_t = Resolution::Spark)]
    pub resolution: Resolution,

    /// Check the OpenPGP signature (`<file>.asc`) of every POM and jar --packages resolves
    /// against --trusted-keys: `warn` says and counts each missing or bad one, `require`
    /// fails on it (exit 4) before anything is published. A --lock needs none: its sha256
    /// pins carry what `resolve` verified.
    #[arg(long, env = env::VERIFY_SIGNATURES, value_enum, default_value_t = VerifySignatures::Off)]
    pub verify_signatures: VerifySignatures,

    /// OpenPGP public keys trusted to sign --packages artifacts, comma-separated or
    /// repeated: armored or binary key files, or a project's `KEYS` file. `GROUP=FILE`:
    /// that file's keys vouch only for artifacts of groupId GROUP (and GROUP.*).
    #[arg(long, env = env::TRUSTED_KEYS, value_name = "[GROUP=]FILE", value_delimiter = ',', action = ArgAction::Append)]
    pub trusted_keys: Vec<String>,

    /// A lockfile from `spark-localizer resolve`: fetch exactly its jars, each pinned
    /// (for `resolve`: where to write it; default stdout).
    #[arg(long, env = env::LOCK, value_name = "FILE")]
    pub lock: Option<PathBuf>,

    /// How many artifacts are transferred at once. A given value is fixed; by default 8 to
    /// start with, grown up to 32 while more raises the throughput (origins that cap
    /// each connection).
    #[arg(long, env = env::PARALLELISM, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: u16,

    /// Overall time limit [default: spark.kubernetes.mountdependencies.mountTimeout, else 300s].
    #[arg(long, env = env::DEADLINE, value_parser = positive_duration, value_name = "DURATION")]
    pub deadline: Option<Duration>,

    #[command(flatten)]
    pub source: SourceArgs,

    /// A node-local mirror (`spark-localizer mirror serve`, e.g. a Service with
    /// internalTrafficPolicy: Local): artifacts fetched without credentials are asked of
    /// it first; any failure of the mirror falls back to the artifact's origin.
    #[arg(long, env = env::MIRROR, value_parser = http_url, value_name = "URL")]
    pub mirror: Option<url::Url>,

    /// Time allowed for the mirror to answer a request (its headers); after it, that
    /// artifact comes from its origin.
    #[arg(long, env = env::MIRROR_TIMEOUT, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub mirror_timeout: Duration,

    /// Registry credentials for oci:// URIs: a docker config.json, as in a mounted
    /// kubernetes.io/dockerconfigjson Secret (`{"auths": {...}}`)
    /// [default: $DOCKER_CONFIG/config.json when DOCKER_CONFIG is set, else anonymous].
    #[arg(long, env = env::REGISTRY_AUTH, value_name = "FILE")]
    pub registry_auth: Option<PathBuf>,

    /// A registry (HOST[:PORT], as oci:// URIs name it) spoken to in plain HTTP
    /// instead of HTTPS (repeatable; the env twin is comma-separated).
    #[arg(long, env = env::INSECURE_REGISTRY, value_name = "HOST[:PORT]", action = ArgAction::Append, value_delimiter = ',')]
    pub insecure_registry: Vec<String>,

    /// The resource staging server, for staging bundles (`--staging-jars-id`, `staging://ID`)
    /// [default: spark.kubernetes.resourceStagingServer.internal.uri, else …resourceStagingServer.uri].
    #[arg(long, env = env::STAGING_URI, value_name = "URL")]
    pub staging_uri: Option<String>,

    /// Resource id of a staged jars bundle: unpacked into --jars-dir, its jars on the
    /// classpath [default: spark.kubernetes.initcontainer.downloadJarsResourceIdentifier].
    #[arg(long, env = env::STAGING_JARS_ID, value_name = "ID")]
    pub staging_jars_id: Option<String>,

    /// Resource id of a staged files bundle, unpacked into --files-dir
    /// [default: spark.kubernetes.initcontainer.downloadFilesResourceIdentifier].
    #[arg(long, env = env::STAGING_FILES_ID, value_name = "ID")]
    pub staging_files_id: Option<String>,

    /// File holding the jars bundle's secret [default: …initcontainer.downloadJarsSecretLocation,
    /// else /mnt/secrets/spark-init/downloadSubmittedJarsSecret].
    #[arg(long, env = env::STAGING_JARS_SECRET_FILE, value_name = "PATH")]
    pub staging_jars_secret_file: Option<PathBuf>,

    /// File holding the files bundle's secret [default: …initcontainer.downloadFilesSecretLocation,
    /// else /mnt/secrets/spark-init/downloadSubmittedFilesSecret].
    #[arg(long, env = env::STAGING_FILES_SECRET_FILE, value_name = "PATH")]
    pub staging_files_secret_file: Option<PathBuf>,

    /// Extra CA certificates trusted for the staging server only (PEM; repeatable)
    /// [default: spark.ssl.kubernetes.resourceStagingServer.internal.clientCertPem, else …clientCertPem].
    #[arg(long, env = env::STAGING_CA_CERT, value_name = "PEM", action = ArgAction::Append, value_delimiter = ',')]
    pub staging_ca_cert: Vec<PathBuf>,

    /// fsync each file, state record and output before publishing it (without it nothing is
    /// fsynced: a restarted run re-verifies files anyway).
    #[arg(long, env = env::FSYNC, value_parser = BoolishValueParser::new())]
    pub fsync: bool,

    /// Where to write the `:`-joined classpath [default: <jars-dir>/classpath].
    #[arg(long, env = env::CLASSPATH_FILE, value_name = "PATH")]
    pub classpath_file: Option<PathBuf>,

    /// Where to write the POSIX-sh snippet prepending to SPARK_CLASSPATH
    /// [default: <jars-dir>/spark-classpath.env].
    #[arg(long, env = env::ENV_FILE, value_name = "PATH")]
    pub env_file: Option<PathBuf>,

    /// Where to write the JSON report [default: <jars-dir>/spark-localizer-report.json].
    #[arg(long, env = env::REPORT, value_name = "PATH")]
    pub report: Option<PathBuf>,

    /// Where to write the CycloneDX SBOM of what was localized (hashes, purls, the
    /// packages' dependency graph; no credentials) [default: <jars-dir>/spark-localizer-sbom.cdx.json;
    /// resolve: <lock>.cdx.json beside --lock].
    #[arg(long, env = env::SBOM, value_name = "PATH")]
    pub sbom: Option<PathBuf>,

    /// Write no SBOM (wins over --sbom).
    #[arg(long, env = env::NO_SBOM, value_parser = BoolishValueParser::new())]
    pub no_sbom: bool,

    /// Kubernetes termination-message file, written in place on failure
    /// [default: /dev/termination-log when it exists].
    #[arg(long, env = env::TERMINATION_LOG, value_name = "PATH")]
    pub termination_log: Option<PathBuf>,

    /// No progress bars or periodic progress lines.
    #[arg(long, env = env::NO_PROGRESS, value_parser = BoolishValueParser::new())]
    pub no_progress: bool,

    /// Interval between plain progress lines when stderr is not a terminal.
    #[arg(long, env = env::PROGRESS_INTERVAL, default_value = "5s", value_parser = progress_interval, value_name = "DURATION")]
    pub progress_interval: Duration,

    /// The classpath doctor: the image's SPARK_HOME, whose jars/ the added jars are
    /// checked against (Scala and Spark versions, Hadoop modules, duplicate classes, the
    /// classes Spark properties name). `check` defaults to SPARK_HOME.
    #[arg(long, env = env::SPARK_HOME, value_name = "DIR")]
    pub spark_home: Option<PathBuf>,

    /// The classpath doctor: the image's jars directory itself (e.g. Spark's jars mounted
    /// read-only into the init container).
    #[arg(long, visible_alias = "doctor-jars", env = env::SPARK_JARS, value_name = "DIR")]
    pub spark_jars: Option<PathBuf>,

    /// fetch: fail (exit 8, no classpath written) when the classpath doctor finds an error
    /// (`check` always does).
    #[arg(long, env = env::DOCTOR_STRICT, value_parser = BoolishValueParser::new())]
    pub doctor_strict: bool,
}

/// `check`: the fetch arguments and how to print.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub fetch: FetchArgs,

    /// `text` for people; `json`: one JSON document on stdout (probes, doctor findings).
    #[arg(long, value_enum, env = env::OUTPUT, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// `check --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Text,
    Json,
}

/// How sources reach their origins: shared by `fetch`, `check`, `resolve` and
/// `mirror serve` (which fetches with its own configuration).
#[derive(Debug, Args, Clone)]
pub(crate) struct SourceArgs {
    /// Retries per artifact after a transient fault (attempts = retries + 1).
    #[arg(long, env = env::RETRIES, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub retries: u32,

    /// First backoff delay; doubles per retry (with jitter), capped at 30s.
    #[arg(long, env = env::RETRY_DELAY, default_value = "500ms", value_parser = bounded_duration, value_name = "DURATION")]
    pub retry_delay: Duration,

    /// A transfer that receives no byte for this long is retried.
    #[arg(long, env = env::STALL_TIMEOUT, default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub stall_timeout: Duration,

    /// Time allowed to open a TCP/TLS connection.
    #[arg(long, env = env::CONNECT_TIMEOUT, default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub connect_timeout: Duration,

    /// Extra trusted CA certificates (PEM; repeatable). SSL_CERT_FILE is honoured too.
    #[arg(long, env = env::CA_CERT, value_name = "PEM", action = ArgAction::Append, value_delimiter = ',')]
    pub ca_cert: Vec<PathBuf>,

    /// Extra HTTP request headers, one `Name: value` per line (e.g. an Artifactory token).
    /// Sent only to each URI's own origin, never after a redirect to another host.
    #[arg(long, env = env::HTTP_HEADER_FILE, value_name = "FILE")]
    pub http_header_file: Option<PathBuf>,

    /// The Hadoop configuration directory (core-site.xml, hdfs-site.xml) for hdfs://
    /// and viewfs:// URIs [default: HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop].
    #[arg(long, env = env::HADOOP_CONF_DIR, value_name = "DIR")]
    pub hadoop_conf_dir: Option<PathBuf>,

    /// A keytab (a mounted Secret) to obtain a Kerberos ticket with, in memory, for
    /// hdfs:// and viewfs:// URIs of a Kerberos cluster (the Kerberos image only);
    /// without it the ticket cache (KRB5CCNAME) is used [properties: spark.kerberos.keytab].
    #[arg(long, env = env::KERBEROS_KEYTAB, value_name = "FILE")]
    pub kerberos_keytab: Option<PathBuf>,

    /// The Kerberos principal: the keytab's (else its first entry's) or the one to pick
    /// from the ticket cache, e.g. spark@EXAMPLE.COM [properties: spark.kerberos.principal].
    #[arg(long, env = env::KERBEROS_PRINCIPAL, value_name = "PRINCIPAL")]
    pub kerberos_principal: Option<String>,

    /// A mounted Secret directory with `access-key`, `secret-key` and optional
    /// `session-token` for s3:// and s3a:// URIs; re-read on every request, so
    /// rotated credentials are picked up. Beats every other S3 credential source.
    #[arg(long, env = env::S3_CREDENTIALS_DIR, value_name = "DIR")]
    pub s3_credentials_dir: Option<PathBuf>,

    /// A mounted Secret directory for abfss:// and wasbs:// URIs: `connection-string`
    /// (as AZURE_STORAGE_CONNECTION_STRING), else `account-key` or `sas-token`.
    /// Beats every other Azure credential source.
    #[arg(long, env = env::AZURE_CREDENTIALS_DIR, value_name = "DIR")]
    pub azure_credentials_dir: Option<PathBuf>,
}

/// `mirror` and its subcommands.
#[derive(Debug, Args)]
pub(crate) struct MirrorArgs {
    #[command(subcommand)]
    pub command: MirrorCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MirrorCommand {
    /// Run the node-local mirror: a pull-through, content-addressed cache of allow-listed
    /// origins (a DaemonSet; `fetch --mirror` asks it first).
    Serve(MirrorServeArgs),
}

/// Inputs of `mirror serve`.
#[derive(Debug, Args, Clone)]
pub(crate) struct MirrorServeArgs {
    /// Address to listen on; port 0 picks a free port (the bound address is printed on stdout).
    #[arg(long, env = env::MIRROR_LISTEN, default_value = "0.0.0.0:10001", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,

    /// Where blobs live (created 0700 if missing); kept across restarts.
    #[arg(long, env = env::MIRROR_DIR, default_value = "/var/lib/spark-localizer/mirror", value_name = "DIR")]
    pub dir: PathBuf,

    /// Disk the blobs and the transfers in progress may use together; the least recently used blobs are evicted beyond it.
    #[arg(long, env = env::MIRROR_MAX_BYTES, default_value_t = 10 << 30, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_bytes: u64,

    /// An origin the mirror may fetch from: a URI prefix such as https://repo1.maven.org/maven2/
    /// or s3://bucket/prefix (repeatable; env: comma-separated).
    /// Anything else is refused (403): the mirror is no open proxy.
    #[arg(long = "allow-origin", env = env::MIRROR_ALLOW_ORIGINS, value_name = "URI", action = ArgAction::Append, value_delimiter = ',', required = true)]
    pub allow_origins: Vec<String>,

    /// A Java properties file for the sources' spark.hadoop.* keys (S3A, HDFS).
    #[arg(long, env = env::PROPERTIES_FILE, value_name = "PATH")]
    pub properties_file: Option<PathBuf>,

    /// Transfers from origins at once (requests beyond wait).
    #[arg(long, env = env::PARALLELISM, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallelism: u16,

    #[command(flatten)]
    pub source: SourceArgs,
}

/// Where each flag's value came from, as clap saw it (flag, env twin or default).
#[derive(Debug, Default, Clone)]
pub(crate) struct ArgOrigins(std::collections::HashMap<String, clap::parser::ValueSource>);

impl ArgOrigins {
    fn from_matches(matches: &clap::ArgMatches) -> Self {
        let mut map = std::collections::HashMap::new();
        for id in matches.ids() {
            if let Some(source) = matches.value_source(id.as_str()) {
                map.insert(id.as_str().to_owned(), source);
            }
        }
        ArgOrigins(map)
    }

    /// True when the user set `id` by flag or environment (not a default).
    pub(crate) fn is_explicit(&self, id: &str) -> bool {
        matches!(
            self.0.get(id),
            Some(clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable)
        )
    }

    /// Where `id` came from: its flag, its environment twin, or the default.
    pub(crate) fn origin(&self, id: &'static str, env_name: &'static str) -> crate::origin::Origin {
        use crate::origin::Origin;
        match self.0.get(id) {
            Some(clap::parser::ValueSource::CommandLine) => Origin::Flag(id),
            Some(clap::parser::ValueSource::EnvVariable) => Origin::Env(env_name),
            _ => Origin::Default,
        }
    }
}

/// Parses this process's command line and environment: empty `SPARK_LOCALIZER_*`
/// variables count as unset, and secrets in URIs are registered before anything
/// (a usage error, say) can echo them.
pub(crate) fn parse() -> Result<(Cli, ArgOrigins), clap::Error> {
    // An empty SPARK_LOCALIZER_* variable means "not set" (as an unset flag).
    for (name, value) in std::env::vars_os() {
        if value.is_empty() && name.to_string_lossy().starts_with("SPARK_LOCALIZER_") {
            std::env::remove_var(name);
        }
    }
    // Learn the secrets in URIs before anything can echo them (usage errors do).
    let env_values = std::env::vars_os()
        .filter(|(name, _)| name.to_string_lossy().starts_with("SPARK_LOCALIZER_"))
        .map(|(_, value)| value);
    for value in std::env::args_os().skip(1).chain(env_values) {
        let value = value.to_string_lossy();
        // `--jars=URI,URI` carries its value after the first '='.
        let value = match value.strip_prefix("--").and_then(|v| v.split_once('=')) {
            Some((_, v)) => v,
            None => &*value,
        };
        for item in value.split(',').chain([value]) {
            crate::util::redact::register_url_secrets(item.trim());
        }
    }
    parse_from(std::env::args_os())
}

/// Parses the command line; returns the subcommand's arguments with their origins.
pub(crate) fn parse_from<I, T>(args: I) -> Result<(Cli, ArgOrigins), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    // Env values may hold secrets (URIs with passwords): never show them in --help.
    let hide = |c: clap::Command| c.mut_args(|a| a.hide_env_values(true));
    let command = hide(Cli::command())
        .mut_subcommand("fetch", hide)
        .mut_subcommand("check", hide)
        .mut_subcommand("resolve", hide)
        .mut_subcommand("bundle", hide)
        .mut_subcommand("stage", |c| {
            hide(c)
                .mut_subcommand("serve", hide)
                .mut_subcommand("upload", hide)
        })
        .mut_subcommand("mirror", |c| hide(c).mut_subcommand("serve", hide));
    let matches = command.try_get_matches_from(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    // The leaf subcommand's (`stage serve`'s, not `stage`'s).
    let mut leaf = None;
    let mut at = &matches;
    while let Some((_, sub)) = at.subcommand() {
        leaf = Some(sub);
        at = sub;
    }
    let origins = leaf.map(ArgOrigins::from_matches).unwrap_or_default();
    Ok((cli, origins))
}
