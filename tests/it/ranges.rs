//! Large objects in parallel ranges over HTTP, against a server that misbehaves
//! on purpose: ranges cut or stalled, the object replaced between ranges, a
//! server that announces ranges and ignores them, a signal mid-way.

use std::time::Duration;

use crate::support::{data, wait_for, Fault, FaultServer, Sandbox};

const BIG: usize = 40 << 20;
const RANGES: usize = 5; // 40 MiB in 8 MiB ranges

fn ranged_gets(server: &FaultServer, path: &str) -> usize {
    server
        .gets(path)
        .iter()
        .filter(|r| r.header("range").is_some())
        .count()
}

#[test]
fn ranges_are_fetched_in_parallel_with_if_range_and_byte_exact() {
    let server = FaultServer::start();
    let body = data(31, BIG);
    server.put("/big.bin", body.clone());
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--files", &server.url("/big.bin")])
        .run();
    out.expect_code(0).expect_stderr(&format!(
        "{BIG} bytes in {RANGES} ranges over {RANGES} connections"
    ));
    assert!(std::fs::read(sb.files.join("big.bin")).unwrap() == body);
    // One plain GET (which serves the first range), then one request per other range,
    // each pinned to the version with If-Range.
    let gets = server.gets("/big.bin");
    assert_eq!(gets.len(), RANGES, "{gets:?}");
    let etag = server.etag("/big.bin");
    for r in gets.iter().filter(|r| r.header("range").is_some()) {
        assert_eq!(r.header("if-range"), Some(etag.as_str()));
    }
    assert_eq!(
        sb.artifact("big.bin")["sha256"],
        crate::support::sha256_hex(&body).as_str()
    );

    // --parallelism 1: one stream.
    server.clear_log();
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--parallelism", "1", "--files", &server.url("/big.bin")])
        .run()
        .expect_code(0);
    assert_eq!(server.gets("/big.bin").len(), 1);
    assert_eq!(ranged_gets(&server, "/big.bin"), 0);
}

#[test]
fn a_cut_or_stalled_range_is_retried_alone_and_resumed() {
    let server = FaultServer::start();
    let body = data(32, BIG);
    server.put("/big.bin", body.clone());
    server.on("/big.bin", 2, Fault::ResetAfter(3 << 20));
    server.on(
        "/big.bin",
        3,
        Fault::StallAfter(1 << 20, Duration::from_secs(60)),
    );
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--stall-timeout", "1s", "--files", &server.url("/big.bin")])
        .run();
    out.expect_code(0).expect_stderr("resuming at byte");
    assert!(std::fs::read(sb.files.join("big.bin")).unwrap() == body);
    // The whole object was not fetched again: five ranges plus the two resumed ones.
    assert_eq!(server.gets("/big.bin").len(), RANGES + 2, "{out}");
}

/// Issue 15, defect 2: one retry budget per artifact, honoured across its ranges.
/// Before, every artifact-level attempt re-ran every range with attempts of its
/// own: 3 × (1 + 4 × 3) = 39 GETs here, and "after 3 attempts" at the end.
#[test]
fn an_origin_failing_every_range_costs_the_artifacts_attempts_once() {
    let server = FaultServer::start();
    server.put("/big.bin", data(37, BIG));
    // The plain GET serves the first range; every other request gets a 500.
    for nth in 2..=200 {
        server.on("/big.bin", nth, Fault::Status(500));
    }
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--retries", "2", "--files", &server.url("/big.bin")])
        .run();
    out.expect_code(3).expect_stderr("(after 3 attempts)");
    // The first GET, the four other ranges once, and one probe per retry.
    let gets = server.gets("/big.bin").len();
    assert!(gets <= RANGES + 2, "{gets} GETs\n{out}");
    assert_eq!(out.stderr.matches("retrying in").count(), 2, "{out}");
    assert!(!sb.files.join("big.bin").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// Ranges that fail together (a restart of the origin) cost one attempt: one of
/// them retries, the others wait for it and then resume.
#[test]
fn ranges_failing_together_cost_one_attempt() {
    let server = FaultServer::start();
    let body = data(38, BIG);
    server.put("/big.bin", body.clone());
    for nth in 2..=RANGES {
        server.on("/big.bin", nth, Fault::HoldThenReset(1 << 20));
    }
    let sb = Sandbox::new();
    let running = sb
        .fetch()
        .args(["--retries", "1", "--files", &server.url("/big.bin")])
        .start();
    assert!(wait_for(Duration::from_secs(20), || server
        .gets("/big.bin")
        .len()
        == RANGES));
    std::thread::sleep(Duration::from_millis(200));
    server.release();
    let out = running.finish();
    out.expect_code(0);
    assert!(std::fs::read(sb.files.join("big.bin")).unwrap() == body);
    assert_eq!(sb.artifact("big.bin")["attempts"], 2, "{out}");
    assert_eq!(out.stderr.matches("retrying in").count(), 1, "{out}");
    // Each cut range resumed once.
    assert_eq!(server.gets("/big.bin").len(), 2 * RANGES - 1, "{out}");
}

#[test]
fn an_object_replaced_between_ranges_is_fetched_again_whole() {
    let server = FaultServer::start();
    server.put_tagged("/big.bin", data(33, BIG), "\"v1\"");
    let new = data(34, BIG + 1000);
    server.replace_after("/big.bin", 2, new.clone(), "\"v2\"");
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--files", &server.url("/big.bin")]).run();
    out.expect_code(0).expect_stderr("starting over");
    assert!(
        std::fs::read(sb.files.join("big.bin")).unwrap() == new,
        "{out}"
    );
}

#[test]
fn a_server_that_announces_ranges_but_ignores_them_gets_one_stream() {
    let server = FaultServer::start();
    let body = data(35, BIG);
    server.put("/big.bin", body.clone());
    server.always("/big.bin", Fault::IgnoreRange);
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--files", &server.url("/big.bin")]).run();
    out.expect_code(0).expect_stderr("server ignores ranges");
    assert!(std::fs::read(sb.files.join("big.bin")).unwrap() == body);
    assert_eq!(sb.artifact("big.bin")["attempts"], 2, "{out}");
}

#[test]
fn sigterm_during_ranges_removes_the_partial_file() {
    let server = FaultServer::start();
    server.put("/big.bin", data(36, BIG));
    for nth in 1..=RANGES {
        server.on("/big.bin", nth, Fault::Hold(1 << 20));
    }
    let sb = Sandbox::new();
    let running = sb
        .fetch()
        .args(["--files", &server.url("/big.bin")])
        .start();
    assert!(wait_for(Duration::from_secs(20), || server
        .gets("/big.bin")
        .len()
        == RANGES));
    std::thread::sleep(Duration::from_millis(300));
    running.signal("TERM");
    let out = running.finish();
    server.release();
    out.expect_code(7);
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert!(!sb.files.join("big.bin").exists());
    let names: Vec<_> = std::fs::read_dir(&sb.files)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".spark-localizer") || n.ends_with(".bin"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
