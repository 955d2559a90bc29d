//! Where an `abfss://` / `wasbs://` container's credentials and endpoint come
//! from, and its object_store client (the Blob API: ADLS Gen2 accounts serve it
//! on the same account).
//!
//! URIs: `abfss://<container>@<account>.dfs.core.windows.net/<path>` and
//! `wasbs://<container>@<account>.blob.core.windows.net/<path>` (also `abfs://`,
//! `wasb://`, and other clouds' suffixes such as `core.chinacloudapi.cn`).
//!
//! Credentials of an account, first match wins (the order `check` prints):
//! 1. `--azure-credentials-dir` (a mounted Secret: `connection-string`, else
//!    `account-key`, else `sas-token`);
//! 2. the Hadoop keys: a SAS (`fs.azure.sas.fixed.token.<account>.dfs.core.windows.net`,
//!    `fs.azure.sas.<container>.<account>.blob.core.windows.net`), an account key
//!    (`fs.azure.account.key.<account>.dfs.core.windows.net` or `.blob.…`), or
//!    OAuth client credentials (`fs.azure.account.oauth2.client.{endpoint,id,secret}`,
//!    per account with the `.<account>.dfs.core.windows.net` suffix), all under
//!    `spark.hadoop.`;
//! 3. `AZURE_STORAGE_CONNECTION_STRING` (`AccountName`, `AccountKey`,
//!    `SharedAccessSignature`, `BlobEndpoint`, `EndpointSuffix`,
//!    `DefaultEndpointsProtocol`), when its account is this one;
//! 4. `AZURE_STORAGE_ACCOUNT_KEY`, else `AZURE_STORAGE_SAS_TOKEN`;
//! 5. workload identity: `AZURE_FEDERATED_TOKEN_FILE` + `AZURE_CLIENT_ID` +
//!    `AZURE_TENANT_ID` (Entra ID at `AZURE_AUTHORITY_HOST`);
//! 6. the node's managed identity (the instance metadata service).
//!
//! Endpoint: a connection string's `BlobEndpoint` (how Azurite and on-prem
//! endpoints are reached), else `https://<account>.blob.<suffix>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object_store::azure::{MicrosoftAzure, MicrosoftAzureBuilder};
use object_store::path::Path as KeyPath;
use url::Url;

use super::{Place, Traced};
use crate::fault::SourceError;
use crate::properties::Properties;

/// The prefix of the Hadoop ABFS/WASB keys in a Spark properties file.
pub(crate) const HADOOP_PREFIX: &str = "spark.hadoop.fs.azure.";

/// The files read from `--azure-credentials-dir`.
pub(crate) const CONNECTION_STRING_FILE: &str = "connection-string";
pub(crate) const ACCOUNT_KEY_FILE: &str = "account-key";
pub(crate) const SAS_TOKEN_FILE: &str = "sas-token";

// The environment variables read (a snapshot, so `check` and `fetch` agree).
use crate::env_vars::azure as env;

/// Where an Azure URI points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    pub account: String,
    pub container: String,
    /// The DNS suffix after `dfs.` / `blob.` (`core.windows.net`).
    pub suffix: String,
    pub key: KeyPath,
}

impl Location {
    /// The account and container, as the plan groups stores.
    pub(crate) fn store_key(&self) -> String {
        format!("{}@{}", self.container, self.account)
    }
}

