//! The protocol-level test HDFS (`tests/hdfs/testhdfs.py`) on 127.0.0.1, killed
//! on Drop.
//!
//! One Python process plays every NameNode (Hadoop IPC: the SASL switch to
//! SIMPLE, connection context, the ClientProtocol calls hdfs-native makes to
//! read) and every DataNode (DataTransferProtocol `OP_READ_BLOCK` with CRC32C or
//! CRC32 checksummed packets) of a read-only cluster described by a JSON config;
//! see `tests/hdfs/README.md` for the format and for what only a real cluster
//! tests. Give port 0 to get free ports; the actual ones come back in the
//! server's ready line ([`TestHdfs::ready`]).
//!
//! `scripts/test.sh` installs `protobuf` and `grpcio-tools` into
//! `target/test-venv`. Without them the test is skipped locally, but fails under
//! CI (env `CI` set).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

const READY_WITHIN: Duration = Duration::from_secs(60);
const FAILOVER_PROVIDER: &str =
    "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider";

pub struct TestHdfs {
    child: Child,
    /// Held open: the server exits when its stdin closes (`--watch-stdin`), so it
    /// cannot outlive a test process that dies without running Drop.
    _stdin: ChildStdin,
    stderr: Arc<Mutex<Vec<u8>>>,
    ready: Value,
    _dir: tempfile::TempDir,
}

