//! Pinned checksums and re-verification of what a previous run left behind.

use std::time::Duration;

use crate::support::{data, sha256_hex, Fault, FaultServer, Sandbox};

#[test]
fn checksum_mismatch_is_never_published() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 300_000));
    let sb = Sandbox::new();
    let pins = sb.write(
        "sha256sums",
        format!("{}  a.jar\n", sha256_hex(b"something else")),
    );
    let url = server.url("/a.jar");
    let out = sb
        .fetch()
        .args(["--jars", &url])
        .arg("--checksums")
        .arg(&pins)
        .run();
    out.expect_code(4).expect_stderr(&url);
    let stderr = out.stderr.to_lowercase();
    assert!(
        stderr.contains("checksum") || stderr.contains("sha256"),
        "{out}"
    );
    assert!(
        !sb.jar("a.jar").exists(),
        "a file failing its pin was published"
    );
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );
    assert_eq!(sb.artifact("a.jar")["status"], "failed");
    assert_eq!(sb.report()["exit_code"], 4);
    let term = sb.term_log_text().expect("termination log");
    assert!(term.contains(&url), "{term}");
}

#[test]
fn checksums_match_by_destination_name_or_by_uri() {
    let server = FaultServer::start();
    let (a, b, c) = (data(2, 10_000), data(3, 20_000), data(4, 30_000));
    server.put("/a.jar", a.clone());
    server.put("/b.jar", b.clone());
    server.put("/c.txt", c.clone());
    let sb = Sandbox::new();
    let pins = format!(
        "# pins\n{}  a.jar\n{} *{}\n{}  c.txt\n",
        sha256_hex(&a),
        sha256_hex(&b),
        server.url("/b.jar"),
        sha256_hex(&c)
    );
    let pins = sb.write("sha256sums", pins);
    let jars = format!("{},{}", server.url("/a.jar"), server.url("/b.jar"));
    let out = sb
        .fetch()
        .args(["--jars", &jars, "--files", &server.url("/c.txt")])
        .arg("--checksums")
        .arg(&pins)
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), a);
    assert_eq!(std::fs::read(sb.jar("b.jar")).unwrap(), b);
    assert_eq!(std::fs::read(sb.files.join("c.txt")).unwrap(), c);
}

#[test]
fn integrity_failure_outranks_fetch_failure() {
    let server = FaultServer::start();
    server.put("/a.jar", data(5, 1000));
    let sb = Sandbox::new();
    let pins = sb.write("sha256sums", format!("{}  a.jar\n", sha256_hex(b"nope")));
    let jars = format!("{},{}", server.url("/missing.jar"), server.url("/a.jar"));
    let out = sb
        .fetch()
        .args(["--jars", &jars])
        .arg("--checksums")
        .arg(&pins)
        .run();
    out.expect_code(4)
        .expect_stderr(&server.url("/missing.jar"))
        .expect_stderr(&server.url("/a.jar"));
    let term = sb.term_log_text().expect("termination log");
    assert!(
        term.contains("/missing.jar") && term.contains("/a.jar"),
        "both failures named:\n{term}"
    );
}

#[test]
fn tampered_or_truncated_files_are_refetched_on_rerun() {
    let server = FaultServer::start();
    let (a, b, c) = (data(6, 100_000), data(7, 100_000), data(8, 100_000));
    server.put("/a.jar", a.clone());
    server.put("/b.jar", b.clone());
    server.put("/c.jar", c.clone());
    let sb = Sandbox::new();
    let jars = ["/a.jar", "/b.jar", "/c.jar"]
        .map(|p| server.url(p))
        .join(",");
    sb.fetch().args(["--jars", &jars]).run().expect_code(0);

    let mut tampered = a.clone();
    tampered[50_000] ^= 0xff; // same size, different bytes
    std::fs::write(sb.jar("a.jar"), &tampered).unwrap();
    std::fs::write(sb.jar("b.jar"), &b[..40_000]).unwrap();
    server.clear_log();
    sb.fetch().args(["--jars", &jars]).run().expect_code(0);

    assert_eq!(
        std::fs::read(sb.jar("a.jar")).unwrap(),
        a,
        "tampered a.jar not repaired"
    );
    assert_eq!(
        std::fs::read(sb.jar("b.jar")).unwrap(),
        b,
        "truncated b.jar not repaired"
    );
    assert_eq!(server.gets("/a.jar").len(), 1);
    assert_eq!(server.gets("/b.jar").len(), 1);
    assert_eq!(
        server.gets("/c.jar").len(),
        0,
        "an intact file was fetched again"
    );
    assert_eq!(sb.artifact("a.jar")["status"], "fetched");
    assert_eq!(sb.artifact("b.jar")["status"], "fetched");
    assert_eq!(sb.artifact("c.jar")["status"], "kept");
}

