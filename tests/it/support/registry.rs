//! A real OCI registry: Debian's `docker-registry` (the CNCF distribution
//! registry) on 127.0.0.1, filesystem storage in a temp dir, optionally with
//! htpasswd (bcrypt) Basic auth and TLS from a test CA; killed on Drop.
//! Artifacts are pushed with raw Registry API calls, as `oras push` does:
//! each file a layer titled by `org.opencontainers.image.title`.
//!
//! `scripts/test.sh` installs `docker-registry` and `apache2-utils`
//! (htpasswd). Without them the tests are skipped locally, but fail under CI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::pki::Pki;
use super::sha256_hex;

pub const USER: &str = "spark";
/// The OAuth2 refresh token (a docker config's `identitytoken`) the token
/// server exchanges for access: must never appear in any output.
pub const IDENTITY_TOKEN: &str = "ident-tok-Rk4m8Wq2";
/// The token auth's service and issuer names.
pub const SERVICE: &str = "spark-localizer-test-registry";
pub const ISSUER: &str = "spark-localizer-test-issuer";
/// The test password: must never appear in any output.
pub const PASSWORD: &str = "reg-pw-7Qz9xK2v";

/// How a registry is set up.
#[derive(Default)]
pub struct Options {
    pub tls: bool,
    /// htpasswd Basic auth (`USER`/`PASSWORD`).
    pub htpasswd: bool,
    /// Token auth, with the token server's realm and the CA bundle its signing
    /// certificates chain to.
    pub token: Option<TokenConfig>,
    /// Blob GETs redirected (307) to this base URL (the `redirect` storage middleware).
    pub redirect: Option<String>,
}

pub struct TokenConfig {
    pub realm: String,
    pub bundle: PathBuf,
}

pub struct Registry {
    child: Option<Child>,
    token: Option<TokenConfig>,
    redirect: Option<String>,
    bin: PathBuf,
    pub port: u16,
    dir: tempfile::TempDir,
    pub pki: Option<Pki>,
    pub auth: bool,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
}

/// A layer to push: its title, bytes and media type.
pub struct Layer<'a> {
    pub title: &'a str,
    pub data: &'a [u8],
    pub media_type: &'a str,
}

impl<'a> Layer<'a> {
    pub fn new(title: &'a str, data: &'a [u8]) -> Layer<'a> {
        Layer {
            title,
            data,
            media_type: "application/octet-stream",
        }
    }
}

fn find(bin: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
        .iter()
        .map(|d| Path::new(d).join(bin))
        .find(|p| p.exists())
}

impl Registry {
    /// Starts a registry, with htpasswd auth (`USER`/`PASSWORD`) and TLS as
    /// asked; `None` (after printing SKIP) when it is not installed outside CI.
    pub fn start(tls: bool, auth: bool) -> Option<Registry> {
        Registry::start_with(Options {
            tls,
            htpasswd: auth,
            ..Options::default()
        })
    }

    /// Starts a registry as `options` say.
    pub fn start_with(options: Options) -> Option<Registry> {
        let Options {
            tls,
            htpasswd,
            token,
            redirect,
        } = options;
        let auth = htpasswd || token.is_some();
        let (Some(bin), Some(htpasswd_bin)) = (find("docker-registry"), find("htpasswd")) else {
            if std::env::var_os("CI").is_some() {
                panic!("docker-registry or htpasswd not found; `bash scripts/test.sh` installs docker-registry and apache2-utils");
            }
            eprintln!("SKIP: docker-registry or htpasswd not installed; run scripts/test.sh");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("sl-registry-")
            .tempdir()
            .unwrap();
        let pki = tls.then(Pki::new);
        if let Some(pki) = &pki {
            pki.write_leaf(dir.path());
            std::fs::write(dir.path().join("ca.pem"), &pki.ca_pem).unwrap();
        }
        if htpasswd {
            let out = Command::new(htpasswd_bin)
                .args(["-Bbn", USER, PASSWORD])
                .output()
                .unwrap();
            assert!(out.status.success(), "htpasswd failed");
            std::fs::write(dir.path().join("htpasswd"), out.stdout).unwrap();
        }
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60));
        if let Some(pki) = &pki {
            let mut roots = rustls::RootCertStore::empty();
            let der = rustls_pemfile_ca(&pki.ca_pem);
            roots.add(der).unwrap();
            let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder = builder.use_preconfigured_tls(config);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut registry = Registry {
            child: None,
            token,
            redirect,
            bin,
            port: 0,
            dir,
            pki,
            auth,
            rt,
            http: builder.build().unwrap(),
        };
        for _ in 0..5 {
            registry.port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            if registry.launch() {
                return Some(registry);
            }
        }
        panic!("docker-registry did not start:\n{}", registry.log());
    }

