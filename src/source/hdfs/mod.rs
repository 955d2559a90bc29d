//! `hdfs://` and `viewfs://` through hdfs-native: one client per cluster
//! (`scheme://authority`), configured from the Hadoop configuration directory
//! and the properties file's `spark.hadoop.*` keys, with delegation tokens from
//! `HADOOP_TOKEN_FILE_LOCATION` (checked here first) and, in the glibc build,
//! Kerberos from a keytab or the ticket cache (`KRB5CCNAME`), checked here first
//! too ([`kerberos`]).

mod client;
pub(crate) mod conf;
pub(crate) mod kerberos;
pub(crate) mod keytab;
mod reader;
pub(crate) mod replicas;
pub(crate) mod token;

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use futures_util::StreamExt;
use hdfs_native::{Client, ClientBuilder, HdfsError};
use url::Url;

use self::conf::HadoopConf;
use self::kerberos::{Identity, KerberosSettings};
use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};

/// The environment variable naming the delegation-token file.
pub(crate) const TOKEN_FILE_VAR: &str = crate::env_vars::hadoop::TOKEN_FILE_LOCATION;

/// What the HDFS source is configured from.
#[derive(Debug, Clone, Default)]
pub(crate) struct HdfsSettings {
    pub conf: HadoopConf,
    /// The delegation-token file and the tokens it holds.
    pub tokens: Option<(PathBuf, Vec<token::TokenInfo>)>,
    /// The keytab and principal for Kerberos (else the ticket cache).
    pub kerberos: KerberosSettings,
}