#[test]
fn local_io_failure_exits_6_and_outranks_fetch_failure() {
    let server = FaultServer::start();
    server.put("/f.txt", data(9, 1000));
    let sb = Sandbox::new();
    let blocker = sb.write("not-a-dir", "a regular file where a directory should be");
    let files_dir = blocker.join("files");
    let out = sb
        .fetch()
        .no_dirs()
        .args([
            "--jars",
            &server.url("/missing.jar"),
            "--files",
            &server.url("/f.txt"),
        ])
        .arg("--jars-dir")
        .arg(&sb.jars)
        .arg("--files-dir")
        .arg(&files_dir)
        .run();
    out.expect_code(6)
        .expect_stderr(files_dir.to_str().unwrap());
    let term = sb.term_log_text().expect("termination log");
    assert!(term.contains("/missing.jar"), "{term}");
}

#[test]
fn a_source_growing_past_its_announced_size_fails_at_once() {
    // The body runs past the size the server announced and then hangs: a client
    // that read on would wait for the 30 s stall timeout.
    let server = FaultServer::start();
    server.put("/a.jar", data(11, 100_000));
    server.always("/a.jar", Fault::GrowsPast(64 * 1024));
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    let out = sb.fetch().args(["--jars", &url]).run();
    out.expect_code(4)
        .expect_stderr(&url)
        .expect_stderr("more than the announced");
    assert!(
        out.elapsed < Duration::from_secs(15),
        "did not stop at once: {:?}\n{out}",
        out.elapsed
    );
    assert_eq!(
        server.gets("/a.jar").len(),
        1,
        "an integrity failure is final"
    );
    assert!(!sb.jar("a.jar").exists(), "an oversized body was published");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert_eq!(sb.artifact("a.jar")["status"], "failed");
    assert_eq!(sb.report()["exit_code"], 4);
}

