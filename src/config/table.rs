//! The settings of `fetch` and `check`, one entry each: the flag (clap's id), its
//! environment twin, the Spark properties keys read when neither is set, and the
//! label `check` shows it under. Resolution (the layers module), `check`'s
//! provenance and the generated references all read this table.

use crate::env_vars as env;

/// One setting and the places its value may come from, in precedence order: the
/// flag, its environment twin, the properties-file keys, then the default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setting {
    /// What `check` calls it.
    pub label: &'static str,
    /// clap's id of the flag: its long name with `_` for `-`.
    pub id: &'static str,
    /// The environment twin.
    pub env: &'static str,
    /// Properties-file keys; the first with a value wins (URI lists join them all).
    pub keys: &'static [&'static str],
}

const fn setting(
    label: &'static str,
    id: &'static str,
    env: &'static str,
    keys: &'static [&'static str],
) -> Setting {
    Setting {
        label,
        id,
        env,
        keys,
    }
}

pub(crate) const JARS: Setting = setting(
    "jars",
    "jars",
    env::JARS,
    &["spark.jars", "spark.kubernetes.initcontainer.remoteJars"],
);
pub(crate) const FILES: Setting = setting(
    "files",
    "files",
    env::FILES,
    &["spark.files", "spark.kubernetes.initcontainer.remoteFiles"],
);
pub(crate) const ARCHIVES: Setting =
    setting("archives", "archives", env::ARCHIVES, &["spark.archives"]);
pub(crate) const JARS_DIR: Setting = setting(
    "jars dir",
    "jars_dir",
    env::JARS_DIR,
    &["spark.kubernetes.mountdependencies.jarsDownloadDir"],
);
pub(crate) const FILES_DIR: Setting = setting(
    "files dir",
    "files_dir",
    env::FILES_DIR,
    &["spark.kubernetes.mountdependencies.filesDownloadDir"],
);
pub(crate) const DEADLINE: Setting = setting(
    "deadline",
    "deadline",
    env::DEADLINE,
    &["spark.kubernetes.mountdependencies.mountTimeout"],
);
pub(crate) const STAGING_URI: Setting = setting(
    "staging server",
    "staging_uri",
    env::STAGING_URI,
    &[
        "spark.kubernetes.resourceStagingServer.internal.uri",
        "spark.kubernetes.resourceStagingServer.uri",
    ],
);
pub(crate) const STAGING_JARS_ID: Setting = setting(
    "staged jars",
    "staging_jars_id",
    env::STAGING_JARS_ID,
    &["spark.kubernetes.initcontainer.downloadJarsResourceIdentifier"],
);
pub(crate) const STAGING_FILES_ID: Setting = setting(
    "staged files",
    "staging_files_id",
    env::STAGING_FILES_ID,
    &["spark.kubernetes.initcontainer.downloadFilesResourceIdentifier"],
);
pub(crate) const STAGING_JARS_SECRET: Setting = setting(
    "jars secret",
    "staging_jars_secret_file",
    env::STAGING_JARS_SECRET_FILE,
    &["spark.kubernetes.initcontainer.downloadJarsSecretLocation"],
);
pub(crate) const STAGING_FILES_SECRET: Setting = setting(
    "files secret",
    "staging_files_secret_file",
    env::STAGING_FILES_SECRET_FILE,
    &["spark.kubernetes.initcontainer.downloadFilesSecretLocation"],
);
pub(crate) const STAGING_CA_CERT: Setting = setting(
    "staging CA",
    "staging_ca_cert",
    env::STAGING_CA_CERT,
    &[
        "spark.ssl.kubernetes.resourceStagingServer.internal.clientCertPem",
        "spark.ssl.kubernetes.resourceStagingServer.clientCertPem",
    ],
);
pub(crate) const CHECKSUMS: Setting = setting("checksums", "checksums", env::CHECKSUMS, &[]);
pub(crate) const PACKAGES: Setting = setting(
    "packages",
    "packages",
    env::PACKAGES,
    &["spark.jars.packages"],
);
pub(crate) const REPOSITORIES: Setting = setting(
    "repositories",
    "repositories",
    env::REPOSITORIES,
    &["spark.jars.repositories"],
);
pub(crate) const EXCLUDE_PACKAGES: Setting = setting(
    "excluded packages",
    "exclude_packages",
    env::EXCLUDE_PACKAGES,
    &["spark.jars.excludes"],
);
pub(crate) const ONLY_REPOSITORIES: Setting = setting(
    "only repositories",
    "only_repositories",
    env::ONLY_REPOSITORIES,
    &[],
);
pub(crate) const IVY_SETTINGS: Setting = setting(
    "ivy settings",
    "ivy_settings",
    env::IVY_SETTINGS,
    &["spark.jars.ivySettings"],
);
pub(crate) const REPOSITORY_CREDENTIALS_DIR: Setting = setting(
    "repository credentials",
    "repository_credentials_dir",
    env::REPOSITORY_CREDENTIALS_DIR,
    &[],
);
pub(crate) const RESOLUTION: Setting = setting("resolution", "resolution", env::RESOLUTION, &[]);
pub(crate) const LOCK: Setting = setting("lock", "lock", env::LOCK, &[]);
pub(crate) const VERIFY_SIGNATURES: Setting = setting(
    "signatures",
    "verify_signatures",
    env::VERIFY_SIGNATURES,
    &[],
);
pub(crate) const TRUSTED_KEYS: Setting =
    setting("trusted keys", "trusted_keys", env::TRUSTED_KEYS, &[]);