impl HdfsSettings {
    /// Loads the Hadoop configuration and checks the token file; problems are messages.
    pub(crate) fn load(
        conf_dir: Option<(PathBuf, String)>,
        props: Option<&crate::properties::Properties>,
        mut kerberos: KerberosSettings,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        kerberos::validate(&mut kerberos, &mut problems);
        let conf = HadoopConf::load(conf_dir, props).unwrap_or_else(|e| {
            problems.push(e);
            HadoopConf::default()
        });
        let tokens = std::env::var_os(TOKEN_FILE_VAR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .and_then(|path| match token::load(&path) {
                Ok(tokens) => Some((path, tokens)),
                Err(e) => {
                    problems.push(format!(
                        "{TOKEN_FILE_VAR}={}: not a usable Hadoop token file: {e}; mount the delegation-token Secret Spark created, or unset the variable",
                        path.display()
                    ));
                    None
                }
            });
        if problems.is_empty() {
            Ok(HdfsSettings {
                conf,
                tokens,
                kerberos,
            })
        } else {
            Err(problems)
        }
    }
}

/// Whether this binary can speak Kerberos: hdfs-native loads
/// `libgssapi_krb5.so.2` at run time, which a static binary cannot do.
pub(crate) fn kerberos_available() -> bool {
    if cfg!(target_env = "musl") {
        return false;
    }
    // SAFETY: loading the system GSSAPI library runs its initialisers, as
    // hdfs-native itself does when it needs Kerberos.
    unsafe { libloading::Library::new("libgssapi_krb5.so.2") }.is_ok()
}

/// The message for a Kerberos cluster this binary cannot authenticate to. The
/// Kerberos-capable image is built for amd64 only: an arm64 build names the token.
#[cfg(not(target_arch = "aarch64"))]
pub(crate) const NO_KERBEROS: &str = "the cluster uses Kerberos (hadoop.security.authentication=kerberos) but this spark-localizer cannot load libgssapi_krb5.so.2 (the static image never can): use the Kerberos-capable image variant with a keytab (--kerberos-keytab) or a ticket cache (KRB5CCNAME), or give a delegation token with HADOOP_TOKEN_FILE_LOCATION";
#[cfg(target_arch = "aarch64")]
pub(crate) const NO_KERBEROS: &str = "the cluster uses Kerberos (hadoop.security.authentication=kerberos) but this spark-localizer cannot load libgssapi_krb5.so.2 (the static image never can): on arm64 nodes give a delegation token with HADOOP_TOKEN_FILE_LOCATION (the Kerberos-capable image variant, for a keytab or a ticket cache, is built for amd64 nodes only)";

/// The Kerberos login of the clusters that need it: done once, on first use, so
/// that `--deadline` and signals bound it like any transfer.
struct Login {
    settings: KerberosSettings,
    limit: std::time::Duration,
    done: tokio::sync::OnceCell<Result<Identity, String>>,
}

impl Login {
    /// The login for clusters that need Kerberos (`None` when none does or this
    /// binary cannot), the credentials their clients are built with, and why the
    /// ticket cache is unusable. A ticket cache is checked before anything reads
    /// it: libkrb5 crashes on some corrupt ones, and hdfs-native asks libgssapi for
    /// the default principal while building a client unless it is given one.
    fn prepare(
        settings: &HdfsSettings,
        needed: bool,
        limit: std::time::Duration,
    ) -> (Option<Login>, KerberosSettings, Option<String>) {
        if !settings.conf.kerberos()
            && settings.kerberos.keytab.is_some()
            && !settings.kerberos.keytab_from_properties
        {
            tracing::warn!(
                "a Kerberos keytab is given but the Hadoop configuration does not say hadoop.security.authentication=kerberos: it is not used (set that key in core-site.xml or as spark.hadoop.hadoop.security.authentication)"
            );
        }
        let mut credentials = settings.kerberos.clone();
        if !needed || !kerberos_available() {
            return (None, credentials, None);
        }
        let mut unusable = None;
        match kerberos::check_ticket_cache(&credentials) {
            Ok(Some(held)) if credentials.principal.is_none() => {
                credentials.principal = Some((held, "the ticket cache".to_owned()));
            }
            Ok(_) => {}
            Err(e) => unusable = Some(e),
        }
        let login = Login {
            settings: credentials.clone(),
            limit,
            done: tokio::sync::OnceCell::new_with(unusable.clone().map(Err)),
        };
        (Some(login), credentials, unusable)
    }
}

/// How the clusters authenticate, for `check` (Kerberos clusters say who once
/// logged in).
fn auth_text(settings: &HdfsSettings) -> String {
    match (&settings.tokens, settings.conf.kerberos()) {
        (Some((path, tokens)), _) => format!(
            "delegation tokens from {} ({})",
            path.display(),
            tokens
                .iter()
                .map(|t| format!("{} for {}", t.kind.escape_debug(), t.service.escape_debug()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, true) => "Kerberos".to_owned(),
        (None, false) => "simple (HADOOP_USER_NAME or the OS user)".to_owned(),
    }
}

/// One cluster's client and what errors should say about it.
struct Cluster {
    /// `None` when the ticket cache is unusable (then every request fails with
    /// the login's error before reaching hdfs-native).
    client: Option<Client>,
    /// The Kerberos settings its client was built with (for `check`'s direct
    /// questions to each NameNode).
    credentials: Option<KerberosSettings>,
    /// The nameservice and its NameNodes, for error messages.
    namenodes: Vec<(String, String)>,
    /// The user the NameNode sees, and where that comes from (`check`).
    user: String,
    /// What is wrong with the credentials for it (warned once, shown by `check`).
    notes: Vec<String>,
    /// The configuration overrides its client was built with (for `check`'s
    /// direct questions to each NameNode).
    config: BTreeMap<String, String>,
    /// Whether it is reached with Kerberos (no delegation token for it).
    kerberos: bool,
}

#[derive(Default)]
pub(crate) struct HdfsSource {
    clusters: BTreeMap<String, Cluster>,
    auth: String,
    /// The Kerberos login, when a cluster needs Kerberos: done once, on first use.
    login: Option<Login>,
    /// Where hdfs-native runs (see [`client::runtime`]).
    runtime: Option<tokio::runtime::Handle>,
    /// How long the NameNode calls of one request may take, failovers included.
    rpc_timeout: std::time::Duration,
    /// The Hadoop configuration directory and where it was named.
    conf_dir: Option<String>,
    /// Whether the client runs SASL with each DataNode (for naming its failures).
    data_transfer_protection: bool,
    /// Files for which every replica of a block has already failed its checksum once.
    corrupt: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, bool>>>,
}

/// `scheme://authority` of an hdfs/viewfs URI: which client serves it.
pub(crate) fn cluster_of(uri: &Url) -> String {
    let mut key = format!("{}://{}", uri.scheme(), uri.host_str().unwrap_or_default());
    if let Some(port) = uri.port() {
        key.push_str(&format!(":{port}"));
    }
    key
}

/// Checks an `hdfs://` / `viewfs://` URI before any traffic.
pub(crate) fn check_uri(uri: &Url) -> Result<(), String> {
    let shown = crate::util::redact::redact_url(uri.as_str());
    if uri.scheme() == "hdfs" && uri.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "{shown} has no NameNode or nameservice (write hdfs://nameservice/path or hdfs://host:8020/path)"
        ));
    }
    if !uri.username().is_empty() || uri.password().is_some() {
        return Err(format!(
            "{shown} holds credentials; HDFS uses delegation tokens (HADOOP_TOKEN_FILE_LOCATION) or Kerberos"
        ));
    }
    if uri.query().is_some() {
        return Err(format!(
            "{shown} has a query ('?'); encode '?' in HDFS paths as %3F"
        ));
    }
    if uri.port() == Some(0) {
        return Err(format!("{shown} has port 0"));
    }
    if uri.scheme() == "viewfs" && uri.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "{shown} has no mount table name (write viewfs://cluster/path)"
        ));
    }
    Ok(())
}

