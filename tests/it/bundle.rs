//! `bundle` against the real registry (Debian's docker-registry, TLS and
//! htpasswd): a lock of Debian's maven-core 3.8.7 becomes an image that podman
//! pulls and mounts (in the throwaway storage) with every jar byte-exact, the
//! same digest on a second run, and a JVM loading classes from the mounted
//! image through the classpath outputs the last layer holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::maven::debian_repo;
use crate::support::podman::podman;
use crate::support::registry::{Registry, PASSWORD, USER};
use crate::support::{s, FaultServer, Sandbox};

/// The lock's entries: jar name → the path of its bytes in Debian's repository.
fn locked(lock: &str, repo_root: &str) -> BTreeMap<String, PathBuf> {
    lock.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let url = l.split_whitespace().nth(1).unwrap();
            let (url, name) = url.rsplit_once('#').unwrap();
            let path = url.strip_prefix(repo_root).unwrap();
            (
                name.to_owned(),
                Path::new("/usr/share/maven-repo").join(path),
            )
        })
        .collect()
}

fn ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_lock_becomes_an_image_that_podman_mounts_byte_exact_with_the_same_digest_every_time() {
    let Some(repo) = debian_repo() else { return };
    let Some(registry) = Registry::start(true, true) else {
        return;
    };
    let sb = Sandbox::new();
    let root = repo.url("/");
    let lock = sb.root.join("packages.lock");
    sb.resolve()
        .args(["--packages", "org.apache.maven:maven-core:3.8.7"])
        .args(["--repositories", &root, "--only-repositories", "--lock"])
        .arg(&lock)
        .run()
        .expect_code(0);
    let lock_text = std::fs::read_to_string(&lock).unwrap();
    let jars = locked(&lock_text, &root);
    assert!(jars.len() > 20, "{lock_text}");
    // A jar of our own beside the lock: its class is what the JVM runs.
    let Some(hello) =
        crate::jvm::jar_with_class(&sb.root, "hello.jar", "Hello", "hello from the image")
    else {
        return;
    };
    let hello_path = sb.write("hello.jar", &hello);
    let conf = sb.write("app.conf", "spark.executor.memory=2g\n");
    let tree = sb.root.join("tree");
    std::fs::create_dir_all(tree.join("nested")).unwrap();
    std::fs::write(tree.join("top.txt"), "top").unwrap();
    std::fs::write(tree.join("nested/deep.txt"), "deep").unwrap();
    let archive = sb.root.join("model.tar.gz");
    ok(std::process::Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&tree)
        .arg("."));
    let auth = sb.write("config.json", registry.docker_config(PASSWORD));
    let mount = sb.root.join("mnt");
    let host = registry.host();
    let target = format!("oci://{host}/spark/deps:1");
    let bundle = |sb: &Sandbox| {
        sb.bundle()
            .arg("--lock")
            .arg(&lock)
            .arg("--jars")
            .arg(format!("file://{}", s(&hello_path)))
            .arg("--files")
            .arg(format!("file://{}", s(&conf)))
            .arg("--archives")
            .arg(format!("file://{}#model", s(&archive)))
            .arg("--ca-cert")
            .arg(registry.ca_file())
            .arg("--registry-auth")
            .arg(&auth)
            .arg("--mount-path")
            .arg(&mount)
            .arg(&target)
            .run()
    };
    let first = bundle(&sb);
    first.expect_code(0);
    let reference = first.stdout.trim().to_owned();
    assert!(
        reference.starts_with(&format!("{host}/spark/deps@sha256:")),
        "{first}"
    );
    // Reproducible: another run (another working directory, other file times)
    // gives the same digest and uploads nothing.
    let again = bundle(&Sandbox::new());
    again
        .expect_code(0)
        .expect_stderr(&format!("0 blobs pushed, {} already there", jars.len() + 6));
    assert_eq!(again.stdout.trim(), reference);
    // An index for amd64 and arm64 over the same layers.
    let (kind, index) = registry.get(
        &format!(
            "spark/deps/manifests/{}",
            reference.rsplit_once('@').unwrap().1
        ),
        "application/vnd.oci.image.index.v1+json",
    );
    assert_eq!(kind, "application/vnd.oci.image.index.v1+json");
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let archs: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["platform"]["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(archs, ["amd64", "arm64"]);

    // A container runtime pulls and mounts it (the user's storage untouched).
    let certs = sb.root.join("certs.d");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(registry.ca_file(), certs.join("ca.crt")).unwrap();
    ok(podman()
        .args(["pull", "-q", "--cert-dir"])
        .arg(&certs)
        .args(["--creds", &format!("{USER}:{PASSWORD}"), &reference]));
    let mounted = PathBuf::from(ok(podman().args(["image", "mount", &reference])));
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = podman().args(["image", "unmount", &self.0]).output();
        }
    }
    let _unmount = Unmount(reference.clone());
    for (name, source) in &jars {
        let got = std::fs::read(mounted.join("jars").join(name))
            .unwrap_or_else(|e| panic!("jars/{name} in the image: {e}"));
        assert!(got == std::fs::read(source).unwrap(), "jars/{name} differs");
    }
    assert_eq!(
        std::fs::read(mounted.join("jars/hello.jar")).unwrap(),
        hello
    );
    assert_eq!(
        std::fs::read(mounted.join("files/app.conf")).unwrap(),
        std::fs::read(&conf).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(mounted.join("files/model/nested/deep.txt")).unwrap(),
        "deep"
    );
    let mut names: Vec<String> = std::fs::read_dir(mounted.join("jars"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = jars.keys().cloned().chain(["hello.jar".into()]).collect();
    expected.sort();
    assert_eq!(names, expected, "the image holds exactly the jars");
    // The SBOM in the image validates and lists every jar with its hash and purl.
    let sha = |bytes: &[u8]| crate::support::sha256_hex(bytes);
    if let Some(python) = crate::sbom::validator() {
        let bom = crate::sbom::validated(&python, &mounted.join("spark-localizer-sbom.cdx.json"));
        for (name, source) in &jars {
            let c = bom["components"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["bom-ref"] == format!("jars/{name}"))
                .unwrap_or_else(|| panic!("no component for {name}: {bom:#}"));
            assert_eq!(
                c["hashes"][0]["content"],
                sha(&std::fs::read(source).unwrap())
            );
            assert!(c["purl"].as_str().unwrap().starts_with("pkg:maven/"), "{c}");
        }
    }
    // The classpath names every jar under the mount path, in declared order.
    let classpath = std::fs::read_to_string(mounted.join("classpath")).unwrap();
    let entries: Vec<&str> = classpath.trim_end().split(':').collect();
    assert_eq!(entries.len(), jars.len() + 1, "{classpath}");
    let prefix = format!("{}/jars/", s(&mount));
    assert!(
        entries.iter().all(|e| e.starts_with(&prefix)),
        "{classpath}"
    );
    // Mounted where the classpath says (a link standing for the pod's
    // mount), a JVM runs the class from the image and finds maven-core's.
    std::os::unix::fs::symlink(&mounted, &mount).unwrap();
    let run = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            ". '{}/spark-classpath.env' && java -cp \"$SPARK_CLASSPATH\" Hello && javap -cp \"$SPARK_CLASSPATH\" org.apache.maven.DefaultMaven",
            s(&mount)
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("hello from the image"),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("class org.apache.maven.DefaultMaven"),
        "{stdout}"
    );

    // The init-container path: fetch of the same reference lays out the same
    // files, and writes the same classpath, where the image would be mounted.
    let pod = Sandbox::new();
    let into = pod.root.join("extra-jars");
    let fetch = || {
        pod.fetch()
            .no_dirs()
            .arg("--jars")
            .arg(format!("oci://{reference}"))
            .arg("--jars-dir")
            .arg(into.join("jars"))
            .arg("--files-dir")
            .arg(into.join("files"))
            .arg("--classpath-file")
            .arg(into.join("classpath"))
            .arg("--env-file")
            .arg(into.join("spark-classpath.env"))
            .arg("--report")
            .arg(pod.root.join("report.json"))
            .arg("--ca-cert")
            .arg(registry.ca_file())
            .arg("--registry-auth")
            .arg(&auth)
            .run()
    };
    fetch().expect_code(0);
    let mut image_files = tree_of(&mounted, &["spark-localizer-sbom.cdx.json"]);
    let mut fetched = tree_of(&into, &["jars/spark-localizer-sbom.cdx.json"]);
    let classpath_fetched = fetched.remove("classpath").unwrap();
    let classpath_image = image_files.remove("classpath").unwrap();
    fetched.remove("spark-classpath.env");
    image_files.remove("spark-classpath.env");
    assert_eq!(
        fetched.keys().collect::<Vec<_>>(),
        image_files.keys().collect::<Vec<_>>()
    );
    assert!(fetched == image_files, "the same paths hold other bytes");
    assert_eq!(
        String::from_utf8(classpath_fetched).unwrap(),
        String::from_utf8(classpath_image)
            .unwrap()
            .replace(&s(&mount), &s(&into)),
        "fetch writes the image's classpath, in the same order"
    );
    // Its SBOM names the jars the layers held, by their own hashes.
    let report_sbom: serde_json::Value = serde_json::from_slice(
        &std::fs::read(into.join("jars/spark-localizer-sbom.cdx.json")).unwrap(),
    )
    .unwrap();
    let hello_component = report_sbom["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["bom-ref"] == "jars/hello.jar")
        .unwrap();
    assert_eq!(hello_component["hashes"][0]["content"], sha(&hello));
    // A rerun keeps what is there.
    fetch()
        .expect_code(0)
        .expect_stderr(&format!("{} kept", jars.len() + 3));
}

/// Every file under `root` by its relative path (`/`-joined), without the
/// state directories and the names in `skip`.
fn tree_of(root: &Path, skip: &[&str]) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if name.starts_with(".spark-localizer") || skip.contains(&relative.as_str()) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, skip, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

#[test]
fn bundle_refuses_what_cannot_work_and_pushes_nothing_when_a_jar_fails() {
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let server = FaultServer::start();
    server.put("/a.jar", b"a".to_vec());
    let sb = Sandbox::new();
    let host = registry.host();
    let run = |extra: &[&str]| {
        sb.bundle()
            .args([
                "--jars",
                &server.url("/a.jar"),
                "--insecure-registry",
                &host,
            ])
            .args(extra)
            .run()
    };
    let digest = format!("sha256:{}", "0".repeat(64));
    for (extra, said) in [
        (
            vec![format!("oci://{host}/x@{digest}")],
            "give a tag".to_owned(),
        ),
        (vec!["https://x/y".to_owned()], "invalid target".to_owned()),
        (
            vec![
                "--mount-path".to_owned(),
                "opt/jars".to_owned(),
                format!("oci://{host}/x:1"),
            ],
            "--mount-path opt/jars".to_owned(),
        ),
        (
            vec![
                "--jars-dir".to_owned(),
                "/tmp/j".to_owned(),
                format!("oci://{host}/x:1"),
            ],
            "--jars-dir is not for bundle".to_owned(),
        ),
        // No tag: not `latest` by default.
        (vec![format!("oci://{host}/x")], "give a tag".to_owned()),
        (
            vec![
                "--mount-path".to_owned(),
                "/opt/a\tb".to_owned(),
                format!("oci://{host}/x:1"),
            ],
            "--mount-path /opt/a\\tb".to_owned(),
        ),
        (
            vec![
                "--report".to_owned(),
                "/tmp/r.json".to_owned(),
                format!("oci://{host}/x:1"),
            ],
            "--report is not for bundle".to_owned(),
        ),
        // Credentials that cannot be read: said before any jar is fetched.
        (
            vec![
                "--registry-auth".to_owned(),
                s(&sb.root.join("no-such.json")),
                format!("oci://{host}/x:1"),
            ],
            "no-such.json".to_owned(),
        ),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        run(&extra).expect_code(2).expect_stderr(&said);
    }
    assert!(server.gets("/a.jar").is_empty(), "a jar was fetched");
    // A name a runtime would take for a whiteout.
    let wh = sb.write(".wh.a.jar", b"x");
    sb.bundle()
        .args([
            "--jars",
            &format!("file://{}", s(&wh)),
            "--insecure-registry",
            &host,
        ])
        .arg(format!("oci://{host}/x:1"))
        .run()
        .expect_code(2)
        .expect_stderr("OCI whiteout");
    // Nothing to bundle.
    sb.bundle()
        .args(["--insecure-registry", &host])
        .arg(format!("oci://{host}/x:1"))
        .run()
        .expect_code(2)
        .expect_stderr("nothing to bundle");
    // A jar that cannot be fetched: fetch's exit code, and nothing pushed.
    sb.bundle()
        .args([
            "--jars",
            &server.url("/missing.jar"),
            "--insecure-registry",
            &host,
        ])
        .arg(format!("oci://{host}/x:1"))
        .run()
        .expect_code(3);
    assert!(
        !registry.log().contains("/v2/x/manifests/"),
        "{}",
        registry.log()
    );
    // A registry that is not there: a fetch failure naming it.
    sb.bundle()
        .args([
            "--jars",
            &server.url("/a.jar"),
            "--insecure-registry",
            "127.0.0.1:9",
        ])
        .arg("oci://127.0.0.1:9/x:1")
        .run()
        .expect_code(3)
        .expect_stderr("cannot push oci://127.0.0.1:9/x");
    let ok = run(&[&format!("oci://{host}/x:1")]);
    ok.expect_code(0);
    assert!(
        ok.stdout.trim().starts_with(&format!("{host}/x@sha256:")),
        "{ok}"
    );
}

#[test]
fn more_jars_than_layers_share_layers_and_fetch_lays_them_out_in_order() {
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let sb = Sandbox::new();
    let host = registry.host();
    // 150 jars, declared in the reverse of their names' order.
    let dir = sb.root.join("many");
    std::fs::create_dir_all(&dir).unwrap();
    let mut uris = Vec::new();
    for i in (0..150).rev() {
        let path = dir.join(format!("j{i:03}.jar"));
        std::fs::write(&path, crate::support::data(i, 100 + i as usize)).unwrap();
        uris.push(format!("file://{}", s(&path)));
    }
    let out = sb
        .bundle()
        .args(["--jars", &uris.join(","), "--insecure-registry", &host])
        .arg(format!("oci://{host}/many:1"))
        .run();
    out.expect_code(0).expect_stderr("(76 layers)");
    let reference = out.stdout.trim().to_owned();
    let pod = Sandbox::new();
    let fetch = || {
        pod.fetch()
            .args([
                "--jars",
                &format!("oci://{reference}"),
                "--insecure-registry",
                &host,
            ])
            .run()
    };
    fetch().expect_code(0);
    let declared: Vec<String> = (0..150)
        .rev()
        .map(|i| s(&pod.jar(&format!("j{i:03}.jar"))))
        .collect();
    assert_eq!(
        pod.classpath().trim_end(),
        declared.join(":"),
        "the declared order"
    );
    for i in 0..150u64 {
        assert_eq!(
            std::fs::read(pod.jar(&format!("j{i:03}.jar"))).unwrap(),
            crate::support::data(i, 100 + i as usize)
        );
    }
    fetch().expect_code(0).expect_stderr("75 kept");
}

#[test]
fn bundle_pushes_through_a_token_realm_that_grants_push_when_asked() {
    let Some(mut registry) = Registry::start(true, true) else {
        return;
    };
    let tokens = crate::support::registry::TokenServer::start();
    registry.reconfigure(Some(tokens.config()), None);
    let sb = Sandbox::new();
    let jar = sb.write("a.jar", crate::support::data(1, 1000));
    let auth = sb.write("config.json", registry.docker_config(PASSWORD));
    let host = registry.host();
    let realm_host = format!("127.0.0.1:{}", tokens.port);
    let out = sb
        .bundle()
        .args(["--jars", &format!("file://{}", s(&jar))])
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .arg("--registry-auth")
        .arg(&auth)
        .args(["--insecure-registry", &realm_host])
        .arg(format!("oci://{host}/team/deps:1"))
        .run();
    out.expect_code(0);
    assert!(
        tokens
            .requests()
            .iter()
            .any(|r| r.target.contains("team%2Fdeps%3Apull%2Cpush")),
        "no push scope asked: {:?}",
        tokens
            .requests()
            .iter()
            .map(|r| &r.target)
            .collect::<Vec<_>>()
    );
    // Pulled back by fetch with the same credentials: the jar as bundled.
    let pod = Sandbox::new();
    pod.fetch()
        .args(["--jars", &format!("oci://{}", out.stdout.trim())])
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .arg("--registry-auth")
        .arg(&auth)
        .args(["--insecure-registry", &realm_host])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(pod.jar("a.jar")).unwrap(),
        crate::support::data(1, 1000)
    );
}

