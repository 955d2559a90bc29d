//! A real nginx serving a directory on 127.0.0.1, killed on Drop.
//!
//! `scripts/test.sh` installs Debian's `nginx-light`. Without nginx the test is
//! skipped locally, but fails under CI (env `CI` set) so it cannot silently vanish.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Nginx {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Serves `root`; `None` (after printing SKIP) when nginx is missing outside CI.
    pub fn start(root: &Path) -> Option<Nginx> {
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
        // The free port we pick may be taken before nginx binds it: try a few.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = dir.path().join("nginx.conf");
            std::fs::write(&conf, config(dir.path(), root, port)).unwrap();
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
                    _dir: dir,
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
            "http://127.0.0.1:{}/{}",
            self.port,
            rel.trim_start_matches('/')
        )
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

fn config(dir: &Path, root: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/client_body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  default_type application/octet-stream;
  sendfile on;
  server {{
    listen 127.0.0.1:{port};
    root {root};
  }}
}}
",
        root = root.display()
    )
}
