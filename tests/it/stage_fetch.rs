//! Staging bundles in `fetch`: the real `stage serve` subprocess, bundles uploaded
//! with `stage upload` (or hand-built for hostile cases), fetched with the secret
//! from a file, as the original init container did: files flat in the jars/files
//! directories, the jars bundle's jars on the classpath (proved with a real JVM),
//! restart re-verification, refusals with clear messages and exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::stage_serve::{bundle, Stage};
use crate::support::pki::Pki;
use crate::support::FaultServer;
use crate::support::{assert_no_secrets, data, s, sha256_hex, Sandbox, BIN};

/// Runs `stage upload` against `stage`; returns (id, secret).
fn upload(stage: &Stage, kind: &str, files: &[&Path], extra: &[&str]) -> (String, String) {
    let out = Command::new(BIN)
        .args(["stage", "upload", "--server"])
        .arg(format!("http://{}", stage.addr))
        .args(["--kind", kind])
        .args(extra)
        .args(files)
        .env_remove("SPARK_LOCALIZER_STAGE_SERVER")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stage upload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        json["resourceId"].as_str().unwrap().to_owned(),
        json["resourceSecret"].as_str().unwrap().to_owned(),
    )
}

/// The report's entry for `uri`.
fn by_uri(sb: &Sandbox, uri: &str) -> serde_json::Value {
    let report = sb.report();
    report["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["uri"] == uri)
        .cloned()
        .unwrap_or_else(|| panic!("no {uri} in {report:#}"))
}

/// Writes `files` under `dir`; returns their paths.
fn write_files(dir: &Path, files: &[(&str, &[u8])]) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    files
        .iter()
        .map(|(name, data)| {
            let p = dir.join(name);
            std::fs::write(&p, data).unwrap();
            p
        })
        .collect()
}

