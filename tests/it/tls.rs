//! HTTPS: trust comes only from bundled roots, --ca-cert and SSL_CERT_FILE; a
//! certificate problem fails at once with a hint; an empty chroot holding only
//! the binary (and its loader) plus a CA file works.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::pki::Pki;
use crate::support::{data, is_root, populate_chroot, s, sha256_hex, Sandbox};

/// A one-file HTTPS server (HTTP/1.1, Connection: close) on 127.0.0.1; counts connections.
struct TlsServer {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl TlsServer {
    fn start(pki: &Pki, body: Vec<u8>) -> TlsServer {
        let config = pki.server_config();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let body = Arc::new(body);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let config = config.clone();
                let body = body.clone();
                std::thread::spawn(move || {
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    let mut reader = BufReader::new(&mut tls);
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(head.as_bytes());
                    let _ = tls.write_all(&body);
                    let _ = tls.flush();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        TlsServer { port, connections }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.port)
    }
}

#[test]
fn untrusted_certificate_fails_fast_with_a_hint() {
    let pki = Pki::new();
    let server = TlsServer::start(&pki, data(1, 1000));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--jars", &server.url("a.jar"), "--retries", "3"])
        .run();
    out.expect_code(3).expect_stderr("--ca-cert");
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        1,
        "a TLS failure is final: no retries"
    );
    assert!(!sb.jar("a.jar").exists());
}

#[test]
fn ca_cert_flag_and_ssl_cert_file_are_trusted() {
    let pki = Pki::new();
    let body = data(2, 300_000);
    let server = TlsServer::start(&pki, body.clone());
    let sb = Sandbox::new();
    let ca = sb.write("ca.pem", &pki.ca_pem);
    sb.fetch()
        .args(["--jars", &server.url("a.jar"), "--ca-cert", &s(&ca)])
        .run()
        .expect_code(0);
    assert_eq!(
        sha256_hex(&std::fs::read(sb.jar("a.jar")).unwrap()),
        sha256_hex(&body)
    );

    let sb = Sandbox::new();
    let ca = sb.write("ca.pem", &pki.ca_pem);
    sb.fetch()
        .args(["--jars", &server.url("b.jar")])
        .env("SSL_CERT_FILE", &s(&ca))
        .run()
        .expect_code(0);
    assert!(sb.jar("b.jar").exists());
}

#[test]
fn unreadable_or_empty_ca_file_is_a_config_error() {
    let sb = Sandbox::new();
    sb.fetch()
        .args([
            "--jars",
            "https://127.0.0.1:9/a.jar",
            "--ca-cert",
            "/nonexistent/ca.pem",
        ])
        .run()
        .expect_code(2)
        .expect_stderr("/nonexistent/ca.pem");
    let junk = sb.write("junk.pem", "not a certificate\n");
    sb.fetch()
        .args([
            "--jars",
            "https://127.0.0.1:9/a.jar",
            "--ca-cert",
            &s(&junk),
        ])
        .run()
        .expect_code(2)
        .expect_stderr("no PEM certificate");
}

#[test]
fn works_in_an_empty_chroot_with_only_a_ca_file() {
    if !is_root() {
        eprintln!("SKIP: the chroot test needs root");
        return;
    }
    let pki = Pki::new();
    let body = data(3, 100_000);
    let server = TlsServer::start(&pki, body.clone());
    let root = tempfile::Builder::new()
        .prefix("sl-chroot-")
        .tempdir()
        .unwrap();
    assert!(
        populate_chroot(
            Path::new(env!("CARGO_BIN_EXE_spark-localizer")),
            root.path()
        ),
        "ldd is needed to build the chroot"
    );
    std::fs::write(root.path().join("ca.pem"), &pki.ca_pem).unwrap();
    // No /etc, no /etc/ssl, no /dev, no /proc: nothing but the binary, its loader and the CA.
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot (coreutils) is installed");
    let out = std::process::Command::new(chroot)
        .arg(root.path())
        .args([
            "/spark-localizer",
            "fetch",
            "--no-progress",
            "--ca-cert",
            "/ca.pem",
        ])
        .args(["--jars-dir", "/out", "--jars", &server.url("c.jar")])
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read(root.path().join("out/c.jar")).unwrap();
    assert_eq!(sha256_hex(&got), sha256_hex(&body));
}