impl HdfsSource {
    /// Builds a client per cluster named by the plan.
    pub(crate) fn new<'a>(
        settings: &HdfsSettings,
        uris: impl IntoIterator<Item = &'a Url>,
        rpc_timeout: std::time::Duration,
    ) -> Result<Self, Vec<String>> {
        quiet_hdfs_native_panics();
        let mut problems = Vec::new();
        let mut clusters = BTreeMap::new();
        let tokens: &[token::TokenInfo] = settings.tokens.as_ref().map_or(&[], |(_, t)| t);
        let kerberos = settings.conf.kerberos();
        let mut seen = std::collections::BTreeSet::new();
        let uris: Vec<&Url> = uris
            .into_iter()
            .filter(|uri| seen.insert(cluster_of(uri)))
            .collect();
        // Clusters that need Kerberos: no HDFS delegation token for them.
        let needs_kerberos: Vec<String> = uris
            .iter()
            .filter(|uri| {
                let host = uri.host_str().unwrap_or_default();
                let is_service = !settings.conf.namenodes(host).is_empty();
                kerberos
                    && !tokens
                        .iter()
                        .any(|t| t.serves(host, uri.port(), is_service))
            })
            .map(|uri| cluster_of(uri))
            .collect();
        let runtime = match client::runtime() {
            Ok(runtime) => Some(runtime),
            Err(e) => {
                problems.push(e);
                None
            }
        };
        let (login, credentials, unusable) =
            Login::prepare(settings, !needs_kerberos.is_empty(), rpc_timeout);
        for uri in uris {
            let key = cluster_of(uri);
            let host = uri.host_str().unwrap_or_default();
            let is_service = !settings.conf.namenodes(host).is_empty();
            let uses_kerberos = needs_kerberos.contains(&key);
            for (id, addr) in settings.conf.namenodes(host) {
                let port = addr
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.parse::<u16>().ok());
                if !matches!(port, Some(p) if p > 0) {
                    problems.push(format!(
                        "dfs.namenode.rpc-address.{host}.{id} is '{addr}', not host:port"
                    ));
                }
            }
            let credentials = uses_kerberos.then_some(&credentials);
            let built = match (&unusable, uses_kerberos) {
                (Some(_), true) => Ok((None, BTreeMap::new())),
                _ => client::build(settings, &key, host, credentials, runtime.as_ref())
                    .map(|(client, config)| (Some(client), config)),
            };
            match built {
                Ok((client, config)) => {
                    let namenodes = settings.conf.namenodes(host);
                    let (user, notes) = who(&key, host, uri.port(), is_service, tokens, kerberos);
                    for note in &notes {
                        tracing::warn!("{note}");
                    }
                    clusters.insert(
                        key,
                        Cluster {
                            client,
                            credentials: credentials.cloned(),
                            namenodes,
                            user,
                            notes,
                            config,
                            kerberos: uses_kerberos,
                        },
                    );
                }
                Err(text) => problems.push(text),
            }
        }
        if !needs_kerberos.is_empty() && !kerberos_available() {
            let why = if tokens.is_empty() {
                ""
            } else {
                " (the token file holds no HDFS delegation token for it)"
            };
            problems.push(format!("{}: {NO_KERBEROS}{why}", needs_kerberos.join(", ")));
        }
        if problems.is_empty() {
            Ok(HdfsSource {
                clusters,
                auth: auth_text(settings),
                login,
                runtime,
                rpc_timeout,
                conf_dir: settings
                    .conf
                    .dir
                    .as_ref()
                    .map(|(d, o)| format!("{}  ({o})", d.display())),
                corrupt: Default::default(),
                data_transfer_protection: settings.conf.get(DATA_TRANSFER_PROTECTION).is_some(),
            })
        } else {
            Err(problems)
        }
    }

    fn cluster(&self, uri: &Url) -> Result<(&Cluster, String), SourceError> {
        let c = self.clusters.get(&cluster_of(uri)).ok_or_else(|| {
            SourceError::new(
                FaultKind::Refused,
                format!("{}: cluster not configured", cluster_of(uri)),
            )
        })?;
        let path = percent_encoding::percent_decode_str(uri.path())
            .decode_utf8()
            .map_err(|_| SourceError::new(FaultKind::Refused, format!("{uri}: path is not UTF-8")))?
            .into_owned();
        Ok((c, path))
    }

    /// The Kerberos login (once, on first use), then the cluster and the path.
    async fn ready(&self, uri: &Url) -> Result<(&Cluster, String), SourceError> {
        let (c, path) = self.cluster(uri)?;
        if c.kerberos {
            if let Some(Err(e)) = self.login().await {
                return Err(SourceError::new(
                    FaultKind::Auth,
                    format!("{}: {e}", crate::util::redact::redact_url(uri.as_str())),
                ));
            }
        }
        Ok((c, path))
    }

    /// Logs in to Kerberos when a cluster needs it (once; later calls get the
    /// first answer).
    pub(crate) async fn login(&self) -> Option<&Result<Identity, String>> {
        let login = self.login.as_ref()?;
        Some(
            login
                .done
                .get_or_init(|| kerberos::login(&login.settings, login.limit))
                .await,
        )
    }

    /// A NameNode call on hdfs-native's runtime, bounded: hdfs-native keeps failing
    /// over (15 times, with growing sleeps, minutes in all) while no NameNode
    /// answers, and may wait on a KDC inside the call.
    async fn call<T, F>(
        &self,
        c: &Cluster,
        uri: &Url,
        call: impl FnOnce(Client) -> F,
    ) -> Result<T, SourceError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, HdfsError>> + Send + 'static,
    {
        let shown = crate::util::redact::redact_url(uri.as_str());
        let Some(runtime) = &self.runtime else {
            return Err(SourceError::new(
                FaultKind::Refused,
                format!("{shown}: no HDFS runtime"),
            ));
        };
        let Some(client) = c.client.clone() else {
            return Err(SourceError::new(
                FaultKind::Auth,
                format!("{shown}: no usable Kerberos credentials"),
            ));
        };
        let mut task = runtime.spawn(call(client));
        match tokio::time::timeout(self.rpc_timeout, &mut task).await {
            Ok(Ok(result)) => result.map_err(|e| classify(c, uri, e)),
            Ok(Err(e)) => Err(SourceError::new(
                FaultKind::Refused,
                format!(
                    "{shown}: hdfs-native stopped on {}'s answer: {e}",
                    tried(c, uri)
                ),
            )),
            Err(_) => {
                task.abort();
                let kdc = if c.kerberos {
                    " (with Kerberos the first call also gets a service ticket from the KDC: if the NameNode is up, check that the KDC answers)"
                } else {
                    ""
                };
                Err(SourceError::new(
                    FaultKind::Transient,
                    format!(
                        "{shown}: no answer from {} within {} (--connect-timeout){kdc}",
                        tried(c, uri),
                        crate::util::duration::format_duration(self.rpc_timeout)
                    ),
                ))
            }
        }
    }
}