#[test]
fn bundles_from_the_original_properties_keys_land_flat_and_jars_join_the_classpath() {
    let work = tempfile::tempdir().unwrap();
    let stage = Stage::start(&work.path().join("store"), &[]);
    let Some(main_jar) =
        crate::jvm::jar_with_class(work.path(), "app.jar", "StagedMain", "from the staged jar")
    else {
        if std::env::var_os("CI").is_some() {
            panic!("no JDK (javac, jar) found; scripts/test.sh installs default-jdk-headless");
        }
        eprintln!("SKIP: no JDK installed; run scripts/test.sh");
        return;
    };
    let lib = data(1, 300_000);
    let up = work.path().join("upload");
    let jars = write_files(
        &up,
        &[
            ("app.jar", &main_jar),
            ("lib.jar", &lib),
            ("notes.txt", b"n"),
        ],
    );
    let files = write_files(
        &up.join("f"),
        &[("app.conf", b"k=v\n"), ("data.csv", &data(2, 5000))],
    );
    let (jars_id, jars_secret) = upload(&stage, "jars", &[&jars[0], &jars[1], &jars[2]], &[]);
    let (files_id, files_secret) = upload(&stage, "files", &[&files[0], &files[1]], &[]);

    let sb = Sandbox::new();
    let secrets = sb.root.join("spark-init");
    std::fs::create_dir_all(&secrets).unwrap();
    // As a mounted Secret: with a trailing newline on one of them.
    std::fs::write(
        secrets.join("downloadSubmittedJarsSecret"),
        format!("{jars_secret}\n"),
    )
    .unwrap();
    std::fs::write(secrets.join("downloadSubmittedFilesSecret"), &files_secret).unwrap();
    let props = sb.write(
        "spark.properties",
        format!(
            "spark.kubernetes.resourceStagingServer.internal.uri=http://{addr}\n\
             spark.kubernetes.resourceStagingServer.uri=http://127.0.0.1:1\n\
             spark.kubernetes.initcontainer.downloadJarsResourceIdentifier={jars_id}\n\
             spark.kubernetes.initcontainer.downloadJarsSecretLocation={dir}/downloadSubmittedJarsSecret\n\
             spark.kubernetes.initcontainer.downloadFilesResourceIdentifier={files_id}\n\
             spark.kubernetes.initcontainer.downloadFilesSecretLocation={dir}/downloadSubmittedFilesSecret\n",
            addr = stage.addr,
            dir = s(&secrets),
        ),
    );
    let run = sb.fetch().args(["--properties-file", &s(&props)]).run();
    run.expect_code(0);
    for secret in [&jars_secret, &files_secret] {
        assert!(
            !sb.all_output(&run).contains(secret.as_str()),
            "secret leaked\n{run}"
        );
    }
    assert_no_secrets("fetch output", &sb.all_output(&run));

    // Flat, byte-exact, where the original init container put them.
    assert_eq!(std::fs::read(sb.jars.join("app.jar")).unwrap(), main_jar);
    assert_eq!(std::fs::read(sb.jars.join("lib.jar")).unwrap(), lib);
    assert_eq!(std::fs::read(sb.jars.join("notes.txt")).unwrap(), b"n");
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), b"k=v\n");
    assert_eq!(
        sha256_hex(&std::fs::read(sb.files.join("data.csv")).unwrap()),
        sha256_hex(&data(2, 5000))
    );
    // Jars of the bundle, in the bundle's order; not the .txt.
    assert_eq!(
        sb.classpath().trim_end(),
        format!("{}:{}", s(&sb.jar("app.jar")), s(&sb.jar("lib.jar")))
    );
    let entry = by_uri(&sb, &format!("staging://{jars_id}"));
    assert_eq!(entry["status"], "fetched");
    let names: Vec<&str> = entry["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app.jar", "lib.jar", "notes.txt"]);
    assert_eq!(entry["files"][1]["sha256"], sha256_hex(&lib));

    // A real JVM starts with the staged class, through the sourced env file.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            ". '{}' && exec java -cp \"$SPARK_CLASSPATH\" StagedMain",
            s(&sb.jars.join("spark-classpath.env"))
        ))
        .env("SPARK_CLASSPATH", "/opt/spark/jars/*")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "from the staged jar",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Restart with the server gone: the kept bundles verify, nothing is fetched.
    stage.kill();
    sb.fetch()
        .args(["--properties-file", &s(&props)])
        .run()
        .expect_code(0);
    assert_eq!(
        by_uri(&sb, &format!("staging://{files_id}"))["status"],
        "kept"
    );
    // A file changed or removed in the emptyDir is published again from the kept bundle.
    std::fs::write(sb.jars.join("lib.jar"), b"tampered").unwrap();
    std::fs::remove_file(sb.files.join("app.conf")).unwrap();
    sb.fetch()
        .args(["--properties-file", &s(&props)])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jars.join("lib.jar")).unwrap(), lib);
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), b"k=v\n");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());

    // A plan without the bundles removes their files.
    sb.fetch().run().expect_code(0);
    for gone in [
        sb.jar("app.jar"),
        sb.jar("lib.jar"),
        sb.files.join("data.csv"),
    ] {
        assert!(!gone.exists(), "{} survived", gone.display());
    }
}