impl TestHdfs {
    /// Starts the server with `config` (the JSON of `tests/hdfs/README.md`) and
    /// waits for its ready line. `None` (after printing SKIP) when the Python
    /// venv with protobuf and grpcio-tools is missing outside CI. Panics, with
    /// the server's stderr, if it does not start.
    pub fn start(config: Value) -> Option<TestHdfs> {
        let python = find_python()?;
        let dir = tempfile::Builder::new()
            .prefix("sl-hdfs-")
            .tempdir()
            .unwrap();
        let config_path = dir.path().join("testhdfs.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hdfs/testhdfs.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(&config_path)
            .arg("--watch-stdin")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {} {}: {e}", python.display(), script.display()));
        let stdin = child.stdin.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        {
            let buf = stderr.clone();
            let mut pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
        }
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Nothing more is expected; keep the pipe drained anyway.
            for _ in lines {}
        });
        let text = |stderr: &Arc<Mutex<Vec<u8>>>| {
            String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned()
        };
        let line = match rx.recv_timeout(READY_WITHIN) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let status = child.wait().ok();
                // Let the stderr drain catch up with a process that just exited.
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "test HDFS did not start ({}; exit {status:?})\n--- config ---\n{config:#}\n--- stderr ---\n{}",
                    match other {
                        Err(_) => format!("no ready line within {READY_WITHIN:?}"),
                        _ => "exited before its ready line".to_string(),
                    },
                    text(&stderr)
                );
            }
        };
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "test HDFS ready line is not JSON ({e}): {line}\n--- stderr ---\n{}",
                text(&stderr)
            )
        });
        Some(TestHdfs {
            child,
            _stdin: stdin,
            stderr,
            ready,
            _dir: dir,
        })
    }

    /// The ready line: `namenodes` (`name`, `port`, `state`), `datanodes` (`id`,
    /// `port`, `uuid`, `down`), `nameservice`, `pool_id`, `pid`, and `files`
    /// with their blocks (`id`, `genstamp`, `offset`, `length`, `replicas`).
    pub fn ready(&self) -> &Value {
        &self.ready
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The nameservice of the config, if it named one.
    pub fn nameservice(&self) -> Option<&str> {
        self.ready["nameservice"].as_str()
    }

    /// `127.0.0.1:PORT` of the `i`-th NameNode of the config (even a "down" one,
    /// whose port is reserved but refuses connections).
    pub fn namenode_addr(&self, i: usize) -> SocketAddr {
        let nn = &self.ready["namenodes"][i];
        let port = nn["port"]
            .as_u64()
            .unwrap_or_else(|| panic!("no NameNode {i} in {}", self.ready));
        SocketAddr::from(([127, 0, 0, 1], port as u16))
    }

    /// `127.0.0.1:PORT` of the DataNode with this id.
    pub fn datanode_addr(&self, id: &str) -> SocketAddr {
        let port = self.ready["datanodes"]
            .as_array()
            .and_then(|dns| dns.iter().find(|dn| dn["id"] == id))
            .and_then(|dn| dn["port"].as_u64())
            .unwrap_or_else(|| panic!("no DataNode {id} in {}", self.ready));
        SocketAddr::from(([127, 0, 0, 1], port as u16))
    }

    /// `hdfs://127.0.0.1:PORT` of the first active NameNode (else the first one):
    /// the URL of a single NameNode, no nameservice involved.
    pub fn url(&self) -> String {
        let nns = self.ready["namenodes"].as_array().unwrap();
        let i = nns
            .iter()
            .position(|nn| nn["state"] == "active")
            .unwrap_or(0);
        format!("hdfs://{}", self.namenode_addr(i))
    }

    /// `hdfs://NAMESERVICE` (panics without a nameservice in the config).
    pub fn ns_url(&self) -> String {
        let ns = self.nameservice().expect("the config names no nameservice");
        format!("hdfs://{ns}")
    }

    /// The client-side Hadoop configuration of this cluster: with a nameservice,
    /// `fs.defaultFS=hdfs://NS`, `dfs.nameservices`, `dfs.ha.namenodes.NS`,
    /// `dfs.namenode.rpc-address.NS.NN` for each NameNode and the failover proxy
    /// provider; without one, `fs.defaultFS` is [`TestHdfs::url`]. For
    /// `hdfs_native::ClientBuilder::with_config`.
    pub fn hadoop_config(&self) -> Vec<(String, String)> {
        let Some(ns) = self.nameservice() else {
            return vec![("fs.defaultFS".into(), self.url())];
        };
        let nns = self.ready["namenodes"].as_array().unwrap();
        let names: Vec<&str> = nns.iter().map(|nn| nn["name"].as_str().unwrap()).collect();
        let mut conf = vec![
            ("fs.defaultFS".into(), format!("hdfs://{ns}")),
            ("dfs.nameservices".into(), ns.to_string()),
            (format!("dfs.ha.namenodes.{ns}"), names.join(",")),
            (
                format!("dfs.client.failover.proxy.provider.{ns}"),
                FAILOVER_PROVIDER.into(),
            ),
        ];
        for (i, name) in names.iter().enumerate() {
            conf.push((
                format!("dfs.namenode.rpc-address.{ns}.{name}"),
                self.namenode_addr(i).to_string(),
            ));
        }
        conf
    }

    /// Writes [`TestHdfs::hadoop_config`] as `core-site.xml` (`fs.defaultFS`) and
    /// `hdfs-site.xml` (the rest) into `dir` (created if missing); returns `dir`,
    /// for `HADOOP_CONF_DIR`.
    pub fn write_hadoop_conf(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let (core, hdfs): (Vec<_>, Vec<_>) = self
            .hadoop_config()
            .into_iter()
            .partition(|(k, _)| k == "fs.defaultFS");
        std::fs::write(dir.join("core-site.xml"), site_xml(&core)).unwrap();
        std::fs::write(dir.join("hdfs-site.xml"), site_xml(&hdfs)).unwrap();
        dir.to_path_buf()
    }

    /// Everything the server logged so far (every connection, call and block read).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Lines of [`TestHdfs::stderr`] that contain `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for TestHdfs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.stderr();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "--- test HDFS stderr (last 60 lines) ---\n{}",
                lines[lines.len().saturating_sub(60)..].join("\n")
            );
        }
    }
}

fn site_xml(props: &[(String, String)]) -> String {
    let mut xml = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (name, value) in props {
        xml.push_str(&format!(
            "  <property><name>{}</name><value>{}</value></property>\n",
            escape(name),
            escape(value)
        ));
    }
    xml.push_str("</configuration>\n");
    xml
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `target/test-venv/bin/python` if it has protobuf and grpcio-tools (checked
/// once per test process).
fn find_python() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/python");
        if !python.is_file() {
            return Err(format!("{} not found", python.display()));
        }
        let check = Command::new(&python)
            .args(["-c", "import google.protobuf, grpc_tools.protoc"])
            .stdin(Stdio::null())
            .output();
        match check {
            Ok(out) if out.status.success() => Ok(python),
            Ok(out) => Err(format!(
                "{} lacks protobuf or grpcio-tools: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!("run {}: {e}", python.display())),
        }
    });
    match found {
        Ok(python) => Some(python.clone()),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("test HDFS cannot run: {why}; `bash scripts/test.sh` installs it")
        }
        Err(why) => {
            eprintln!("SKIP: test HDFS cannot run ({why}); run scripts/test.sh");
            None
        }
    }
}
