//! URL passwords, query-string signatures and header-file values never appear in
//! stdout, stderr, the report, the termination log or any other output.

use base64::Engine;

use crate::support::{assert_no_secrets, data, refused_url, FaultServer, Sandbox};

const QUERY: &str = "?X-Amz-Signature=SECRETSIG&token=SECRETTOK";

/// `http://user:SECRETPW@127.0.0.1:PORT/PATH?X-Amz-Signature=SECRETSIG&token=SECRETTOK`.
fn secret_url(plain: &str) -> String {
    format!(
        "{}{QUERY}",
        plain.replacen("http://", "http://user:SECRETPW@", 1)
    )
}

#[test]
fn secrets_never_appear_in_any_output() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 100_000));
    let refused = refused_url("/gone.jar");
    let cases = [
        (server.url("/a.jar"), 0),
        (server.url("/missing.jar"), 3),
        (refused, 3),
    ];
    let modes: [&[&str]; 3] = [&[], &["-v", "-v"], &["--log-format", "json"]];
    for (plain, code) in &cases {
        for mode in modes {
            let sb = Sandbox::new();
            let secrets_dir = tempfile::tempdir().unwrap();
            let headers = secrets_dir.path().join("headers");
            std::fs::write(&headers, "X-Api-Token: SECRETHDR\n").unwrap();
            let out = sb
                .fetch()
                .global(mode)
                .args(["--jars", &secret_url(plain)])
                .arg("--http-header-file")
                .arg(&headers)
                .run();
            let context = format!("{plain} with {mode:?}");
            assert_eq!(out.code, Some(*code), "{context}\n{out}");
            assert_no_secrets(&context, &sb.all_output(&out));
            let report = serde_json::to_string(&sb.report()).unwrap();
            assert!(
                report.contains(&plain["http://".len()..]),
                "report should name the redacted URI: {report}"
            );
            if *code != 0 {
                out.expect_stderr(&plain["http://".len()..]);
                let term = sb.term_log_text().expect("termination log");
                assert!(
                    term.contains(&plain["http://".len()..]),
                    "{context}: {term}"
                );
            }
        }
    }
    // The secrets were used on the wire, only hidden from the outputs.
    let sent = &server.gets("/a.jar")[0];
    assert!(
        sent.target.ends_with(QUERY),
        "query string altered: {sent:#?}"
    );
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("user:SECRETPW")
    );
    assert_eq!(sent.header("authorization"), Some(basic.as_str()));
    assert_eq!(sent.header("x-api-token"), Some("SECRETHDR"));
}

#[test]
fn secrets_are_redacted_in_config_errors() {
    let sb = Sandbox::new();
    let dup = format!(
        "{},{}",
        secret_url("http://127.0.0.1:9/x/a.jar"),
        secret_url("http://127.0.0.1:9/y/a.jar")
    );
    let out = sb.fetch().args(["--jars", &dup]).run();
    out.expect_code(2).expect_stderr("a.jar");
    assert_no_secrets("duplicate-name error", &sb.all_output(&out));
    let ftp = "ftp://user:SECRETPW@127.0.0.1/a.jar?token=SECRETTOK";
    let out = sb.fetch().args(["--jars", ftp]).run();
    out.expect_code(2).expect_stderr("ftp");
    assert_no_secrets("unsupported-scheme error", &sb.all_output(&out));
}

/// A URI with a password and a signature, as a user would put in a pod spec.
const ENV_SECRET_URL: &str = "http://user:s3cretPW@h/x.jar?sig=QTOK1";

#[track_caller]
fn assert_hides(what: &str, out: &crate::support::Outcome, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !out.stdout.contains(secret) && !out.stderr.contains(secret),
            "{what}: {secret:?} shown\n{out}"
        );
    }
}

#[test]
fn help_never_shows_env_values() {
    let sb = Sandbox::new();
    for sub in ["fetch", "check"] {
        let run = match sub {
            "fetch" => sb.fetch(),
            _ => sb.check(),
        };
        let out = run
            .arg("--help")
            .env("SPARK_LOCALIZER_JARS", ENV_SECRET_URL)
            .env("SPARK_LOCALIZER_FILES", ENV_SECRET_URL)
            .run();
        out.expect_code(0);
        assert!(
            out.stdout.contains("SPARK_LOCALIZER_JARS"),
            "{sub} --help should still name the env twin\n{out}"
        );
        assert_hides(&format!("{sub} --help"), &out, &["s3cretPW", "QTOK1"]);
    }
}

#[test]
fn usage_errors_never_echo_secrets() {
    let sb = Sandbox::new();
    let cases = [
        // A URI where a flag was expected (forgot --jars).
        ("positional URI", sb.fetch().arg(ENV_SECRET_URL)),
        // A URI as the value of a flag that takes something else.
        (
            "--log-format before fetch",
            sb.fetch().global(["--log-format", ENV_SECRET_URL]),
        ),
        (
            "--log-format after fetch",
            sb.fetch().args(["--log-format", ENV_SECRET_URL]),
        ),
        (
            "--parallelism",
            sb.fetch().args(["--parallelism", ENV_SECRET_URL]),
        ),
    ];
    for (what, run) in cases {
        let out = run.run();
        out.expect_code(2);
        assert!(
            out.stderr.contains("h/x.jar"),
            "{what}: the error should still show the (redacted) URI\n{out}"
        );
        assert_hides(what, &out, &["s3cretPW", "QTOK1"]);
    }
}

#[test]
fn usage_errors_never_echo_a_password_with_a_quote() {
    let sb = Sandbox::new();
    let url = "http://user:s3cret'PW@h/x.jar?sig=QTOK1";
    for (what, run) in [
        ("positional URI", sb.fetch().arg(url)),
        ("--log-format", sb.fetch().global(["--log-format", url])),
    ] {
        let out = run.run();
        out.expect_code(2);
        assert_hides(what, &out, &["s3cret", "QTOK1"]);
    }
}