#[test]
fn flags_env_and_staging_uris_with_a_wrong_secret_or_unknown_id() {
    let work = tempfile::tempdir().unwrap();
    let stage = Stage::start(&work.path().join("store"), &[]);
    let jars = write_files(&work.path().join("up"), &[("a.jar", &data(3, 1000))]);
    let (id, secret) = upload(&stage, "jars", &[&jars[0]], &[]);
    let sb = Sandbox::new();
    let good = sb.write("good", &secret);
    let wrong = sb.write("wrong", "not-the-secret");
    let server = format!("http://{}", stage.addr);

    // Env twins, and a staging:// URI in --jars next to the id flag's bundle.
    sb.fetch()
        .env("SPARK_LOCALIZER_STAGING_URI", &server)
        .env("SPARK_LOCALIZER_STAGING_JARS_ID", &id)
        .env("SPARK_LOCALIZER_STAGING_JARS_SECRET_FILE", &s(&good))
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), data(3, 1000));

    // A wrong secret: refused at once (no retries), naming the secret file, never its value.
    let sb = Sandbox::new();
    let run = sb
        .fetch()
        .retry_delay("5s")
        .args([
            "--staging-uri",
            &server,
            "--jars",
            &format!("staging://{id}"),
        ])
        .args(["--staging-jars-secret-file", &s(&wrong)])
        .run();
    run.expect_code(3)
        .expect_stderr("401")
        .expect_stderr(&s(&wrong));
    assert!(run.elapsed < std::time::Duration::from_secs(5), "{run}");
    assert!(!sb.all_output(&run).contains("not-the-secret"));
    assert!(!sb.jar("a.jar").exists());

    // An unknown id: 404 with what it means.
    sb.fetch()
        .args([
            "--staging-uri",
            &server,
            "--staging-jars-secret-file",
            &s(&good),
        ])
        .args(["--staging-jars-id", "0123456789abcdef0123456789abcdef"])
        .run()
        .expect_code(3)
        .expect_stderr("expired");

    // Configuration errors, all at once, before any traffic (exit 2).
    let run = sb
        .fetch()
        .args(["--staging-jars-id", &id, "--staging-files-id", "bad/id"])
        .run();
    run.expect_code(2)
        .expect_stderr("needs the staging server's URL")
        .expect_stderr("--staging-files-id");
    sb.fetch()
        .args(["--staging-uri", &server, "--staging-jars-id", &id])
        .args(["--staging-jars-secret-file", &s(&sb.root.join("missing"))])
        .run()
        .expect_code(2)
        .expect_stderr("downloadSubmittedJarsSecret")
        // Issue 15: the secret file's flag is named, not the bundle id's.
        .expect_stderr("invalid --staging-jars-secret-file: cannot read");
    sb.fetch()
        .args(["--staging-uri", "ftp://x", "--staging-jars-id", &id])
        .run()
        .expect_code(2)
        .expect_stderr("--staging-uri");
    sb.fetch()
        .args([
            "--staging-uri",
            &server,
            "--archives",
            &format!("staging://{id}"),
        ])
        .run()
        .expect_code(2)
        .expect_stderr("--jars or --files");
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0));
    assert!(!stderr.contains(&secret));
}

#[test]
fn bundles_that_are_not_flat_or_collide_are_refused_and_nothing_is_published() {
    let work = tempfile::tempdir().unwrap();
    let stage = Stage::start(&work.path().join("store"), &[]);
    let server = format!("http://{}", stage.addr);
    let sb = Sandbox::new();
    // Our server refuses such bundles at upload; the original (fork's) server,
    // played here by a plain HTTP server, stores whatever it is given.
    let original = FaultServer::start();
    let fork = original.url("");
    let nested = "0123456789abcdef0123456789abcdef";
    original.put(
        &format!("/api/v0/resources/{nested}"),
        bundle(&[("ok.jar", b"x"), ("lib/inner.jar", b"y")]),
    );
    let secret = sb.write("nested", "fork-secret");
    sb.fetch()
        .args(["--staging-uri", &fork, "--staging-jars-id", nested])
        .args(["--staging-jars-secret-file", &s(&secret)])
        .run()
        .expect_code(4)
        .expect_stderr("top level only");
    assert!(!sb.jar("ok.jar").exists() && !sb.jar("lib").exists());

    // A bundle file named like another artifact, or like the classpath output.
    let (clash, clash_secret) = stage.stage(&bundle(&[("a.jar", b"from the bundle")]));
    let secret = sb.write("clash", &clash_secret);
    let local = sb.write("a.jar", b"from file://");
    sb.fetch()
        .args(["--staging-uri", &server, "--staging-jars-id", &clash])
        .args(["--staging-jars-secret-file", &s(&secret)])
        .args(["--jars", &format!("file://{}", s(&local))])
        .run()
        .expect_code(4)
        .expect_stderr("also puts");
    let out = "fedcba9876543210fedcba9876543210";
    original.put(
        &format!("/api/v0/resources/{out}"),
        bundle(&[("classpath", b"/evil.jar")]),
    );
    let secret = sb.write("out", "fork-secret");
    sb.fetch()
        .args(["--staging-uri", &fork, "--staging-jars-id", out])
        .args(["--staging-jars-secret-file", &s(&secret)])
        .run()
        .expect_code(4)
        .expect_stderr("--classpath-file");
    assert!(!sb.jars.join("classpath").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn tls_staging_server_with_the_staging_ca() {
    let pki = Pki::new();
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = pki.write_leaf(work.path());
    let stage = Stage::start(
        &work.path().join("store"),
        &["--tls-cert", &s(&cert), "--tls-key", &s(&key)],
    );
    let ca = work.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let jars = write_files(&work.path().join("up"), &[("tls.jar", &data(4, 70_000))]);
    // Issue 15: without the CA, stage upload gives fetch's hint.
    let untrusted = Command::new(BIN)
        .args(["stage", "upload", "--server"])
        .arg(format!("https://{}", stage.addr))
        .arg(&jars[0])
        .env_remove("SSL_CERT_FILE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert_eq!(untrusted.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("trust the server's CA with --ca-cert or SSL_CERT_FILE"),
        "{stderr}"
    );
    let out = Command::new(BIN)
        .args([
            "stage",
            "upload",
            "--server",
            &format!("https://{}", stage.addr),
        ])
        .args(["--ca-cert", &s(&ca)])
        .arg(&jars[0])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sb = Sandbox::new();
    let secret = sb.write("secret", json["resourceSecret"].as_str().unwrap());
    let args = [
        "--staging-uri".to_owned(),
        format!("https://{}", stage.addr),
        "--staging-jars-id".to_owned(),
        json["resourceId"].as_str().unwrap().to_owned(),
        "--staging-jars-secret-file".to_owned(),
        s(&secret),
    ];
    // Without the staging CA: a TLS failure, at once.
    sb.fetch()
        .args(&args)
        .run()
        .expect_code(3)
        .expect_stderr("certificate");
    // With it (the original properties key for the PEM works too).
    sb.fetch()
        .args(&args)
        .args(["--staging-ca-cert", &s(&ca)])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("tls.jar")).unwrap(), data(4, 70_000));
    let sb = Sandbox::new();
    let props = sb.write(
        "p.properties",
        format!(
            "spark.ssl.kubernetes.resourceStagingServer.internal.clientCertPem={}\n",
            s(&ca)
        ),
    );
    sb.fetch()
        .args(&args)
        .args(["--properties-file", &s(&props)])
        .run()
        .expect_code(0);
}

