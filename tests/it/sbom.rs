//! The CycloneDX SBOM `fetch` and `resolve` write, validated by PyPI's
//! cyclonedx-python-lib (the CycloneDX 1.6 JSON schema, strict) and
//! packageurl-python (`tests/sbom/validate.py`): every artifact with its SHA-256
//! and purl, the packages' dependency graph, no credentials, no local path, the
//! same bytes for the same inputs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{assert_no_secrets, data, s, sha256_hex, tar_gz, FaultServer, Sandbox};

const SBOM: &str = "spark-localizer-sbom.cdx.json";

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// The Python with cyclonedx-python-lib: `SPARK_LOCALIZER_TEST_CYCLONEDX_PYTHON`
/// (`scripts/test.sh` installs it into target/test-venv), else that venv's;
/// `None` (SKIP) locally when neither has it, a failure under CI.
pub(crate) fn validator() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/python");
    let python = match std::env::var_os("SPARK_LOCALIZER_TEST_CYCLONEDX_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => venv,
    };
    let has = Command::new(&python)
        .args(["-c", "import cyclonedx.validation.json, packageurl"])
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        assert!(
            !ci(),
            "{} has no cyclonedx-python-lib: `bash scripts/test.sh` installs it",
            python.display()
        );
        eprintln!("SKIP: no cyclonedx-python-lib (set SPARK_LOCALIZER_TEST_CYCLONEDX_PYTHON)");
        return None;
    }
    Some(python)
}

/// Validates the SBOM at `path` (the test fails with the validator's messages)
/// and returns it.
#[track_caller]
pub(crate) fn validated(python: &Path, path: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sbom/validate.py");
    let out = Command::new(python).arg(script).arg(path).output().unwrap();
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no SBOM at {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "{} does not validate:\n{}{}\n{text}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&text).unwrap()
}

fn components(bom: &Value) -> &Vec<Value> {
    bom["components"].as_array().expect("components")
}

fn component<'a>(bom: &'a Value, bom_ref: &str) -> &'a Value {
    components(bom)
        .iter()
        .find(|c| c["bom-ref"] == bom_ref)
        .unwrap_or_else(|| panic!("no component {bom_ref}:\n{bom:#}"))
}

/// `ref -> dependsOn`, in order.
fn graph(bom: &Value) -> Vec<(String, Vec<String>)> {
    bom["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .map(|d| {
            let on = d["dependsOn"].as_array().unwrap();
            (
                d["ref"].as_str().unwrap().to_owned(),
                on.iter().map(|r| r.as_str().unwrap().to_owned()).collect(),
            )
        })
        .collect()
}

/// Two jars (one renamed), a file and a tar.gz archive over plain HTTP.
struct Inputs {
    server: FaultServer,
    args: Vec<String>,
    archive: Vec<u8>,
}

fn inputs() -> Inputs {
    let server = FaultServer::start();
    server.put("/lib/a.jar", data(1, 20_000));
    server.put("/lib/b-1.0.jar", data(2, 3_000));
    server.put("/conf/app.conf", data(3, 300));
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("x.txt"), "x\n").unwrap();
    let tgz = tempfile::NamedTempFile::new().unwrap();
    tar_gz(work.path(), tgz.path());
    let archive = std::fs::read(tgz.path()).unwrap();
    server.put("/env.tar.gz", archive.clone());
    let args = vec![
        "--jars".into(),
        format!(
            "{},{}#b.jar",
            server.url("/lib/a.jar"),
            server.url("/lib/b-1.0.jar")
        ),
        "--files".into(),
        server.url("/conf/app.conf"),
        "--archives".into(),
        format!("{}#env", server.url("/env.tar.gz")),
    ];
    Inputs {
        server,
        args,
        archive,
    }
}

