//! Long URI lists: read and planned in linear time, and every phase before and
//! after the transfers obeys `--deadline` (exit 5) and a stop signal (exit 7).

use std::time::Duration;

use crate::support::{s, wait_for, Sandbox};

/// A properties file declaring `n` distinct `local://` jars.
fn long_list(sb: &Sandbox, n: usize) -> String {
    let jars: Vec<String> = (0..n)
        .map(|i| format!("local:///opt/spark/jars/lib-{i}.jar"))
        .collect();
    let path = sb.write(
        "long.properties",
        format!("spark.jars={}\n", jars.join(",")),
    );
    s(&path)
}

/// The stop's message in the termination log and the report, and no classpath.
fn stopped_with(sb: &Sandbox, code: i64, message: &str) {
    let term = sb.term_log_text().unwrap_or_default();
    assert!(term.contains(message), "termination log: {term}");
    let report = sb.report();
    assert_eq!(report["ok"], false, "{report:#}");
    assert_eq!(report["exit_code"], code, "{report:#}");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains(message)),
        "{report:#}"
    );
    assert!(!sb.jars.join("classpath").exists());
}

/// A signal while a long list is planned stops the run (exit 7) there, with the
/// report and the termination message written; the signal used to be logged and
/// the run went on to exit 0.
#[test]
fn a_signal_while_a_long_list_is_planned_stops_the_run() {
    let sb = Sandbox::new();
    let props = long_list(&sb, 300_000);
    let running = sb.fetch().args(["--properties-file", &props]).start();
    assert!(
        wait_for(Duration::from_secs(120), || running
            .stderr_so_far()
            .contains("planning 300000 declared URI(s)")),
        "{}",
        running.stderr_so_far()
    );
    running.signal("TERM");
    let out = running.finish();
    out.expect_code(7)
        .expect_stderr("300000 declared URI(s): stopped by a signal while planning");
    assert!(!out.stderr.contains("summary:"), "{out}");
    stopped_with(&sb, 7, "stopped by a signal while planning");
}

/// `--deadline` bounds a long list's run wherever it is (reading, planning,
/// writing the outputs): exit 5 with the report and the termination message;
/// it used to end at 17 s with exit 0 for a deadline of 2 s.
#[test]
fn the_deadline_bounds_a_long_list() {
    let sb = Sandbox::new();
    let props = long_list(&sb, 300_000);
    let out = sb
        .fetch()
        .args(["--properties-file", &props, "--deadline", "1s"])
        .run();
    out.expect_code(5)
        .expect_stderr("within the deadline (1.0s, --deadline)");
    assert!(!out.stderr.contains("summary:"), "{out}");
    stopped_with(&sb, 5, "within the deadline");
}

/// A long list with repeats is localized, each URI once, in declared order.
#[test]
fn a_long_list_with_repeats_is_localized_once_each() {
    let sb = Sandbox::new();
    let n = 50_000;
    let jars: Vec<String> = (0..2 * n)
        .map(|i| format!("local:///opt/spark/jars/lib-{}.jar", i % n))
        .collect();
    let props = sb.write(
        "long.properties",
        format!("spark.jars={}\n", jars.join(",")),
    );
    let out = sb.fetch().args(["--properties-file", &s(&props)]).run();
    out.expect_code(0);
    let classpath = sb.classpath();
    let lines: Vec<&str> = classpath.trim_end().split(':').collect();
    assert_eq!(lines.len(), n, "{}", &classpath[..200]);
    assert_eq!(lines[0], "/opt/spark/jars/lib-0.jar");
    assert_eq!(lines[n - 1], format!("/opt/spark/jars/lib-{}.jar", n - 1));
}