/// Where `abfss://container@account.dfs.core.windows.net/path` points.
pub(crate) fn locate(uri: &Url) -> Result<Location, String> {
    let shown = crate::util::redact::redact_url(uri.as_str());
    let form = "write abfss://container@account.dfs.core.windows.net/path or wasbs://container@account.blob.core.windows.net/path";
    let host = uri.host_str().unwrap_or_default().to_ascii_lowercase();
    let container = uri.username();
    if container.is_empty() {
        return Err(format!("{shown} names no container ({form})"));
    }
    if uri.password().is_some() {
        return Err(format!(
            "{shown} holds a password; give credentials with --azure-credentials-dir, spark.hadoop.fs.azure.account.key.<account>.dfs.core.windows.net or AZURE_* variables"
        ));
    }
    let Some((account, rest)) = host.split_once('.') else {
        return Err(format!("{shown} names no storage account ({form})"));
    };
    let suffix = rest
        .strip_prefix("dfs.")
        .or_else(|| rest.strip_prefix("blob."))
        .filter(|s| CLOUD_SUFFIXES.contains(s))
        .ok_or_else(|| {
            format!(
                "{shown}: '{host}' is not an account's dfs or blob host in an Azure cloud ({}; {form})",
                CLOUD_SUFFIXES.join(", ")
            )
        })?;
    let account_ok = (3..=24).contains(&account.len())
        && account
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !account_ok {
        return Err(format!(
            "{shown}: '{account}' is not a storage account name (3 to 24 lower-case letters and digits)"
        ));
    }
    if uri.port().is_some() {
        return Err(format!(
            "{shown} has a port; an endpoint is given with AZURE_STORAGE_CONNECTION_STRING's BlobEndpoint"
        ));
    }
    if uri.query().is_some() {
        return Err(format!(
            "{shown} has a query ('?'); give a SAS with spark.hadoop.fs.azure.sas.* or AZURE_STORAGE_SAS_TOKEN"
        ));
    }
    let path = uri.path().trim_start_matches('/');
    if path.is_empty() {
        return Err(format!("{shown} names a container, not a file"));
    }
    let key = KeyPath::from_url_path(path)
        .map_err(|e| format!("{shown} is not a usable blob name: {e}"))?;
    let container = percent_encoding::percent_decode_str(container)
        .decode_utf8_lossy()
        .into_owned();
    if !container_name_ok(&container) {
        return Err(format!(
            "{shown}: '{container}' is not a container name (3 to 63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit; or $root, $web)"
        ));
    }
    Ok(Location {
        account: account.to_owned(),
        container,
        suffix: suffix.to_owned(),
        key,
    })
}

/// The DNS suffixes of the Azure clouds (public, China, US Government): an
/// account's host is `<account>.dfs.<suffix>` or `<account>.blob.<suffix>`, and
/// nothing else receives its credentials.
const CLOUD_SUFFIXES: &[&str] = &[
    "core.windows.net",
    "core.chinacloudapi.cn",
    "core.usgovcloudapi.net",
];

/// Azure's container naming rules.
fn container_name_ok(name: &str) -> bool {
    if name == "$root" || name == "$web" {
        return true;
    }
    let bytes = name.as_bytes();
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
        && !name.contains("--")
}

/// How requests to one account are authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AzureCredentials {
    AccountKey(String),
    Sas(String),
    ClientSecret {
        client_id: String,
        secret: String,
        tenant: String,
        authority: Option<String>,
    },
    WorkloadIdentity {
        client_id: String,
        tenant: String,
        token_file: String,
        authority: Option<String>,
    },
    ManagedIdentity,
}

/// One container's configuration, with where each part came from.
#[derive(Debug, Clone)]
pub(crate) struct ContainerConfig {
    pub account: String,
    pub container: String,
    pub credentials: AzureCredentials,
    pub credential_source: String,
    /// The Blob service's account URL, without a trailing `/`.
    pub endpoint: String,
    pub endpoint_origin: String,
}

/// A parsed connection string (`Key=Value;…`, as the Azure SDKs read it).
#[derive(Debug, Clone, Default)]
struct ConnectionString {
    account: Option<String>,
    key: Option<String>,
    sas: Option<String>,
    blob_endpoint: Option<String>,
    protocol: Option<String>,
    suffix: Option<String>,
}

