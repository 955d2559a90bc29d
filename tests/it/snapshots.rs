//! CLI behaviour pinned as snapshots: the exit code and stderr of configuration
//! errors, which users read and scripts may match. Timestamps, temp paths and
//! ports are normalized; everything else must stay as it is (or be reviewed).

use crate::support::{s, Sandbox};

/// Exit code and stderr with the run's variable parts replaced.
fn normalized(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb.fetch().args(args).run();
    let root = s(&sb.root);
    let mut text = format!("exit: {:?}\n", out.code);
    for line in out.stderr.lines() {
        // "2026-11-22T14:05:40.649193Z ERROR message" -> "ERROR message"
        let line = match line.split_once('Z') {
            Some((stamp, rest)) if stamp.len() == 26 && stamp.starts_with("20") => {
                rest.trim_start()
            }
            _ => line,
        };
        text.push_str(&line.replace(&root, "[ROOT]"));
        text.push('\n');
    }
    text
}

#[test]
fn unsupported_scheme() {
    let sb = Sandbox::new();
    insta::assert_snapshot!(normalized(&sb, &["--jars", "ftp://repo.example/lib/a.jar"]));
}

#[test]
fn duplicate_names_and_unsafe_aliases_all_at_once() {
    let sb = Sandbox::new();
    insta::assert_snapshot!(normalized(
        &sb,
        &[
            "--jars",
            "https://a.example/x/lib.jar,https://b.example/y/lib.jar,https://c.example/z.jar#../evil.jar",
            "--files",
            "https://d.example/conf/,https://e.example/a:b.txt#",
        ],
    ));
}

#[test]
fn unreadable_inputs() {
    let sb = Sandbox::new();
    insta::assert_snapshot!(normalized(
        &sb,
        &[
            "--jars",
            "https://repo.example/a.jar",
            "--properties-file",
            "/nonexistent/spark.properties",
            "--checksums",
            "/nonexistent/sha256sums",
            "--http-header-file",
            "/nonexistent/headers",
            "--ca-cert",
            "/nonexistent/ca.pem",
        ],
    ));
}

#[test]
fn secrets_in_a_bad_uri_are_redacted() {
    let sb = Sandbox::new();
    insta::assert_snapshot!(normalized(
        &sb,
        &[
            "--jars",
            "gs://user:hunter2pw@bucket/a.jar?X-Goog-Signature=abcdef123456"
        ],
    ));
}

#[test]
fn bad_duration() {
    let sb = Sandbox::new();
    insta::assert_snapshot!(normalized(&sb, &["--deadline", "soon"]));
}