/// (1) and (3): plain URIs, a file and an archive give a valid SBOM listing each
/// with its SHA-256, type, purl and kind, in declared order, with no local path;
/// a run in another directory, and a rerun that keeps everything, give the
/// same bytes.
#[test]
fn sbom_of_plain_uris_validates_and_is_reproducible() {
    let Some(python) = validator() else { return };
    let inputs = inputs();
    let sb = Sandbox::new();
    sb.fetch().args(&inputs.args).run().expect_code(0);
    let path = sb.jars.join(SBOM);
    let bom = validated(&python, &path);
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.6");
    assert_eq!(bom["version"], 1);
    let tool = &bom["metadata"]["tools"]["components"][0];
    assert_eq!(tool["name"], "spark-localizer", "{bom:#}");
    assert_eq!(tool["version"], env!("CARGO_PKG_VERSION"), "{bom:#}");
    assert!(bom["metadata"].get("timestamp").is_none(), "{bom:#}");
    let refs: Vec<&str> = components(&bom)
        .iter()
        .map(|c| c["bom-ref"].as_str().unwrap())
        .collect();
    assert_eq!(
        refs,
        ["jars/a.jar", "jars/b.jar", "files/app.conf", "archives/env"]
    );
    let url = |p: &str| inputs.server.url(p);
    let expected = [
        (
            "jars/a.jar",
            "library",
            sha256_hex(&data(1, 20_000)),
            "a.jar",
            url("/lib/a.jar"),
            "jars",
        ),
        (
            "jars/b.jar",
            "library",
            sha256_hex(&data(2, 3_000)),
            "b.jar",
            url("/lib/b-1.0.jar"),
            "jars",
        ),
        (
            "files/app.conf",
            "file",
            sha256_hex(&data(3, 300)),
            "app.conf",
            url("/conf/app.conf"),
            "files",
        ),
        (
            "archives/env",
            "file",
            sha256_hex(&inputs.archive),
            "env",
            url("/env.tar.gz"),
            "archives",
        ),
    ];
    for (bom_ref, kind, sha, name, download, dir) in expected {
        let c = component(&bom, bom_ref);
        assert_eq!(c["type"], kind, "{c:#}");
        assert_eq!(c["name"], name, "{c:#}");
        assert_eq!(c["hashes"][0]["alg"], "SHA-256", "{c:#}");
        assert_eq!(c["hashes"][0]["content"], sha, "{c:#}");
        assert_eq!(
            c["purl"],
            format!("pkg:generic/{name}?download_url={download}"),
            "{c:#}"
        );
        let kind_property = c["properties"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "spark-localizer:kind");
        assert_eq!(kind_property.unwrap()["value"], dir, "{c:#}");
    }
    // Every component in the graph, none depending on another.
    assert!(graph(&bom).iter().all(|(_, on)| on.is_empty()), "{bom:#}");
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        !text.contains(&s(&sb.root)),
        "a local path in the SBOM:\n{text}"
    );
    assert!(!text.contains("/tmp/"), "a local path in the SBOM:\n{text}");

    // (3) Determinism: another directory, and a rerun keeping everything.
    let other = Sandbox::with_jars_dir("elsewhere");
    other.fetch().args(&inputs.args).run().expect_code(0);
    assert_eq!(std::fs::read(other.jars.join(SBOM)).unwrap(), bytes);
    sb.fetch()
        .args(&inputs.args)
        .run()
        .expect_code(0)
        .expect_stderr("4 kept");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// (4) `--no-sbom` writes none, `--sbom PATH` (and the env twins) moves it; the
