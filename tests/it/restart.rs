//! A SIGKILL mid-download (the kubelet restarting the init container) never leaves a
//! file under a final name; the rerun completes, and a further rerun fetches nothing.

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