impl ConnectionString {
    /// Parses `text` strictly (`;` or newlines between `Key=Value` parts): an
    /// unknown or repeated key, an empty value, a key that is not base64 or an
    /// endpoint that is not an http(s) URL is an error — which never shows a
    /// value, nor a name that could be one.
    fn parse(text: &str, from: &str) -> Result<Self, String> {
        crate::util::redact::register_secret(text.trim());
        let mut c = ConnectionString::default();
        let mut seen = std::collections::BTreeSet::new();
        let parts = text
            .split([';', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty());
        for (n, part) in parts.enumerate() {
            let Some((name, value)) = part.split_once('=') else {
                return Err(format!(
                    "{from}: part {} is not Key=Value (a connection string is AccountName=…;AccountKey=…;BlobEndpoint=…; nothing of it is shown)",
                    n + 1
                ));
            };
            let (name, value) = (name.trim(), value.trim().to_owned());
            let shown = if name.len() <= 40 && name.chars().all(|c| c.is_ascii_alphabetic()) {
                format!("'{name}'")
            } else {
                format!("part {}", n + 1)
            };
            if value.is_empty() {
                return Err(format!("{from}: {shown} has no value"));
            }
            // Keys are case-insensitive, as the Azure SDKs read them.
            if !seen.insert(name.to_ascii_lowercase()) {
                return Err(format!("{from}: {shown} is given twice"));
            }
            let slot = match name.to_ascii_lowercase().as_str() {
                "accountname" => &mut c.account,
                "accountkey" => &mut c.key,
                "sharedaccesssignature" => &mut c.sas,
                "blobendpoint" => &mut c.blob_endpoint,
                "defaultendpointsprotocol" => &mut c.protocol,
                "endpointsuffix" => &mut c.suffix,
                "usedevelopmentstorage" => {
                    if !value.eq_ignore_ascii_case("true") {
                        return Err(format!("{from}: UseDevelopmentStorage may only be true"));
                    }
                    c.account = Some("devstoreaccount1".to_owned());
                    c.key = Some(AZURITE_KEY.to_owned());
                    c.blob_endpoint = Some("http://127.0.0.1:10000/devstoreaccount1".to_owned());
                    continue;
                }
                // Other services' endpoints do not matter here.
                "queueendpoint" | "tableendpoint" | "fileendpoint" | "blobsecondaryendpoint"
                | "queuesecondaryendpoint" | "tablesecondaryendpoint" | "filesecondaryendpoint" => {
                    continue
                }
                _ => {
                    return Err(format!(
                        "{from}: {shown} is not a connection-string key (AccountName, AccountKey, SharedAccessSignature, BlobEndpoint, DefaultEndpointsProtocol, EndpointSuffix, UseDevelopmentStorage)"
                    ))
                }
            };
            *slot = Some(value);
        }
        for secret in [&c.key, &c.sas].into_iter().flatten() {
            crate::util::redact::register_secret(secret);
        }
        c.check(from)?;
        Ok(c)
    }

    /// The parts' values make sense together.
    fn check(&self, from: &str) -> Result<(), String> {
        use base64::Engine as _;
        if let Some(key) = &self.key {
            if base64::engine::general_purpose::STANDARD
                .decode(key)
                .is_err()
            {
                return Err(format!(
                    "{from}: AccountKey is not base64 (nothing of it is shown)"
                ));
            }
        }
        if let Some(p) = &self.protocol {
            if p != "https" && p != "http" {
                return Err(format!(
                    "{from}: DefaultEndpointsProtocol is '{p}'; write https or http"
                ));
            }
        }
        if let Some(e) = &self.blob_endpoint {
            let ok = !e.contains(char::is_whitespace)
                && Url::parse(e).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.query().is_none()
                        && u.username().is_empty()
                        && u.password().is_none()
                });
            if !ok {
                return Err(format!(
                    "{from}: BlobEndpoint is not an http(s) URL without spaces, query or credentials (a ';' missing?)"
                ));
            }
        }
        if self.key.is_none()
            && self.sas.is_none()
            && self.blob_endpoint.is_none()
            && self.suffix.is_none()
        {
            return Err(format!(
                "{from} holds no AccountKey, SharedAccessSignature, BlobEndpoint or EndpointSuffix (a key or SAS alone goes in AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN)"
            ));
        }
        Ok(())
    }

    fn credentials(&self) -> Option<AzureCredentials> {
        match (&self.key, &self.sas) {
            (Some(key), _) => Some(AzureCredentials::AccountKey(key.clone())),
            (None, Some(sas)) => Some(AzureCredentials::Sas(sas.clone())),
            _ => None,
        }
    }

    /// Whether it describes `account` (no AccountName: any account).
    fn is_for(&self, account: &str) -> bool {
        self.account
            .as_deref()
            .is_none_or(|a| a.eq_ignore_ascii_case(account))
    }

    fn endpoint(&self, account: &str) -> Option<String> {
        if let Some(e) = &self.blob_endpoint {
            return Some(e.trim_end_matches('/').to_owned());
        }
        let suffix = self.suffix.as_deref()?;
        let protocol = self.protocol.as_deref().unwrap_or("https");
        Some(format!("{protocol}://{account}.blob.{suffix}"))
    }
}

