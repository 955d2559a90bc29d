//! The classpath file, the env snippet, the JSON report, the termination log, and
//! every way to declare inputs (flags, env twins, properties files, local://, file://).

use std::os::unix::fs::MetadataExt;

use crate::support::{data, s, sha256_hex, FaultServer, Sandbox};

fn serve(files: &[(&str, usize)]) -> FaultServer {
    let server = FaultServer::start();
    for (i, (path, len)) in files.iter().enumerate() {
        server.put(path, data(100 + i as u64, *len));
    }
    server
}

#[test]
fn classpath_env_and_report_follow_declared_order() {
    // Sizes differ so "largest first" scheduling cannot leak into the output order.
    let server = serve(&[
        ("/c.jar", 1_000),
        ("/a.jar", 400_000),
        ("/b.jar", 50_000),
        ("/f.conf", 300),
    ]);
    let sb = Sandbox::new();
    let jars = format!(
        "{},local:///opt/spark/x.jar,{}",
        server.url("/c.jar"),
        server.url("/a.jar")
    );
    let out = sb
        .fetch()
        .args([
            "--jars",
            &jars,
            "--jars",
            &server.url("/b.jar"),
            "--files",
            &server.url("/f.conf"),
        ])
        .run();
    out.expect_code(0);

    let expected = [
        s(&sb.jar("c.jar")),
        "/opt/spark/x.jar".into(),
        s(&sb.jar("a.jar")),
        s(&sb.jar("b.jar")),
    ]
    .join(":");
    assert_eq!(sb.classpath(), format!("{expected}\n"));
    assert_eq!(sb.sourced_classpath(None), expected);
    assert_eq!(
        sb.sourced_classpath(Some("/pre/one.jar:/pre/two.jar")),
        format!("{expected}:/pre/one.jar:/pre/two.jar")
    );
    assert!(sb.files.join("f.conf").exists() && !sb.jar("f.conf").exists());

    let report = sb.report();
    assert_eq!(report["version"], 1, "{report:#}");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["exit_code"], 0, "{report:#}");
    assert!(report["duration_ms"].is_u64(), "{report:#}");
    assert_eq!(
        report["artifacts"].as_array().map(Vec::len),
        Some(5),
        "{report:#}"
    );
    let a = sb.artifact("a.jar");
    let body = data(101, 400_000);
    assert_eq!(a["uri"], server.url("/a.jar"), "{a:#}");
    assert_eq!(a["kind"], "jar", "{a:#}");
    assert_eq!(a["destination"], s(&sb.jar("a.jar")), "{a:#}");
    assert_eq!(a["status"], "fetched", "{a:#}");
    assert_eq!(a["bytes"], 400_000, "{a:#}");
    assert_eq!(a["sha256"], sha256_hex(&body), "{a:#}");
    assert_eq!(a["attempts"], 1, "{a:#}");
    assert!(a["duration_ms"].is_u64(), "{a:#}");
    assert_eq!(sb.artifact("x.jar")["status"], "local");
    assert_eq!(sb.artifact("f.conf")["kind"], "file");
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), body);
}

#[test]
fn env_file_quotes_any_path() {
    let server = serve(&[("/a.jar", 100)]);
    let sb = Sandbox::with_jars_dir("it's a $HOME `dir` \"q\" \\ x");
    sb.fetch()
        .args(["--jars", &server.url("/a.jar")])
        .run()
        .expect_code(0);
    let jar = s(&sb.jar("a.jar"));
    assert_eq!(sb.classpath(), format!("{jar}\n"));
    assert_eq!(sb.sourced_classpath(None), jar);
    assert_eq!(
        sb.sourced_classpath(Some("/pre.jar")),
        format!("{jar}:/pre.jar")
    );
}

#[test]
fn nothing_to_fetch_still_writes_an_empty_classpath() {
    let sb = Sandbox::new();
    let out = sb.fetch().run();
    out.expect_code(0);
    assert_eq!(sb.classpath().trim(), "");
    assert_eq!(sb.sourced_classpath(None), "");
    assert_eq!(
        sb.sourced_classpath(Some("/pre.jar")),
        "/pre.jar",
        "an empty fragment must not add an empty entry"
    );
    assert_eq!(sb.report()["artifacts"].as_array().map(Vec::len), Some(0));
}

#[test]
fn file_uris_are_copied_and_aliases_rename() {
    let server = serve(&[("/v1/lib.jar", 5_000)]);
    let sb = Sandbox::new();
    let src = sb.write("source.jar", data(7, 123_456));
    let jars = format!(
        "file://{}#copied.jar,{}#renamed.jar",
        s(&src),
        server.url("/v1/lib.jar")
    );
    sb.fetch().args(["--jars", &jars]).run().expect_code(0);
    assert_eq!(
        std::fs::read(sb.jar("copied.jar")).unwrap(),
        data(7, 123_456)
    );
    assert!(src.exists(), "the source of a file:// copy must stay");
    assert_eq!(
        std::fs::read(sb.jar("renamed.jar")).unwrap(),
        data(100, 5_000)
    );
    assert_eq!(sb.jar_names(), ["copied.jar", "renamed.jar"]);
    assert_eq!(sb.artifact("copied.jar")["status"], "copied");
    assert_eq!(
        sb.classpath(),
        format!(
            "{}:{}\n",
            s(&sb.jar("copied.jar")),
            s(&sb.jar("renamed.jar"))
        )
    );
}