/// A hostile image that says it is a bundle: a tree whose link climbs out of
/// what is published, a layer holding more than its path; and a jar another
/// artifact replaced between two runs is extracted again from its layer.
#[test]
fn fetch_of_a_bundle_refuses_hostile_layers_and_restores_a_replaced_jar() {
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let host = registry.host();
    let tgz = |entries: &[(&str, Option<&str>)]| {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, link) in entries {
            let mut h = tar::Header::new_gnu();
            match link {
                Some(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    h.set_mode(0o777);
                    tar.append_link(&mut h, path, target).unwrap();
                }
                None => {
                    h.set_size(1);
                    h.set_mode(0o644);
                    tar.append_data(&mut h, path, &b"x"[..]).unwrap();
                }
            }
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    };
    let push = |tag: &str, path: &str, blob: Vec<u8>| {
        let config = registry.push_blob("evil", b"{}");
        let size = blob.len();
        let layer = registry.push_owned("evil", blob);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": layer, "size": size,
                "annotations": {"io.github.spark-localizer.path": path},
            }],
        }))
        .unwrap();
        registry.push_manifest(
            "evil",
            tag,
            "application/vnd.oci.image.manifest.v1+json",
            &manifest,
        );
    };
    push(
        "link",
        "files/conf",
        tgz(&[("files/conf/a", None), ("files/conf/s", Some("../../jars"))]),
    );
    push(
        "extra",
        "jars/a.jar",
        tgz(&[("jars/a.jar", None), ("jars/b.jar", None)]),
    );
    push("good", "jars/a.jar", tgz(&[("jars/a.jar", None)]));
    let sb = Sandbox::new();
    let fetch = |tag: &str| {
        sb.fetch()
            .args(["--jars", &format!("oci://{host}/evil:{tag}")])
            .args(["--insecure-registry", &host])
            .run()
    };
    fetch("link")
        .expect_code(4)
        .expect_stderr("pointing outside");
    assert!(!sb.files.join("conf").exists());
    fetch("extra")
        .expect_code(4)
        .expect_stderr("'b.jar' beside");
    assert!(!sb.jar("a.jar").exists() && !sb.jar("b.jar").exists());
    fetch("good").expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), b"x");
    std::fs::write(sb.jar("a.jar"), b"another artifact's").unwrap();
    fetch("good").expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), b"x");
}

