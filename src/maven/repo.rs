//! The repositories of one resolution: tried in order for each file; a file is
//! verified against the repository's `.sha1` (a mismatch fails naming the file
//! and the repository; a missing checksum is counted and warned about once per
//! repository); a repository that cannot be reached (DNS, refused, TLS, no
//! answer) is tried once and skipped for the rest of the run with one warning.
//! Every file is fetched at most once per run (concurrent asks share one
//! request).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sha1::{Digest, Sha1};
use tokio::sync::OnceCell;
use url::Url;

use super::MavenError;

/// How a file is fetched: over HTTP for real, from a map in unit tests.
#[async_trait]
pub(crate) trait Transport: Send + Sync {
    /// GETs `url`: the body on success, `None` when the server has no such file
    /// (404, 410), at most `limit` bytes.
    async fn get(&self, url: &Url, limit: usize) -> Result<Option<Bytes>, TransportError>;

    /// [`Transport::get`] for a file wanted ahead of need (a jar's `.sha1`
    /// while POMs are still being read): it never takes more than half of an
    /// origin's requests in flight, so the POMs on the resolution's critical
    /// path do not queue behind it.
    async fn get_ahead(&self, url: &Url, limit: usize) -> Result<Option<Bytes>, TransportError> {
        self.get(url, limit).await
    }
}

/// Why a GET failed.
#[derive(Debug, Clone)]
pub(crate) enum TransportError {
    /// No answer at all (DNS, refused, TLS, timeout): the repository is skipped
    /// from then on.
    Unreachable(String),
    /// An answer other than success or not-found.
    Status(String),
    /// Larger than the limit.
    TooLarge(usize),
}

/// One repository: its root URL.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    /// The root, ending with `/`.
    pub root: Url,
}

impl Repo {
    pub(crate) fn new(root: &str) -> Result<Repo, String> {
        let with_slash = if root.ends_with('/') {
            root.to_owned()
        } else {
            format!("{root}/")
        };
        let root = Url::parse(&with_slash)
            .map_err(|e| format!("'{root}' is not a repository URL: {e}"))?;
        if !matches!(root.scheme(), "http" | "https") || !root.has_host() {
            return Err(format!(
                "'{}' is not an http(s) repository URL",
                crate::util::redact::redact_url(root.as_str())
            ));
        }
        if root.query().is_some() || root.fragment().is_some() {
            return Err(format!(
                "'{}': a repository URL has no query or fragment",
                crate::util::redact::redact_url(root.as_str())
            ));
        }
        Ok(Repo { root })
    }

    /// The URL of `path` under the root.
    pub(crate) fn url(&self, path: &str) -> Url {
        self.root.join(path).unwrap_or_else(|_| self.root.clone())
    }

    /// The root as users may see it (credentials masked).
    pub(crate) fn shown(&self) -> String {
        crate::util::redact::redact_url(self.root.as_str())
    }
}

/// A file found: which repository had it, and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub repo: usize,
    pub bytes: Bytes,
}

/// Every repository's answer for a file none of them had.
#[derive(Debug, Clone, Default)]
pub(crate) struct Misses(pub Vec<String>);

impl Misses {
    /// `; tried: <each repository's answer>`, or nothing when no file was
    /// missing (the metadata was found, but no version in it fits).
    pub(crate) fn tried(&self) -> String {
        if self.0.is_empty() {
            String::new()
        } else {
            format!("; tried: {self}")
        }
    }
}

impl std::fmt::Display for Misses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

type Cached = Arc<OnceCell<Result<Result<Found, Misses>, MavenError>>>;

/// The repositories and what was fetched from them in this run.
pub(crate) struct Repos {
    pub list: Vec<Repo>,
    transport: Arc<dyn Transport>,
    down: Mutex<HashSet<usize>>,
    cache: Mutex<HashMap<String, Cached>>,
    /// The `.sha1` answers, by repository and path.
    sha1s: Mutex<HashMap<(usize, String), Sha1Slot>>,
    /// Files without a `.sha1`, per repository (warned about once, at the end).
    unverified: Mutex<BTreeMap<usize, Vec<String>>>,
}

