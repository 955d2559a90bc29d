//! Who transfers when: one GET per artifact in declared order, and two runs sharing
//! a jars dir take turns instead of sweeping each other's partial files.

use std::time::Duration;

use crate::support::{data, wait_for, Fault, FaultServer, Sandbox};

/// One request per artifact: no size probe before the transfers (a HEAD per
/// artifact cost as much again on many small jars), transfers in declared order.
#[test]
fn one_get_per_artifact_in_declared_order() {
    let server = FaultServer::start();
    let sizes = [
        ("/small.jar", 1024),
        ("/medium.jar", 100 * 1024),
        ("/large.jar", 3 << 20),
    ];
    for (i, (path, len)) in sizes.iter().enumerate() {
        server.put(path, data(i as u64, *len));
    }
    let sb = Sandbox::new();
    let jars: Vec<String> = sizes.iter().map(|(p, _)| server.url(p)).collect();
    sb.fetch()
        .args(["--jars", &jars.join(","), "--parallelism", "1"])
        .run()
        .expect_code(0);
    let requests: Vec<(String, String)> = server
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let expected: Vec<(String, String)> = sizes
        .iter()
        .map(|(p, _)| ("GET".to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(requests, expected);
    // Declared order rules the classpath.
    let expected: Vec<String> = sizes
        .iter()
        .map(|(p, _)| crate::support::s(&sb.jar(&p[1..])))
        .collect();
    assert_eq!(sb.classpath(), format!("{}\n", expected.join(":")));
}

#[test]
fn concurrent_runs_on_one_jars_dir_take_turns() {
    let server = FaultServer::start();
    let body = data(7, 2 << 20);
    server.put("/a.jar", body.clone());
    // The first GET sends 256 KiB, then holds the rest until released.
    server.on("/a.jar", 1, Fault::Hold(256 * 1024));
    let sb = Sandbox::new();
    let run = sb.fetch().args(["--jars", &server.url("/a.jar")]);

    let first = run.start();
    let transferring = wait_for(Duration::from_secs(20), || {
        server.gets("/a.jar").len() == 1 && !sb.leftovers().is_empty()
    });
    assert!(
        transferring,
        "first run never started its transfer:\n{}",
        first.stderr_so_far()
    );
    let second = run.start();
    let waits = wait_for(Duration::from_secs(20), || {
        second.stderr_so_far().to_lowercase().contains("waiting")
    });
    assert!(
        !sb.leftovers().is_empty(),
        "the first run's partial file is gone while it is still transferring"
    );
    server.release();
    let (first, second) = (first.finish(), second.finish());
    first.expect_code(0);
    second.expect_code(0);
    assert!(
        waits,
        "the second run did not log that it waits for the first\n{second}"
    );
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), body);
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );
    assert_eq!(
        server.gets("/a.jar").len(),
        1,
        "one transfer (the first run's) is all it takes"
    );
    // The report is the second run's: it found the first run's file and kept it.
    assert_eq!(sb.artifact("a.jar")["status"], "kept");
}

/// Starts a run of /a.jar whose transfer is held (after 256 KiB) until `server.release()`,
/// and returns once it is mid-transfer, holding the jars dir's lock.
fn first_run_holding_the_lock(server: &FaultServer, sb: &Sandbox) -> crate::support::Running {
    server.put("/a.jar", data(8, 2 << 20));
    server.on("/a.jar", 1, Fault::Hold(256 * 1024));
    let first = sb.fetch().args(["--jars", &server.url("/a.jar")]).start();
    let transferring = wait_for(Duration::from_secs(20), || {
        server.gets("/a.jar").len() == 1 && !sb.leftovers().is_empty()
    });
    assert!(
        transferring,
        "first run never started its transfer:\n{}",
        first.stderr_so_far()
    );
    first
}

#[track_caller]
fn wait_until_waiting(second: &crate::support::Running) {
    let waits = wait_for(Duration::from_secs(20), || {
        second.stderr_so_far().to_lowercase().contains("waiting")
    });
    assert!(
        waits,
        "the second run never said it waits for the lock:\n{}",
        second.stderr_so_far()
    );
}

#[test]
fn sigterm_while_waiting_for_the_lock_exits_7_promptly() {
    let server = FaultServer::start();
    let sb = Sandbox::new();
    let first = first_run_holding_the_lock(&server, &sb);
    let second = sb.fetch().args(["--jars", &server.url("/a.jar")]).start();
    wait_until_waiting(&second);
    let sent = std::time::Instant::now();
    second.signal("TERM");
    let second = second.finish();
    let took = sent.elapsed();
    second.expect_code(7);
    assert!(
        took < Duration::from_secs(5),
        "SIGTERM during the lock wait took {took:?}\n{second}"
    );
    assert_eq!(server.gets("/a.jar").len(), 1, "the second run fetched");
    assert!(
        !sb.leftovers().is_empty(),
        "the interrupted waiter removed the first run's partial file"
    );

    server.release();
    let first = first.finish();
    first.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), data(8, 2 << 20));
    assert_eq!(
        sb.classpath(),
        format!("{}\n", crate::support::s(&sb.jar("a.jar")))
    );
    assert_eq!(sb.report()["exit_code"], 0, "{first}");
}

#[test]
fn waiting_for_the_lock_past_the_deadline_exits_5() {
    let server = FaultServer::start();
    let sb = Sandbox::new();
    let first = first_run_holding_the_lock(&server, &sb);
    let second = sb
        .fetch()
        .args(["--jars", &server.url("/a.jar"), "--deadline", "2s"])
        .run();
    server.release();
    let first = first.finish();
    second
        .expect_code(5)
        .expect_stderr("another spark-localizer");
    second.expect_stderr(&crate::support::s(&sb.jars));
    assert!(
        second.elapsed < Duration::from_secs(15),
        "deadline 2s but took {:?}",
        second.elapsed
    );
    first.expect_code(0);
    assert_eq!(server.gets("/a.jar").len(), 1, "the second run fetched");
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), data(8, 2 << 20));
}