/// Azurite's published development account key (not a secret).
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Everything Azure configuration is made of.
#[derive(Debug, Clone, Default)]
pub(crate) struct AzureSettings {
    pub credentials_dir: Option<(PathBuf, String)>,
    hadoop: BTreeMap<String, String>,
    properties_path: PathBuf,
    env: BTreeMap<&'static str, String>,
}

impl AzureSettings {
    /// Reads the Hadoop keys from `props`, `dir` and the environment.
    pub(crate) fn new(dir: Option<(PathBuf, String)>, props: Option<&Properties>) -> Self {
        let env = super::env_snapshot(env::ALL);
        Self::with_env(dir, props, env)
    }

    pub(crate) fn with_env(
        credentials_dir: Option<(PathBuf, String)>,
        props: Option<&Properties>,
        env: BTreeMap<&'static str, String>,
    ) -> Self {
        for name in env::SECRET {
            if let Some(v) = env.get(name) {
                crate::util::redact::register_secret(v);
            }
        }
        let hadoop = super::hadoop_keys(props, |k| k.starts_with(HADOOP_PREFIX));
        for (key, value) in &hadoop {
            if key.contains(".key.") || key.contains(".sas.") || key.contains(".secret") {
                crate::util::redact::register_secret(value);
            }
        }
        AzureSettings {
            credentials_dir,
            hadoop,
            properties_path: props
                .and_then(Properties::path)
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            env,
        }
    }

    fn key_origin(&self, key: &str) -> String {
        format!("{key} in {}", self.properties_path.display())
    }

    /// The first Hadoop key present of `keys`, with its value.
    fn hadoop_first(&self, keys: &[String]) -> Option<(String, String)> {
        keys.iter()
            .find_map(|k| self.hadoop.get(k).map(|v| (k.clone(), v.clone())))
    }

    /// The container's configuration; every problem found is returned.
    pub(crate) fn resolve(&self, at: &Location) -> Result<ContainerConfig, Vec<String>> {
        let dir_parsed = self.dir_connection_string().map_err(|e| vec![e])?;
        let env_parsed = match self.env.get(env::CONNECTION_STRING) {
            Some(text) => {
                Some(ConnectionString::parse(text, env::CONNECTION_STRING).map_err(|e| vec![e])?)
            }
            None => None,
        };
        // A connection string of another account is not used; `check` says so.
        let mut skipped = Vec::new();
        let mut mine = |parsed: Option<ConnectionString>, origin: &str| match parsed {
            Some(c) if !c.is_for(&at.account) => {
                let other = c.account.clone().unwrap_or_default();
                skipped.push(format!(
                    "{origin} is for account '{other}', not '{}'",
                    at.account
                ));
                None
            }
            other => other,
        };
        let dir_string = mine(
            dir_parsed,
            "the connection string in --azure-credentials-dir",
        );
        let env_string = mine(env_parsed, env::CONNECTION_STRING);
        let (credentials, mut credential_source) =
            self.credentials(at, dir_string.as_ref(), env_string.as_ref())?;
        if !skipped.is_empty() {
            credential_source.push_str(&format!(" ({})", skipped.join("; ")));
        }
        let from_string = [
            (
                dir_string.as_ref(),
                "the connection string in --azure-credentials-dir",
            ),
            (env_string.as_ref(), env::CONNECTION_STRING),
        ]
        .into_iter()
        .find_map(|(c, origin)| {
            let c = c?;
            let part = if c.blob_endpoint.is_some() {
                "BlobEndpoint"
            } else {
                "EndpointSuffix"
            };
            c.endpoint(&at.account)
                .map(|e| (e, format!("{part} of {origin}")))
        });
        let (endpoint, endpoint_origin) = match from_string {
            Some((endpoint, origin)) => (endpoint, origin),
            None => (
                format!("https://{}.blob.{}", at.account, at.suffix),
                "the URI's account".to_owned(),
            ),
        };
        let parsed = Url::parse(&endpoint)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if parsed.is_none() {
            return Err(vec![format!(
                "{endpoint_origin}: '{endpoint}' is not an http(s) URL"
            )]);
        }
        Ok(ContainerConfig {
            account: at.account.clone(),
            container: at.container.clone(),
            credentials,
            credential_source,
            endpoint,
            endpoint_origin,
        })
    }