/// The user the NameNode of cluster `key` will see and where it comes from, and
/// what is wrong with the delegation tokens for it: none for this cluster while
/// the file holds others, or one past its max date.
fn who(
    key: &str,
    host: &str,
    port: Option<u16>,
    is_service: bool,
    tokens: &[token::TokenInfo],
    kerberos: bool,
) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let token = tokens.iter().find(|t| t.serves(host, port, is_service));
    let user = match (token, kerberos) {
        (Some(t), _) => format!(
            "{} (the HDFS delegation token for {})",
            t.owner.as_deref().unwrap_or("?"),
            t.service
        ),
        // Known once logged in: `describe` says who.
        (None, true) => "the Kerberos principal".to_owned(),
        (None, false) => match std::env::var(crate::env_vars::hadoop::USER_NAME) {
            Ok(user) if !user.is_empty() => format!(
                "{user} ({}; simple authentication)",
                crate::env_vars::hadoop::USER_NAME
            ),
            _ => format!(
                "{} (the OS user; simple authentication)",
                whoami::username().unwrap_or_else(|_| "unknown".to_owned())
            ),
        },
    };
    let hdfs_tokens: Vec<&str> = tokens
        .iter()
        .filter(|t| t.is_hdfs())
        .map(|t| t.service.as_str())
        .collect();
    if token.is_none() && !tokens.is_empty() {
        notes.push(format!(
            "{TOKEN_FILE_VAR} holds no HDFS delegation token for {key} (its HDFS tokens are for: {}); the NameNode will see {user}",
            if hdfs_tokens.is_empty() {
                "none".to_owned()
            } else {
                hdfs_tokens.join(", ")
            }
        ));
    }
    if let Some((t, max)) = token.and_then(|t| Some((t, t.max_date_ms?))) {
        if max > 0 && (max as u64) < crate::util::time::now_ms() {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(max as u64);
            notes.push(format!(
                "the HDFS delegation token for {} passed its max date ({}): the NameNode refuses it; the job's tokens must be obtained again (a keytab lets Spark do so: spark.kerberos.keytab and spark.kerberos.principal)",
                t.service,
                httpdate::fmt_http_date(when)
            ));
        }
    }
    (user, notes)
}

