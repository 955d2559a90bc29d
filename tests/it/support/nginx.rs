//! A real nginx serving a directory on 127.0.0.1 over HTTP/1.1, or over HTTPS
//! with HTTP/2 (certificate from a test CA), killed on Drop. Its access log
//! records method, URI, protocol and status of every request.
//!
//! `scripts/test.sh` installs Debian's `nginx-light`. Without nginx the test is
//! skipped locally, but fails under CI (env `CI` set) so it cannot silently vanish.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::pki::Pki;

pub struct Nginx {
    child: Child,
    port: u16,
    scheme: &'static str,
    dir: tempfile::TempDir,
}

/// The certificate and key files of an HTTPS server block.
struct Tls {
    cert: PathBuf,
    key: PathBuf,
}

impl Nginx {
    /// Serves `root` over plain HTTP; `None` (after printing SKIP) when nginx is
    /// missing outside CI.
    pub fn start(root: &Path) -> Option<Nginx> {
        Nginx::launch(root, None)
    }

    /// Serves `root` over HTTPS with HTTP/2 offered (ALPN), with a leaf
    /// certificate of `pki`'s CA.
    pub fn start_tls(root: &Path, pki: &Pki) -> Option<Nginx> {
        Nginx::launch(root, Some(pki))
    }

    fn launch(root: &Path, pki: Option<&Pki>) -> Option<Nginx> {
        let Some(bin) = find_nginx() else {
            if std::env::var_os("CI").is_some() {
                panic!("nginx not found on PATH or in /usr/sbin; `bash scripts/test.sh` installs nginx-light");
            }
            eprintln!("SKIP: nginx not installed; run scripts/test.sh");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("sl-nginx-")
            .tempdir()
            .unwrap();
        let tls = pki.map(|pki| {
            let (cert, key) = pki.write_leaf(dir.path());
            Tls { cert, key }
        });
        let http2_on = tls.is_some() && version(&bin) >= (1, 25, 1);
        // The free port we pick may be taken before nginx binds it: try a few.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = dir.path().join("nginx.conf");
            let server = server_block(port, tls.as_ref(), http2_on);
            std::fs::write(&conf, config(dir.path(), root, &server)).unwrap();
            let error_log = dir.path().join("error.log");
            let mut child = Command::new(&bin)
                .arg("-p")
                .arg(dir.path())
                .arg("-e")
                .arg(&error_log)
                .arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nginx");
            let up = super::wait_for(Duration::from_secs(10), || {
                matches!(child.try_wait(), Ok(Some(_)))
                    || TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            if up && matches!(child.try_wait(), Ok(None)) {
                return Some(Nginx {
                    child,
                    port,
                    scheme: if tls.is_some() { "https" } else { "http" },
                    dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&error_log).unwrap_or_default();
            eprintln!("nginx did not start on port {port}:\n{log}");
        }
        panic!("nginx failed to start; see the error logs above");
    }

    pub fn url(&self, rel: &str) -> String {
        format!(
            "{}://127.0.0.1:{}/{}",
            self.scheme,
            self.port,
            rel.trim_start_matches('/')
        )
    }

    /// Access-log lines so far: `METHOD URI PROTOCOL STATUS`, e.g. `GET /a.jar HTTP/2.0 200`.
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_nginx() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("nginx"))
        .chain(
            [
                "/usr/sbin/nginx",
                "/usr/local/sbin/nginx",
                "/usr/local/nginx/sbin/nginx",
            ]
            .map(PathBuf::from),
        )
        .find(|p| p.is_file())
}

/// `nginx -v` as (major, minor, patch); (0, 0, 0) when it cannot be read.
fn version(bin: &Path) -> (u32, u32, u32) {
    let out = Command::new(bin).arg("-v").output().expect("run nginx -v");
    let text = String::from_utf8_lossy(&out.stderr);
    let v = text.split("nginx/").nth(1).unwrap_or_default();
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

/// `listen` and TLS directives. nginx 1.25.1 replaced `listen ... http2` with `http2 on;`.
fn server_block(port: u16, tls: Option<&Tls>, http2_on: bool) -> String {
    let Some(tls) = tls else {
        return format!("listen 127.0.0.1:{port};");
    };
    let (listen, http2) = if http2_on {
        ("ssl", "\n    http2 on;")
    } else {
        ("ssl http2", "")
    };
    format!(
        "listen 127.0.0.1:{port} {listen};{http2}
    ssl_certificate {};
    ssl_certificate_key {};",
        tls.cert.display(),
        tls.key.display()
    )
}

fn config(dir: &Path, root: &Path, server: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  log_format requests '$request_method $request_uri $server_protocol $status';
  access_log {d}/access.log requests;
  client_body_temp_path {d}/client_body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  default_type application/octet-stream;
  sendfile on;
  server {{
    {server}
    root {root};
  }}
}}
",
        root = root.display()
    )
}