#[test]
fn one_upload_of_jars_and_files_feeds_fetch_through_the_secret_manifest() {
    let work = tempfile::tempdir().unwrap();
    let stage = Stage::start(&work.path().join("store"), &[]);
    let up = work.path().join("up");
    let jars = write_files(&up, &[("x.jar", &data(5, 2000)), ("y.jar", &data(6, 3000))]);
    let files = write_files(&up.join("f"), &[("x.conf", b"x=1\n")]);
    let out = Command::new(BIN)
        .args([
            "stage",
            "upload",
            "--server",
            &format!("http://{}", stage.addr),
        ])
        .args(["--secret-manifest", "spark-init", "--namespace", "spark"])
        .arg("--jars")
        .arg(format!("{},{}", s(&jars[0]), s(&jars[1])))
        .arg("--files")
        .arg(&files[0])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = String::from_utf8(out.stdout).unwrap();
    assert_eq!(manifest.matches("kind: Secret").count(), 1, "{manifest}");

    // What kubectl would mount: each stringData key a file in the Secret volume.
    let sb = Sandbox::new();
    let mount = sb.root.join("spark-init");
    std::fs::create_dir_all(&mount).unwrap();
    for line in manifest.lines() {
        if let Some((key, value)) = line.trim_start().split_once(": ") {
            if key.starts_with("downloadSubmitted") {
                let value: String = serde_json::from_str(value).unwrap();
                std::fs::write(mount.join(key), value).unwrap();
            }
        }
    }
    // The properties the manifest lists, pointed at this mount.
    let props: String = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("#   spark."))
        .map(|l| l.split("   (").next().unwrap())
        .map(|l| {
            format!(
                "spark.{}\n",
                l.replace("/mnt/secrets/spark-init", &s(&mount))
            )
        })
        .collect();
    assert_eq!(props.lines().count(), 6, "{props}");
    let props = sb.write("spark.properties", props);
    sb.fetch()
        .args(["--properties-file", &s(&props)])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("x.jar")).unwrap(), data(5, 2000));
    assert_eq!(std::fs::read(sb.jar("y.jar")).unwrap(), data(6, 3000));
    assert_eq!(std::fs::read(sb.files.join("x.conf")).unwrap(), b"x=1\n");
    assert_eq!(
        sb.classpath().trim_end(),
        format!("{}:{}", s(&sb.jar("x.jar")), s(&sb.jar("y.jar")))
    );

    // The server refusing the second bundle (too large): the first one is deleted.
    let small = Stage::start(
        &work.path().join("small"),
        &["--max-upload-bytes", "100000"],
    );
    let big = write_files(&up.join("big"), &[("big.bin", &data(7, 300_000))]);
    let out = Command::new(BIN)
        .args([
            "stage",
            "upload",
            "--server",
            &format!("http://{}", small.addr),
        ])
        .arg("--jars")
        .arg(&jars[0])
        .arg("--files")
        .arg(&big[0])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("deleted the jars bundle"), "{stderr}");
    assert_eq!(small.metric("uploads_total"), 1);
    assert_eq!(small.metric("bundles_stored"), 0);
}

