//! Resolves flags, their environment twins and the properties file into one
//! [`Settings`], remembering where each value came from (shown by `check`).
//!
//! Precedence: flag, then `SPARK_LOCALIZER_*` env, then the properties file, then
//! the built-in default. Configuration is fully read and validated here, before
//! any network traffic.

pub(crate) mod checksums;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{ArgOrigins, FetchArgs};
use crate::config::checksums::{Checksums, ChecksumsError};
use crate::env_vars as env;
use crate::net::{load_header_file, CaFile, HttpConfig, HttpSetupError};
use crate::origin::Origin;
use crate::properties::{Properties, PropertiesError};
use crate::util::duration::positive_duration;

/// Default destination for jars, as in the apache-spark-on-k8s init container.
pub(crate) const DEFAULT_JARS_DIR: &str = "/var/spark-data/spark-jars";
/// Default destination for files.
pub(crate) const DEFAULT_FILES_DIR: &str = "/var/spark-data/spark-files";
/// Default overall deadline (the fork's mountTimeout default).
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// Properties-file keys read for each input, in the order their lists are joined.
pub(crate) mod keys {
    pub(crate) const JARS: &[&str] = &["spark.jars", "spark.kubernetes.initcontainer.remoteJars"];
    pub(crate) const FILES: &[&str] =
        &["spark.files", "spark.kubernetes.initcontainer.remoteFiles"];
    pub(crate) const ARCHIVES: &[&str] = &["spark.archives"];
    pub(crate) const JARS_DIR: &str = "spark.kubernetes.mountdependencies.jarsDownloadDir";
    pub(crate) const FILES_DIR: &str = "spark.kubernetes.mountdependencies.filesDownloadDir";
    pub(crate) const MOUNT_TIMEOUT: &str = "spark.kubernetes.mountdependencies.mountTimeout";
    pub(crate) const STAGING_URI: &[&str] = &[
        "spark.kubernetes.resourceStagingServer.internal.uri",
        "spark.kubernetes.resourceStagingServer.uri",
    ];
    pub(crate) const STAGING_JARS_ID: &str =
        "spark.kubernetes.initcontainer.downloadJarsResourceIdentifier";
    pub(crate) const STAGING_FILES_ID: &str =
        "spark.kubernetes.initcontainer.downloadFilesResourceIdentifier";
    pub(crate) const STAGING_JARS_SECRET: &str =
        "spark.kubernetes.initcontainer.downloadJarsSecretLocation";
    pub(crate) const STAGING_FILES_SECRET: &str =
        "spark.kubernetes.initcontainer.downloadFilesSecretLocation";
    pub(crate) const STAGING_CA_PEM: &[&str] = &[
        "spark.ssl.kubernetes.resourceStagingServer.internal.clientCertPem",
        "spark.ssl.kubernetes.resourceStagingServer.clientCertPem",
    ];
}

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
    pub archive_limits: crate::archive::Limits,
    pub jars_dir: Sourced<PathBuf>,
    pub files_dir: Sourced<PathBuf>,
    pub deadline: Sourced<Duration>,
    pub checksums: Option<Sourced<Checksums>>,
    pub header_file: Option<PathBuf>,
    pub http: HttpConfig,
    pub parallelism: usize,
    pub retries: u32,
    pub retry_delay: Duration,
    pub stall_timeout: Duration,
    pub fsync: bool,
    pub classpath_file: PathBuf,
    pub env_file: PathBuf,
    pub report: PathBuf,
    pub termination_log: Option<PathBuf>,
    pub properties_file: Option<PathBuf>,
    pub no_progress: bool,
    pub progress_interval: Duration,
    /// S3 inputs (the credentials-dir flag, the S3A keys, the AWS_* environment).
    pub s3: crate::s3::settings::S3Settings,
    /// `--hadoop-conf-dir` and where it was given (HDFS reads it only when needed).
    pub hadoop_conf_dir: Option<(PathBuf, String)>,
    /// The properties file, parsed (for `spark.hadoop.*` keys).
    pub properties: Option<Properties>,
    /// The resource staging server and the bundles' secret files.
    pub staging: StagingSettings,
    /// Every configuration problem found while resolving (reported together).
    pub problems: Vec<ConfigError>,
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

