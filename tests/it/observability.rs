//! What operators see: progress lines off a terminal, JSON log lines, the final
//! summary, `-q`; and proxies taken from the environment.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{data, sha256_hex, wait_for, Fault, FaultServer, Sandbox};

/// The binary with only the flags given (no `--no-progress`), proxies cleared.
fn bare(sb: &Sandbox, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spark-localizer"));
    cmd.args(args)
        .arg("--jars-dir")
        .arg(&sb.jars)
        .arg("--files-dir")
        .arg(&sb.files)
        .arg("--termination-log")
        .arg(&sb.term_log);
    for (name, _) in std::env::vars() {
        if name.starts_with("SPARK_LOCALIZER_") || name.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(name);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn off_a_terminal_progress_lines_and_a_summary_are_logged() {
    let server = FaultServer::start();
    server.put("/slow.jar", data(1, 2 << 20));
    server.on("/slow.jar", 1, Fault::Hold(64 << 10));
    let sb = Sandbox::new();
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = bare(
        &sb,
        &[
            "fetch",
            "--progress-interval",
            "100ms",
            "--jars",
            &server.url("/slow.jar"),
        ],
    )
    .stderr(log.reopen().unwrap())
    .spawn()
    .unwrap();
    // Held until a periodic progress line is out (however long a busy machine
    // takes to start the process).
    let progressed = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(log.path())
            .unwrap_or_default()
            .contains("progress: 0/1 files")
    });
    server.release();
    let out = child.wait_with_output().unwrap();
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        progressed,
        "no periodic progress line while the transfer was held:\n{stderr}"
    );
    assert!(
        stderr.contains("summary: 1 fetched") && stderr.contains("MiB/s"),
        "no final summary:\n{stderr}"
    );
}

#[test]
fn json_log_lines_parse_and_quiet_silences_info() {
    let server = FaultServer::start();
    server.put("/a.jar", data(2, 1000));
    let sb = Sandbox::new();
    let out = bare(
        &sb,
        &[
            "--log-format",
            "json",
            "fetch",
            "--jars",
            &server.url("/a.jar"),
            "--jars",
            &server.url("/missing.jar"),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut levels = Vec::new();
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{stderr}"));
        levels.push(v["level"].as_str().unwrap_or_default().to_owned());
        assert!(v["message"].is_string(), "no message field: {line}");
    }
    assert!(levels.iter().any(|l| l == "ERROR"), "{stderr}");
    assert!(levels.iter().any(|l| l == "INFO"), "{stderr}");

    let sb = Sandbox::new();
    let out = bare(
        &sb,
        &[
            "-q",
            "fetch",
            "--no-progress",
            "--jars",
            &server.url("/a.jar"),
        ],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "-q printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn http_proxy_from_the_environment_is_used() {
    // The fault server plays the proxy: it sees the absolute-form request target.
    let proxy = FaultServer::start();
    let body = data(3, 50_000);
    proxy.put("http://artifacts.invalid/lib/a.jar", body.clone());
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", "http://artifacts.invalid/lib/a.jar"])
        .env("HTTP_PROXY", &proxy.url(""))
        .run()
        .expect_code(0);
    assert_eq!(
        sha256_hex(&std::fs::read(sb.jar("a.jar")).unwrap()),
        sha256_hex(&body)
    );
    let gets = proxy.gets("http://artifacts.invalid/lib/a.jar");
    assert_eq!(gets.len(), 1, "the GET did not go through the proxy");

    // NO_PROXY exempts a host: the request then goes direct (and fails to resolve).
    let sb = Sandbox::new();
    sb.fetch()
        .args([
            "--jars",
            "http://artifacts.invalid/lib/a.jar",
            "--retries",
            "0",
        ])
        .env("HTTP_PROXY", &proxy.url(""))
        .env("NO_PROXY", "artifacts.invalid")
        .run()
        .expect_code(3);
    assert_eq!(proxy.gets("http://artifacts.invalid/lib/a.jar").len(), 1);
}

/// Issue 15: `-v` shows the request trail (method, URL with secrets masked, the
/// range asked for, status, time), next to the retry decisions; `-vv` adds the
/// answer's headers that decide a transfer. Before, `-v` added at most a line.
#[test]
fn verbose_shows_the_request_trail() {
    let server = FaultServer::start();
    let body = data(41, 5000);
    server.put("/a.jar", body.clone());
    server.on("/a.jar", 1, Fault::Status(503));
    let sb = Sandbox::new();
    let url = server.url("/a.jar?token=hunter2-secret");
    let out = sb.fetch().global(["-v"]).args(["--jars", &url]).run();
    out.expect_code(0)
        .expect_stderr(&format!(
            "GET {} -> 503 Service Unavailable in",
            server.url("/a.jar?token=***")
        ))
        .expect_stderr("retrying in")
        .expect_stderr(&format!(
            "GET {} -> 200 OK in",
            server.url("/a.jar?token=***")
        ));
    assert!(!out.stderr.contains("hunter2"), "{out}");

    let sb = Sandbox::new();
    let out = sb.fetch().global(["-vv"]).args(["--jars", &url]).run();
    out.expect_code(0)
        .expect_stderr(&format!("[content-length: {}", body.len()))
        .expect_stderr("etag: ");

    // A request cut short by the stall timeout is in the trail too.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hung = format!("http://{}/hung.jar", silent.local_addr().unwrap());
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .global(["-v"])
        .args(["--stall-timeout", "1s", "--retries", "0", "--jars", &hung])
        .run();
    out.expect_code(3)
        .expect_stderr(&format!("GET {hung} -> abandoned after 1."));

    // Without -v, no trail.
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--jars", &url]).run();
    assert!(!out.stderr.contains("GET "), "{out}");
}

/// Issue 15: `https://` at a plain-HTTP server says so, instead of suggesting a CA.
#[test]
fn https_at_a_plain_http_server_says_so() {
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}/a.jar", plain.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in plain.incoming().take(4) {
            let Ok(mut conn) = conn else { continue };
            let mut hello = [0u8; 512];
            let _ = std::io::Read::read(&mut conn, &mut hello);
            let _ = std::io::Write::write_all(
                &mut conn,
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--jars", &url]).run();
    out.expect_code(3).expect_stderr(
        "the server answered in plain HTTP, not TLS: write the URL (or endpoint) with http://",
    );
    assert!(!out.stderr.contains("--ca-cert"), "{out}");
}