#[test]
fn damaged_bundles_are_refused_by_the_server_and_by_fetch() {
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    let stage = Stage::start(&store, &[]);
    let server = format!("http://{}", stage.addr);
    // Incompressible contents: a flipped byte in the middle changes the file but
    // still decodes; only the gzip CRC at the end tells.
    let payload = data(8, 200_000);
    let good = bundle(&[("payload.jar", &payload)]);
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    let (content_type, body) = crate::stage_serve::multipart(&[
        ("resources", "application/octet-stream", &flipped),
        (
            "resourcesOwner",
            "application/json",
            br#"{"namespace":"spark","labels":{},"ownerType":"Pod"}"#,
        ),
    ]);
    let refused = stage.send(
        "POST",
        "/api/v0/resources",
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(refused.status, 400, "{refused:?}");

    // The stored bytes damaged behind the server's back: fetch checks them against
    // the sha256 the server announces, and publishes nothing.
    let (id, secret) = stage.stage(&good);
    let stored = store.join("bundles").join(&id).join("bundle.tar.gz");
    let mut bytes = std::fs::read(&stored).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&stored, &bytes).unwrap();
    let sb = Sandbox::new();
    let secret = sb.write("secret", &secret);
    sb.fetch()
        .args(["--staging-uri", &server, "--staging-jars-id", &id])
        .args(["--staging-jars-secret-file", &s(&secret)])
        .run()
        .expect_code(4)
        .expect_stderr("announced sha256");
    assert!(!sb.jar("payload.jar").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_kept_bundle_survives_another_spelling_of_the_server_and_ids_are_checked_raw() {
    let work = tempfile::tempdir().unwrap();
    let stage = Stage::start(&work.path().join("store"), &[]);
    let jars = write_files(&work.path().join("up"), &[("k.jar", &data(9, 4000))]);
    let (id, secret) = upload(&stage, "jars", &[&jars[0]], &[]);
    let sb = Sandbox::new();
    let secret = sb.write("secret", &secret);
    let fetch = |server: &str| {
        sb.fetch()
            .args(["--staging-uri", server, "--staging-jars-id", &id])
            .args(["--staging-jars-secret-file", &s(&secret)])
            .run()
    };
    fetch(&format!("http://{}", stage.addr)).expect_code(0);
    stage.kill();
    // The pod now reaches the server by another name, and the server is down: the
    // kept bundle and its files are the same bundle, so nothing is fetched.
    let run = fetch("http://127.0.0.1:1/staging");
    run.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("k.jar")).unwrap(), data(9, 4000));

    // A newline in an id is refused, not silently dropped by URL parsing.
    sb.fetch()
        .args(["--staging-uri", "http://127.0.0.1:1"])
        .args(["--staging-jars-id", "ab\ncd"])
        .run()
        .expect_code(2)
        .expect_stderr("control characters");
    // An invalid --staging-uri is one error, not also "needs the staging server's URL".
    let run = sb
        .fetch()
        .args(["--staging-uri", "ftp://x", "--staging-jars-id", &id])
        .run();
    run.expect_code(2);
    assert!(!run.stderr.contains("needs the staging server"), "{run}");
}