pub(crate) const CA_CERT: Setting = setting("trusted CA", "ca_cert", env::CA_CERT, &[]);
pub(crate) const S3_CREDENTIALS_DIR: Setting = setting(
    "s3 credentials",
    "s3_credentials_dir",
    env::S3_CREDENTIALS_DIR,
    &[],
);
pub(crate) const AZURE_CREDENTIALS_DIR: Setting = setting(
    "azure credentials",
    "azure_credentials_dir",
    env::AZURE_CREDENTIALS_DIR,
    &[],
);
pub(crate) const HADOOP_CONF_DIR: Setting =
    setting("hadoop conf", "hadoop_conf_dir", env::HADOOP_CONF_DIR, &[]);
pub(crate) const KERBEROS_KEYTAB: Setting = setting(
    "kerberos keytab",
    "kerberos_keytab",
    env::KERBEROS_KEYTAB,
    &["spark.kerberos.keytab", "spark.yarn.keytab"],
);
pub(crate) const KERBEROS_PRINCIPAL: Setting = setting(
    "kerberos principal",
    "kerberos_principal",
    env::KERBEROS_PRINCIPAL,
    &["spark.kerberos.principal", "spark.yarn.principal"],
);
pub(crate) const PARALLELISM: Setting =
    setting("parallelism", "parallelism", env::PARALLELISM, &[]);
pub(crate) const RETRIES: Setting = setting("retries", "retries", env::RETRIES, &[]);
pub(crate) const RETRY_DELAY: Setting =
    setting("retry delay", "retry_delay", env::RETRY_DELAY, &[]);
pub(crate) const STALL_TIMEOUT: Setting =
    setting("stall timeout", "stall_timeout", env::STALL_TIMEOUT, &[]);
pub(crate) const CONNECT_TIMEOUT: Setting = setting(
    "connect timeout",
    "connect_timeout",
    env::CONNECT_TIMEOUT,
    &[],
);
pub(crate) const FSYNC: Setting = setting("fsync", "fsync", env::FSYNC, &[]);
pub(crate) const NO_PROGRESS: Setting =
    setting("no progress", "no_progress", env::NO_PROGRESS, &[]);
pub(crate) const PROGRESS_INTERVAL: Setting = setting(
    "progress every",
    "progress_interval",
    env::PROGRESS_INTERVAL,
    &[],
);
pub(crate) const CLASSPATH_FILE: Setting =
    setting("classpath file", "classpath_file", env::CLASSPATH_FILE, &[]);
pub(crate) const ENV_FILE: Setting = setting("env file", "env_file", env::ENV_FILE, &[]);
pub(crate) const REPORT: Setting = setting("report", "report", env::REPORT, &[]);
pub(crate) const SBOM: Setting = setting("sbom", "sbom", env::SBOM, &[]);
pub(crate) const NO_SBOM: Setting = setting("no sbom", "no_sbom", env::NO_SBOM, &[]);
pub(crate) const TERMINATION_LOG: Setting = setting(
    "termination log",
    "termination_log",
    env::TERMINATION_LOG,
    &[],
);

pub(crate) const REGISTRY_AUTH: Setting =
    setting("registry auth", "registry_auth", env::REGISTRY_AUTH, &[]);
pub(crate) const INSECURE_REGISTRY: Setting = setting(
    "insecure registry",
    "insecure_registry",
    env::INSECURE_REGISTRY,
    &[],
);

/// Every setting (the generated references and the tests read it).
#[cfg(test)]
pub(crate) const ALL: &[Setting] = &[
    JARS,
    FILES,
    ARCHIVES,
    JARS_DIR,
    FILES_DIR,
    DEADLINE,
    PARALLELISM,
    RETRIES,
    RETRY_DELAY,
    STALL_TIMEOUT,
    CONNECT_TIMEOUT,
    FSYNC,
    NO_PROGRESS,
    PROGRESS_INTERVAL,
    CLASSPATH_FILE,
    ENV_FILE,
    REPORT,
    SBOM,
    NO_SBOM,
    TERMINATION_LOG,
    CHECKSUMS,
    PACKAGES,
    REPOSITORIES,
    EXCLUDE_PACKAGES,
    ONLY_REPOSITORIES,
    IVY_SETTINGS,
    REPOSITORY_CREDENTIALS_DIR,
    RESOLUTION,
    LOCK,
    VERIFY_SIGNATURES,
    TRUSTED_KEYS,
    CA_CERT,
    S3_CREDENTIALS_DIR,
    AZURE_CREDENTIALS_DIR,
    HADOOP_CONF_DIR,
    STAGING_URI,
    STAGING_JARS_ID,
    STAGING_FILES_ID,
    STAGING_JARS_SECRET,
    STAGING_FILES_SECRET,
    STAGING_CA_CERT,
    REGISTRY_AUTH,
    INSECURE_REGISTRY,
];

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::ALL;

    /// Every entry names a real flag of `fetch` with that very env twin.
    #[test]
    fn every_setting_is_a_flag_with_its_env_twin() {
        let command = crate::cli::Cli::command();
        let fetch = command.find_subcommand("fetch").expect("fetch");
        for setting in ALL {
            let arg = fetch
                .get_arguments()
                .find(|arg| arg.get_id() == setting.id)
                .unwrap_or_else(|| panic!("no flag {}", setting.id));
            assert_eq!(
                arg.get_env().and_then(|e| e.to_str()),
                Some(setting.env),
                "{}",
                setting.id
            );
        }
    }
}
