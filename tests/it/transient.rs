//! Transient faults are retried (resuming with `Range` + `If-Range`) until the file is complete.

use std::time::Duration;

use crate::support::{data, Fault, FaultServer, Sandbox};

/// Serves `body` at /a.jar with `faults` on given GETs; fetches it; returns what happened.
fn fetch_with_faults(
    body: &[u8],
    faults: Vec<(usize, Fault)>,
    extra: &[&str],
) -> (FaultServer, Sandbox) {
    let server = FaultServer::start();
    server.put("/a.jar", body.to_vec());
    for (nth, fault) in faults {
        server.on("/a.jar", nth, fault);
    }
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &server.url("/a.jar")])
        .args(extra)
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(sb.jar("a.jar")).unwrap(),
        body,
        "a.jar differs from what was served"
    );
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );
    (server, sb)
}

#[test]
fn status_503_then_200_succeeds_on_second_attempt() {
    let body = data(503, 200_000);
    let (server, sb) = fetch_with_faults(&body, vec![(1, Fault::Status(503))], &[]);
    assert_eq!(server.gets("/a.jar").len(), 2);
    let a = sb.artifact("a.jar");
    assert_eq!(a["attempts"], 2, "{a:#}");
    assert_eq!(a["status"], "fetched", "{a:#}");
    assert_eq!(a["bytes"], body.len(), "{a:#}");
    assert_eq!(a["sha256"], crate::support::sha256_hex(&body), "{a:#}");
}

#[test]
fn other_transient_statuses_are_retried() {
    for status in [500, 408, 429] {
        let body = data(status.into(), 50_000);
        let (server, sb) = fetch_with_faults(&body, vec![(1, Fault::Status(status))], &[]);
        assert_eq!(server.gets("/a.jar").len(), 2, "HTTP {status}");
        assert_eq!(sb.artifact("a.jar")["attempts"], 2, "HTTP {status}");
    }
}

#[test]
fn reset_mid_body_resumes_with_range_and_if_range() {
    let body = data(1, 1 << 20);
    let (server, sb) = fetch_with_faults(&body, vec![(1, Fault::ResetAfter(256 * 1024))], &[]);
    let gets = server.gets("/a.jar");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert_eq!(gets[0].header("range"), None);
    let range = gets[1]
        .header("range")
        .unwrap_or_else(|| panic!("second GET did not resume: {:#?}", gets[1]));
    let from: usize = range
        .strip_prefix("bytes=")
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected Range {range:?}"));
    assert!(from > 0 && from <= 256 * 1024, "resumed from {from}");
    assert_eq!(
        gets[1].header("if-range"),
        Some(server.etag("/a.jar").as_str()),
        "{:#?}",
        gets[1]
    );
    assert_eq!(sb.artifact("a.jar")["attempts"], 2);
}

#[test]
fn resume_answered_with_full_200_starts_over() {
    let body = data(2, 1 << 20);
    let faults = vec![(1, Fault::ResetAfter(300_000)), (2, Fault::NoRange)];
    let (server, _sb) = fetch_with_faults(&body, faults, &[]);
    assert_eq!(server.gets("/a.jar").len(), 2);
}

#[test]
fn content_length_larger_than_body_is_retried() {
    let body = data(3, 700_000);
    let (server, sb) = fetch_with_faults(&body, vec![(1, Fault::ShortBody(100_000))], &[]);
    assert_eq!(server.gets("/a.jar").len(), 2);
    assert_eq!(sb.artifact("a.jar")["attempts"], 2);
}

#[test]
fn always_truncated_body_exhausts_retries() {
    let server = FaultServer::start();
    server.put("/a.jar", data(4, 300_000));
    server.always("/a.jar", Fault::ShortBody(1000));
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    sb.fetch()
        .args(["--jars", &url, "--retries", "2"])
        .run()
        .expect_code(3)
        .expect_stderr(&url);
    assert_eq!(server.gets("/a.jar").len(), 3, "retries=2 means 3 attempts");
    assert!(!sb.jar("a.jar").exists());
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );
    assert_eq!(sb.artifact("a.jar")["attempts"], 3);
}

#[test]
fn stalled_body_is_retried_after_stall_timeout() {
    let body = data(5, 500_000);
    let stall = Fault::StallAfter(64 * 1024, Duration::from_secs(60));
    let (server, sb) = fetch_with_faults(&body, vec![(1, stall)], &["--stall-timeout", "1s"]);
    assert_eq!(server.gets("/a.jar").len(), 2);
    assert_eq!(sb.artifact("a.jar")["attempts"], 2);
}

