//! Who transfers when: largest first when slots are scarce, and two runs sharing
//! a jars dir take turns instead of sweeping each other's partial files.

use std::time::Duration;

use crate::support::{data, wait_for, Fault, FaultServer, Sandbox};

#[test]
fn largest_first_with_one_slot() {
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
    let gets: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path)
        .collect();
    assert_eq!(gets, ["/large.jar", "/medium.jar", "/small.jar"]);
    // Declared order still rules the classpath.
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
