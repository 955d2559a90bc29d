//! Resolves flags, their environment twins and the properties file into one
//! [`Settings`], remembering where each value came from (shown by `check`).
//!
//! Precedence: flag, then `SPARK_LOCALIZER_*` env, then the properties file, then
//! the built-in default. Configuration is fully read and validated here, before
//! any network traffic.

pub(crate) mod checksums;
mod layers;
pub(crate) mod mirror;
pub(crate) mod oci;
pub(crate) mod packages;
mod staging;
pub(crate) mod table;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{ArgOrigins, FetchArgs, SourceArgs};
use crate::config::checksums::{Checksums, ChecksumsError};
use crate::env_vars as env;
use crate::net::{load_header_file, CaFile, HttpConfig, HttpSetupError};
use crate::origin::Origin;

use self::layers::{Found, Layers};
use self::table::Setting;
use crate::properties::{Properties, PropertiesError};
use crate::util::duration::positive_duration;

/// Default destination for jars, as in the apache-spark-on-k8s init container.
pub(crate) const DEFAULT_JARS_DIR: &str = "/var/spark-data/spark-jars";
/// Default destination for files.
pub(crate) const DEFAULT_FILES_DIR: &str = "/var/spark-data/spark-files";
/// How far the default parallelism (8) may grow while throughput grows with it.
pub(crate) const AUTO_PARALLELISM_MAX: usize = 32;
/// Default overall deadline (the fork's mountTimeout default).
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// A value and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Sourced<T> {
    pub value: T,
    pub origin: Origin,
}

/// One URI as the user declared it.
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    pub uri: String,
    pub origin: Origin,
}

/// Everything `fetch` and `check` need, validated.
#[derive(Debug)]
pub(crate) struct Settings {
    pub jars: Vec<Declared>,
    pub files: Vec<Declared>,
    pub archives: Vec<Declared>,
    pub archive_classpath: bool,
    /// `--require-pins`: an unpinned artifact or a pin matching none is a
    /// configuration error.
    pub require_pins: bool,
    pub archive_limits: crate::archive::Limits,
    pub jars_dir: Sourced<PathBuf>,
    pub files_dir: Sourced<PathBuf>,
    pub deadline: Sourced<Duration>,
    pub checksums: Option<Sourced<Checksums>>,
    pub header_file: Option<PathBuf>,
    pub http: HttpConfig,
    /// Transfers at once to start with.
    pub parallelism: usize,
    /// Transfers at once at most: `parallelism` when given, else up to
    /// [`AUTO_PARALLELISM_MAX`] while more raises the throughput.
    pub parallelism_max: usize,
    pub retries: u32,
    pub retry_delay: Duration,
    pub stall_timeout: Duration,
    pub fsync: bool,
    pub classpath_file: PathBuf,
    pub env_file: PathBuf,
    pub report: PathBuf,
    /// The CycloneDX SBOM (`None` with `--no-sbom`).
    pub sbom: Option<PathBuf>,
    pub termination_log: Option<PathBuf>,
    pub properties_file: Option<PathBuf>,
    pub no_progress: bool,
    pub progress_interval: Duration,
    /// S3 inputs (the credentials-dir flag, the S3A keys, the AWS_* environment).
    pub s3: crate::s3::settings::S3Settings,
    /// GCS inputs (the connector's keys, GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST).
    pub gcs: crate::cloud::gcs::GcsSettings,
    /// Azure inputs (`--azure-credentials-dir`, the ABFS/WASB keys, the AZURE_* environment).
    pub azure: crate::cloud::azure::AzureSettings,
    /// `--hadoop-conf-dir` and where it was given (HDFS reads it only when needed).
    pub hadoop_conf_dir: Option<(PathBuf, String)>,
    /// The keytab and principal for Kerberos HDFS.
    pub kerberos: crate::source::hdfs::kerberos::KerberosSettings,
    /// The properties file, parsed (for `spark.hadoop.*` keys).
    pub properties: Option<Properties>,
    /// The resource staging server and the bundles' secret files.
    pub staging: StagingSettings,
    /// `--packages` and `--lock`.
    pub packages: packages::PackagesSettings,
    /// sha1 digests the Maven repositories publish for `--packages` jars, by
    /// declared URI (verified while fetching).
    pub sha1_pins: std::collections::HashMap<String, [u8; 20]>,
    /// The sha256 of `--packages` jars whose signatures were checked before the
    /// transfers (`--verify-signatures`), by declared URI: pins of what was verified.
    pub signed_pins: std::collections::HashMap<String, [u8; 32]>,
    /// `--mirror` and `--mirror-timeout`.
    pub mirror: Option<(url::Url, Duration)>,
    /// `oci://` credentials, plain-HTTP registries and the resolved layers.
    pub oci: oci::OciSettings,
}

