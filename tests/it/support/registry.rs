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
/// The test password: must never appear in any output.
pub const PASSWORD: &str = "reg-pw-7Qz9xK2v";

pub struct Registry {
    child: Option<Child>,
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
        let (Some(bin), Some(htpasswd)) = (find("docker-registry"), find("htpasswd")) else {
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
        if auth {
            let out = Command::new(htpasswd)
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
        if self.auth {
            c.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: spark-localizer-test\n    path: {d}/htpasswd\n"
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
