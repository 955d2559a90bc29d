//! Configuration errors exit 2 with a message naming the problem, before any network traffic.

use std::time::Duration;

use crate::support::{data, FaultServer, Sandbox};

/// Runs fetch with a valid jar plus `args`; asserts exit 2, every `needle` in stderr,
/// and that the server saw no request at all.
#[track_caller]
fn rejected(args: &[&str], needles: &[&str]) {
    let server = FaultServer::start();
    server.put("/ok.jar", data(1, 1000));
    let ok = server.url("/ok.jar");
    let sb = Sandbox::new();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{ok}", &ok).replace("{base}", &server.url("")))
        .collect();
    let out = sb.fetch().args(["--jars", &ok]).args(&args).run();
    out.expect_code(2);
    for needle in needles {
        out.expect_stderr(&needle.replace("{base}", &server.url("")));
    }
    assert!(
        server.requests().is_empty(),
        "config error found after network traffic: {:#?}\n{out}",
        server.requests()
    );
    assert!(
        out.elapsed < Duration::from_secs(20),
        "took {:?}",
        out.elapsed
    );
    assert!(!sb.jar("ok.jar").exists());
}

#[test]
fn duplicate_destination_names_suggest_an_alias() {
    rejected(
        &["--jars", "{base}/x/dup.jar,{base}/y/dup.jar"],
        &["dup.jar", "#"],
    );
    rejected(&["--jars", "{base}/x/other.jar#ok.jar"], &["ok.jar", "#"]);
    rejected(
        &["--files", "{base}/x/f.txt", "--files", "{base}/y/f.txt"],
        &["f.txt", "#"],
    );
}

#[test]
fn traversal_alias_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#../x.jar"], &["../x.jar"]);
    rejected(&["--jars", "{base}/x.jar#.."], &[".."]);
    rejected(
        &["--files", "{base}/x.txt#../../etc/passwd"],
        &["../../etc/passwd"],
    );
}

#[test]
fn alias_with_a_slash_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#sub/x.jar"], &["sub/x.jar"]);
    rejected(&["--jars", "{base}/x.jar#/abs.jar"], &["/abs.jar"]);
}

#[test]
fn empty_alias_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#"], &["{base}/x.jar"]);
}

#[test]
fn control_characters_in_names_are_rejected() {
    rejected(&["--jars", "{base}/x.jar#a\u{1}b.jar"], &["{base}/x.jar"]);
    rejected(&["--jars", "{base}/a%0Ab.jar"], &["{base}/a%0Ab.jar"]);
    rejected(&["--jars", "{base}/a%1Bb.jar"], &["{base}/a%1Bb.jar"]);
}

#[test]
fn encoded_traversal_in_the_last_segment_is_rejected() {
    rejected(&["--jars", "{base}/lib/..%2F..%2Fevil.jar"], &["evil.jar"]);
}

#[test]
fn unsupported_scheme_lists_the_supported_ones() {
    rejected(
        &["--jars", "ftp://127.0.0.1/a.jar"],
        &["ftp://127.0.0.1/a.jar", "http", "https", "file", "local"],
    );
}

#[test]
fn uri_path_ending_in_a_slash_is_rejected() {
    rejected(&["--jars", "{base}/libs/"], &["{base}/libs/"]);
}

#[test]
fn unreadable_input_files_are_config_errors() {
    let missing = "/nonexistent/spark-localizer-test/input";
    rejected(&["--properties-file", missing], &[missing]);
    rejected(&["--checksums", missing], &[missing]);
    rejected(&["--http-header-file", missing], &[missing]);
    let dir = tempfile::tempdir().unwrap(); // a directory is not a readable file either
    let dir = dir.path().to_str().unwrap();
    rejected(&["--properties-file", dir], &[dir]);
}

#[test]
fn malformed_checksums_and_durations_are_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pins = dir.path().join("sha256sums");
    std::fs::write(&pins, "not-a-hash  ok.jar\n").unwrap();
    rejected(
        &["--checksums", pins.to_str().unwrap()],
        &[pins.to_str().unwrap()],
    );
    rejected(&["--retry-delay", "soon"], &["--retry-delay"]);
}

#[test]
fn zero_durations_are_rejected_naming_the_flag() {
    for flag in ["--progress-interval", "--stall-timeout", "--deadline"] {
        rejected(&[flag, "0"], &[flag]);
    }
}

#[test]
fn termination_log_on_a_jar_destination_is_a_collision() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1000));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--jars", &server.url("/a.jar")])
        .termination_log(sb.jar("a.jar"))
        .run();
    out.expect_code(2)
        .expect_stderr(sb.jar("a.jar").to_str().unwrap())
        .expect_stderr("termination");
    assert!(
        server.requests().is_empty(),
        "config error found after network traffic: {:#?}\n{out}",
        server.requests()
    );
}

#[test]
fn colon_in_a_jar_name_is_rejected_files_may_have_one() {
    rejected(
        &["--jars", "{base}/a:b.jar"],
        &["a:b.jar", "classpath separator", "#alias"],
    );
    rejected(
        &["--jars", "{base}/lib.jar#x:y.jar"],
        &["x:y.jar", "classpath separator", "#alias"],
    );

    let server = FaultServer::start();
    server.put("/a:b.txt", data(2, 500));
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--files", &server.url("/a:b.txt")])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(sb.files.join("a:b.txt")).unwrap(),
        data(2, 500)
    );
}

#[test]
fn every_configuration_problem_is_reported_at_once() {
    rejected(
        &[
            "--jars",
            "ftp://x/a.jar,http://127.0.0.1:9/dir/",
            "--checksums",
            "/nonexistent.sums",
            "--http-header-file",
            "/nonexistent.hdr",
        ],
        &[
            "ftp://x/a.jar",
            "http://127.0.0.1:9/dir/",
            "/nonexistent.sums",
            "/nonexistent.hdr",
        ],
    );
}

#[test]
fn header_file_may_not_set_transfer_headers() {
    for line in ["Host: evil", "Content-Length: 5"] {
        let dir = tempfile::tempdir().unwrap();
        let headers = dir.path().join("headers");
        std::fs::write(&headers, format!("# a token\nX-Api-Token: t\n{line}\n")).unwrap();
        let path = headers.to_str().unwrap();
        rejected(&["--http-header-file", path], &[path, "line 3"]);
    }
}
