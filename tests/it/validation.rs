//! Configuration errors exit 2 with a message naming the problem, before any network traffic.

use std::time::Duration;

use crate::support::{data, s, FaultServer, Sandbox};

/// Runs fetch with a valid jar plus `args`; asserts exit 2, every `needle` in stderr,
/// and that the server saw no request at all.
#[track_caller]
fn rejected(args: &[&str], needles: &[&str]) {
    rejected_in(&Sandbox::new(), args, needles);
}

/// [`rejected`] in a sandbox prepared by the caller. In `args` and `needles`,
/// `{base}` is the server's URL, `{ok}` the valid jar's, and `{root}`, `{jars}`,
/// `{files}` the sandbox's directories.
#[track_caller]
fn rejected_in(sb: &Sandbox, args: &[&str], needles: &[&str]) {
    let server = FaultServer::start();
    server.put("/ok.jar", data(1, 1000));
    let ok = server.url("/ok.jar");
    let expand = |a: &str| {
        a.replace("{ok}", &ok)
            .replace("{base}", &server.url(""))
            .replace("{root}", &s(&sb.root))
            .replace("{jars}", &s(&sb.jars))
            .replace("{files}", &s(&sb.files))
    };
    let args: Vec<String> = args.iter().map(|a| expand(a)).collect();
    let out = sb.fetch().args(["--jars", &ok]).args(&args).run();
    out.expect_code(2);
    assert!(
        !out.stderr.contains("panicked"),
        "a configuration error must not panic\n{out}"
    );
    for needle in needles {
        out.expect_stderr(&expand(needle));
    }
    assert!(
        server.requests().is_empty(),
        "config error found after network traffic: {:#?}\n{out}",
        server.requests()
    );
    assert!(
        out.elapsed < Duration::from_secs(20),
        "took {:?}",
        out.elapsed
    );
    assert!(!sb.jar("ok.jar").exists());
}

#[test]
fn duplicate_destination_names_suggest_an_alias() {
    rejected(
        &["--jars", "{base}/x/dup.jar,{base}/y/dup.jar"],
        &["dup.jar", "#"],
    );
    rejected(&["--jars", "{base}/x/other.jar#ok.jar"], &["ok.jar", "#"]);
    rejected(
        &["--files", "{base}/x/f.txt", "--files", "{base}/y/f.txt"],
        &["f.txt", "#"],
    );
}

#[test]
fn traversal_alias_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#../x.jar"], &["../x.jar"]);
    rejected(&["--jars", "{base}/x.jar#.."], &[".."]);
    rejected(
        &["--files", "{base}/x.txt#../../etc/passwd"],
        &["../../etc/passwd"],
    );
}

#[test]
fn alias_with_a_slash_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#sub/x.jar"], &["sub/x.jar"]);
    rejected(&["--jars", "{base}/x.jar#/abs.jar"], &["/abs.jar"]);
}

#[test]
fn empty_alias_is_rejected() {
    rejected(&["--jars", "{base}/x.jar#"], &["{base}/x.jar"]);
}

#[test]
fn control_characters_in_names_are_rejected() {
    rejected(&["--jars", "{base}/x.jar#a\u{1}b.jar"], &["{base}/x.jar"]);
    rejected(&["--jars", "{base}/a%0Ab.jar"], &["{base}/a%0Ab.jar"]);
    rejected(&["--jars", "{base}/a%1Bb.jar"], &["{base}/a%1Bb.jar"]);
}

#[test]
fn encoded_traversal_in_the_last_segment_is_rejected() {
    rejected(&["--jars", "{base}/lib/..%2F..%2Fevil.jar"], &["evil.jar"]);
}

#[test]
fn unsupported_scheme_lists_the_supported_ones() {
    rejected(
        &["--jars", "ftp://127.0.0.1/a.jar"],
        &["ftp://127.0.0.1/a.jar", "http", "https", "file", "local"],
    );
}

#[test]
fn uri_path_ending_in_a_slash_is_rejected() {
    rejected(&["--jars", "{base}/libs/"], &["{base}/libs/"]);
}

#[test]
fn unreadable_input_files_are_config_errors() {
    let missing = "/nonexistent/spark-localizer-test/input";
    rejected(&["--properties-file", missing], &[missing]);
    rejected(&["--checksums", missing], &[missing]);
    rejected(&["--http-header-file", missing], &[missing]);
    let dir = tempfile::tempdir().unwrap(); // a directory is not a readable file either
    let dir = dir.path().to_str().unwrap();
    rejected(&["--properties-file", dir], &[dir]);
}

