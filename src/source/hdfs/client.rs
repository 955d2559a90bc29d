//! hdfs-native clients: one per cluster, built from the Hadoop configuration and
//! the Kerberos settings, and the runtime they run on.
//!
//! hdfs-native calls libgssapi inside its futures; a ticket cache holding only a
//! TGT makes `gss_init_sec_context` ask the KDC for the NameNode's service ticket,
//! which blocks the calling thread for as long as libkrb5 waits (about half a
//! minute for a KDC that does not answer). So its calls and its own tasks run on
//! a runtime of their own: a thread blocked there stops no timer, signal or other
//! transfer of the command's runtime.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use hdfs_native::{Client, ClientBuilder};

use super::kerberos::{self, KerberosSettings};
use super::HdfsSettings;

/// Threads of hdfs-native's runtime: calls blocked on a KDC do not starve the rest.
const THREADS: usize = 4;

/// hdfs-native's runtime, made once per process and never dropped (dropping would
/// wait for a thread blocked in libkrb5).
pub(super) fn runtime() -> Result<tokio::runtime::Handle, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(THREADS)
                .thread_name("hdfs")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the HDFS client's runtime: {e}"))
        })
        .as_ref()
        .map(|rt| rt.handle().clone())
        .map_err(Clone::clone)
}

/// Gives `builder` the Kerberos credentials: a keytab's principal, keytab and the
/// in-memory cache the login fills; or the principal to pick from the ticket
/// cache (a `DIR:` collection holds several).
pub(super) fn with_kerberos(
    mut builder: ClientBuilder,
    credentials: Option<&KerberosSettings>,
) -> ClientBuilder {
    let Some(settings) = credentials else {
        return builder;
    };
    if let Some((principal, _)) = &settings.principal {
        builder = builder.with_kerberos_principal(principal.clone());
    }
    if let (Some((keytab, _)), Some(_)) = (&settings.keytab, &settings.principal) {
        builder = builder
            .with_kerberos_keytab(keytab.to_string_lossy().into_owned())
            .with_kerberos_cache(kerberos::MEMORY_CACHE.to_owned());
    }
    builder
}

/// The client of cluster `key` (whose URI host is `host`) and the configuration
/// overrides it was built with; or why it cannot be built.
pub(super) fn build(
    settings: &HdfsSettings,
    key: &str,
    host: &str,
    credentials: Option<&KerberosSettings>,
    runtime: Option<&tokio::runtime::Handle>,
) -> Result<(Client, BTreeMap<String, String>), String> {
    // hdfs-native fails over 15 times with sleeps growing to 15 s (minutes
    // against a dead NameNode): a few quick rounds, then the engine's
    // retries and deadline take over, with the real error in hand.
    let mut config = settings.conf.overrides.clone();
    for (name, value) in [
        ("dfs.client.failover.max.attempts", "3"),
        ("dfs.client.failover.sleep.base.millis", "200"),
        ("dfs.client.failover.sleep.max.millis", "1000"),
    ] {
        if settings.conf.get(name).is_none() {
            config.insert(name.to_owned(), value.to_owned());
        }
    }
    let mut builder = ClientBuilder::new()
        .with_url(key.to_owned())
        .with_config(config.clone());
    if let Some((dir, _)) = &settings.conf.dir {
        builder = builder.with_config_dir(dir.to_string_lossy().into_owned());
    }
    if let Some(runtime) = runtime {
        builder = builder.with_io_runtime(runtime.clone());
    }
    let e = match with_kerberos(builder, credentials).build() {
        Ok(client) => return Ok((client, config)),
        Err(e) => e,
    };
    let mut text = format!("{key}: {}", super::describe(&e));
    if text.contains("No NameNode hosts found") {
        let conf = settings.conf.dir.as_ref().map_or(
            "none found: give --hadoop-conf-dir or HADOOP_CONF_DIR".to_owned(),
            |(d, o)| format!("{} from {o}", d.display()),
        );
        text.push_str(&format!(
            " ('{host}' is neither host:port nor a nameservice of the Hadoop configuration ({conf}); set dfs.nameservices, dfs.ha.namenodes.<ns> and dfs.namenode.rpc-address.<ns>.<nn>, or write hdfs://host:port/path)"
        ));
    }
    if text.contains("fallback mount") {
        text.push_str(&format!(
            " (set fs.viewfs.mounttable.{host}.linkFallback in core-site.xml or spark.hadoop.*)"
        ));
    }
    Err(text)
}
