//! Shared test support: the misbehaving server, a sandbox that runs the real
//! binary as a subprocess, an nginx fixture, and small data helpers.

pub mod aws_creds;
pub mod cloud;
pub mod cut_proxy;
pub mod gpg;
pub mod hdfs;
pub mod kdc;
pub mod kube;
pub mod nginx;
pub mod pki;
pub mod podman;
pub mod registry;
pub mod seaweed;
pub mod server;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use server::{refused_url, Fault, FaultServer, Request};

pub const BIN: &str = env!("CARGO_BIN_EXE_spark-localizer");

/// Secrets planted by the redaction tests; none may ever show up in any output.
pub const SECRETS: &[&str] = &[
    "SECRETPW",
    "SECRETSIG",
    "SECRETTOK",
    "SECRETHDR",
    registry::PASSWORD,
    registry::IDENTITY_TOKEN,
];

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The sha256 of a file, read in a stream (for objects too large to hold twice).
pub fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).unwrap();
    hex::encode(h.finalize())
}

/// A file of `len` random bytes at `path` (from /dev/urandom).
pub fn random_file(path: &Path, len: u64) {
    let status = Command::new("head")
        .args(["-c", &len.to_string(), "/dev/urandom"])
        .stdout(std::fs::File::create(path).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Bytes on disk (allocated blocks) under `dir`, its state directory included:
/// the progress of a preallocated transfer.
pub fn allocated(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.blocks() * 512,
                Err(_) => {}
            }
        }
    }
    total
}

/// Deterministic pseudo-random bytes (splitmix64), different per seed.
pub fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ len as u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub cmdline: String,
}

impl Outcome {
    /// Panics (showing everything the binary said) unless it exited with `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{self}");
        self
    }

    /// Panics unless stdout or stderr contains `needle` (ASCII case-insensitive).
    #[track_caller]
    pub fn expect_stdout_or_stderr(&self, needle: &str) -> &Self {
        let needle_lower = needle.to_lowercase();
        assert!(
            self.stdout.to_lowercase().contains(&needle_lower)
                || self.stderr.to_lowercase().contains(&needle_lower),
            "output lacks {needle:?}\n{self}"
        );
        self
    }

    /// Panics unless stderr contains `needle` (ASCII case-insensitive).
    #[track_caller]
    pub fn expect_stderr(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "stderr lacks {needle:?}\n{self}"
        );
        self
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "$ {}\nexit: {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline, self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A temp dir with `jars/`, `files/` and a termination-log path; outlives several runs.
pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub jars: PathBuf,
    pub files: PathBuf,
    pub term_log: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox::with_jars_dir("jars")
    }

    /// A sandbox whose jars dir has this (relative) name, e.g. one needing shell quoting.
    pub fn with_jars_dir(name: &str) -> Sandbox {
        let tmp = tempfile::Builder::new().prefix("sl-it-").tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (jars, files) = (root.join(name), root.join("files"));
        std::fs::create_dir_all(&jars).unwrap();
        std::fs::create_dir_all(&files).unwrap();
        let term_log = root.join("termination-log");
        Sandbox {
            _tmp: tmp,
            root,
            jars,
            files,
            term_log,
        }
    }

    /// `spark-localizer fetch` with the sandbox's dirs and fast, quiet defaults.
    pub fn fetch(&self) -> Run<'_> {
        Run::new(self, "fetch")
    }

    pub fn check(&self) -> Run<'_> {
        Run::new(self, "check")
    }

    /// `spark-localizer resolve` (the fetch flags apply; no directories given).
    pub fn resolve(&self) -> Run<'_> {
        Run::new(self, "resolve").no_dirs()
    }

    /// `spark-localizer bundle` (the fetch flags apply; it lays out in a directory of its own).
    pub fn bundle(&self) -> Run<'_> {
        Run::new(self, "bundle").no_dirs()
    }

    /// Writes a helper file (header file, checksums, properties) under the sandbox root.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    pub fn jar(&self, name: &str) -> PathBuf {
        self.jars.join(name)
    }

    pub fn report(&self) -> serde_json::Value {
        let path = self.jars.join("spark-localizer-report.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{text}"))
    }

    /// The report's artifact whose destination ends with `/name`.
    pub fn artifact(&self, name: &str) -> serde_json::Value {
        let report = self.report();
        let found = report["artifacts"].as_array().and_then(|a| {
            a.iter()
                .find(|x| {
                    x["destination"]
                        .as_str()
                        .is_some_and(|d| d.ends_with(&format!("/{name}")))
                })
                .cloned()
        });
        found.unwrap_or_else(|| panic!("no artifact for {name} in report:\n{report:#}"))
    }

    pub fn classpath(&self) -> String {
        std::fs::read_to_string(self.jars.join("classpath")).expect("classpath file")
    }

    pub fn term_log_text(&self) -> Option<String> {
        std::fs::read(&self.term_log)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Sources the env file in `sh` (with `pre` as an existing SPARK_CLASSPATH) and echoes it.
    pub fn sourced_classpath(&self, pre: Option<&str>) -> String {
        let env_file = self.jars.join("spark-classpath.env");
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(r#". "$1"; printf '%s' "$SPARK_CLASSPATH""#)
            .arg("sh")
            .arg(&env_file);
        sh.env_remove("SPARK_CLASSPATH");
        if let Some(pre) = pre {
            sh.env("SPARK_CLASSPATH", pre);
        }
        let out = sh.output().unwrap();
        assert!(
            out.status.success(),
            "sourcing {} failed: {}",
            env_file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Temp/partial files left in the jars or files dir (never under a final name).
    pub fn leftovers(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in [&self.jars, &self.files] {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().is_file() && (name.contains(".partial") || name.contains(".sl-")) {
                    found.push(entry.path());
                }
            }
        }
        found
    }

    /// Names in the jars dir other than the outputs and the state dir.
    pub fn jar_names(&self) -> Vec<String> {
        let outputs = [
            "classpath",
            "spark-classpath.env",
            "spark-localizer-report.json",
            "spark-localizer-sbom.cdx.json",
            ".spark-localizer",
        ];
        let mut names: Vec<String> = std::fs::read_dir(&self.jars)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !outputs.contains(&n.as_str()))
            .collect();
        names.sort();
        names
    }

    /// Everything the binary said or wrote: stdout, stderr, the jars and files dirs
    /// (outputs, state records) and the termination log. Helper files are not included.
    pub fn all_output(&self, out: &Outcome) -> String {
        let mut all = format!("{}\n{}\n", out.stdout, out.stderr);
        let mut stack = vec![self.jars.clone(), self.files.clone(), self.term_log.clone()];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(
                    std::fs::read_dir(&path)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                );
            } else if let Ok(bytes) = std::fs::read(&path) {
                all.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        all
    }
}

/// Panics if any planted secret (or the basic-auth token built from one) appears.
#[track_caller]
pub fn assert_no_secrets(what: &str, text: &str) {
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode("user:SECRETPW");
    for secret in SECRETS.iter().copied().chain([basic.as_str()]) {
        assert!(
            !text.contains(secret),
            "secret {secret:?} leaked in {what}:\n{text}"
        );
    }
}

/// One invocation being assembled: `BIN [global] SUB [dirs+defaults] [args]`.
pub struct Run<'a> {
    sandbox: &'a Sandbox,
    sub: &'static str,
    global: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    /// The program and its leading arguments, when not `BIN` (another build, an emulator).
    program: Option<Vec<OsString>>,
    dirs: bool,
    retry_delay: String,
    term_log: PathBuf,
    timeout: Duration,
}