/// Where staging bundles come from and the files holding their secrets.
#[derive(Debug, Clone)]
pub(crate) struct StagingSettings {
    /// The server's base URL (http or https).
    pub uri: Option<Sourced<url::Url>>,
    pub jars_secret: Sourced<PathBuf>,
    pub files_secret: Sourced<PathBuf>,
    /// CA files trusted for the staging server (besides the usual roots and --ca-cert).
    pub ca_files: Vec<CaFile>,
    /// A server URL was given but is invalid (reported as a problem already).
    pub uri_invalid: bool,
}

/// A configuration problem; always found before any network traffic (exit code 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error(transparent)]
    Properties(#[from] PropertiesError),
    #[error(transparent)]
    Checksums(#[from] ChecksumsError),
    #[error(transparent)]
    Http(#[from] HttpSetupError),
    #[error("invalid {key} in {}: {reason}", path.display())]
    Property {
        path: PathBuf,
        key: &'static str,
        reason: String,
    },
    #[error("invalid {what}: {reason}")]
    Invalid { what: String, reason: String },
}

/// Every configuration problem found before any network traffic, in the order
/// found; reported all at once (exit code 2).
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<String>);

impl Problems {
    /// Records a problem, its causes included, secrets scrubbed.
    pub(crate) fn push(&mut self, problem: impl Into<ConfigError>) {
        self.0
            .push(crate::util::redact::error_chain(&problem.into()));
    }

    /// Records a problem already worded (the plan's, the sources').
    pub(crate) fn push_message(&mut self, message: String) {
        self.0.push(message);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("\n"))
    }
}

impl Settings {
    /// Resolves `args` (with their origins) and the properties file they name.
    /// A problem does not stop resolution: the value stands at its default and
    /// the problem goes into `problems`, so that the plan is still built and the
    /// user sees every problem of the configuration at once.
    pub(crate) fn resolve(
        args: &FetchArgs,
        origins: &ArgOrigins,
        problems: &mut Problems,
    ) -> Settings {
        let properties = args
            .properties_file
            .as_deref()
            .and_then(|path| Properties::load(path).map_err(|e| problems.push(e)).ok());
        let layers = Layers::new(origins, properties.as_ref());
        let (jars, files, archives) = declared_uris(args, &layers);
        let (jars_dir, files_dir) = destination_dirs(args, &layers, problems);
        let deadline = deadline(args, &layers, problems);
        let mut checksums = args.checksums.as_deref().and_then(|path| {
            Checksums::load(path)
                .map(|value| Sourced {
                    value,
                    origin: layers.origin(&table::CHECKSUMS),
                })
                .map_err(|e| problems.push(e))
                .ok()
        });
        let http = http_config(
            &args.source,
            parallelism_max(args, &layers),
            &layers,
            problems,
        );
        let s3 = s3_settings(&args.source, &layers, properties.as_ref());
        let gcs = crate::cloud::gcs::GcsSettings::new(properties.as_ref());
        let azure = crate::cloud::azure::AzureSettings::new(
            args.source.azure_credentials_dir.clone().map(|dir| {
                let origin = layers.origin(&table::AZURE_CREDENTIALS_DIR).to_string();
                (dir, origin)
            }),
            properties.as_ref(),
        );
        let staging = staging::settings(args, &layers, problems);
        let mut packages = packages::settings(args, &layers, problems);
        let mut jars = jars;
        if let Some(lock) = packages.lock.clone() {
            packages.locked = packages::load_lock(
                &lock,
                packages.request.as_ref(),
                args.repository_credentials_dir.as_deref(),
                &mut jars,
                &mut checksums,
                problems,
            );
        }
        let oci = oci::settings(args, &layers, problems);
        let in_jars_dir = |name: &str| jars_dir.value.join(name);
        Settings {
            classpath_file: args
                .classpath_file
                .clone()
                .unwrap_or_else(|| in_jars_dir(crate::layout::CLASSPATH_FILE)),
            env_file: args
                .env_file
                .clone()
                .unwrap_or_else(|| in_jars_dir(crate::layout::ENV_FILE)),
            report: args
                .report
                .clone()
                .unwrap_or_else(|| in_jars_dir(crate::layout::REPORT_FILE)),
            sbom: (!args.no_sbom).then(|| {
                args.sbom
                    .clone()
                    .unwrap_or_else(|| in_jars_dir(crate::layout::SBOM_FILE))
            }),
            termination_log: termination_log(args.termination_log.as_deref()),
            jars,
            files,
            archives,
            archive_classpath: args.archive_classpath,
            require_pins: args.require_pins,
            archive_limits: crate::archive::Limits {
                max_bytes: args.archive_max_bytes,
                max_entries: args.archive_max_entries,
                max_ratio: args.archive_max_ratio,
            },
            jars_dir,
            files_dir,
            deadline,
            checksums,
            header_file: args.source.http_header_file.clone(),
            parallelism: usize::from(args.parallelism),
            parallelism_max: http.pool_size,
            http,
            retries: args.source.retries,
            retry_delay: args.source.retry_delay,
            stall_timeout: args.source.stall_timeout,
            fsync: args.fsync,
            properties_file: args.properties_file.clone(),
            no_progress: args.no_progress,
            progress_interval: args.progress_interval,
            s3,
            gcs,
            azure,
            hadoop_conf_dir: args
                .source
                .hadoop_conf_dir
                .clone()
                .map(|dir| (dir, layers.origin(&table::HADOOP_CONF_DIR).to_string())),
            kerberos: kerberos_settings(&args.source, &layers, problems),
            properties,
            staging,
            packages,
            sha1_pins: Default::default(),
            signed_pins: Default::default(),
            mirror: args.mirror.clone().map(|url| (url, args.mirror_timeout)),
            oci,
        }
    }