#[test]
fn malformed_checksums_and_durations_are_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pins = dir.path().join("sha256sums");
    std::fs::write(&pins, "not-a-hash  ok.jar\n").unwrap();
    rejected(
        &["--checksums", pins.to_str().unwrap()],
        &[pins.to_str().unwrap()],
    );
    rejected(&["--retry-delay", "soon"], &["--retry-delay"]);
}

#[test]
fn zero_durations_are_rejected_naming_the_flag() {
    for flag in ["--progress-interval", "--stall-timeout", "--deadline"] {
        rejected(&[flag, "0"], &[flag]);
    }
}

#[test]
fn termination_log_on_a_jar_destination_is_a_collision() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1000));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--jars", &server.url("/a.jar")])
        .termination_log(sb.jar("a.jar"))
        .run();
    out.expect_code(2)
        .expect_stderr(sb.jar("a.jar").to_str().unwrap())
        .expect_stderr("termination");
    assert!(
        server.requests().is_empty(),
        "config error found after network traffic: {:#?}\n{out}",
        server.requests()
    );
}

#[test]
fn colon_in_a_jar_name_is_rejected_files_may_have_one() {
    rejected(
        &["--jars", "{base}/a:b.jar"],
        &["a:b.jar", "classpath separator", "#alias"],
    );
    rejected(
        &["--jars", "{base}/lib.jar#x:y.jar"],
        &["x:y.jar", "classpath separator", "#alias"],
    );

    let server = FaultServer::start();
    server.put("/a:b.txt", data(2, 500));
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--files", &server.url("/a:b.txt")])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(sb.files.join("a:b.txt")).unwrap(),
        data(2, 500)
    );
}

#[test]
fn every_configuration_problem_is_reported_at_once() {
    rejected(
        &[
            "--jars",
            "ftp://x/a.jar,http://127.0.0.1:9/dir/",
            "--checksums",
            "/nonexistent.sums",
            "--http-header-file",
            "/nonexistent.hdr",
        ],
        &[
            "ftp://x/a.jar",
            "http://127.0.0.1:9/dir/",
            "/nonexistent.sums",
            "/nonexistent.hdr",
        ],
    );
}

#[test]
fn header_file_may_not_set_transfer_headers() {
    for line in ["Host: evil", "Content-Length: 5"] {
        let dir = tempfile::tempdir().unwrap();
        let headers = dir.path().join("headers");
        std::fs::write(&headers, format!("# a token\nX-Api-Token: t\n{line}\n")).unwrap();
        let path = headers.to_str().unwrap();
        rejected(&["--http-header-file", path], &[path, "line 3"]);
    }
}

#[test]
fn durations_past_30_days_are_rejected_naming_the_setting() {
    // Used to overflow `Instant + Duration` and panic.
    let huge = "3000000000000000h";
    for flag in [
        "--deadline",
        "--stall-timeout",
        "--connect-timeout",
        "--progress-interval",
    ] {
        rejected(&[flag, huge], &[flag, huge]);
    }
    rejected(&["--deadline", "721h"], &["--deadline", "30 days"]);

    let sb = Sandbox::new();
    let key = "spark.kubernetes.mountdependencies.mountTimeout";
    let props = sb.write("spark.properties", format!("{key}={huge}\n"));
    rejected_in(
        &sb,
        &["--properties-file", props.to_str().unwrap()],
        &[key, huge],
    );
}

#[test]
fn a_deadline_of_30_days_is_accepted() {
    let server = FaultServer::start();
    server.put("/a.jar", data(2, 1000));
    let sb = Sandbox::new();
    let props = sb.write(
        "spark.properties",
        "spark.kubernetes.mountdependencies.mountTimeout=720h\n",
    );
    sb.fetch()
        .args(["--jars", &server.url("/a.jar"), "--deadline", "720h"])
        .run()
        .expect_code(0);
    sb.fetch()
        .args(["--jars", &server.url("/a.jar")])
        .arg("--properties-file")
        .arg(&props)
        .run()
        .expect_code(0);
}

#[test]
fn output_through_a_symlink_onto_a_jar_is_a_collision() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(&sb.jars, sb.root.join("lnk")).unwrap();
    rejected_in(
        &sb,
        &[
            "--jars",
            "{base}/a.jar",
            "--classpath-file",
            "{root}/lnk/a.jar",
        ],
        &["--classpath-file", "a.jar"],
    );
    assert!(!sb.jar("a.jar").exists());
}

