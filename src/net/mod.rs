//! The network leaf every client shares: one TLS configuration (bundled Mozilla
//! roots, the system store, `--ca-cert` files), one reqwest client factory, the
//! `--http-header-file` reader, and the questions errors ask of the network
//! (a TLS cause? a proxy in the way?).

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{self, HeaderName, HeaderValue};

use crate::util::redact::register_secret;

pub(crate) mod origins;
pub(crate) mod ranges;
pub(crate) mod server;
pub(crate) mod tls;
pub(crate) mod trail;
pub(crate) mod upload;

/// Why the HTTP client could not be set up (a configuration error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpSetupError {
    #[error("cannot read CA certificate file {path}; check the path (from {origin})")]
    CaRead {
        path: PathBuf,
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("CA certificate file {path} holds no PEM certificate (from {origin})")]
    CaEmpty { path: PathBuf, origin: String },
    #[error(
        "cannot read --http-header-file {path}; check the path and that the Secret is mounted"
    )]
    HeaderRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid --http-header-file {path} line {line}: {reason} (expected `Name: value`)")]
    HeaderSyntax {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot set up TLS")]
    Tls(#[source] rustls::Error),
}

/// A CA bundle to trust, and where it was named (for error messages and `check`).
#[derive(Debug, Clone)]
pub(crate) struct CaFile {
    pub path: PathBuf,
    pub origin: String,
}

/// Settings of the HTTP source.
#[derive(Debug, Clone)]
pub(crate) struct HttpConfig {
    pub ca_files: Vec<CaFile>,
    pub connect_timeout: Duration,
    /// Idle connections kept per host (the engine's parallelism).
    pub pool_size: usize,
    /// Extra request headers (values are secrets).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Headers the transfer itself controls; a header file may not set them.
const RESERVED_HEADERS: &[HeaderName] = &[
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::RANGE,
    header::IF_RANGE,
    header::TE,
    header::UPGRADE,
];

/// Reads `Name: value` lines (`#` comments, blank lines ignored); registers values as secrets.
pub(crate) fn load_header_file(
    path: &Path,
) -> Result<Vec<(HeaderName, HeaderValue)>, HttpSetupError> {
    let text =
        crate::util::fs::read_config_text(path).map_err(|source| HttpSetupError::HeaderRead {
            path: path.to_owned(),
            source,
        })?;
    let mut headers = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let syntax = |reason: &str| HttpSetupError::HeaderSyntax {
            path: path.to_owned(),
            line: i + 1,
            reason: reason.to_owned(),
        };
        let (name, value) = line.split_once(':').ok_or_else(|| syntax("no `:`"))?;
        let value = value.trim();
        register_secret(value);
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| syntax("invalid header name"))?;
        if RESERVED_HEADERS.contains(&name) {
            return Err(syntax(&format!(
                "{name} is set by spark-localizer itself and cannot be overridden"
            )));
        }
        let mut value =
            HeaderValue::from_str(value).map_err(|_| syntax("invalid characters in the value"))?;
        value.set_sensitive(true);
        headers.push((name, value));
    }
    Ok(headers)
}

/// The trust anchors: [`tls::default_roots`] and every `--ca-cert`/SSL_CERT_FILE.
fn root_store(ca_files: &[CaFile]) -> Result<rustls::RootCertStore, HttpSetupError> {
    let mut roots = tls::default_roots();
    for ca in ca_files {
        let data = crate::util::fs::read_regular(&ca.path, crate::util::fs::CONFIG_LIMIT).map_err(
            |source| HttpSetupError::CaRead {
                path: ca.path.clone(),
                origin: ca.origin.clone(),
                source,
            },
        )?;
        if tls::add_pem_certificates(&mut roots, &data) == 0 {
            return Err(HttpSetupError::CaEmpty {
                path: ca.path.clone(),
                origin: ca.origin.clone(),
            });
        }
    }
    Ok(roots)
}