/// How NameNode `addr` of `cluster` answers a read (`getFileInfo /`) asked
/// directly: active, standby, or not at all.
async fn namenode_state(cluster: &Cluster, addr: &str, limit: std::time::Duration) -> String {
    let runtime = match client::runtime() {
        Ok(runtime) => runtime,
        Err(e) => return format!("cannot ask it: {e}"),
    };
    let builder = ClientBuilder::new()
        .with_url(format!("hdfs://{addr}"))
        .with_config(cluster.config.clone())
        .with_io_runtime(runtime.clone());
    let client = match client::with_kerberos(builder, cluster.credentials.as_ref()).build() {
        Ok(client) => client,
        Err(e) => return format!("cannot ask it: {}", describe(&e)),
    };
    let task = runtime.spawn(async move { client.get_file_info("/").await });
    let answer = tokio::time::timeout(limit, task).await;
    let answer = match answer {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => return format!("cannot ask it: {e}"),
        Err(elapsed) => Err(elapsed),
    };
    match answer {
        Err(_) => format!(
            "does not answer within {} (--connect-timeout)",
            crate::util::duration::format_duration(limit)
        ),
        Ok(Ok(_) | Err(HdfsError::FileNotFound(_))) => "answers (active)".to_owned(),
        Ok(Err(HdfsError::RPCError(class, _) | HdfsError::FatalRPCError(class, _)))
            if class.ends_with("StandbyException") =>
        {
            "standby".to_owned()
        }
        Ok(Err(e)) if fault_of(&e) == FaultKind::Auth => format!(
            "cannot be asked directly with these credentials (delegation tokens name the nameservice): {}",
            describe(&e)
        ),
        Ok(Err(e)) => format!("does not answer: {}", describe(&e)),
    }
}

/// A file's version: its length and modification time.
fn validator(status: &hdfs_native::client::FileStatus) -> String {
    format!("{}-{}", status.length, status.modification_time)
}