    /// Adds the jars `--packages` resolved to (each named as Spark names them,
    /// pinned by the repository's sha1 where it publishes one), after the
    /// declared jars.
    pub(crate) fn add_resolved(&mut self, resolution: &crate::maven::Resolution) {
        let origin = self.packages.origin.clone();
        let mut seen = Seen::of(&self.jars);
        for jar in &resolution.jars {
            let uri = format!("{}#{}", jar.url, jar.coord.spark_name());
            if let Some(sha1) = jar.sha1 {
                self.sha1_pins.insert(uri.clone(), sha1);
            }
            if let Some(sha256) = jar.checked_sha256 {
                self.signed_pins.insert(uri.clone(), sha256);
            }
            seen.push(&mut self.jars, &uri, &origin);
        }
    }
}

/// The declared jars, files and archives: each list from its flag or twin, else
/// from its properties keys; staging bundles join their kind's list as
/// `staging://<id>`, after the URIs.
fn declared_uris(
    args: &FetchArgs,
    layers: &Layers<'_>,
) -> (Vec<Declared>, Vec<Declared>, Vec<Declared>) {
    let list = |setting: &Setting, given: &[String]| {
        let mut out = Vec::new();
        let mut seen = Seen::default();
        for value in layers.lists(setting, given) {
            push_uris(&mut out, &mut seen, &value.value, &value.origin);
        }
        out
    };
    let mut jars = list(&table::JARS, &args.jars);
    let mut files = list(&table::FILES, &args.files);
    let staged = [
        (&table::STAGING_JARS_ID, &args.staging_jars_id, &mut jars),
        (&table::STAGING_FILES_ID, &args.staging_files_id, &mut files),
    ];
    for (setting, given, list) in staged {
        let given = given.as_ref().map(|value| value.trim().to_owned());
        let found = match layers.find(setting, given) {
            Some(Found::Given(value) | Found::Property(value)) => value,
            None => continue,
        };
        if !found.value.is_empty() {
            let mut seen = Seen::of(list);
            push_uris(
                list,
                &mut seen,
                &format!("staging://{}", found.value),
                &found.origin,
            );
        }
    }
    let archives = list(&table::ARCHIVES, &args.archives);
    (jars, files, archives)
}