    /// The Secret directory's connection string, its key and SAS filling in
    /// what the connection string lacks (or standing alone).
    fn dir_connection_string(&self) -> Result<Option<ConnectionString>, String> {
        let Some((dir, origin)) = &self.credentials_dir else {
            return Ok(None);
        };
        let read = |name: &str| -> Result<Option<String>, String> {
            let path = dir.join(name);
            match crate::util::fs::read_config_text(&path) {
                Ok(text) => {
                    let text = text.trim().to_owned();
                    crate::util::redact::register_secret(&text);
                    Ok(Some(text).filter(|t| !t.is_empty()))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("{origin}: cannot read {}: {e}", path.display())),
            }
        };
        let mut c = match read(CONNECTION_STRING_FILE)? {
            Some(text) => {
                ConnectionString::parse(&text, &format!("{CONNECTION_STRING_FILE} in {origin}"))?
            }
            None => ConnectionString::default(),
        };
        let key = read(ACCOUNT_KEY_FILE)?;
        let sas = read(SAS_TOKEN_FILE)?;
        if c.key.is_none() && c.sas.is_none() {
            c.key = key;
            c.sas = sas;
        }
        if c.key.is_none() && c.sas.is_none() && c.blob_endpoint.is_none() {
            return Err(format!(
                "{origin}: {} holds none of {CONNECTION_STRING_FILE}, {ACCOUNT_KEY_FILE}, {SAS_TOKEN_FILE}",
                dir.display()
            ));
        }
        c.check(origin)?;
        Ok(Some(c))
    }

    fn credentials(
        &self,
        at: &Location,
        dir: Option<&ConnectionString>,
        env_string: Option<&ConnectionString>,
    ) -> Result<(AzureCredentials, String), Vec<String>> {
        if let Some(c) = dir.and_then(ConnectionString::credentials) {
            let origin = self.credentials_dir.as_ref().map(|d| d.1.clone());
            return Ok((c, origin.unwrap_or_default()));
        }
        if let Some(found) = self.hadoop_credentials(at)? {
            return Ok(found);
        }
        if let Some(c) = env_string.and_then(ConnectionString::credentials) {
            return Ok((c, env::CONNECTION_STRING.to_owned()));
        }
        if let Some(key) = self.env.get(env::ACCOUNT_KEY) {
            return Ok((
                AzureCredentials::AccountKey(key.clone()),
                env::ACCOUNT_KEY.to_owned(),
            ));
        }
        if let Some(sas) = self.env.get(env::SAS_TOKEN) {
            return Ok((
                AzureCredentials::Sas(sas.clone()),
                env::SAS_TOKEN.to_owned(),
            ));
        }
        let e = |k| self.env.get(k).cloned();
        if let (Some(token_file), Some(client_id), Some(tenant)) = (
            e(env::FEDERATED_TOKEN_FILE),
            e(env::CLIENT_ID),
            e(env::TENANT_ID),
        ) {
            // Read now (never a fifo): a token that is missing or empty is a
            // configuration error; its value is never shown.
            let token = crate::util::fs::read_config_text(std::path::Path::new(&token_file))
                .map_err(|e| {
                    vec![format!(
                        "{}: cannot read {token_file}: {e}",
                        env::FEDERATED_TOKEN_FILE
                    )]
                })?;
            if token.trim().is_empty() {
                return Err(vec![format!(
                    "{}: {token_file} is empty",
                    env::FEDERATED_TOKEN_FILE
                )]);
            }
            crate::util::redact::register_secret(token.trim());
            return Ok((
                AzureCredentials::WorkloadIdentity {
                    client_id,
                    tenant,
                    token_file,
                    authority: e(env::AUTHORITY_HOST),
                },
                "workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID)"
                    .to_owned(),
            ));
        }
        Ok((
            AzureCredentials::ManagedIdentity,
            "the node's managed identity (instance metadata)".to_owned(),
        ))
    }