#[async_trait]
impl Source for HdfsSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (c, path) = self.ready(uri).await?;
        let p = path.clone();
        let status = self
            .call(c, uri, move |client| async move {
                client.get_file_info(&p).await
            })
            .await?;
        if status.isdir {
            return Err(directory(uri));
        }
        let p = path.clone();
        let reader = self
            .call(c, uri, move |client| async move { client.read(&p).await })
            .await?;
        let size = reader.file_length() as u64;
        let version = validator(&status);
        // Like If-Range: continue only the same version, else send it all.
        let same = req.validator.as_deref() == Some(version.as_str());
        let offset = if req.offset > 0 && same {
            req.offset
        } else {
            0
        };
        let end = match req.end {
            Some(end) if same => end,
            _ => size,
        };
        // hdfs-native panics on a range past the end: clamp it.
        let (start, end) = (offset.min(size), end.min(size).max(offset.min(size)));
        let shown = crate::util::redact::redact_url(uri.as_str());
        let (corrupt, key) = (self.corrupt.clone(), uri.to_string());
        let mut watched = replicas::Watched::new(
            reader
                .read_range_stream(start as usize, (end - start) as usize)
                .boxed(),
        );
        // Where the read is (for naming the block that failed).
        let (mut at, block_size) = (start, status.blocksize.filter(|&b| b > 0));
        let protected = self.data_transfer_protection;
        let stream = futures_util::stream::poll_fn(move |cx| {
            // hdfs-native panics on some DataNode answers (a refused SASL handshake:
            // status ERROR without a payload): a failed read, not a crashed run.
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                watched.poll_next_unpin(cx)
            }));
            let item = match polled {
                Ok(item) => item,
                Err(panic) => {
                    return std::task::Poll::Ready(Some(Err(datanode_panic(
                        &shown, protected, &panic,
                    ))))
                }
            };
            if let std::task::Poll::Ready(Some(Ok(chunk))) = &item {
                at += chunk.len() as u64;
            }
            let block = block_size.map(|b| {
                let n = at / b;
                format!(
                    " block {n} (bytes {}-{}):",
                    n * b,
                    ((n + 1) * b).min(size) - 1
                )
            });
            item.map(|next| {
                next.map(|r| {
                    r.map_err(|e| match &e {
                        HdfsError::DataTransferError(m)
                            if m.starts_with("All DataNodes failed") =>
                        {
                            // A reader never goes back to a DataNode that sent one bad
                            // block, even for other blocks: try once more with a fresh
                            // reader before calling the file corrupt.
                            let seen_before = corrupt
                                .lock()
                                .map(|mut c| {
                                    std::mem::replace(&mut *c.entry(key.clone()).or_default(), true)
                                })
                                .unwrap_or(true);
                            datanodes_failed(&shown, &watched, seen_before, block.as_deref())
                        }
                        _ => SourceError::new(fault_of(&e), format!("{shown}: {}", describe(&e))),
                    })
                })
            })
        });
        Ok(Body {
            meta: Meta {
                size: Some(size),
                validator: Some(version),
                ranges: true,
            },
            offset: start,
            stream: stream.boxed(),
        })
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (c, path) = self.ready(uri).await?;
        let status = self
            .call(c, uri, move |client| async move {
                client.get_file_info(&path).await
            })
            .await?;
        if status.isdir {
            return Err(directory(uri));
        }
        Ok(Probe {
            meta: Meta {
                size: Some(status.length as u64),
                validator: Some(validator(&status)),
                ranges: true,
            },
            status: format!(
                "exists, replication {}",
                status.replication.unwrap_or_default()
            ),
            redirected_to: None,
        })
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    /// Each NameNode of each nameservice, asked directly: which one answers
    /// (active), which is standby, which cannot be reached.
    async fn inspect(&self, limit: std::time::Duration) -> Vec<String> {
        let mut lines = Vec::new();
        for (key, cluster) in &self.clusters {
            if cluster.namenodes.is_empty() {
                continue;
            }
            lines.push(format!("  hdfs cluster     {key}"));
            for (id, addr) in &cluster.namenodes {
                let state = namenode_state(cluster, addr, limit).await;
                lines.push(format!("    namenode {id:<6}{addr}: {state}"));
            }
        }
        lines
    }

    /// The Hadoop configuration directory used, and every cluster: its NameNodes
    /// and how the client authenticates.
    fn describe(&self) -> Vec<String> {
        let conf_dir = self
            .conf_dir
            .iter()
            .map(|dir| format!("  hadoop conf      {dir}"));
        let clusters = self.clusters.iter().map(|(key, cluster)| {
            let namenodes = if cluster.namenodes.is_empty() {
                "(a single NameNode)".to_owned()
            } else {
                cluster
                    .namenodes
                    .iter()
                    .map(|(id, addr)| format!("{id} {addr}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let notes: String = cluster
                .notes
                .iter()
                .map(|n| format!("\n    warning        {n}"))
                .collect();
            let (auth, user) = match (cluster.kerberos, self.login.as_ref().map(|l| l.done.get())) {
                (true, Some(Some(Ok(identity)))) => (
                    format!("Kerberos: {}", identity.describe()),
                    format!("{} (Kerberos)", identity.principal),
                ),
                (true, Some(Some(Err(e)))) => (
                    format!("Kerberos, but the login failed: {e}"),
                    "none (no Kerberos login)".to_owned(),
                ),
                _ => (self.auth.clone(), cluster.user.clone()),
            };
            format!(
                "  hdfs cluster     {key}\n    namenodes      {namenodes}\n    auth           {auth}\n    user           {user}{notes}"
            )
        });
        conf_dir.chain(clusters).collect()
    }
}

/// Every DataNode of a block failed for one reader: corrupt replicas (checked
/// once more with a fresh reader before the file is called corrupt), refused
/// block tokens, or DataNodes that could not serve it.
fn datanodes_failed(
    shown: &str,
    watched: &replicas::Watched<impl futures_util::Stream + Unpin>,
    seen_before: bool,
    block: Option<&str>,
) -> SourceError {
    if watched.saw_checksum_errors() && seen_before {
        return SourceError::new(
            FaultKind::Integrity,
            format!("{shown}: every replica of a block failed checksum verification (corrupt on every DataNode); nothing was published"),
        );
    }
    if watched.saw_checksum_errors() {
        return SourceError::new(
            FaultKind::Transient,
            format!("{shown}: corrupt replicas (checksum mismatch) and no good one left for this reader; trying again with a fresh list of DataNodes"),
        );
    }
    let tried = watched.failed_datanodes();
    let token = if tried.iter().any(|t| t.contains("access token")) {
        "; the DataNodes refused the block access token the NameNode issued: the cluster's NameNode and DataNodes disagree on block keys, or the token expired (a cluster problem, for its admins)"
    } else {
        ""
    };
    let tried = if tried.is_empty() {
        String::new()
    } else {
        format!(" (tried {})", tried.join(", "))
    };
    SourceError::new(
        FaultKind::Transient,
        format!(
            "{shown}:{} no DataNode holding it could serve it{tried}{token}",
            block.unwrap_or(" a block:")
        ),
    )
}

/// The Hadoop key that makes the client run SASL with each DataNode.
const DATA_TRANSFER_PROTECTION: &str = "dfs.data.transfer.protection";

/// A panic inside hdfs-native while reading blocks, as a failed read.
fn datanode_panic(shown: &str, protected: bool, panic: &(dyn std::any::Any + Send)) -> SourceError {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    if protected {
        SourceError::new(
            FaultKind::Auth,
            format!("{shown}: a DataNode refused the SASL handshake of dfs.data.transfer.protection (hdfs-native stopped on its answer: {what}): usually the DataNodes' block keys differ from the NameNode's, or their dfs.data.transfer.protection differs from this configuration's; for the cluster's admins"),
        )
    } else {
        SourceError::new(
            FaultKind::Refused,
            format!("{shown}: hdfs-native stopped on a DataNode's answer ({what})"),
        )
    }
}

/// Keeps the panics [`datanode_panic`] turns into errors off stderr (they are
/// reported as the artifact's error); every other panic prints as before.
fn quiet_hdfs_native_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info
                .location()
                .is_some_and(|l| l.file().contains("hdfs-native"))
            {
                tracing::debug!("hdfs-native panicked: {info}");
            } else {
                previous(info);
            }
        }));
    });
}