impl<'a> Run<'a> {
    fn new(sandbox: &'a Sandbox, sub: &'static str) -> Run<'a> {
        Run {
            sandbox,
            sub,
            global: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            program: None,
            dirs: true,
            retry_delay: "1ms".into(),
            term_log: sandbox.term_log.clone(),
            timeout: Duration::from_secs(90),
        }
    }

    /// Replaces the default `--retry-delay 1ms` (the flag may be given only once).
    pub fn retry_delay(mut self, delay: &str) -> Self {
        self.retry_delay = delay.into();
        self
    }

    /// Replaces the sandbox's `--termination-log` (the flag may be given only once).
    pub fn termination_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.term_log = path.into();
        self
    }

    /// Flags before the subcommand (`-v`, `--log-format json`).
    pub fn global<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.global.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn arg(self, arg: impl Into<OsString>) -> Self {
        self.args([arg])
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Runs `program` (its first element, with the rest as leading arguments) instead of
    /// this build's binary: another build, or one under an emulator.
    pub fn program<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, program: I) -> Self {
        let program: Vec<OsString> = program.into_iter().map(Into::into).collect();
        assert!(!program.is_empty(), "an empty program");
        self.program = Some(program);
        self
    }

    /// Leaves out `--jars-dir` / `--files-dir` (to test other ways of setting them).
    pub fn no_dirs(mut self) -> Self {
        self.dirs = false;
        self
    }

    pub fn command(&self) -> Command {
        let sb = self.sandbox;
        let mut cmd = match &self.program {
            Some(program) => {
                let mut cmd = Command::new(&program[0]);
                cmd.args(&program[1..]);
                cmd
            }
            None => Command::new(BIN),
        };
        cmd.args(&self.global).arg(self.sub);
        if self.dirs {
            cmd.arg("--jars-dir")
                .arg(&sb.jars)
                .arg("--files-dir")
                .arg(&sb.files);
        }
        cmd.arg("--termination-log").arg(&self.term_log);
        cmd.arg("--retry-delay")
            .arg(&self.retry_delay)
            .arg("--no-progress")
            .args(&self.args);
        for (name, _) in std::env::vars() {
            let lower = name.to_ascii_lowercase();
            if name.starts_with("SPARK_LOCALIZER_")
                || name.starts_with("AWS_")
                || lower.ends_with("_proxy")
                || name == "RUST_LOG"
                || name == "SSL_CERT_FILE"
                || name == "DOCKER_CONFIG"
                || name == "SPARK_HOME"
            {
                cmd.env_remove(&name);
            }
        }
        // The developer's ~/.aws/ is not the test's: HOME is the sandbox (a test
        // may set another).
        cmd.env("HOME", &sb.root);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    pub fn spawn(&self) -> Child {
        self.command().spawn().expect("spawn spark-localizer")
    }

    /// Starts the binary in the background; its output is collected as it comes.
    pub fn start(&self) -> Running {
        let cmdline = format!("{:?}", self.command());
        let start = Instant::now();
        let mut child = self.spawn();
        let (stdout, stderr) = (Captured::default(), Captured::default());
        let drains = [
            stdout.drain(child.stdout.take()),
            stderr.drain(child.stderr.take()),
        ];
        Running {
            child,
            stdout,
            stderr,
            drains,
            start,
            cmdline,
            timeout: self.timeout,
        }
    }

    /// Runs to completion (killed after a generous timeout) and captures everything.
    pub fn run(&self) -> Outcome {
        self.start().finish()
    }
}

