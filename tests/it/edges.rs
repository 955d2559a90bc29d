//! Edges found by black-box probing: closed output streams, competing
//! credentials, pins keyed by a URI without its userinfo, bad proxy variables,
//! output write failures, progress interval floor.

use std::process::Stdio;

use crate::support::{data, s, sha256_hex, FaultServer, Sandbox};

#[test]
fn a_full_or_closed_stderr_does_not_panic_and_outputs_are_still_written() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1000));
    let sb = Sandbox::new();
    let mut cmd = sb
        .fetch()
        .args([
            "--jars",
            &server.url("/a.jar"),
            "--jars",
            &server.url("/missing.jar"),
        ])
        .command();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let status = cmd
        .stderr(Stdio::from(full))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "a closed stderr changed the outcome"
    );
    assert_eq!(sb.report()["exit_code"], 3);
    assert!(sb.term_log_text().unwrap().contains("missing.jar"));

    // check | head: stdout closed early.
    let mut child = sb
        .check()
        .args(["--jars", &server.url("/a.jar")])
        .command()
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "check with a closed stdout");
}

#[test]
fn url_userinfo_beats_a_header_file_authorization() {
    let server = FaultServer::start();
    server.put("/a.jar", data(2, 1000));
    let sb = Sandbox::new();
    let headers = sb.write(
        "headers",
        "Authorization: Bearer FILETOKEN\nX-Other: kept\n",
    );
    let url = server
        .url("/a.jar")
        .replace("http://", "http://user:pw1234@");
    sb.fetch()
        .args(["--jars", &url, "--http-header-file", &s(&headers)])
        .run()
        .expect_code(0);
    let get = &server.gets("/a.jar")[0];
    let auths: Vec<_> = get
        .headers
        .iter()
        .filter(|(n, _)| n == "authorization")
        .collect();
    assert_eq!(auths.len(), 1, "exactly one Authorization: {auths:?}");
    assert!(auths[0].1.starts_with("Basic "), "{auths:?}");
    assert_eq!(get.header("x-other"), Some("kept"));
}

#[test]
fn a_pin_keyed_by_the_uri_without_userinfo_applies() {
    let server = FaultServer::start();
    server.put("/a.jar", data(3, 1000));
    let sb = Sandbox::new();
    let pins = sb.write(
        "pins",
        format!("{}  {}\n", "0".repeat(64), server.url("/a.jar")),
    );
    let url = server
        .url("/a.jar")
        .replace("http://", "http://user:pw1234@");
    sb.fetch()
        .args(["--jars", &url, "--checksums", &s(&pins)])
        .run()
        .expect_code(4);
    assert!(
        !sb.jar("a.jar").exists(),
        "an unverified file was published"
    );

    let good = sb.write(
        "good",
        format!("{}  {}\n", sha256_hex(&data(3, 1000)), server.url("/a.jar")),
    );
    let out = sb
        .fetch()
        .args(["--jars", &url, "--checksums", &s(&good)])
        .run();
    out.expect_code(0);
    assert!(!out.stderr.contains("no artifact matches"), "{out}");
}

#[test]
fn an_unparseable_proxy_variable_is_a_config_error_that_hides_its_value() {
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--jars", "http://127.0.0.1:9/a.jar"])
        .env("HTTPS_PROXY", "http://pu:proxysecret@[::1")
        .run();
    out.expect_code(2).expect_stderr("HTTPS_PROXY");
    assert!(!sb.all_output(&out).contains("proxysecret"), "{out}");
}

#[test]
fn an_unwritable_report_is_a_local_io_failure() {
    let server = FaultServer::start();
    server.put("/a.jar", data(4, 1000));
    let sb = Sandbox::new();
    let report_dir = sb.root.join("report-is-a-dir");
    std::fs::create_dir_all(&report_dir).unwrap();
    sb.fetch()
        .args(["--jars", &server.url("/a.jar"), "--report", &s(&report_dir)])
        .run()
        .expect_code(6)
        .expect_stderr("cannot write the report");
}

#[test]
fn progress_interval_has_a_floor() {
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--progress-interval", "1ms"])
        .run()
        .expect_code(2)
        .expect_stderr("--progress-interval");
}

#[test]
fn a_uri_pin_without_userinfo_beats_a_name_pin_and_spellings_of_one_uri_match() {
    let server = FaultServer::start();
    server.put("/a.jar", data(5, 1000));
    let good = sha256_hex(&data(5, 1000));
    let bad = "0".repeat(64);
    let url = server
        .url("/a.jar")
        .replace("http://", "http://user:pw1234@");
    // The URI key (here without the userinfo) must win over the name key.
    let sb = Sandbox::new();
    let pins = sb.write(
        "pins",
        format!("{good}  a.jar\n{bad}  {}\n", server.url("/a.jar")),
    );
    sb.fetch()
        .args(["--jars", &url, "--checksums", &s(&pins)])
        .run()
        .expect_code(4);
    // Scheme and host case do not make another key.
    let sb = Sandbox::new();
    let shouting = server.url("/a.jar").replace("http://", "HTTP://");
    let pins = sb.write("pins", format!("{bad}  {shouting}\n"));
    let out = sb
        .fetch()
        .args(["--jars", &server.url("/a.jar"), "--checksums", &s(&pins)])
        .run();
    out.expect_code(4);
    assert!(!out.stderr.contains("no fetched artifact matches"), "{out}");
}