impl Settings {
    /// Resolves `args` (with their origins) and the properties file they name.
    /// Problems do not stop resolution: they are collected in `problems` so the
    /// user sees all of them at once.
    pub(crate) fn resolve(args: &FetchArgs, origins: &ArgOrigins) -> Settings {
        let mut problems = Vec::new();
        let origin_of = |id: &'static str, env_name: &'static str| origins.origin(id, env_name);
        let properties = args.properties_file.as_deref().and_then(|path| {
            Properties::load(path)
                .map_err(|e| problems.push(e.into()))
                .ok()
        });
        let from_props = |key: &str| -> Option<Sourced<String>> {
            let props = properties.as_ref()?;
            let value = props.get(key)?.trim();
            (!value.is_empty()).then(|| Sourced {
                value: value.to_owned(),
                origin: Origin::Properties {
                    path: props.path().map(Path::to_owned).unwrap_or_default(),
                    key: key.to_owned(),
                },
            })
        };

        let uri_list = |values: &[String], id: &'static str, env_name, props_keys: &[&str]| {
            let mut out = Vec::new();
            if origins.is_explicit(id) {
                let origin = origin_of(id, env_name);
                for value in values {
                    push_uris(&mut out, value, &origin);
                }
            } else {
                for key in props_keys {
                    if let Some(v) = from_props(key) {
                        push_uris(&mut out, &v.value, &v.origin);
                    }
                }
            }
            out
        };
        let mut jars = uri_list(&args.jars, "jars", env::JARS, keys::JARS);
        let mut files = uri_list(&args.files, "files", env::FILES, keys::FILES);
        // Staging bundles join their kind's list as `staging://<id>`, after the URIs.
        let staged = [
            (
                &args.staging_jars_id,
                "staging_jars_id",
                env::STAGING_JARS_ID,
                keys::STAGING_JARS_ID,
                &mut jars,
            ),
            (
                &args.staging_files_id,
                "staging_files_id",
                env::STAGING_FILES_ID,
                keys::STAGING_FILES_ID,
                &mut files,
            ),
        ];
        for (flag, id, env_name, key, list) in staged {
            let declared = match flag {
                Some(value) => Some((value.trim().to_owned(), origin_of(id, env_name))),
                None => from_props(key).map(|v| (v.value, v.origin)),
            };
            if let Some((value, origin)) = declared.filter(|(v, _)| !v.is_empty()) {
                push_uris(list, &format!("staging://{value}"), &origin);
            }
        }
        let archives = uri_list(&args.archives, "archives", env::ARCHIVES, keys::ARCHIVES);