/// Output of a running child, readable while it runs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn drain<R: Read + Send + 'static>(&self, pipe: Option<R>) -> std::thread::JoinHandle<()> {
        let buf = self.0.clone();
        std::thread::spawn(move || {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A binary started with [`Run::start`].
pub struct Running {
    child: Child,
    stdout: Captured,
    stderr: Captured,
    drains: [std::thread::JoinHandle<()>; 2],
    start: Instant,
    cmdline: String,
    timeout: Duration,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.text()
    }

    /// Sends a signal (`TERM`, `INT`, ...) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {} failed", self.pid());
    }

    /// Waits for the exit (killing it after the run's timeout) and captures everything.
    pub fn finish(mut self) -> Outcome {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if self.start.elapsed() > self.timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} still running after {:?}; killed\n--- stderr ---\n{}",
                    self.cmdline,
                    self.timeout,
                    self.stderr.text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.start.elapsed();
        for drain in self.drains {
            drain.join().unwrap();
        }
        Outcome {
            code: status.code(),
            stdout: self.stdout.text(),
            stderr: self.stderr.text(),
            elapsed,
            cmdline: self.cmdline,
        }
    }
}

/// Waits up to `limit` for `cond`, polling.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// The absolute path as a string (for building expected classpaths).
pub fn s(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// Copies `bin` and the shared objects it loads into `root`, at their own paths.
pub fn populate_chroot(bin: &Path, root: &Path) -> bool {
    let Ok(out) = std::process::Command::new("ldd").arg(bin).output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let libs: Vec<PathBuf> = text
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    for lib in libs {
        let dest = root.join(lib.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&lib, &dest).unwrap();
    }
    std::fs::copy(bin, root.join("spark-localizer")).unwrap();
    true
}

/// `tar czf out -C src .` with the system tar.
pub fn tar_gz(src: &Path, out: &Path) {
    let ok = Command::new("tar")
        .arg("czf")
        .arg(out)
        .arg("-C")
        .arg(src)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar failed");
}

/// Whether the tests run as root (needed for chroot).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A server subprocess (`stage serve`, `mirror serve`) that printed its
/// `listening on SCHEME://ADDR` line; its stderr is collected as it comes.
pub struct Listening {
    pub child: Child,
    /// `host:port` from the listening line.
    pub addr: String,
    pub stderr: Arc<Mutex<Vec<u8>>>,
    pub drain: Option<std::thread::JoinHandle<()>>,
}

impl Listening {
    /// Spawns `cmd` (stdout and stderr piped here) and waits up to 20 s for its
    /// listening line; panics with its stderr when none comes.
    pub fn spawn(mut cmd: Command) -> Listening {
        use std::io::BufRead;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the server");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut pipe = child.stderr.take().unwrap();
        let drain = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|url| url.split_once("://"))
            .map(|(_, addr)| addr.to_owned());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no 'listening on' line (got {line:?})\n--- stderr ---\n{}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            );
        };
        Listening {
            child,
            addr,
            stderr,
            drain: Some(drain),
        }
    }
}