#[test]
fn output_spelled_with_dotdot_onto_a_jar_is_a_collision() {
    rejected(
        &[
            "--jars",
            "{base}/b.jar",
            "--env-file",
            "{files}/../jars/b.jar",
        ],
        &["--env-file", "b.jar"],
    );
}

#[test]
fn two_outputs_on_one_file_are_refused_naming_both_flags() {
    // --report on the default classpath file, as spelled and through a symlink.
    rejected(
        &["--report", "{jars}/classpath"],
        &["--report", "--classpath-file"],
    );
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(&sb.jars, sb.root.join("lnk")).unwrap();
    rejected_in(
        &sb,
        &["--report", "{root}/lnk/classpath"],
        &["--report", "--classpath-file"],
    );
    rejected(
        &[
            "--env-file",
            "{root}/same",
            "--classpath-file",
            "{root}/same",
        ],
        &["--env-file", "--classpath-file"],
    );
}

#[test]
fn names_are_limited_to_200_bytes() {
    // The temp file (.spark-localizer.<name>.<pid>.<n>.partial) must fit in 255 bytes.
    let too_long = format!("{}.jar", "n".repeat(197));
    assert_eq!(too_long.len(), 201);
    rejected(
        &["--jars", &format!("{{base}}/x.jar#{too_long}")],
        &[&too_long, "200 bytes"],
    );
    let long_segment = format!("{{base}}/lib/{too_long}");
    rejected(&["--jars", &long_segment], &["200 bytes"]);

    let fits = format!("{}.jar", "n".repeat(196));
    assert_eq!(fits.len(), 200);
    let server = FaultServer::start();
    let body = data(3, 300_000);
    server.put("/x.jar", body.clone());
    // Go through a resumed transfer too: the partial file carries the name.
    server.on("/x.jar", 1, crate::support::Fault::ResetAfter(100_000));
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &format!("{}#{fits}", server.url("/x.jar"))])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar(&fits)).unwrap(), body);
    assert_eq!(sb.classpath(), format!("{}\n", s(&sb.jar(&fits))));
    assert!(
        sb.jars
            .join(format!(".spark-localizer/{fits}.json"))
            .exists(),
        "no state record for the 200-byte name"
    );
}

#[test]
fn output_through_a_missing_dir_and_dotdot_onto_a_jar_is_a_collision() {
    rejected(
        &[
            "--jars",
            "{base}/a.jar",
            "--classpath-file",
            "{root}/not-yet/../jars/a.jar",
        ],
        &["--classpath-file", "a.jar"],
    );
}

#[test]
fn a_fifo_for_any_input_file_is_refused_at_once_not_waited_on() {
    let sb = Sandbox::new();
    let fifo = sb.root.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    let secret = sb.write("secret", "s3cr3t");
    let secret = secret.to_str().unwrap();
    for args in [
        vec!["--properties-file", f],
        vec!["--checksums", f],
        vec!["--ca-cert", f],
        vec!["--http-header-file", f],
        vec![
            "--staging-uri",
            "http://127.0.0.1:1",
            "--staging-jars-id",
            "abc",
            "--staging-jars-secret-file",
            f,
        ],
        vec![
            "--staging-uri",
            "https://127.0.0.1:1",
            "--staging-jars-id",
            "abc",
            "--staging-jars-secret-file",
            secret,
            "--staging-ca-cert",
            f,
        ],
    ] {
        let run = sb.fetch().args(&args).arg("--deadline").arg("20s").run();
        run.expect_code(2);
        assert!(
            run.elapsed < std::time::Duration::from_secs(10),
            "{args:?} took {:?}",
            run.elapsed
        );
        assert!(run.stderr.contains("not a regular file"), "{run}");
    }
}

/// An invalid URI hides nothing else (issue 15): the sources are still configured
/// for the valid ones, so a half S3A key pair and a malformed `core-site.xml` are
/// reported in the same run as the unsupported scheme.
#[test]
fn an_invalid_uri_does_not_hide_the_sources_problems() {
    let sb = Sandbox::new();
    let props = sb.write("spark.conf", "spark.hadoop.fs.s3a.access.key=AKIDEXAMPLE\n");
    let conf = sb.root.join("hadoop-conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("core-site.xml"), "<configuration><property>").unwrap();
    rejected_in(
        &sb,
        &[
            "--jars",
            "ftp://x/a.jar,s3://bucket/k.jar,hdfs://nn:8020/k.jar",
            "--properties-file",
            &s(&props),
            "--hadoop-conf-dir",
            &s(&conf),
        ],
        &[
            "unsupported scheme 'ftp'",
            "no secret.key is",
            "core-site.xml is not usable XML",
        ],
    );
}