#[test]
fn jars_and_files_dir_that_are_one_directory_do_not_deadlock() {
    let server = FaultServer::start();
    server.put("/a.jar", data(9, 1000));
    server.put("/f.txt", data(10, 100));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .no_dirs()
        .arg("--jars-dir")
        .arg(&sb.jars)
        .arg("--files-dir")
        .arg(sb.files.join("../jars"))
        .args(["--jars", &server.url("/a.jar")])
        .args(["--files", &server.url("/f.txt"), "--deadline", "5s"])
        .run();
    out.expect_code(0);
    assert!(sb.jar("a.jar").exists() && sb.jar("f.txt").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_busy_directory_this_plan_does_not_use_is_left_alone_not_waited_for() {
    let server = FaultServer::start();
    let sb = Sandbox::new();
    // The first run holds the lock of sb.jars; the second only fetches files, but
    // its configured --jars-dir (unused by its plan) is that busy directory.
    let first = first_run_holding_the_lock(&server, &sb);
    server.put("/f.txt", data(9, 1000));
    let other = Sandbox::new();
    let report = other.root.join("report.json");
    let second = other
        .fetch()
        .no_dirs()
        .args(["--jars-dir", &crate::support::s(&sb.jars)])
        .args(["--files-dir", &crate::support::s(&other.files)])
        .args(["--report", &crate::support::s(&report)])
        .args(["--files", &server.url("/f.txt"), "--deadline", "20s"])
        .run();
    server.release();
    let first = first.finish();
    second.expect_code(0);
    assert!(
        second.elapsed < Duration::from_secs(10),
        "waited for a directory it does not use: {:?}",
        second.elapsed
    );
    assert_eq!(
        std::fs::read(other.files.join("f.txt")).unwrap(),
        data(9, 1000)
    );
    first.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), data(8, 2 << 20));
}

/// An origin that caps each connection: by default a plan of 48 starts 32
/// transfers at once (one per artifact, up to 32: each costs a round trip at
/// least); a given `--parallelism` is never exceeded. (Growing by the
/// throughput is the ranged transfers' now: `ranges::`.)
#[test]
fn the_default_parallelism_starts_wide_on_a_long_plan_and_a_given_one_is_fixed() {
    let server = FaultServer::start();
    let names: Vec<String> = (0..48).map(|i| format!("/j{i:02}.jar")).collect();
    for (i, name) in names.iter().enumerate() {
        server.put(name, data(i as u64, 128 * 1024));
        // 1 MiB/s per connection: 8 at once take 0.75 s for these 48.
        server.always(name, Fault::Paced(1 << 20));
    }
    let jars: Vec<String> = names.iter().map(|n| server.url(n)).collect();
    let peers = |server: &FaultServer| {
        server
            .requests()
            .iter()
            .map(|r| r.peer)
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    let fixed = Sandbox::new();
    fixed
        .fetch()
        .args(["--jars", &jars.join(","), "--parallelism", "8"])
        .run()
        .expect_code(0);
    let with_fixed = peers(&server);
    // At most 8 transfers at once. (Not at most 8 connections: one that finished
    // may be replaced before it is back in the pool, which a loaded machine saw.)
    let at_once = server.peak_in_flight();
    assert!(
        (2..=8).contains(&at_once),
        "--parallelism 8 ran {at_once} transfers at once"
    );

    let grown = Sandbox::new();
    let out = grown
        .fetch()
        .global(["-v"])
        .args(["--jars", &jars.join(",")])
        .run();
    out.expect_code(0);
    let with_default = peers(&server) - with_fixed;
    assert!(
        with_default > 16,
        "the default parallelism used {with_default} connections on a capped origin:\n{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("32 transfers at once to start with"),
        "{}",
        out.stderr
    );
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            std::fs::read(grown.jar(&name[1..])).unwrap(),
            data(i as u64, 128 * 1024)
        );
    }
}

/// A server that closes every connection (`python3 -m http.server`, a small
/// proxy): at most 6 requests wait for it at once, however wide the plan
/// starts (a burst of new connections past its listen backlog is dropped and
/// tried again a second later); the same plan from a server that keeps
/// connections alive runs wide.
#[test]
fn a_server_that_closes_connections_gets_a_few_requests_at_once() {
    let names: Vec<String> = (0..24).map(|i| format!("/c{i:02}.jar")).collect();
    let run = |fault: Fault, size: usize| {
        let server = FaultServer::start();
        for (i, name) in names.iter().enumerate() {
            server.put(name, data(i as u64, size));
            server.always(name, fault.clone());
        }
        let jars: Vec<String> = names.iter().map(|n| server.url(n)).collect();
        let sb = Sandbox::new();
        sb.fetch()
            .args(["--jars", &jars.join(",")])
            .run()
            .expect_code(0);
        for (i, name) in names.iter().enumerate() {
            assert_eq!(
                std::fs::read(sb.jar(&name[1..])).unwrap(),
                data(i as u64, size)
            );
        }
        server.peak_in_flight()
    };
    let closing = run(Fault::Closing(Duration::from_millis(200)), 4096);
    assert!(
        (1..=6).contains(&closing),
        "{closing} requests at once to a server that closes connections"
    );
    // 16 KiB at 8 KiB/s: a second each, connections kept.
    let kept = run(Fault::Paced(8 << 10), 16 << 10);
    assert!(
        kept > 6,
        "only {kept} requests at once to a server that keeps connections alive"
    );
}