impl Repos {
    pub(crate) fn new(list: Vec<Repo>, transport: Arc<dyn Transport>) -> Repos {
        Repos {
            list,
            transport,
            down: Mutex::new(HashSet::new()),
            cache: Mutex::new(HashMap::new()),
            sha1s: Mutex::new(HashMap::new()),
            unverified: Mutex::new(BTreeMap::new()),
        }
    }

    /// `path` from the first repository that has it, verified; every
    /// repository's answer when none has it.
    pub(crate) async fn first(
        &self,
        path: &str,
        limit: usize,
    ) -> Result<Result<Found, Misses>, MavenError> {
        if path
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return Err(MavenError::Malformed(format!(
                "'{}' is not a path inside a repository (a coordinate with '/' or '..' in a POM?)",
                path.escape_debug()
            )));
        }
        let cell = {
            let mut cache = self.cache.lock().expect("lock");
            cache.entry(path.to_owned()).or_default().clone()
        };
        cell.get_or_init(|| self.fetch_first(path, limit))
            .await
            .clone()
    }

    async fn fetch_first(
        &self,
        path: &str,
        limit: usize,
    ) -> Result<Result<Found, Misses>, MavenError> {
        let mut misses = Vec::new();
        for (i, repo) in self.list.iter().enumerate() {
            if self.down.lock().expect("lock").contains(&i) {
                misses.push(format!("{}: skipped (unreachable earlier)", repo.shown()));
                continue;
            }
            let url = repo.url(path);
            // The file and its .sha1 at once: one round trip, not two.
            let (file, sha1) = futures_util::join!(
                self.transport.get(&url, limit),
                self.read_sha1(i, path, false)
            );
            match file {
                Ok(Some(bytes)) => {
                    self.verify(i, path, &bytes, self.note(i, path, sha1))?;
                    return Ok(Ok(Found { repo: i, bytes }));
                }
                Ok(None) => misses.push(format!("{}: not found", repo.shown())),
                Err(TransportError::Unreachable(why)) => {
                    let first = self.down.lock().expect("lock").insert(i);
                    if first {
                        tracing::warn!(
                            "Maven repository {} cannot be reached ({why}); skipping it for the rest of this run",
                            repo.shown()
                        );
                    }
                    misses.push(format!("{}: unreachable ({why})", repo.shown()));
                }
                Err(TransportError::Status(status)) => {
                    misses.push(format!("{}: {status}", repo.shown()));
                }
                Err(TransportError::TooLarge(n)) => {
                    return Err(MavenError::Malformed(format!(
                        "{}: larger than {n} bytes",
                        crate::util::redact::redact_url(url.as_str())
                    )));
                }
            }
        }
        Ok(Err(Misses(misses)))
    }

    /// The first repository's HTML listing of directory `dir` (what Ivy reads
    /// when a module has no `maven-metadata.xml`): its text, if one serves it.
    pub(crate) async fn listing(&self, dir: &str) -> Option<String> {
        for (i, repo) in self.list.iter().enumerate() {
            if self.down.lock().expect("lock").contains(&i) {
                continue;
            }
            let url = repo.url(&format!("{dir}/"));
            if let Ok(Some(bytes)) = self.transport.get(&url, MAX_LISTING).await {
                return Some(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        None
    }

    /// Checks `bytes` of `path` against repository `i`'s `.sha1`.
    fn verify(
        &self,
        i: usize,
        path: &str,
        bytes: &[u8],
        expected: Option<[u8; 20]>,
    ) -> Result<(), MavenError> {
        let Some(expected) = expected else {
            return Ok(());
        };
        let got: [u8; 20] = Sha1::digest(bytes).into();
        if got != expected {
            return Err(MavenError::Integrity(format!(
                "{}: sha1 {} does not match the repository's .sha1 ({}); the file is damaged or was replaced",
                crate::util::redact::redact_url(self.list[i].url(path).as_str()),
                hex::encode(got),
                hex::encode(expected)
            )));
        }
        Ok(())
    }

    /// The sha1 repository `i` publishes for `path` (`path.sha1`), if any; a
    /// missing one is noted for the warning.
    pub(crate) async fn sha1_of(&self, i: usize, path: &str) -> Option<[u8; 20]> {
        let sha1 = self.read_sha1(i, path, false).await;
        self.note(i, path, sha1)
    }

    /// `sha1`, noting a missing one for the warning.
    fn note(&self, i: usize, path: &str, sha1: Sha1Answer) -> Option<[u8; 20]> {
        match sha1 {
            Sha1Answer::Found(sha1) => Some(sha1),
            Sha1Answer::Missing => {
                self.unverified
                    .lock()
                    .expect("lock")
                    .entry(i)
                    .or_default()
                    .push(path.to_owned());
                None
            }
            Sha1Answer::Unusable => None,
        }
    }

    /// What repository `i` answers for `path.sha1`, asked once per run
    /// (`ahead`: before anything needs it, see [`Transport::get_ahead`]).
    async fn read_sha1(&self, i: usize, path: &str, ahead: bool) -> Sha1Answer {
        let cell = {
            let mut all = self.sha1s.lock().expect("lock");
            all.entry((i, path.to_owned())).or_default().clone()
        };
        *cell.get_or_init(|| self.fetch_sha1(i, path, ahead)).await
    }

    /// Warms the answer for `path.sha1` in repository `i` (the resolution
    /// asks for it later).
    pub(crate) async fn warm_sha1(&self, i: usize, path: &str) {
        self.read_sha1(i, path, true).await;
    }

    async fn fetch_sha1(&self, i: usize, path: &str, ahead: bool) -> Sha1Answer {
        let url = self.list[i].url(&format!("{path}.sha1"));
        let got = if ahead {
            self.transport.get_ahead(&url, 1024).await
        } else {
            self.transport.get(&url, 1024).await
        };
        let text = match got {
            Ok(Some(text)) => text,
            _ => return Sha1Answer::Missing,
        };
        // `<hex>` or `<hex>  <file name>`, as repositories write it.
        let hex_part = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.split_whitespace().next())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        let mut out = [0u8; 20];
        match hex::decode_to_slice(&hex_part, &mut out) {
            Ok(()) => Sha1Answer::Found(out),
            Err(_) => {
                tracing::warn!(
                    "{}: not a sha1; the file is not verified",
                    crate::util::redact::redact_url(url.as_str())
                );
                Sha1Answer::Unusable
            }
        }
    }

    /// One warning per repository that served files without a `.sha1`.
    pub(crate) fn warn_unverified(&self) {
        for (i, paths) in self.unverified.lock().expect("lock").iter() {
            tracing::warn!(
                "Maven repository {} serves no .sha1 for {} file(s) (e.g. {}): they are not verified against it",
                self.list[*i].shown(),
                paths.len(),
                paths[0]
            );
        }
    }
}

/// The path of `c`'s file under a repository root: for a `-SNAPSHOT` version the
/// timestamped file its `maven-metadata.xml` names (`a-1.0-20240102.030405-7.jar`),
/// else (no metadata: a non-unique snapshot, or a release) the plain name.
pub(crate) async fn file_path(
    repos: &Repos,
    c: &super::coord::Coord,
) -> Result<String, MavenError> {
    let plain = c.path();
    if !c.version.ends_with("-SNAPSHOT") {
        return Ok(plain);
    }
    let dir = plain.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let Ok(found) = repos
        .first(
            &format!("{dir}/maven-metadata.xml"),
            super::metadata::MAX_METADATA,
        )
        .await?
    else {
        return Ok(plain);
    };
    let value = super::metadata::snapshot_version(&found.bytes, c)
        .map_err(|why| MavenError::Malformed(format!("{dir}/maven-metadata.xml: {why}")))?;
    Ok(match value {
        Some(v) => format!("{dir}/{}", c.file_name_at(&v)),
        None => plain,
    })
}

/// The real transport: the shared HTTP client (trust roots, proxies, the request
/// trail); credentials (the repository URL's userinfo, `--http-header-file`'s
/// headers) sent only to the repository's origin, redirects followed (a few) without
/// them; a few retries on 5xx.
pub(crate) struct Http {
    pub client: reqwest::Client,
    /// A request that sends nothing for this long is abandoned.
    pub stall_timeout: Duration,
    /// `--http-header-file`'s headers.
    pub headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// Requests in flight per origin.
    pub per_origin: PerOrigin,
}

/// Requests in flight to one origin at first. A resolution asks for POMs in
/// bursts; a small server (a team's Nexus behind a small proxy, `python3 -m
/// http.server` with its listen backlog of 5 and a connection per request)
/// drops the connections past its backlog and the kernel tries again only a
/// second later. Six, as browsers open.
pub(crate) const MAX_PER_ORIGIN: usize = 6;
/// Requests in flight to an origin that keeps connections alive (HTTP/1.1
/// without `Connection: close`, or HTTP/2): its connections are reused, so
/// more at once cost no new connection and save round trips.
pub(crate) const MAX_PER_KEPT_ALIVE_ORIGIN: usize = 32;

/// One origin's turns: every request takes one of `all`; a request made
/// ahead of need first takes one of `ahead` (half as many), so at least half
/// of the turns are left to the requests the resolution waits for.
struct Turns {
    all: Arc<tokio::sync::Semaphore>,
    ahead: Arc<tokio::sync::Semaphore>,
    raised: bool,
}

impl Turns {
    fn new() -> Turns {
        Turns {
            all: Arc::new(tokio::sync::Semaphore::new(MAX_PER_ORIGIN)),
            ahead: Arc::new(tokio::sync::Semaphore::new(MAX_PER_ORIGIN / 2)),
            raised: false,
        }
    }
}

/// One semaphore per origin, raised once the origin keeps connections alive.
#[derive(Default)]
pub(crate) struct PerOrigin(std::sync::Mutex<HashMap<String, Turns>>);

impl PerOrigin {
    pub(crate) async fn enter(&self, url: &Url) -> tokio::sync::OwnedSemaphorePermit {
        let semaphore = self.turns(url, |t| t.all.clone());
        semaphore.acquire_owned().await.expect("never closed")
    }

    /// The turn a request made ahead of need waits for before [`Self::enter`].
    async fn enter_ahead(&self, url: &Url) -> tokio::sync::OwnedSemaphorePermit {
        let semaphore = self.turns(url, |t| t.ahead.clone());
        semaphore.acquire_owned().await.expect("never closed")
    }

    fn turns<T>(&self, url: &Url, pick: impl FnOnce(&Turns) -> T) -> T {
        let mut all = self.0.lock().expect("lock");
        pick(
            all.entry(url.origin().ascii_serialization())
                .or_insert_with(Turns::new),
        )
    }

    /// `url`'s origin answered `response`: raised if it keeps connections alive.
    fn answered(&self, url: &Url, response: &reqwest::Response) {
        if crate::net::origins::answered(url, response) != crate::net::origins::Kind::KeptAlive {
            return;
        }
        let mut all = self.0.lock().expect("lock");
        if let Some(turns) = all.get_mut(&url.origin().ascii_serialization()) {
            if !turns.raised {
                turns.raised = true;
                turns
                    .all
                    .add_permits(MAX_PER_KEPT_ALIVE_ORIGIN - MAX_PER_ORIGIN);
                turns
                    .ahead
                    .add_permits((MAX_PER_KEPT_ALIVE_ORIGIN - MAX_PER_ORIGIN) / 2);
            }
        }
    }
}

/// The answer for one `.sha1`, asked once.
type Sha1Slot = Arc<OnceCell<Sha1Answer>>;

/// What a repository answers for a `.sha1`.
#[derive(Clone, Copy)]
enum Sha1Answer {
    Found([u8; 20]),
    Missing,
    /// Not a sha1 (warned).
    Unusable,
}

/// A directory listing read at most.
const MAX_LISTING: usize = 4 << 20;

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 5;

#[async_trait]
impl Transport for Http {
    async fn get(&self, url: &Url, limit: usize) -> Result<Option<Bytes>, TransportError> {
        self.get_once(url, limit).await
    }

    async fn get_ahead(&self, url: &Url, limit: usize) -> Result<Option<Bytes>, TransportError> {
        let _ahead = self.per_origin.enter_ahead(url).await;
        self.get_once(url, limit).await
    }
}

impl Http {
    /// GETs `url` and answers the response's head (after redirects): `None` for
    /// 404 and 410. A 5xx answer is retried twice (POMs, metadata and jars alike).
    pub(crate) async fn open(
        &self,
        url: &Url,
    ) -> Result<Option<reqwest::Response>, TransportError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.open_once(url).await {
                Err(TransportError::Status(s)) if s.starts_with('5') && attempt < 3 => {}
                other => return other,
            }
            tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
        }
    }

    /// One GET of [`Http::open`].
    async fn open_once(&self, url: &Url) -> Result<Option<reqwest::Response>, TransportError> {
        let origin = url.origin();
        let mut current = url.clone();
        let _ = current.set_username("");
        let _ = current.set_password(None);
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self.client.get(current.clone());
            if current.origin() == origin {
                // The repository URL's own credentials win over the header
                // file's Authorization, as for --jars (docs/fetch.md).
                let own = !url.username().is_empty();
                for (name, value) in &self.headers {
                    if !(own && name == reqwest::header::AUTHORIZATION) {
                        request = request.header(name, value);
                    }
                }
                if !url.username().is_empty() {
                    let user =
                        percent_encoding::percent_decode_str(url.username()).decode_utf8_lossy();
                    let password = url.password().map(|p| {
                        percent_encoding::percent_decode_str(p)
                            .decode_utf8_lossy()
                            .into_owned()
                    });
                    request = request.basic_auth(user, password);
                }
            }
            let request = request
                .build()
                .map_err(|e| TransportError::Status(e.to_string()))?;
            let sent = crate::net::trail::execute(&self.client, request);
            let response = match tokio::time::timeout(self.stall_timeout, sent).await {
                Err(_) => return Err(TransportError::Unreachable("no answer".into())),
                Ok(Err(e)) if e.is_connect() || e.is_timeout() => {
                    return Err(TransportError::Unreachable(
                        crate::util::redact::error_chain(&e.without_url()),
                    ))
                }
                Ok(Err(e)) => {
                    return Err(TransportError::Status(crate::util::redact::error_chain(
                        &e.without_url(),
                    )))
                }
                Ok(Ok(r)) => r,
            };
            if current.origin() == origin {
                self.per_origin.answered(url, &response);
            }
            let status = response.status();
            if status.is_redirection() {
                let next = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| current.join(l).ok())
                    .filter(|n| matches!(n.scheme(), "http" | "https"));
                match next {
                    Some(next) => {
                        current = next;
                        continue;
                    }
                    None => {
                        return Err(TransportError::Status(format!(
                            "{status} without a usable Location"
                        )))
                    }
                }
            }
            if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(TransportError::Status(status.to_string()));
            }
            return Ok(Some(response));
        }
        Err(TransportError::Status(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    async fn get_once(&self, url: &Url, limit: usize) -> Result<Option<Bytes>, TransportError> {
        let _turn = self.per_origin.enter(url).await;
        let Some(mut response) = self.open(url).await? else {
            return Ok(None);
        };
        let mut body = Vec::new();
        loop {
            let chunk = tokio::time::timeout(self.stall_timeout, response.chunk()).await;
            match chunk {
                Err(_) => return Err(TransportError::Status("the body stalled".into())),
                Ok(Err(e)) => return Err(TransportError::Status(format!("reading the body: {e}"))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    if body.len() + chunk.len() > limit {
                        return Err(TransportError::TooLarge(limit));
                    }
                    body.extend_from_slice(&chunk);
                }
            }
        }
        Ok(Some(Bytes::from(body)))
    }
}