    fn config(&self) -> String {
        let d = self.dir.path().display();
        let mut c = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {d}/storage\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{}\n  secret: spark-localizer-test\n",
            self.port
        );
        if self.pki.is_some() {
            c.push_str(&format!(
                "  tls:\n    certificate: {d}/cert.pem\n    key: {d}/key.pem\n"
            ));
        }
        if let Some(token) = &self.token {
            c.push_str(&format!(
                "auth:\n  token:\n    realm: {}\n    service: {SERVICE}\n    issuer: {ISSUER}\n    rootcertbundle: {}\n",
                token.realm,
                token.bundle.display()
            ));
        } else if self.auth {
            c.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: spark-localizer-test\n    path: {d}/htpasswd\n"
            ));
        }
        if let Some(base) = &self.redirect {
            c.push_str(&format!(
                "middleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: {base}\n"
            ));
        }
        c
    }

    /// Starts the process on `self.port` and waits until `/v2/` answers.
    fn launch(&mut self) -> bool {
        let conf = self.dir.path().join("config.yml");
        std::fs::write(&conf, self.config()).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("registry.log"))
            .unwrap();
        let child = Command::new(&self.bin)
            .arg("serve")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn docker-registry");
        self.child = Some(child);
        let url = format!("{}/v2/", self.base());
        for _ in 0..100 {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return false;
            }
            let up = self
                .rt
                .block_on(async { self.http.get(&url).send().await.is_ok() });
            if up {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop();
        false
    }

    /// Restarts the registry (same port and storage) with token auth and a
    /// blob redirect as given: push first, then switch (the test's own pushes
    /// speak only Basic).
    pub fn reconfigure(&mut self, token: Option<TokenConfig>, redirect: Option<String>) {
        self.token = token;
        self.redirect = redirect;
        self.restart();
    }

    /// Kills the registry (its storage stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and storage.
    pub fn restart(&mut self) {
        self.stop();
        for _ in 0..20 {
            if self.launch() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("docker-registry did not restart:\n{}", self.log());
    }

    /// The registry's log (requests included).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// `127.0.0.1:PORT`, as oci:// URIs and --insecure-registry name it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn base(&self) -> String {
        let scheme = if self.pki.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// The CA file to give `--ca-cert` (TLS registries).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A docker config.json with the registry's credentials, as a
    /// kubernetes.io/dockerconfigjson Secret holds it.
    pub fn docker_config(&self, password: &str) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, self.host())
    }

    /// Where the registry keeps the bytes of blob `digest` (`sha256:…`).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, url);
        if self.auth {
            r.basic_auth(USER, Some(PASSWORD))
        } else {
            r
        }
    }

    /// GET `/v2/{path}` (a manifest or a blob) with `accept`: the content type and body.
    pub fn get(&self, path: &str, accept: &str) -> (String, Vec<u8>) {
        self.rt.block_on(async {
            let url = format!("{}/v2/{path}", self.base());
            let got = self
                .request(reqwest::Method::GET, &url)
                .header("accept", accept)
                .send()
                .await
                .unwrap();
            assert_eq!(got.status().as_u16(), 200, "GET {url}");
            let kind = got
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            (kind, got.bytes().await.unwrap().to_vec())
        })
    }

    /// Uploads `data` as a blob of `repo` (monolithic upload); returns its digest.
    pub fn push_blob(&self, repo: &str, data: &[u8]) -> String {
        self.push_owned(repo, data.to_vec())
    }

    /// [`Registry::push_blob`] without a copy (large blobs).
    pub fn push_owned(&self, repo: &str, data: Vec<u8>) -> String {
        let digest = format!("sha256:{}", sha256_hex(&data));
        self.rt.block_on(async {
            let start = self
                .request(
                    reqwest::Method::POST,
                    &format!("{}/v2/{repo}/blobs/uploads/", self.base()),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(start.status().as_u16(), 202, "start upload");
            let location = start.headers()["location"].to_str().unwrap().to_owned();
            let url = reqwest::Url::parse(&self.base())
                .unwrap()
                .join(&location)
                .unwrap();
            let sep = if url.query().is_some() { '&' } else { '?' };
            let put = self
                .request(reqwest::Method::PUT, &format!("{url}{sep}digest={digest}"))
                .header("content-type", "application/octet-stream")
                .body(data)
                .send()
                .await
                .unwrap();
            assert_eq!(put.status().as_u16(), 201, "finish upload");
        });
        digest
    }

    /// Puts a manifest under `reference` (a tag or digest); returns its digest.
    pub fn push_manifest(
        &self,
        repo: &str,
        reference: &str,
        media_type: &str,
        body: &[u8],
    ) -> String {
        self.rt.block_on(async {
            let put = self
                .request(
                    reqwest::Method::PUT,
                    &format!("{}/v2/{repo}/manifests/{reference}", self.base()),
                )
                .header("content-type", media_type)
                .body(body.to_vec())
                .send()
                .await
                .unwrap();
            let status = put.status().as_u16();
            assert_eq!(
                status,
                201,
                "put manifest: {}",
                put.text().await.unwrap_or_default()
            );
        });
        format!("sha256:{}", sha256_hex(body))
    }

    /// The OCI image manifest of `layers` (each titled), as `oras push` writes it.
    pub fn manifest(&self, repo: &str, layers: &[Layer<'_>]) -> Vec<u8> {
        let pushed: Vec<(&str, String, usize, &str)> = layers
            .iter()
            .map(|l| {
                (
                    l.title,
                    self.push_blob(repo, l.data),
                    l.data.len(),
                    l.media_type,
                )
            })
            .collect();
        self.manifest_of(repo, &pushed)
    }

    /// The manifest of blobs already pushed: (title, digest, size, media type).
    pub fn manifest_of(&self, repo: &str, pushed: &[(&str, String, usize, &str)]) -> Vec<u8> {
        let config = self.push_blob(repo, b"{}");
        let layers: Vec<serde_json::Value> = pushed
            .iter()
            .map(|(title, digest, size, media_type)| {
                serde_json::json!({
                    "mediaType": media_type,
                    "digest": digest,
                    "size": size,
                    "annotations": {"org.opencontainers.image.title": title},
                })
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.spark-localizer.test",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config, "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    /// Pushes `layers` as an artifact tagged `tag`; returns the manifest digest.
    pub fn push(&self, repo: &str, tag: &str, layers: &[Layer<'_>]) -> String {
        let body = self.manifest(repo, layers);
        self.push_manifest(
            repo,
            tag,
            "application/vnd.oci.image.manifest.v1+json",
            &body,
        )
    }
}

/// The DER of the first certificate of a PEM text.
fn rustls_pemfile_ca(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
    use base64::Engine as _;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
        .into()
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A request the token server answered.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    pub method: String,
    /// The path and query (`/token?service=…&scope=…`).
    pub target: String,
    pub authorization: Option<String>,
    /// A POST's form.
    pub form: String,
}

/// A Docker token server (the `realm` of a registry's Bearer challenge): Basic
/// `USER`/`PASSWORD` gets pull (and push, when asked) on any repository, anonymous gets pull on
/// `public/*` only; tokens are ES256 JWTs with the signing certificate in
/// `x5c`, chained to `bundle`, as the registry's token auth verifies them.
pub struct TokenServer {
    pub port: u16,
    pub bundle: PathBuf,
    requests: std::sync::Arc<std::sync::Mutex<Vec<TokenRequest>>>,
    _dir: tempfile::TempDir,
}

impl TokenServer {
    pub fn start() -> TokenServer {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "token CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["token-signer".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let dir = tempfile::Builder::new()
            .prefix("sl-token-")
            .tempdir()
            .unwrap();
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, ca.pem()).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = requests.clone();
        let leaf_der = leaf.der().to_vec();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                answer(stream, &leaf_der, &key, &log);
            }
        });
        TokenServer {
            port,
            bundle,
            requests,
            _dir: dir,
        }
    }

    pub fn realm(&self) -> String {
        format!("http://127.0.0.1:{}/token", self.port)
    }

    pub fn config(&self) -> TokenConfig {
        TokenConfig {
            realm: self.realm(),
            bundle: self.bundle.clone(),
        }
    }

    pub fn requests(&self) -> Vec<TokenRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(
    mut stream: std::net::TcpStream,
    leaf_der: &[u8],
    key: &rcgen::KeyPair,
    log: &std::sync::Mutex<Vec<TokenRequest>>,
) {
    use base64::Engine as _;
    use std::io::{Read, Write};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.lines();
    let (method, target) = lines
        .next()
        .and_then(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .unwrap_or_default();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let authorization = header("authorization");
    // A POST carries an OAuth2 form (a refresh token exchanged for an access token).
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let form = String::from_utf8_lossy(&body).into_owned();
    log.lock().unwrap().push(TokenRequest {
        method: method.clone(),
        target: target.clone(),
        authorization: authorization.clone(),
        form: form.clone(),
    });
    let url = reqwest::Url::parse(&format!("http://x{target}?{form}")).unwrap();
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let scope = param("scope");
    let refresh = method == "POST"
        && param("grant_type") == "refresh_token"
        && param("refresh_token") == IDENTITY_TOKEN;
    if method == "POST" && !refresh {
        let body = r#"{"error":"invalid_grant"}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let good = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    );
    let (status, body) = match authorization.as_deref() {
        Some(a) if a != good => (
            "401 Unauthorized",
            r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#.to_owned(),
        ),
        given => {
            let repo = scope
                .strip_prefix("repository:")
                .and_then(|s| s.rsplit_once(':'))
                .map(|(name, _)| name.to_owned())
                .unwrap_or_default();
            let allowed = given.is_some() || refresh || repo.starts_with("public/");
            // Push only to those who say who they are, and ask for it.
            let wants_push = scope.rsplit_once(':').is_some_and(|(_, actions)| {
                // (A GET's query ends with the `?` of the empty form above.)
                actions
                    .trim_end_matches('?')
                    .split(',')
                    .any(|a| a == "push")
            });
            let actions: Vec<&str> = match (allowed, wants_push && given.is_some()) {
                (true, true) => vec!["pull", "push"],
                (true, false) => vec!["pull"],
                _ => vec![],
            };
            let token = jwt(
                leaf_der,
                key,
                if given.is_some() || refresh { USER } else { "" },
                &repo,
                &actions,
            );
            (
                "200 OK",
                if refresh {
                    serde_json::json!({"access_token": token, "expires_in": 300}).to_string()
                } else {
                    serde_json::json!({"token": token, "expires_in": 300}).to_string()
                },
            )
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// An ES256 JWT for `repo` with `actions`, signed by `key` (`x5c`: its certificate).
fn jwt(leaf_der: &[u8], key: &rcgen::KeyPair, sub: &str, repo: &str, actions: &[&str]) -> String {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine as _;
    use rcgen::SigningKey as _;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header =
        serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [STANDARD.encode(leaf_der)]});
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": sub, "aud": SERVICE,
        "exp": now + 300, "nbf": now - 10, "iat": now - 10,
        "jti": format!("{now}-{}", fastrand::u64(..)),
        "access": [{"type": "repository", "name": repo, "actions": actions}],
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der = key.sign(signing_input.as_bytes()).unwrap();
    format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(raw_signature(&der))
    )
}

/// An ASN.1 ECDSA signature (SEQUENCE of INTEGER r, s) as JWS wants it: r || s, 32 bytes each.
fn raw_signature(der: &[u8]) -> Vec<u8> {
    let mut i = 2; // SEQUENCE tag and (short) length
    let mut out = Vec::new();
    for _ in 0..2 {
        assert_eq!(der[i], 0x02, "an INTEGER");
        let len = der[i + 1] as usize;
        let int = &der[i + 2..i + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        out.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        out.extend_from_slice(int);
        i += 2 + len;
    }
    out
}
