//! `spark-localizer check`: probes every URI, reports size, writes nothing.

use crate::support::{assert_no_secrets, data, s, FaultServer, Sandbox};

#[test]
fn check_succeeds_and_prints_sizes_when_all_probes_pass() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 12_345));
    server.put("/f.txt", data(2, 10));
    let sb = Sandbox::new();
    std::fs::remove_dir(&sb.jars).unwrap();
    let out = sb
        .check()
        .args([
            "--jars",
            &server.url("/a.jar"),
            "--files",
            &server.url("/f.txt"),
        ])
        .run();
    out.expect_code(0);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&server.url("/a.jar")),
        "plan does not list the URI\n{out}"
    );
    assert!(
        ["12345", "12 345", "12,345", "12.1 KiB", "12.06 KiB"]
            .iter()
            .any(|s| all.contains(s)),
        "size of a.jar (12345 bytes) not shown\n{out}"
    );
    assert!(
        !sb.jars.exists(),
        "check must write nothing (jars dir created)"
    );
    assert!(
        std::fs::read_dir(&sb.files).unwrap().next().is_none(),
        "check must write nothing"
    );
}

#[test]
fn check_fails_when_one_uri_is_missing() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1_000));
    let sb = Sandbox::new();
    let missing = server.url("/missing.jar");
    let out = sb
        .check()
        .args(["--jars", &format!("{},{missing}", server.url("/a.jar"))])
        .run();
    out.expect_code(3);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&missing) && all.contains("404"),
        "failing probe not explained\n{out}"
    );
    assert!(
        std::fs::read_dir(&sb.jars).unwrap().next().is_none(),
        "check wrote into the jars dir: {:?}",
        sb.jar_names()
    );
}

#[test]
fn check_never_prints_secrets() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1_000));
    let sb = Sandbox::new();
    let secrets_dir = tempfile::tempdir().unwrap();
    let headers = secrets_dir.path().join("headers");
    std::fs::write(&headers, "X-Api-Token: SECRETHDR\n").unwrap();
    let url = format!(
        "http://user:SECRETPW@127.0.0.1:{}/a.jar?X-Amz-Signature=SECRETSIG&token=SECRETTOK",
        server.port()
    );
    let missing = url.replace("/a.jar", "/missing.jar");
    for (jars, code) in [(url.clone(), 0), (format!("{url},{missing}"), 3)] {
        for mode in [&[][..], &["-v", "-v"][..], &["--log-format", "json"][..]] {
            let out = sb
                .check()
                .global(mode)
                .args(["--jars", &jars])
                .arg("--http-header-file")
                .arg(&headers)
                .run();
            out.expect_code(code);
            assert_no_secrets(&format!("check {mode:?}"), &sb.all_output(&out));
        }
    }
    let probe = &server.requests_for("/a.jar")[0];
    assert!(
        probe.header("authorization").is_some(),
        "probe should use the credentials: {probe:#?}"
    );
}

#[test]
fn config_error_check_writes_no_termination_log_fetch_does() {
    let bad = "ftp://127.0.0.1/a.jar";
    let sb = Sandbox::new();
    sb.check()
        .args(["--jars", bad])
        .run()
        .expect_code(2)
        .expect_stderr(bad);
    assert!(
        !sb.term_log.exists(),
        "check wrote a termination log: {:?}",
        sb.term_log_text()
    );

    sb.fetch()
        .args(["--jars", bad])
        .run()
        .expect_code(2)
        .expect_stderr(bad);
    let term = sb
        .term_log_text()
        .expect("fetch writes the termination log on a config error");
    assert!(term.contains(bad), "termination log lacks {bad}:\n{term}");
}

/// The `check` settings line for `name` (e.g. `retries`), trimmed.
#[track_caller]
fn setting<'a>(out: &'a crate::support::Outcome, name: &str) -> &'a str {
    out.stdout
        .lines()
        .map(str::trim)
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(char::is_whitespace))
        })
        .unwrap_or_else(|| panic!("check shows no {name:?} setting\n{out}"))
}

#[track_caller]
fn assert_setting(out: &crate::support::Outcome, name: &str, value: &str, origin: &str) {
    let line = setting(out, name);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(
        words.contains(&value) && line.ends_with(&format!("({origin})")),
        "expected {name} = {value} ({origin}), got {line:?}\n{out}"
    );
}

#[test]
fn check_lists_every_setting_with_its_origin() {
    let sb = Sandbox::new();
    let out = sb
        .check()
        .args(["--parallelism", "3"])
        .env("SPARK_LOCALIZER_RETRIES", "2")
        .run();
    out.expect_code(0);
    assert_setting(&out, "retries", "2", "SPARK_LOCALIZER_RETRIES");
    assert_setting(&out, "parallelism", "3", "--parallelism");
    // Given, it is fixed; by default it may grow.
    assert!(!setting(&out, "parallelism").contains("up to"), "{out}");
    let out = sb.check().run();
    assert!(
        setting(&out, "parallelism").contains("one per artifact to start, 8 to 32"),
        "{out}"
    );
    assert_setting(&out, "retry delay", "1ms", "--retry-delay");
    assert_setting(&out, "stall timeout", "30.0s", "default");
    for name in [
        "connect timeout",
        "fsync",
        "classpath file",
        "env file",
        "report",
        "deadline",
        "jars dir",
        "files dir",
        "termination log",
    ] {
        let line = setting(&out, name);
        assert!(line.ends_with(')'), "{name} has no origin: {line:?}\n{out}");
    }
    assert_setting(&out, "jars dir", &s(&sb.jars), "--jars-dir");
    assert_setting(
        &out,
        "termination log",
        &s(&sb.term_log),
        "--termination-log",
    );
}

#[test]
fn check_treats_an_empty_env_twin_as_unset() {
    let sb = Sandbox::new();
    let out = sb
        .check()
        .env("SPARK_LOCALIZER_JARS_DIR", "")
        .env("SPARK_LOCALIZER_RETRIES", "")
        .env("SPARK_LOCALIZER_FSYNC", "")
        .run();
    out.expect_code(0);
    assert_setting(&out, "jars dir", &s(&sb.jars), "--jars-dir");
    assert_setting(&out, "retries", "5", "default");
    assert_setting(&out, "fsync", "false", "default");

    let out = sb
        .check()
        .no_dirs()
        .env("SPARK_LOCALIZER_JARS_DIR", "")
        .run();
    out.expect_code(0);
    assert_setting(&out, "jars dir", "/var/spark-data/spark-jars", "default");
}