#[test]
fn a_resumed_range_running_past_the_announced_size_fails_at_once() {
    let server = FaultServer::start();
    server.put("/a.jar", data(12, 1 << 20));
    server.on("/a.jar", 1, Fault::ResetAfter(256 * 1024));
    server.on("/a.jar", 2, Fault::GrowsPast(64 * 1024));
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    let out = sb.fetch().args(["--jars", &url]).run();
    out.expect_code(4).expect_stderr(&url);
    assert!(
        out.elapsed < Duration::from_secs(15),
        "did not stop at once: {:?}\n{out}",
        out.elapsed
    );
    let gets = server.gets("/a.jar");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert!(
        gets[1].header("range").is_some(),
        "the second GET did not resume: {gets:#?}"
    );
    assert!(!sb.jar("a.jar").exists(), "an oversized body was published");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// `--require-pins`: an artifact no pin covers, and a pin that covers nothing,
/// are each a configuration error naming it, before any request; with every
/// artifact pinned (by name or by URI) the same fetch goes through.
#[test]
fn require_pins_refuses_an_unpinned_artifact_and_a_stray_pin_before_any_request() {
    let server = FaultServer::start();
    let (a, b) = (data(11, 10_000), data(12, 20_000));
    server.put("/a.jar", a.clone());
    server.put("/b.jar", b.clone());
    let jars = format!("{},{}", server.url("/a.jar"), server.url("/b.jar"));
    let sb = Sandbox::new();
    let stray = format!("{}  gone.jar\n", sha256_hex(b"gone"));
    let partial = sb.write("partial", format!("{}  a.jar\n{stray}", sha256_hex(&a)));
    let out = sb
        .fetch()
        .args(["--jars", &jars, "--require-pins"])
        .arg("--checksums")
        .arg(&partial)
        .run();
    out.expect_code(2)
        .expect_stderr(&format!(
            "--require-pins: {} (--jars) is not pinned",
            server.url("/b.jar")
        ))
        .expect_stderr("--require-pins: the pin of gone.jar matches no artifact");
    assert!(
        !out.stderr
            .contains(&format!("{} (--jars) is not pinned", server.url("/a.jar"))),
        "{out}"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    assert!(!sb.jar("a.jar").exists() && !sb.jar("b.jar").exists());
    let term = sb.term_log_text().expect("termination log");
    assert!(term.contains("--require-pins"), "{term}");
    // `check` says the same, and so does the env twin.
    let out = sb
        .check()
        .args(["--jars", &jars])
        .env("SPARK_LOCALIZER_REQUIRE_PINS", "true")
        .arg("--checksums")
        .arg(&partial)
        .run();
    out.expect_code(2).expect_stderr("is not pinned");
    // Without the flag the stray pin is a warning and b.jar is fetched unpinned.
    sb.fetch()
        .args(["--jars", &jars])
        .arg("--checksums")
        .arg(&partial)
        .run()
        .expect_code(0)
        .expect_stderr("which no artifact matches");

    let sb = Sandbox::new();
    let whole = sb.write(
        "whole",
        format!(
            "{}  a.jar\n{} *{}\n",
            sha256_hex(&a),
            sha256_hex(&b),
            server.url("/b.jar")
        ),
    );
    sb.fetch()
        .args(["--jars", &jars])
        .env("SPARK_LOCALIZER_REQUIRE_PINS", "1")
        .arg("--checksums")
        .arg(&whole)
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), a);
    assert_eq!(std::fs::read(sb.jar("b.jar")).unwrap(), b);
    // Two keys for one artifact both count as used; two digests for it are
    // refused; Spark's `file:/path` spelling pins `file:///path`.
    let local = sb.write("c.jar", b"local bytes");
    let both = sb.write(
        "both",
        format!(
            "{a_sum}  a.jar\n{a_sum}  {a_url}\n{b_sum}  {b_url}\n{c_sum}  file:{c}\n",
            a_sum = sha256_hex(&a),
            a_url = server
                .url("/a.jar")
                .to_uppercase()
                .replace("/A.JAR", "/a.jar"),
            b_sum = sha256_hex(&b),
            b_url = server.url("/b.jar"),
            c_sum = sha256_hex(b"local bytes"),
            c = local.display()
        ),
    );
    let with_local = format!("{jars},local://{}", local.display());
    let both = sb.write(
        "both-local",
        std::fs::read_to_string(&both).unwrap().replace(
            &format!("file:{}", local.display()),
            &format!("local:{}", local.display()),
        ),
    );
    sb.check()
        .args(["--jars", &with_local, "--require-pins"])
        .arg("--checksums")
        .arg(&both)
        .run()
        .expect_code(0);
    let conflict = sb.write(
        "conflict",
        format!(
            "{}  a.jar\n{}  {}\n{}  b.jar\n",
            sha256_hex(&a),
            sha256_hex(b"other"),
            server.url("/a.jar"),
            sha256_hex(&b)
        ),
    );
    sb.check()
        .args(["--jars", &jars, "--require-pins"])
        .arg("--checksums")
        .arg(&conflict)
        .run()
        .expect_code(2)
        .expect_stderr("is pinned to two digests");
    // `resolve` writes pins; it does not take the flag silently.
    sb.resolve()
        .args(["--packages", "org.example:a:1", "--require-pins"])
        .run()
        .expect_code(2)
        .expect_stderr("--require-pins is for fetch and check");
}