    /// The Hadoop ABFS/WASB keys for the account: a SAS, an account key, or
    /// OAuth client credentials.
    fn hadoop_credentials(
        &self,
        at: &Location,
    ) -> Result<Option<(AzureCredentials, String)>, Vec<String>> {
        let (a, c, s) = (&at.account, &at.container, &at.suffix);
        let p = HADOOP_PREFIX;
        let sas_keys = [
            format!("{p}sas.fixed.token.{a}.dfs.{s}"),
            format!("{p}sas.{c}.{a}.blob.{s}"),
            format!("{p}sas.fixed.token"),
        ];
        if let Some((key, value)) = self.hadoop_first(&sas_keys) {
            return Ok(Some((AzureCredentials::Sas(value), self.key_origin(&key))));
        }
        let key_keys = [
            format!("{p}account.key.{a}.dfs.{s}"),
            format!("{p}account.key.{a}.blob.{s}"),
        ];
        if let Some((key, value)) = self.hadoop_first(&key_keys) {
            return Ok(Some((
                AzureCredentials::AccountKey(value),
                self.key_origin(&key),
            )));
        }
        let oauth = |name: &str| {
            self.hadoop_first(&[
                format!("{p}account.oauth2.client.{name}.{a}.dfs.{s}"),
                format!("{p}account.oauth2.client.{name}"),
            ])
        };
        let (Some(endpoint), Some(id), Some(secret)) =
            (oauth("endpoint"), oauth("id"), oauth("secret"))
        else {
            return Ok(None);
        };
        let (authority, tenant) = split_token_endpoint(&endpoint.1)
            .map_err(|e| vec![format!("{}: {e}", self.key_origin(&endpoint.0))])?;
        Ok(Some((
            AzureCredentials::ClientSecret {
                client_id: id.1,
                secret: secret.1,
                tenant,
                authority: Some(authority),
            },
            format!(
                "OAuth client credentials ({}, {} and {})",
                self.key_origin(&endpoint.0),
                id.0,
                secret.0
            ),
        )))
    }
}

/// `https://login.microsoftonline.com/<tenant>/oauth2/token` (the ABFS
/// `client.endpoint`) → the authority host and the tenant.
fn split_token_endpoint(endpoint: &str) -> Result<(String, String), String> {
    let url = Url::parse(endpoint).map_err(|e| format!("'{endpoint}' is not a URL: {e}"))?;
    let tenant = url
        .path_segments()
        .and_then(|mut s| s.next())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            format!("'{endpoint}' names no tenant (write https://login.microsoftonline.com/<tenant>/oauth2/token)")
        })?;
    let authority = url[..url::Position::BeforePath].to_owned();
    Ok((authority, tenant.to_owned()))
}

/// A container's store and how it was configured.
pub(crate) struct AzureContainer {
    pub store: MicrosoftAzure,
    pub config: ContainerConfig,
}

impl AzureContainer {
    /// The container's store; object_store's own retries are off (the engine retries).
    pub(crate) fn open(
        config: ContainerConfig,
        client: &reqwest::Client,
    ) -> object_store::Result<AzureContainer> {
        let mut b = MicrosoftAzureBuilder::new()
            .with_account(&config.account)
            .with_container_name(&config.container)
            .with_endpoint(config.endpoint.clone())
            .with_allow_http(config.endpoint.starts_with("http://"))
            .with_retry(super::no_retries())
            .with_http_connector(Traced::new(client, None));
        b = match &config.credentials {
            AzureCredentials::AccountKey(key) => b.with_access_key(key),
            AzureCredentials::Sas(sas) => b.with_config(
                object_store::azure::AzureConfigKey::SasKey,
                sas.trim_start_matches('?'),
            ),
            AzureCredentials::ClientSecret {
                client_id,
                secret,
                tenant,
                authority,
            } => {
                let b = b
                    .with_client_secret_authorization(client_id, secret, tenant)
                    .with_credential_type("client_secret");
                match authority {
                    Some(a) => b.with_authority_host(a),
                    None => b,
                }
            }
            AzureCredentials::WorkloadIdentity {
                client_id,
                tenant,
                token_file,
                authority,
            } => {
                let b = b
                    .with_client_id(client_id)
                    .with_tenant_id(tenant)
                    .with_federated_token_file(token_file)
                    .with_credential_type("workload_identity");
                match authority {
                    Some(a) => b.with_authority_host(a),
                    None => b,
                }
            }
            AzureCredentials::ManagedIdentity => b.with_credential_type("managed_identity"),
        };
        Ok(AzureContainer {
            store: b.build()?,
            config,
        })
    }