fn directory(uri: &Url) -> SourceError {
    SourceError::new(
        FaultKind::Refused,
        format!(
            "{}: is a directory; name a file",
            crate::util::redact::redact_url(uri.as_str())
        ),
    )
}

/// hdfs-native's message, without its generic prefixes.
fn describe(e: &HdfsError) -> String {
    crate::util::redact::scrub(&e.to_string())
}

fn fault_of(e: &HdfsError) -> FaultKind {
    match e {
        HdfsError::FileNotFound(_) | HdfsError::BlocksNotFound(_) => FaultKind::NotFound,
        HdfsError::ChecksumError => FaultKind::Integrity,
        HdfsError::IOError(_) | HdfsError::DataTransferError(_) => FaultKind::Transient,
        HdfsError::SASLError(_) | HdfsError::GSSAPIError(..) | HdfsError::NoSASLMechanism => {
            FaultKind::Auth
        }
        HdfsError::RPCError(class, _) | HdfsError::FatalRPCError(class, _) => {
            if class.ends_with("AccessControlException")
                || class.ends_with("InvalidToken")
                || class.ends_with("SaslException")
            {
                FaultKind::Auth
            } else if class.ends_with("FileNotFoundException") {
                FaultKind::NotFound
            } else if class.ends_with("StandbyException")
                || class.ends_with("RetriableException")
                || class.ends_with("SafeModeException")
            {
                FaultKind::Transient
            } else {
                FaultKind::Refused
            }
        }
        _ => FaultKind::Refused,
    }
}