        let dir = |flag: &Option<PathBuf>, id: &'static str, env_name, key: &str, default: &str| {
            if let Some(path) = flag {
                return Sourced {
                    value: path.clone(),
                    origin: origin_of(id, env_name),
                };
            }
            from_props(key)
                .map(|v| Sourced {
                    value: PathBuf::from(v.value),
                    origin: v.origin,
                })
                .unwrap_or(Sourced {
                    value: PathBuf::from(default),
                    origin: Origin::Default,
                })
        };
        let jars_dir = dir(
            &args.jars_dir,
            "jars_dir",
            env::JARS_DIR,
            keys::JARS_DIR,
            DEFAULT_JARS_DIR,
        );
        let files_dir = dir(
            &args.files_dir,
            "files_dir",
            env::FILES_DIR,
            keys::FILES_DIR,
            DEFAULT_FILES_DIR,
        );
        for d in [&jars_dir, &files_dir] {
            if !d.value.is_absolute() {
                problems.push(ConfigError::Invalid {
                    what: d.origin.to_string(),
                    reason: format!("{} is not an absolute path", d.value.display()),
                });
            }
        }

        let deadline = match args.deadline {
            Some(value) => Sourced {
                value,
                origin: origin_of("deadline", env::DEADLINE),
            },
            None => match from_props(keys::MOUNT_TIMEOUT) {
                Some(v) => match positive_duration(&v.value) {
                    Ok(value) => Sourced {
                        value,
                        origin: v.origin,
                    },
                    Err(reason) => {
                        problems.push(ConfigError::Property {
                            path: args.properties_file.clone().unwrap_or_default(),
                            key: keys::MOUNT_TIMEOUT,
                            reason,
                        });
                        Sourced {
                            value: DEFAULT_DEADLINE,
                            origin: Origin::Default,
                        }
                    }
                },
                None => Sourced {
                    value: DEFAULT_DEADLINE,
                    origin: Origin::Default,
                },
            },
        };

        let checksums = args.checksums.as_deref().and_then(|path| {
            Checksums::load(path)
                .map(|value| Sourced {
                    value,
                    origin: origin_of("checksums", env::CHECKSUMS),
                })
                .map_err(|e| problems.push(e.into()))
                .ok()
        });

        let mut ca_files: Vec<CaFile> = args
            .ca_cert
            .iter()
            .map(|path| CaFile {
                path: path.clone(),
                origin: origin_of("ca_cert", env::CA_CERT).to_string(),
            })
            .collect();
        if let Some(path) = std::env::var_os(env::SSL_CERT_FILE).filter(|p| !p.is_empty()) {
            ca_files.push(CaFile {
                path: path.into(),
                origin: env::SSL_CERT_FILE.to_owned(),
            });
        }
        // reqwest silently ignores a proxy variable it cannot parse: refuse it instead.
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
                // Like reqwest, `host:port` without a scheme means http://host:port.
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
        let headers = match &args.http_header_file {
            Some(path) => load_header_file(path).unwrap_or_else(|e| {
                problems.push(e.into());
                Vec::new()
            }),
            None => Vec::new(),
        };
        let parallelism = usize::from(args.parallelism);
        let http = HttpConfig {
            ca_files,
            connect_timeout: args.connect_timeout,
            pool_size: parallelism,
            headers,
        };

        let s3 = crate::s3::settings::S3Settings::new(
            args.s3_credentials_dir.clone().map(|dir| {
                (
                    dir,
                    origin_of("s3_credentials_dir", env::S3_CREDENTIALS_DIR),
                )
            }),
            properties.as_ref(),
        );
        let staging = staging_settings(args, origins, &from_props, &mut problems);
        let in_jars_dir = |name: &str| jars_dir.value.join(name);
        let termination_log = termination_log(args.termination_log.as_deref());
        Settings {
            problems,
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
            termination_log,
            jars,
            files,
            archives,
            archive_classpath: args.archive_classpath,
            archive_limits: crate::archive::Limits {
                max_bytes: args.archive_max_bytes,
                max_entries: args.archive_max_entries,
                max_ratio: args.archive_max_ratio,
            },
            jars_dir,
            files_dir,
            deadline,
            checksums,
            header_file: args.http_header_file.clone(),
            http,
            parallelism,
            retries: args.retries,
            retry_delay: args.retry_delay,
            stall_timeout: args.stall_timeout,
            fsync: args.fsync,
            properties_file: args.properties_file.clone(),
            no_progress: args.no_progress,
            progress_interval: args.progress_interval,
            s3,
            hadoop_conf_dir: args.hadoop_conf_dir.clone().map(|dir| {
                let origin = origin_of("hadoop_conf_dir", env::HADOOP_CONF_DIR).to_string();
                (dir, origin)
            }),
            properties,
            staging,
        }
    }
}