    /// Where a request for `shown` went, for [`super::classify`].
    pub(crate) fn place<'a>(&'a self, shown: &'a str) -> Place<'a> {
        Place {
            shown,
            service: "Azure",
            endpoint: &self.config.endpoint,
            bucket: &self.config.container,
            credentials: &self.config.credential_source,
            auth_hint: "give the identity the Storage Blob Data Reader role on the account or container, or other credentials: --azure-credentials-dir, spark.hadoop.fs.azure.account.key.<account>.dfs.core.windows.net, a SAS or AKS workload identity",
        }
    }

    /// Gets a token before the first request (OAuth kinds), so a credential
    /// failure is reported as such, within its time limit.
    pub(crate) async fn credentials(&self, shown: &str) -> Result<(), SourceError> {
        let (limit, hint) = match self.config.credentials {
            AzureCredentials::AccountKey(_) | AzureCredentials::Sas(_) => return Ok(()),
            AzureCredentials::ManagedIdentity => (
                super::METADATA_TIMEOUT,
                "no credentials were given and the node's managed identity did not answer: give AKS workload identity (azure.workload.identity/use: \"true\" on the pod), --azure-credentials-dir or spark.hadoop.fs.azure.account.key.<account>.dfs.core.windows.net",
            ),
            AzureCredentials::WorkloadIdentity { .. } => (
                super::TOKEN_TIMEOUT,
                "check that Entra ID is reachable from the pod (AZURE_AUTHORITY_HOST, HTTPS_PROXY) and that the federated credential matches the ServiceAccount",
            ),
            AzureCredentials::ClientSecret { .. } => (super::TOKEN_TIMEOUT, ""),
        };
        let what = &self.config.credential_source;
        let token = self.store.credentials().get_credential();
        let bearer = |c: &std::sync::Arc<object_store::azure::AzureCredential>| match c.as_ref() {
            object_store::azure::AzureCredential::BearerToken(t) => Some(t.clone()),
            _ => None,
        };
        super::token_within(shown, what, limit, hint, token, bearer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(uri: &str) -> Location {
        locate(&Url::parse(uri).unwrap()).unwrap()
    }

    fn settings(props: &str, env: &[(&'static str, &str)]) -> AzureSettings {
        let props = Properties::parse(props).unwrap();
        AzureSettings::with_env(
            None,
            Some(&props),
            env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        )
    }

    #[test]
    fn abfss_and_wasbs_uris_name_account_container_and_blob() {
        let l = loc("abfss://jars@acct.dfs.core.windows.net/libs/a.jar");
        assert_eq!(
            (l.account.as_str(), l.container.as_str(), l.suffix.as_str()),
            ("acct", "jars", "core.windows.net")
        );
        assert_eq!(l.key.as_ref(), "libs/a.jar");
        let l = loc("wasbs://jars@acct.blob.core.chinacloudapi.cn/a.jar");
        assert_eq!(l.suffix, "core.chinacloudapi.cn");
        for bad in [
            "abfss://acct.dfs.core.windows.net/a.jar",
            "abfss://jars@acct.example.com/a.jar",
            "abfss://jars@acct.dfs.core.windows.net/",
            "abfss://jars@acct.dfs.core.windows.net:443/a.jar",
            "abfss://jars:pw@acct.dfs.core.windows.net/a.jar",
            "abfss://jars@acct.dfs.core.windows.net/a.jar?sig=x",
            "abfss://jars@acct.dfs.core.windows.net.evil.com/a.jar",
            "abfss://jars@acct.blob.example.com/a.jar",
            "abfss://JARS@acct.dfs.core.windows.net/a.jar",
            "abfss://j@acct.dfs.core.windows.net/a.jar",
            "abfss://a--b@acct.dfs.core.windows.net/a.jar",
            "abfss://jars@ac.dfs.core.windows.net/a.jar",
        ] {
            assert!(locate(&Url::parse(bad).unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_connection_string_gives_key_and_endpoint_for_its_account_only() {
        let cs = "DefaultEndpointsProtocol=http;AccountName=devacct;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/devacct/;";
        let s = settings("", &[(env::CONNECTION_STRING, cs)]);
        let c = s
            .resolve(&loc("abfss://cont@devacct.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(c.credentials, AzureCredentials::AccountKey("a2V5".into()));
        assert_eq!(c.endpoint, "http://127.0.0.1:10000/devacct");
        let other = s
            .resolve(&loc("abfss://cont@prod.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(other.credentials, AzureCredentials::ManagedIdentity);
        assert_eq!(other.endpoint, "https://prod.blob.core.windows.net");
    }

    #[test]
    fn hadoop_keys_beat_the_environment() {
        let s = settings(
            "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=aGFkb29w",
            &[(env::ACCOUNT_KEY, "ZW52")],
        );
        let c = s
            .resolve(&loc("abfss://cont@acct.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(
            c.credentials,
            AzureCredentials::AccountKey("aGFkb29w".into())
        );
        assert!(c.credential_source.contains("account.key.acct"));
        let sas = settings(
            "spark.hadoop.fs.azure.sas.cont.acct.blob.core.windows.net=sv=1&sig=x",
            &[],
        );
        let c = sas
            .resolve(&loc("wasbs://cont@acct.blob.core.windows.net/x"))
            .unwrap();
        assert_eq!(c.credentials, AzureCredentials::Sas("sv=1&sig=x".into()));
    }

    #[test]
    fn oauth_client_credentials_split_the_token_endpoint() {
        let s = settings(
            "spark.hadoop.fs.azure.account.oauth2.client.endpoint=https://login.example/tenant-1/oauth2/token\nspark.hadoop.fs.azure.account.oauth2.client.id=app\nspark.hadoop.fs.azure.account.oauth2.client.secret=shh",
            &[],
        );
        let c = s
            .resolve(&loc("abfss://cont@acct.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(
            c.credentials,
            AzureCredentials::ClientSecret {
                client_id: "app".into(),
                secret: "shh".into(),
                tenant: "tenant-1".into(),
                authority: Some("https://login.example".into()),
            }
        );
    }

    #[test]
    fn workload_identity_comes_from_the_webhook_variables() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("azure-identity-token");
        std::fs::write(&token, "projected.sa.token").unwrap();
        let token = token.display().to_string();
        let s = settings(
            "",
            &[
                (env::FEDERATED_TOKEN_FILE, token.as_str()),
                (env::CLIENT_ID, "cid"),
                (env::TENANT_ID, "tid"),
            ],
        );
        let c = s
            .resolve(&loc("abfss://cont@acct.dfs.core.windows.net/x"))
            .unwrap();
        assert!(matches!(
            c.credentials,
            AzureCredentials::WorkloadIdentity { .. }
        ));
    }

    #[test]
    fn per_account_secrets_are_scrubbed_and_a_secret_dir_serves_its_account_only() {
        let _ = settings(
            "spark.hadoop.fs.azure.account.oauth2.client.secret.acct.dfs.core.windows.net=PerAccountSecret77",
            &[],
        );
        assert_eq!(
            crate::util::redact::scrub("got PerAccountSecret77"),
            "got ***"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONNECTION_STRING_FILE),
            "AccountName=other;AccountKey=b3RoZXI=",
        )
        .unwrap();
        let s = AzureSettings::with_env(
            Some((dir.path().to_path_buf(), "--azure-credentials-dir".into())),
            None,
            BTreeMap::new(),
        );
        let mine = s
            .resolve(&loc("abfss://cont@acct.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(mine.credentials, AzureCredentials::ManagedIdentity);
        let other = s
            .resolve(&loc("abfss://cont@other.dfs.core.windows.net/x"))
            .unwrap();
        assert_eq!(
            other.credentials,
            AzureCredentials::AccountKey("b3RoZXI=".into())
        );
    }

    #[test]
    fn a_malformed_connection_string_is_named_without_its_secret() {
        let s = settings(
            "",
            &[(
                env::CONNECTION_STRING,
                "AccountKey=c2VjcmV0c2VjcmV0;garbage",
            )],
        );
        let problems = s
            .resolve(&loc("abfss://cont@acct.dfs.core.windows.net/x"))
            .unwrap_err()
            .join("\n");
        assert!(problems.contains(env::CONNECTION_STRING), "{problems}");
        assert!(!problems.contains("c2VjcmV0c2VjcmV0"), "{problems}");
    }
}
