//! Final HTTP errors fail fast with the fetch exit code; redirects are bounded and
//! never carry credentials to another origin.

use std::time::Duration;

use base64::Engine;

use crate::support::{assert_no_secrets, data, Fault, FaultServer, Sandbox};

#[test]
fn not_found_fails_fast_without_retry() {
    let server = FaultServer::start();
    server.put("/ok.jar", data(1, 1000));
    let sb = Sandbox::new();
    let url = server.url("/missing.jar");
    let out = sb
        .fetch()
        .args(["--jars", &format!("{},{url}", server.url("/ok.jar"))])
        .run();
    out.expect_code(3).expect_stderr(&url).expect_stderr("404");
    assert_eq!(
        server.requests_for("/missing.jar").len(),
        1,
        "a 404 is final: no retry"
    );
    assert!(
        out.elapsed < Duration::from_secs(20),
        "took {:?}",
        out.elapsed
    );
    assert!(!sb.jar("missing.jar").exists());
    let report = sb.report();
    assert_eq!(report["ok"], false, "{report:#}");
    assert_eq!(report["exit_code"], 3, "{report:#}");
    let failed = sb.artifact("missing.jar");
    assert_eq!(failed["status"], "failed", "{failed:#}");
    assert!(
        failed["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{failed:#}"
    );
    let term = sb
        .term_log_text()
        .expect("termination log written on failure");
    assert!(
        term.len() <= 4096 && term.contains(&url),
        "termination log:\n{term}"
    );
    assert!(
        !term.contains("/ok.jar"),
        "only failed URIs belong in the termination log:\n{term}"
    );
}

#[test]
fn unauthorized_and_forbidden_fail_fast_with_a_credentials_hint() {
    for status in [401, 403] {
        let server = FaultServer::start();
        server.put("/private.jar", data(2, 1000));
        server.always("/private.jar", Fault::Status(status));
        let sb = Sandbox::new();
        let url = server.url("/private.jar");
        let out = sb.fetch().args(["--jars", &url]).run();
        out.expect_code(3)
            .expect_stderr(&url)
            .expect_stderr(&status.to_string());
        let stderr = out.stderr.to_lowercase();
        assert!(
            stderr.contains("credential") || stderr.contains("--http-header-file"),
            "HTTP {status}: no hint about credentials / --http-header-file\n{out}"
        );
        assert_eq!(
            server.requests_for("/private.jar").len(),
            1,
            "HTTP {status} is final: no retry"
        );
    }
}

#[test]
fn redirect_loop_fails_with_a_redirect_message() {
    let server = FaultServer::start();
    server.always("/loop.jar", Fault::Redirect(302, server.url("/loop.jar")));
    server.always("/ping.jar", Fault::Redirect(301, server.url("/pong.jar")));
    server.always("/pong.jar", Fault::Redirect(307, server.url("/ping.jar")));
    for path in ["/loop.jar", "/ping.jar"] {
        let sb = Sandbox::new();
        let url = server.url(path);
        let out = sb.fetch().args(["--jars", &url]).run();
        out.expect_code(3)
            .expect_stderr(&url)
            .expect_stderr("redirect");
        assert!(!sb.jar(&path[1..]).exists());
    }
    assert!(
        server.requests().len() < 150,
        "redirects must be bounded: {} requests",
        server.requests().len()
    );
}

fn basic(userinfo: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

#[test]
fn redirect_to_another_origin_drops_credentials() {
    let origin = FaultServer::start();
    let other = FaultServer::start();
    let body = data(3, 50_000);
    other.put("/real.jar", body.clone());
    origin.put("/real2.jar", body.clone());
    // Another port is another origin; so is another host name for the same port.
    origin.always("/a.jar", Fault::Redirect(302, other.url("/real.jar")));
    origin.always(
        "/b.jar",
        Fault::Redirect(301, format!("http://localhost:{}/real2.jar", origin.port())),
    );
    let sb = Sandbox::new();
    let headers = sb.write(
        "headers",
        "# an Artifactory token\nX-Api-Token: SECRETHDR\n",
    );
    let authed = |path: &str| format!("http://user:SECRETPW@127.0.0.1:{}{path}", origin.port());
    let out = sb
        .fetch()
        .args([
            "--jars",
            &format!("{},{}", authed("/a.jar"), authed("/b.jar")),
        ])
        .arg("--http-header-file")
        .arg(&headers)
        .run();
    out.expect_code(0);
    assert_no_secrets("outputs", &sb.all_output(&out));
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), body);
    assert_eq!(std::fs::read(sb.jar("b.jar")).unwrap(), body);
    for first in [origin.gets("/a.jar"), origin.gets("/b.jar")] {
        let r = first.first().expect("request at the origin");
        assert_eq!(
            r.header("authorization"),
            Some(basic("user:SECRETPW").as_str()),
            "{r:#?}"
        );
        assert_eq!(r.header("x-api-token"), Some("SECRETHDR"), "{r:#?}");
    }
    let elsewhere = [other.gets("/real.jar"), origin.gets("/real2.jar")].concat();
    assert_eq!(elsewhere.len(), 2, "{elsewhere:#?}");
    for r in &elsewhere {
        assert_eq!(
            r.header("authorization"),
            None,
            "credentials forwarded to another origin: {r:#?}"
        );
        assert_eq!(
            r.header("x-api-token"),
            None,
            "header-file header forwarded to another origin: {r:#?}"
        );
    }
}

#[test]
fn redirect_within_the_origin_keeps_credentials() {
    let server = FaultServer::start();
    let body = data(4, 20_000);
    server.put("/new.jar", body.clone());
    server.always("/old.jar", Fault::Redirect(301, server.url("/new.jar")));
    let sb = Sandbox::new();
    let headers = sb.write("headers", "X-Api-Token: SECRETHDR\n");
    let url = format!("http://user:SECRETPW@127.0.0.1:{}/old.jar", server.port());
    let out = sb
        .fetch()
        .args(["--jars", &url])
        .arg("--http-header-file")
        .arg(&headers)
        .run();
    out.expect_code(0);
    assert_eq!(
        std::fs::read(sb.jar("old.jar")).unwrap(),
        body,
        "destination is named after the declared URI"
    );
    let r = &server.gets("/new.jar")[0];
    assert_eq!(
        r.header("authorization"),
        Some(basic("user:SECRETPW").as_str()),
        "{r:#?}"
    );
    assert_eq!(r.header("x-api-token"), Some("SECRETHDR"), "{r:#?}");
}

#[test]
fn redirect_to_a_file_uri_is_refused() {
    let server = FaultServer::start();
    server.always("/a.jar", Fault::Redirect(302, "file:///etc/passwd".into()));
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    let out = sb.fetch().args(["--jars", &url, "--retries", "3"]).run();
    out.expect_code(3)
        .expect_stderr(&url)
        .expect_stderr("not http(s)")
        .expect_stderr("file:///etc/passwd");
    assert_eq!(
        server.gets("/a.jar").len(),
        1,
        "a redirect off http(s) is final: no retry"
    );
    assert!(!sb.jar("a.jar").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert_eq!(sb.artifact("a.jar")["status"], "failed");
}