/// The staging server's URL, the secret files and the staging CA files.
fn staging_settings(
    args: &FetchArgs,
    origins: &ArgOrigins,
    from_props: &dyn Fn(&str) -> Option<Sourced<String>>,
    problems: &mut Vec<ConfigError>,
) -> StagingSettings {
    use crate::source::staging::{DEFAULT_SECRET_DIR, FILES_SECRET_KEY, JARS_SECRET_KEY};
    let declared = match &args.staging_uri {
        Some(value) => Some(Sourced {
            value: value.trim().to_owned(),
            origin: origins.origin("staging_uri", env::STAGING_URI),
        }),
        None => keys::STAGING_URI.iter().find_map(|key| from_props(key)),
    };
    let uri_given = declared.is_some();
    let uri = declared.and_then(|d| match parse_staging_uri(&d.value) {
        Ok(value) => Some(Sourced {
            value,
            origin: d.origin,
        }),
        Err(reason) => {
            problems.push(ConfigError::Invalid {
                what: d.origin.to_string(),
                reason,
            });
            None
        }
    });
    let secret = |flag: &Option<PathBuf>, id: &'static str, env_name, key: &str, file: &str| {
        if let Some(path) = flag {
            return Sourced {
                value: path.clone(),
                origin: origins.origin(id, env_name),
            };
        }
        from_props(key)
            .map(|v| Sourced {
                value: PathBuf::from(v.value),
                origin: v.origin,
            })
            .unwrap_or_else(|| Sourced {
                value: Path::new(DEFAULT_SECRET_DIR).join(file),
                origin: Origin::Default,
            })
    };
    let jars_secret = secret(
        &args.staging_jars_secret_file,
        "staging_jars_secret_file",
        env::STAGING_JARS_SECRET_FILE,
        keys::STAGING_JARS_SECRET,
        JARS_SECRET_KEY,
    );
    let files_secret = secret(
        &args.staging_files_secret_file,
        "staging_files_secret_file",
        env::STAGING_FILES_SECRET_FILE,
        keys::STAGING_FILES_SECRET,
        FILES_SECRET_KEY,
    );
    let ca_files = if args.staging_ca_cert.is_empty() {
        keys::STAGING_CA_PEM
            .iter()
            .find_map(|key| from_props(key))
            .map(|v| {
                vec![CaFile {
                    path: PathBuf::from(v.value),
                    origin: v.origin.to_string(),
                }]
            })
            .unwrap_or_default()
    } else {
        let origin = origins
            .origin("staging_ca_cert", env::STAGING_CA_CERT)
            .to_string();
        args.staging_ca_cert
            .iter()
            .map(|path| CaFile {
                path: path.clone(),
                origin: origin.clone(),
            })
            .collect()
    };
    StagingSettings {
        uri_invalid: uri_given && uri.is_none(),
        uri,
        jars_secret,
        files_secret,
        ca_files,
    }
}

/// A staging server URL: http(s), a host, no credentials, query or fragment.
fn parse_staging_uri(value: &str) -> Result<url::Url, String> {
    let shown = crate::util::redact::redact_url(value);
    let url = url::Url::parse(value)
        .map_err(|e| format!("{shown} is not a URL ({e}); e.g. http://spark-staging:10000"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!(
            "{shown} is not an http:// or https:// URL with a host; e.g. http://spark-staging:10000"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{shown} carries credentials; the staging server takes each bundle's secret from its secret file"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{shown} has a query or fragment; give the server's base URL"
        ));
    }
    Ok(url)
}

/// The termination-message file: the one given, else `/dev/termination-log` when
/// the kubelet mounted it, else none.
pub(crate) fn termination_log(explicit: Option<&Path>) -> Option<PathBuf> {
    let default = Path::new(env::DEFAULT_TERMINATION_LOG);
    explicit
        .map(Path::to_owned)
        .or_else(|| default.exists().then(|| default.to_owned()))
}

/// Splits a Spark-style comma-separated list; blanks are skipped, exact repeats dropped.
fn push_uris(out: &mut Vec<Declared>, list: &str, origin: &Origin) {
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !out.iter().any(|d| d.uri == item) {
            out.push(Declared {
                uri: item.to_owned(),
                origin: origin.clone(),
            });
        }
    }
}