/// SBOM's path is reserved; a failed run removes an SBOM an earlier run wrote,
/// never a file of someone else's.
#[test]
fn sbom_flags_and_failed_runs() {
    let server = FaultServer::start();
    server.put("/a.jar", data(1, 1_000));
    let jar = server.url("/a.jar");
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &jar, "--no-sbom"])
        .run()
        .expect_code(0);
    assert!(!sb.jars.join(SBOM).exists());
    sb.fetch()
        .args(["--jars", &jar])
        .env("SPARK_LOCALIZER_NO_SBOM", "true")
        .run()
        .expect_code(0);
    assert!(!sb.jars.join(SBOM).exists());

    let moved = sb.root.join("out/bom.cdx.json");
    sb.fetch()
        .args(["--jars", &jar, "--sbom", &s(&moved)])
        .run()
        .expect_code(0);
    assert!(moved.is_file() && !sb.jars.join(SBOM).exists());
    let twin = sb.root.join("twin.cdx.json");
    sb.fetch()
        .args(["--jars", &jar])
        .env("SPARK_LOCALIZER_SBOM", &s(&twin))
        .run()
        .expect_code(0);
    assert!(twin.is_file());

    // No artifact may land on it.
    let out = sb.fetch().args(["--jars", &format!("{jar}#{SBOM}")]).run();
    out.expect_code(2).expect_stderr("--sbom");

    // A failed run removes the SBOM of an earlier one (it would vouch for jars
    // this run does not), but not a file that is not ours.
    sb.fetch().args(["--jars", &jar]).run().expect_code(0);
    assert!(sb.jars.join(SBOM).is_file());
    let missing = format!("{jar},{}", server.url("/missing.jar"));
    sb.fetch().args(["--jars", &missing]).run().expect_code(3);
    assert!(!sb.jars.join(SBOM).exists(), "a failed run left the SBOM");
    assert!(!sb.jars.join("classpath").exists());
    let theirs = sb.write("theirs.json", "{\"not\": \"ours\"}\n");
    sb.fetch()
        .args(["--jars", &missing, "--sbom", &s(&theirs)])
        .run()
        .expect_code(3);
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        "{\"not\": \"ours\"}\n"
    );
    // A run stopped before any transfer (a package that cannot be resolved)
    // removes it too.
    sb.fetch().args(["--jars", &jar]).run().expect_code(0);
    assert!(sb.jars.join(SBOM).is_file());
    sb.fetch()
        .args(["--jars", &jar, "--packages", "org.x:nothing:1"])
        .args([
            "--repositories",
            &server.url("/repo/"),
            "--only-repositories",
        ])
        .run()
        .expect_code(3);
    assert!(
        !sb.jars.join(SBOM).exists(),
        "an unresolved run left the SBOM"
    );
}

/// (5) A URL with `user:password@` and a presigned query: neither the password,
/// the user, nor any part of the query reaches the SBOM.
#[test]
fn sbom_holds_no_credentials_or_query() {
    let Some(python) = validator() else { return };
    let server = FaultServer::start();
    server.put("/secret/a.jar", data(9, 500));
    let uri = server
        .url("/secret/a.jar")
        .replacen("http://", "http://user:SECRETPW@", 1)
        + "?X-Amz-Signature=SECRETSIG&X-Amz-Credential=AKIDSECRET&token=SECRETTOK";
    let sb = Sandbox::new();
    sb.fetch().args(["--jars", &uri]).run().expect_code(0);
    let path = sb.jars.join(SBOM);
    let bom = validated(&python, &path);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_no_secrets("the SBOM", &text);
    for needle in ["user", "X-Amz", "AKIDSECRET", "token", "?X", "%3F", "***"] {
        assert!(!text.contains(needle), "{needle:?} in the SBOM:\n{text}");
    }
    assert_eq!(
        components(&bom)[0]["purl"],
        format!(
            "pkg:generic/a.jar?download_url={}",
            server.url("/secret/a.jar")
        )
    );
}