#[test]
fn permanent_stall_hits_the_deadline() {
    let server = FaultServer::start();
    server.put("/slow.jar", data(6, 500_000));
    server.always(
        "/slow.jar",
        Fault::StallAfter(64 * 1024, Duration::from_secs(120)),
    );
    let sb = Sandbox::new();
    let url = server.url("/slow.jar");
    let out = sb.fetch().args(["--jars", &url, "--deadline", "3s"]).run();
    out.expect_code(5).expect_stderr(&url);
    assert!(
        out.elapsed < Duration::from_secs(20),
        "deadline 3s but took {:?}",
        out.elapsed
    );
    assert!(!sb.jar("slow.jar").exists());
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );
    let report = sb.report();
    assert_eq!(report["exit_code"], 5, "{report:#}");
    assert_eq!(sb.artifact("slow.jar")["status"], "failed");
    let term = sb.term_log_text().expect("termination log written");
    assert!(term.contains(&url), "termination log lacks {url}:\n{term}");
}

#[test]
fn deadline_message_carries_the_last_error() {
    let server = FaultServer::start();
    server.put("/busy.jar", data(7, 10_000));
    server.always("/busy.jar", Fault::Status(503));
    let sb = Sandbox::new();
    let url = server.url("/busy.jar");
    let out = sb
        .fetch()
        .args(["--jars", &url, "--retries", "100", "--deadline", "2s"])
        .retry_delay("200ms")
        .run();
    out.expect_code(5).expect_stderr(&url).expect_stderr("503");
    assert!(
        out.elapsed < Duration::from_secs(20),
        "deadline 2s but took {:?}",
        out.elapsed
    );
    let a = sb.artifact("busy.jar");
    assert_eq!(a["status"], "failed", "{a:#}");
    assert!(a["attempts"].as_u64().is_some_and(|n| n >= 2), "{a:#}");
    assert!(
        a["error"].as_str().is_some_and(|e| e.contains("503")),
        "{a:#}"
    );
}

fn retry_after(seconds: &str) -> Fault {
    Fault::StatusWith(429, vec![("Retry-After".into(), seconds.into())])
}

#[test]
fn retry_after_seconds_are_honoured() {
    // --retry-delay is 1ms: only Retry-After explains a wait.
    let body = data(429, 50_000);
    let (server, sb) = fetch_with_faults(&body, vec![(1, retry_after("1"))], &[]);
    let gets = server.gets("/a.jar");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    let waited = gets[1].at - gets[0].at;
    assert!(
        waited >= Duration::from_millis(900),
        "retried {waited:?} after a 429 with Retry-After: 1"
    );
    assert_eq!(sb.artifact("a.jar")["attempts"], 2);

    // An HTTP-date is honoured too: the wait until then.
    let when = std::time::SystemTime::now() + Duration::from_secs(3);
    let date = Fault::StatusWith(
        503,
        vec![("Retry-After".into(), httpdate::fmt_http_date(when))],
    );
    let (server, _sb) = fetch_with_faults(&body, vec![(1, date)], &[]);
    let gets = server.gets("/a.jar");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    let waited = gets[1].at - gets[0].at;
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(10),
        "retried {waited:?} after a 503 with a Retry-After date 3 s ahead"
    );
    // A date already past: the retry comes at once (after the backoff).
    let past = Fault::StatusWith(
        503,
        vec![("Retry-After".into(), "Fri, 31 Dec 1999 23:59:59 GMT".into())],
    );
    let (server, _sb) = fetch_with_faults(&body, vec![(1, past)], &[]);
    let gets = server.gets("/a.jar");
    assert!(
        gets[1].at - gets[0].at < Duration::from_secs(1),
        "{gets:#?}"
    );
}

#[test]
fn retry_after_does_not_outlast_the_deadline() {
    let server = FaultServer::start();
    server.put("/a.jar", data(30, 1000));
    server.always("/a.jar", retry_after("30"));
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    let out = sb.fetch().args(["--jars", &url, "--deadline", "2s"]).run();
    out.expect_code(5).expect_stderr(&url).expect_stderr("429");
    assert!(
        out.elapsed < Duration::from_secs(15),
        "deadline 2s but took {:?}",
        out.elapsed
    );
    assert_eq!(server.gets("/a.jar").len(), 1);
}