/// A registry that starts an upload and then never answers its `PUT` (it holds the
/// connection and reads nothing more): the push stalls after `--stall-timeout`, like a
/// download that gets no bytes, is retried, and fails with exit 3 long before `--deadline`
/// (it ran until the deadline, exit 5, when only the deadline bounded an upload).
#[test]
fn an_upload_the_registry_never_answers_stalls_instead_of_running_to_the_deadline() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let puts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = std::sync::Arc::clone(&puts);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let held = std::sync::Arc::clone(&held);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    let mut head = Vec::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push(line);
                    }
                    let answer = match head[0].split(' ').next().unwrap() {
                        "POST" => "HTTP/1.1 202 Accepted\r\nLocation: /v2/team/deps/blobs/uploads/1\r\nContent-Length: 0\r\n\r\n",
                        "PUT" => {
                            // Never answered, never read again: the test's end closes it.
                            held.lock().unwrap().push(writer);
                            return;
                        }
                        _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                    };
                    writer.write_all(answer.as_bytes()).unwrap();
                }
            });
        }
    });
    let sb = Sandbox::new();
    let jar = sb.write("a.jar", crate::support::data(2, 1000));
    let out = sb
        .bundle()
        .args(["--jars", &format!("file://{}", s(&jar))])
        .args(["--insecure-registry", &host])
        .args([
            "--stall-timeout",
            "1s",
            "--retries",
            "1",
            "--deadline",
            "10m",
        ])
        .arg(format!("oci://{host}/team/deps:1"))
        .run();
    out.expect_code(3);
    assert!(
        out.stderr
            .contains(&format!("cannot push oci://{host}/team/deps"))
            && out
                .stderr
                .contains("no answer within 1.0s (--stall-timeout)"),
        "{}",
        out.stderr
    );
    // Each blob's PUT, and its retry.
    let puts = puts.lock().unwrap().len();
    assert!(puts >= 2 && puts % 2 == 0, "{puts} PUTs");
}