/// The NameNode, or the nameservice and its NameNodes, a request went to.
fn tried(c: &Cluster, uri: &Url) -> String {
    let host = uri.host_str().unwrap_or_default();
    if uri.scheme() == "viewfs" {
        format!("viewfs mount table {host}")
    } else if c.namenodes.is_empty() {
        format!(
            "NameNode {host}{}",
            uri.port().map(|p| format!(":{p}")).unwrap_or_default()
        )
    } else {
        format!(
            "nameservice {host} (NameNodes {})",
            c.namenodes
                .iter()
                .map(|(id, addr)| format!("{id} {addr}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn classify(c: &Cluster, uri: &Url, e: HdfsError) -> SourceError {
    let shown = crate::util::redact::redact_url(uri.as_str());
    let kind = fault_of(&e);
    let tried = tried(c, uri);
    let message = match &e {
        HdfsError::FileNotFound(_) => format!("{shown}: no such file in {tried}"),
        HdfsError::ChecksumError => format!(
            "{shown}: every replica failed checksum verification (corrupt blocks); nothing was published"
        ),
        HdfsError::SASLError(_) | HdfsError::GSSAPIError(..) | HdfsError::NoSASLMechanism
            if !kerberos_available() =>
        {
            format!("{shown}: {}: {}", describe(&e), NO_KERBEROS)
        }
        HdfsError::GSSAPIError(_, _, message) => format!(
            "{shown}: Kerberos authentication to {tried} failed: {} ({})",
            kerberos::hint(message),
            crate::util::redact::scrub(message)
        ),
        HdfsError::RPCError(class, message) | HdfsError::FatalRPCError(class, message)
            if class.ends_with("SaslException") =>
        {
            format!(
                "{shown}: {tried} refused the Kerberos ticket: {} ({class}: {})",
                kerberos::hint(message),
                crate::util::redact::scrub(message)
            )
        }
        HdfsError::IOError(_) | HdfsError::RPCError(..) | HdfsError::FatalRPCError(..) => {
            format!("{shown}: {tried}: {}", describe(&e))
        }
        _ => format!("{shown}: {}", describe(&e)),
    };
    SourceError::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_checked_and_grouped_by_cluster() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(check_uri(&u("hdfs:///a.jar"))
            .unwrap_err()
            .contains("no NameNode"));
        assert!(check_uri(&u("hdfs://u:p@ns/a.jar"))
            .unwrap_err()
            .contains("credentials"));
        assert!(check_uri(&u("hdfs://ns/a.jar?x"))
            .unwrap_err()
            .contains("query"));
        check_uri(&u("viewfs://cluster/a.jar")).unwrap();
        assert_eq!(cluster_of(&u("hdfs://ns1/a/b.jar")), "hdfs://ns1");
        assert_eq!(cluster_of(&u("hdfs://h:8020/a/b.jar")), "hdfs://h:8020");
    }
}