#[test]
fn properties_file_supplies_spark_jars_and_files() {
    let server = serve(&[("/a.jar", 1_000), ("/b.jar", 2_000), ("/f.txt", 10)]);
    let sb = Sandbox::new();
    let props = format!(
        "# spark-defaults.conf\n! another comment\nspark.app.name : demo\nspark.jars = {},\\\n    {}\nspark.files {}\n",
        server.url("/a.jar"),
        server.url("/b.jar"),
        server.url("/f.txt")
    );
    let props = sb.write("spark-defaults.conf", props);
    sb.fetch()
        .arg("--properties-file")
        .arg(&props)
        .run()
        .expect_code(0);
    assert_eq!(
        sb.classpath(),
        format!("{}:{}\n", s(&sb.jar("a.jar")), s(&sb.jar("b.jar")))
    );
    assert_eq!(
        std::fs::read(sb.files.join("f.txt")).unwrap(),
        data(102, 10)
    );
}

#[test]
fn init_container_properties_set_uris_and_dirs() {
    let server = serve(&[("/a.jar", 1_000), ("/f.txt", 10)]);
    let sb = Sandbox::new();
    let (pjars, pfiles) = (sb.root.join("pjars"), sb.root.join("pfiles"));
    let props = format!(
        "spark.kubernetes.initcontainer.remoteJars={}\n\
         spark.kubernetes.initcontainer.remoteFiles={}\n\
         spark.kubernetes.mountdependencies.jarsDownloadDir={}\n\
         spark.kubernetes.mountdependencies.filesDownloadDir={}\n\
         spark.kubernetes.mountdependencies.mountTimeout=60s\n",
        server.url("/a.jar"),
        server.url("/f.txt"),
        s(&pjars),
        s(&pfiles)
    );
    let props = sb.write("spark.properties", props);
    sb.fetch()
        .no_dirs()
        .arg("--properties-file")
        .arg(&props)
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(pjars.join("a.jar")).unwrap(),
        data(100, 1_000)
    );
    assert_eq!(std::fs::read(pfiles.join("f.txt")).unwrap(), data(101, 10));
    assert_eq!(
        std::fs::read_to_string(pjars.join("classpath")).unwrap(),
        format!("{}\n", s(&pjars.join("a.jar")))
    );

    // A flag beats the properties file.
    sb.fetch()
        .arg("--properties-file")
        .arg(&props)
        .run()
        .expect_code(0);
    assert!(sb.jar("a.jar").exists() && sb.files.join("f.txt").exists());
}

#[test]
fn env_twins_work_and_flags_beat_them() {
    let server = serve(&[("/a.jar", 1_000)]);
    let sb = Sandbox::new();
    let elsewhere = sb.root.join("elsewhere");
    sb.fetch()
        .env("SPARK_LOCALIZER_JARS", &server.url("/a.jar"))
        .env("SPARK_LOCALIZER_JARS_DIR", &s(&elsewhere))
        .run()
        .expect_code(0);
    assert!(
        sb.jar("a.jar").exists(),
        "--jars-dir flag must beat SPARK_LOCALIZER_JARS_DIR"
    );
    assert!(!elsewhere.join("a.jar").exists());
}

#[test]
fn termination_log_is_bounded_and_written_in_place() {
    let server = FaultServer::start();
    let sb = Sandbox::new();
    std::fs::write(&sb.term_log, "stale text from an earlier container\n").unwrap();
    let inode = std::fs::metadata(&sb.term_log).unwrap().ino();
    let long = "x".repeat(120);
    let jars: Vec<String> = (0..60)
        .map(|i| server.url(&format!("/{long}/missing-{i:02}.jar")))
        .collect();
    let out = sb.fetch().args(["--jars", &jars.join(",")]).run();
    out.expect_code(3).expect_stderr(&jars[0]);
    let term = sb.term_log_text().expect("termination log");
    assert!(
        term.len() <= 4096,
        "termination log is {} bytes",
        term.len()
    );
    assert!(term.contains("/missing-"), "failed URIs not named:\n{term}");
    assert!(
        !term.contains("stale text"),
        "termination log not truncated:\n{term}"
    );
    assert_eq!(
        std::fs::metadata(&sb.term_log).unwrap().ino(),
        inode,
        "termination log replaced, not written in place"
    );
}

#[test]
fn file_uri_with_a_single_slash_is_copied() {
    // Spark writes local paths as `file:/abs/path`.
    let sb = Sandbox::new();
    let src = sb.write("x.jar", data(9, 54_321));
    let out = sb
        .fetch()
        .args(["--jars", &format!("file:{}", s(&src))])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("x.jar")).unwrap(), data(9, 54_321));
    let a = sb.artifact("x.jar");
    assert_eq!(a["status"], "copied", "{a:#}");
    assert_eq!(a["sha256"], sha256_hex(&data(9, 54_321)), "{a:#}");
    assert_eq!(sb.classpath(), format!("{}\n", s(&sb.jar("x.jar"))));
}