/// The working directories killed bundles left under TMPDIR (their lock file free) are
/// removed by the next bundle, refused or not; a running bundle's (its lock held), one
/// being made (no lock file yet) and anything else there are left.
#[test]
fn a_bundle_removes_the_working_directories_killed_bundles_left() {
    let sb = Sandbox::new();
    let tmp = sb.root.join("tmp");
    let dir = |name: &str| {
        let dir = tmp.join(format!("spark-localizer-bundle.{name}"));
        std::fs::create_dir_all(dir.join("jars")).unwrap();
        dir
    };
    let killed = dir("killed");
    std::fs::write(killed.join(".owner"), "").unwrap();
    std::fs::write(killed.join("jars/a.jar"), "x").unwrap();
    let running = dir("running");
    let lock = std::fs::File::create(running.join(".owner")).unwrap();
    lock.try_lock().unwrap();
    dir("making");
    std::fs::create_dir_all(tmp.join("unrelated")).unwrap();
    sb.bundle()
        .env("TMPDIR", &s(&tmp))
        .arg("oci://127.0.0.1:1/team/deps:1")
        .run()
        .expect_code(2);
    let mut left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "spark-localizer-bundle.making",
            "spark-localizer-bundle.running",
            "unrelated"
        ]
    );
    drop(lock);
}