/// The overall deadline: `--deadline`, else Spark's `mountTimeout`, else 5 minutes.
fn deadline(args: &FetchArgs, layers: &Layers<'_>, problems: &mut Problems) -> Sourced<Duration> {
    let default = || Sourced {
        value: DEFAULT_DEADLINE,
        origin: Origin::Default,
    };
    match layers.find(&table::DEADLINE, args.deadline) {
        Some(Found::Given(given)) => given,
        Some(Found::Property(text)) => match positive_duration(&text.value) {
            Ok(value) => Sourced {
                value,
                origin: text.origin,
            },
            Err(reason) => {
                problems.push(ConfigError::Property {
                    path: args.properties_file.clone().unwrap_or_default(),
                    key: table::DEADLINE.keys[0],
                    reason,
                });
                default()
            }
        },
        None => default(),
    }
}

/// `--jars-dir` and `--files-dir` (their properties keys, the defaults); each
/// must be absolute.
fn destination_dirs(
    args: &FetchArgs,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> (Sourced<PathBuf>, Sourced<PathBuf>) {
    let jars_dir = layers.value_or(
        &table::JARS_DIR,
        args.jars_dir.clone(),
        PathBuf::from,
        || PathBuf::from(DEFAULT_JARS_DIR),
    );
    let files_dir = layers.value_or(
        &table::FILES_DIR,
        args.files_dir.clone(),
        PathBuf::from,
        || PathBuf::from(DEFAULT_FILES_DIR),
    );
    for dir in [&jars_dir, &files_dir] {
        if !dir.value.is_absolute() {
            problems.push(ConfigError::Invalid {
                what: dir.origin.to_string(),
                reason: format!("{} is not an absolute path", dir.value.display()),
            });
        }
    }
    // Its jars go on the classpath by path: refused here, before any resolution
    // or traffic (`--packages` included).
    let classpath_safe = jars_dir
        .value
        .to_str()
        .is_some_and(|dir| !dir.contains(':') && !dir.chars().any(char::is_control));
    if !classpath_safe {
        problems.push(ConfigError::Invalid {
            what: jars_dir.origin.to_string(),
            reason: format!(
                "{} holds ':', a control character or bytes that are not UTF-8, which the classpath cannot hold; choose another directory",
                jars_dir.value.display().to_string().escape_debug()
            ),
        });
    }
    (jars_dir, files_dir)
}

/// The most transfers at once: a given `--parallelism` is fixed; the default
/// starts at 8 and may grow to [`AUTO_PARALLELISM_MAX`].
fn parallelism_max(args: &FetchArgs, layers: &Layers<'_>) -> usize {
    if layers.is_explicit(&table::PARALLELISM) {
        usize::from(args.parallelism)
    } else {
        AUTO_PARALLELISM_MAX
    }
}

/// The HTTP client's settings: trusted CA files (`--ca-cert`, `SSL_CERT_FILE`),
/// the connect timeout, the pool size and the header file's headers; proxy
/// variables are checked here (reqwest silently ignores one it cannot parse).
fn http_config(
    args: &SourceArgs,
    parallelism: usize,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> HttpConfig {
    let ca_origin = layers.origin(&table::CA_CERT).to_string();
    let mut ca_files: Vec<CaFile> = args
        .ca_cert
        .iter()
        .map(|path| CaFile {
            path: path.clone(),
            origin: ca_origin.clone(),
        })
        .collect();
    if let Some(path) = std::env::var_os(env::SSL_CERT_FILE).filter(|p| !p.is_empty()) {
        ca_files.push(CaFile {
            path: path.into(),
            origin: env::SSL_CERT_FILE.to_owned(),
        });
    }
    check_proxy_vars(problems);
    let headers = match &args.http_header_file {
        Some(path) => load_header_file(path).unwrap_or_else(|e| {
            problems.push(e);
            Vec::new()
        }),
        None => Vec::new(),
    };
    HttpConfig {
        ca_files,
        connect_timeout: args.connect_timeout,
        pool_size: parallelism,
        headers,
    }
}

/// The S3 inputs: `--s3-credentials-dir` (with where it was given), the
/// properties file's S3A keys and the AWS_* environment.
fn s3_settings(
    args: &SourceArgs,
    layers: &Layers<'_>,
    properties: Option<&Properties>,
) -> crate::s3::settings::S3Settings {
    crate::s3::settings::S3Settings::new(
        args.s3_credentials_dir
            .clone()
            .map(|dir| (dir, layers.origin(&table::S3_CREDENTIALS_DIR))),
        properties,
    )
}

/// Every proxy variable set must be a proxy URL (`host:port` alone means
/// `http://host:port`, as reqwest reads it).
fn check_proxy_vars(problems: &mut Problems) {
    for var in env::PROXY_VARS
        .iter()
        .filter(|v| !v.eq_ignore_ascii_case("no_proxy"))
    {
        let Some(value) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let value = value.trim();
        let parses = url::Url::parse(value)
            .ok()
            .filter(|u| u.has_host())
            .or_else(|| {
                (!value.contains("://"))
                    .then(|| url::Url::parse(&format!("http://{value}")).ok())
                    .flatten()
                    .filter(|u| u.has_host())
            })
            .is_some();
        if !parses {
            problems.push(ConfigError::Invalid {
                what: (*var).to_owned(),
                reason: "not a proxy URL (e.g. http://proxy:3128); its value is not shown as it may hold credentials".to_owned(),
            });
        }
    }
}

/// The termination-message file: the one given, else `/dev/termination-log` when
/// the kubelet mounted it, else none.
pub(crate) fn termination_log(explicit: Option<&Path>) -> Option<PathBuf> {
    let default = Path::new(env::DEFAULT_TERMINATION_LOG);
    explicit
        .map(Path::to_owned)
        .or_else(|| default.exists().then(|| default.to_owned()))
}

/// Splits a Spark-style comma-separated list; blanks are skipped, exact repeats
/// dropped (in time linear in the list: `seen` holds what `out` has).
fn push_uris(out: &mut Vec<Declared>, seen: &mut Seen, list: &str, origin: &Origin) {
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        seen.push(out, item, origin);
    }
}

/// The URIs a list of declared URIs already holds, by hash: a repeat is found
/// in constant time, not by a scan of the list (which made long lists quadratic).
#[derive(Default)]
struct Seen(std::collections::HashSet<String>);

impl Seen {
    fn of(list: &[Declared]) -> Self {
        let mut seen = Seen::default();
        for d in list {
            seen.insert(&d.uri);
        }
        seen
    }

    /// Whether `uri` is new (and now held).
    fn insert(&mut self, uri: &str) -> bool {
        self.0.insert(uri.to_owned())
    }

    /// Appends `uri` to `out` unless it holds it already.
    fn push(&mut self, out: &mut Vec<Declared>, uri: &str, origin: &Origin) {
        if self.insert(uri) {
            out.push(Declared {
                uri: uri.to_owned(),
                origin: origin.clone(),
            });
        }
    }
}

/// `--kerberos-keytab` and `--kerberos-principal`, else Spark's keys.
fn kerberos_settings(
    source: &crate::cli::SourceArgs,
    layers: &Layers,
    problems: &mut Problems,
) -> crate::source::hdfs::kerberos::KerberosSettings {
    use layers::Found;
    let text = |found: Option<Found<String>>| match found {
        Some(Found::Given(given)) => Some((given.value, given.origin.to_string(), false)),
        Some(Found::Property(text)) => Some((text.value, text.origin.to_string(), true)),
        None => None,
    };
    let keytab = text(
        layers.find(
            &table::KERBEROS_KEYTAB,
            source
                .kerberos_keytab
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        ),
    );
    let principal = text(layers.find(
        &table::KERBEROS_PRINCIPAL,
        source.kerberos_principal.clone(),
    ));
    let mut settings = crate::source::hdfs::kerberos::KerberosSettings {
        keytab_from_properties: keytab.as_ref().is_some_and(|k| k.2),
        principal_from_properties: principal.as_ref().is_some_and(|p| p.2),
        keytab: keytab.map(|(path, origin, _)| (PathBuf::from(path), origin)),
        principal: principal.map(|(p, origin, _)| (p, origin)),
        validated: false,
    };
    // Given by flag or env: checked now, HDFS or not. From the properties file only
    // (Spark's keys, set for Spark's own use): checked when HDFS needs them.
    let given = (settings.keytab.is_some() && !settings.keytab_from_properties)
        || (settings.principal.is_some() && !settings.principal_from_properties);
    if given {
        let mut found = Vec::new();
        crate::source::hdfs::kerberos::validate(&mut settings, &mut found);
        for problem in found {
            problems.push_message(problem);
        }
    }
    settings
}