#[test]
fn a_failed_run_removes_the_classpath_outputs_of_an_earlier_run() {
    let server = serve(&[("/a.jar", 10_000)]);
    let sb = Sandbox::new();
    let url = server.url("/a.jar");
    sb.fetch().args(["--jars", &url]).run().expect_code(0);
    let env_file = sb.jars.join("spark-classpath.env");
    assert!(sb.jars.join("classpath").exists() && env_file.exists());

    // The pin no longer matches: the kept file is dropped and the refetch fails.
    let pins = sb.write("sha256sums", format!("{}  a.jar\n", sha256_hex(b"other")));
    let out = sb
        .fetch()
        .args(["--jars", &url])
        .arg("--checksums")
        .arg(&pins)
        .run();
    out.expect_code(4);
    assert!(
        !sb.jars.join("classpath").exists(),
        "a failed run left the earlier run's classpath\n{out}"
    );
    assert!(
        !env_file.exists(),
        "a failed run left the earlier run's spark-classpath.env\n{out}"
    );
    assert!(!sb.jar("a.jar").exists());
    assert_eq!(sb.report()["exit_code"], 4);
}

#[test]
fn an_empty_plan_clears_what_an_earlier_run_published() {
    let server = serve(&[("/b.jar", 10_000), ("/f.txt", 100)]);
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &server.url("/b.jar")])
        .args(["--files", &server.url("/f.txt")])
        .run()
        .expect_code(0);
    assert!(sb.jar("b.jar").exists() && sb.files.join("f.txt").exists());
    let mine = sb.jar("notes-of-the-user.txt");
    std::fs::write(&mine, "not spark-localizer's").unwrap();

    server.clear_log();
    let out = sb.fetch().run();
    out.expect_code(0);
    assert!(server.requests().is_empty(), "{:#?}", server.requests());
    for gone in [
        sb.jar("b.jar"),
        sb.jars.join(".spark-localizer/b.jar.json"),
        sb.files.join("f.txt"),
        sb.files.join(".spark-localizer/f.txt.json"),
    ] {
        assert!(
            !gone.exists(),
            "{} survived an empty plan\n{out}",
            gone.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(&mine).unwrap(),
        "not spark-localizer's",
        "a file no run published was touched"
    );
    assert_eq!(sb.jar_names(), ["notes-of-the-user.txt"]);
    assert_eq!(sb.classpath(), "", "no jars: an empty (0-byte) classpath");
    assert_eq!(sb.sourced_classpath(Some("/pre.jar")), "/pre.jar");
}

#[test]
fn boolean_env_twins_take_yes_no_words() {
    let server = serve(&[("/a.jar", 10_000)]);
    let sb = Sandbox::new();
    for (fsync, no_progress) in [("1", "yes"), ("on", "true"), ("0", "no"), ("off", "1")] {
        let out = sb
            .fetch()
            .args(["--jars", &server.url("/a.jar")])
            .env("SPARK_LOCALIZER_FSYNC", fsync)
            .env("SPARK_LOCALIZER_NO_PROGRESS", no_progress)
            .run();
        out.expect_code(0);
    }
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), data(100, 10_000));
    sb.fetch()
        .env("SPARK_LOCALIZER_FSYNC", "maybe")
        .run()
        .expect_code(2)
        .expect_stderr("--fsync");
}

#[test]
fn empty_env_twins_count_as_unset() {
    let server = serve(&[("/a.jar", 1_000)]);
    let sb = Sandbox::new();
    let props = sb.write(
        "spark.properties",
        format!("spark.jars={}\n", server.url("/a.jar")),
    );
    // The empty list does not hide the properties file; the empty dir does not
    // clash with the flag; empty values of typed settings are not parse errors.
    let mut run = sb.fetch().arg("--properties-file").arg(&props);
    for name in [
        "SPARK_LOCALIZER_JARS",
        "SPARK_LOCALIZER_FILES",
        "SPARK_LOCALIZER_JARS_DIR",
        "SPARK_LOCALIZER_DEADLINE",
        "SPARK_LOCALIZER_PARALLELISM",
        "SPARK_LOCALIZER_RETRIES",
        "SPARK_LOCALIZER_FSYNC",
        "SPARK_LOCALIZER_CLASSPATH_FILE",
        "SPARK_LOCALIZER_CHECKSUMS",
        "SPARK_LOCALIZER_CA_CERT",
        "SPARK_LOCALIZER_LOG_FORMAT",
    ] {
        run = run.env(name, "");
    }
    let out = run.run();
    out.expect_code(0);
    assert_eq!(
        sb.classpath(),
        format!("{}\n", s(&sb.jar("a.jar"))),
        "the properties file was not read\n{out}"
    );
}