/// (2) `resolve` of a package from Debian's maven-repo (served by nginx) writes
/// `<lock>.cdx.json`: pkg:maven purls, the graph of the lockfile's paths; `fetch
/// --lock` of it gives the same components and graph (and, the inputs being
/// the same, the same bytes).
#[test]
fn sbom_of_resolve_and_fetch_lock() {
    let Some(python) = validator() else { return };
    let Some(repo) = crate::maven::debian_repo() else {
        return;
    };
    let sb = Sandbox::new();
    let lock = sb.root.join("packages.lock");
    sb.resolve()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args(["--repositories", &repo.url("/"), "--only-repositories"])
        .args(["--lock", &s(&lock)])
        .run()
        .expect_code(0);
    let resolved_path = sb.root.join("packages.lock.cdx.json");
    let resolved = validated(&python, &resolved_path);
    let text = std::fs::read_to_string(&lock).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once('#').map(|(_, n)| n))
        .collect();
    assert_eq!(components(&resolved).len(), names.len(), "{resolved:#}");
    for (c, name) in components(&resolved).iter().zip(&names) {
        assert_eq!(c["bom-ref"], format!("jars/{name}"), "{c:#}");
        assert_eq!(c["type"], "library", "{c:#}");
        let sha = text
            .lines()
            .find(|l| l.ends_with(&format!("#{name}")))
            .and_then(|l| l.split_whitespace().next())
            .unwrap();
        assert_eq!(c["hashes"][0]["content"], sha, "{c:#}");
    }
    let plexus = component(
        &resolved,
        "jars/org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar",
    );
    assert_eq!(
        plexus["purl"],
        "pkg:maven/org.eclipse.sisu/org.eclipse.sisu.plexus@0.3.4"
    );
    assert_eq!(plexus["group"], "org.eclipse.sisu");
    assert_eq!(plexus["version"], "0.3.4");
    let slf4j = component(&resolved, "jars/org.slf4j_slf4j-api-debian.jar");
    assert_eq!(slf4j["purl"], "pkg:maven/org.slf4j/slf4j-api@debian");
    // The lock's paths: plexus -> inject -> slf4j-api.
    let edges = graph(&resolved);
    let on = |of: &str| -> Vec<String> {
        edges
            .iter()
            .find(|(r, _)| r == &format!("jars/{of}"))
            .map(|(_, on)| on.clone())
            .unwrap_or_else(|| panic!("{of} not in the graph: {edges:?}"))
    };
    assert!(on("org.eclipse.sisu_org.eclipse.sisu.plexus-0.3.4.jar")
        .contains(&"jars/org.eclipse.sisu_org.eclipse.sisu.inject-debian.jar".to_owned()));
    assert!(on("org.eclipse.sisu_org.eclipse.sisu.inject-debian.jar")
        .contains(&"jars/org.slf4j_slf4j-api-debian.jar".to_owned()));
    let edge_count: usize = edges.iter().map(|(_, on)| on.len()).sum();
    assert_eq!(
        edge_count,
        names.len() - 1,
        "a tree under one package: {edges:?}"
    );

    // fetch --lock: the same components and graph.
    sb.fetch().args(["--lock", &s(&lock)]).run().expect_code(0);
    let fetched = validated(&python, &sb.jars.join(SBOM));
    assert_eq!(fetched["components"], resolved["components"]);
    assert_eq!(fetched["dependencies"], resolved["dependencies"]);
    assert_eq!(
        std::fs::read(sb.jars.join(SBOM)).unwrap(),
        std::fs::read(&resolved_path).unwrap()
    );
    // The same packages resolved in the pod give the same components and graph.
    let pod = Sandbox::new();
    pod.fetch()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args(["--repositories", &repo.url("/"), "--only-repositories"])
        .run()
        .expect_code(0);
    let in_pod = validated(&python, &pod.jars.join(SBOM));
    assert_eq!(in_pod["components"], resolved["components"]);
    assert_eq!(in_pod["dependencies"], resolved["dependencies"]);

    // --no-sbom, and --sbom naming another path.
    let other = sb.root.join("other.lock");
    sb.resolve()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args(["--repositories", &repo.url("/"), "--only-repositories"])
        .args(["--lock", &s(&other), "--no-sbom"])
        .run()
        .expect_code(0);
    assert!(!sb.root.join("other.lock.cdx.json").exists());
    let moved = sb.root.join("moved.cdx.json");
    sb.resolve()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args(["--repositories", &repo.url("/"), "--only-repositories"])
        .args(["--sbom", &s(&moved)])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(&moved).unwrap(),
        std::fs::read(&resolved_path).unwrap()
    );
}