/// The HTTP client every source shares: rustls with [`root_store`], HTTP/2 when
/// offered (ALPN), proxies from the environment, no redirects (sources follow
/// them, keeping credentials on the first origin).
///
/// One per configuration in a process: the Maven resolver, `oci://` references
/// and the transfers share its pool, so the connections a resolution warmed
/// carry its jars (a new connection costs a round trip, more over TLS).
pub(crate) fn client(config: &HttpConfig) -> Result<reqwest::Client, HttpSetupError> {
    type Shared = std::sync::Mutex<Vec<(HttpConfig, reqwest::Client)>>;
    static SHARED: std::sync::OnceLock<Shared> = std::sync::OnceLock::new();
    if !SHARING.load(std::sync::atomic::Ordering::Relaxed) {
        return client_builder(config)?
            .build()
            .map_err(HttpSetupError::Client);
    }
    let shared = SHARED.get_or_init(Default::default);
    let same = |c: &HttpConfig| {
        c.connect_timeout == config.connect_timeout
            && c.pool_size == config.pool_size
            && c.headers == config.headers
            && c.ca_files
                .iter()
                .map(|f| &f.path)
                .eq(config.ca_files.iter().map(|f| &f.path))
    };
    if let Some((_, client)) = shared.lock().expect("lock").iter().find(|(c, _)| same(c)) {
        return Ok(client.clone());
    }
    let client = client_builder(config)?
        .build()
        .map_err(HttpSetupError::Client)?;
    shared
        .lock()
        .expect("lock")
        .push((config.clone(), client.clone()));
    Ok(client)
}

/// Whether [`client`] shares clients: set by the binary, whose one runtime
/// outlives them (a client's connections belong to the runtime that opened
/// them; tests start a runtime each).
static SHARING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`client`] share one client per configuration in this process.
pub(crate) fn share_clients() {
    SHARING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The builder of [`client`], for a client that differs in one setting (the
/// mirror's own DNS resolver).
pub(crate) fn client_builder(
    config: &HttpConfig,
) -> Result<reqwest::ClientBuilder, HttpSetupError> {
    let tls = tls::client_config(root_store(&config.ca_files)?).map_err(HttpSetupError::Tls)?;
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(config.connect_timeout)
        .pool_max_idle_per_host(config.pool_size)
        .tcp_nodelay(true)
        .http2_adaptive_window(true)
        .user_agent(concat!("spark-localizer/", env!("CARGO_PKG_VERSION"))))
}

/// Said when a connection fails while a proxy is configured.
pub(crate) const PROXY_HINT: &str = "a proxy variable is set (HTTP_PROXY, HTTPS_PROXY or ALL_PROXY): check the proxy is reachable, or exempt the host with NO_PROXY";

/// Whether a proxy variable is set.
pub(crate) fn proxied() -> bool {
    crate::env_vars::PROXY_VARS
        .iter()
        .filter(|v| !v.eq_ignore_ascii_case("no_proxy"))
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// The hint for a failed TLS handshake (fetch and stage upload alike).
pub(crate) const TLS_HINT: &str =
    "the TLS handshake failed: trust the server's CA with --ca-cert or SSL_CERT_FILE";

/// What to do about a transport failure: a TLS problem (a plain-HTTP answer, an
/// untrusted certificate) or a refused connection through a proxy.
pub(crate) fn transport_hint(
    err: &(dyn std::error::Error + 'static),
    connect: bool,
) -> Option<&'static str> {
    if is_plain_http_answer(err) {
        Some(PLAIN_HTTP_HINT)
    } else if has_tls_cause(err) {
        Some(TLS_HINT)
    } else if connect && proxied() {
        Some(PROXY_HINT)
    } else {
        None
    }
}

/// The hint for an `https://` URL whose server answered in plain HTTP.
pub(crate) const PLAIN_HTTP_HINT: &str =
    "the server answered in plain HTTP, not TLS: write the URL (or endpoint) with http://";

/// Whether a TLS failure is a server answering in plain HTTP: its first bytes
/// ("HTTP/1.1 400 ...") are not a TLS record.
pub(crate) fn is_plain_http_answer(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
            );
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if is_plain_http_answer(inner) {
                return true;
            }
        }
        next = e.source();
    }
    false
}

pub(crate) fn has_tls_cause(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        // io::Error::source() skips the error it wraps (and connectors wrap
        // io::Errors in io::Errors), so look inside each one.
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if has_tls_cause(inner) {
                return true;
            }
        }
        next = e.source();
    }
    false
}
