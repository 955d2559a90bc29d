//! A SIGKILL mid-download (the kubelet restarting the init container) never leaves a
//! file under a final name; the rerun completes, and a further rerun fetches nothing.
//! A SIGTERM (the pod being deleted) stops promptly with exit code 7, cleans up and
//! still writes the report and the termination message.

use std::time::Duration;

use crate::support::{data, wait_for, Fault, FaultServer, Sandbox};

#[test]
fn sigkill_mid_download_then_rerun_completes_and_skips_complete_files() {
    let server = FaultServer::start();
    let (big, small) = (data(1, 4 << 20), data(2, 10_000));
    server.put("/big.jar", big.clone());
    server.put("/small.jar", small.clone());
    // 3 MiB before the stall, so some bytes get past the binary's write buffer.
    server.on(
        "/big.jar",
        1,
        Fault::StallAfter(3 << 20, Duration::from_secs(120)),
    );
    let sb = Sandbox::new();
    let jars = format!("{},{}", server.url("/big.jar"), server.url("/small.jar"));
    let run = sb.fetch().args(["--jars", &jars]);

    let mut child = run.spawn();
    let partial_has_bytes = || {
        sb.leftovers()
            .iter()
            .any(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
    };
    let small_done =
        || sb.jar("small.jar").exists() && sb.jars.join(".spark-localizer/small.jar.json").exists();
    let ready = wait_for(Duration::from_secs(20), || {
        partial_has_bytes() && small_done()
    });
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(
        ready,
        "never saw small.jar complete and a non-empty big.jar partial: {:?}",
        sb.jar_names()
    );
    assert!(
        status.code().is_none(),
        "child should have died from SIGKILL: {status:?}"
    );
    assert!(
        !sb.jar("big.jar").exists(),
        "an incomplete file appeared under its final name"
    );

    server.clear_log();
    let out = run.run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("big.jar")).unwrap(), big);
    assert_eq!(std::fs::read(sb.jar("small.jar")).unwrap(), small);
    assert!(
        sb.leftovers().is_empty(),
        "stale partials survived the rerun: {:?}",
        sb.leftovers()
    );
    assert_eq!(
        server.gets("/small.jar").len(),
        0,
        "small.jar was complete but fetched again"
    );
    assert_eq!(sb.artifact("small.jar")["status"], "kept");
    assert_eq!(sb.artifact("big.jar")["status"], "fetched");

    server.clear_log();
    run.run().expect_code(0);
    let gets: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert!(gets.is_empty(), "a complete rerun fetched again: {gets:#?}");
    for name in ["big.jar", "small.jar"] {
        assert_eq!(sb.artifact(name)["status"], "kept", "{name}");
    }
    let expected = format!(
        "{}:{}\n",
        crate::support::s(&sb.jar("big.jar")),
        crate::support::s(&sb.jar("small.jar"))
    );
    assert_eq!(sb.classpath(), expected);
}

#[test]
fn sigterm_mid_transfer_exits_7_and_cleans_up() {
    let server = FaultServer::start();
    server.put("/big.jar", data(3, 2 << 20));
    server.always(
        "/big.jar",
        Fault::StallAfter(64 * 1024, Duration::from_secs(120)),
    );
    let sb = Sandbox::new();
    let url = server.url("/big.jar");
    let running = sb.fetch().args(["--jars", &url]).start();
    let mid_transfer = wait_for(Duration::from_secs(20), || {
        server.gets("/big.jar").len() == 1 && !sb.leftovers().is_empty()
    });
    assert!(
        mid_transfer,
        "never saw the transfer start:\n{}",
        running.stderr_so_far()
    );
    std::thread::sleep(Duration::from_millis(200)); // well into the stalled body
    let sent = std::time::Instant::now();
    running.signal("TERM");
    let out = running.finish();
    let took = sent.elapsed();
    out.expect_code(7);
    assert!(
        took < Duration::from_secs(5),
        "exit took {took:?} after SIGTERM\n{out}"
    );
    assert!(
        sb.leftovers().is_empty(),
        "partial files left after SIGTERM: {:?}",
        sb.leftovers()
    );
    assert!(
        !sb.jar("big.jar").exists(),
        "an interrupted transfer appeared under its final name"
    );
    let report = sb.report();
    assert_eq!(report["exit_code"], 7, "{report:#}");
    assert_eq!(report["ok"], false, "{report:#}");
    let a = sb.artifact("big.jar");
    assert_eq!(a["status"], "failed", "{a:#}");
    assert!(
        a["error"]
            .as_str()
            .is_some_and(|e| e.to_lowercase().contains("interrupted")),
        "{a:#}"
    );
    let term = sb.term_log_text().expect("termination log written");
    assert!(term.contains(&url), "termination log lacks {url}:\n{term}");
}
