//! `oci://` against a real registry (Debian's docker-registry, the CNCF
//! distribution registry) with htpasswd auth and TLS: artifacts pushed as
//! `oras push` pushes them, layers named by their title, every layer verified
//! against its digest, tags resolved and recorded, credentials from
//! `--registry-auth` or `DOCKER_CONFIG`, never in any output.

use crate::support::registry::{Layer, Registry, PASSWORD};
use crate::support::{
    allocated, assert_no_secrets, data, random_file, s, sha256_file, sha256_hex, Sandbox,
};

/// A zip holding one entry, as an archive layer.
fn zip_with(name: &str, body: &[u8]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    zip.start_file(name, zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(&mut zip, body).unwrap();
    zip.finish().unwrap();
    out.into_inner()
}

/// A registry with TLS and htpasswd, and a sandbox with its auth file.
fn secured() -> Option<(Registry, Sandbox, std::path::PathBuf)> {
    let registry = Registry::start(true, true)?;
    let sb = Sandbox::new();
    let auth = sb.write("config.json", registry.docker_config(PASSWORD));
    Some((registry, sb, auth))
}

#[test]
fn oci_jars_files_and_archives_from_a_tls_registry_with_htpasswd() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    let (app, lib) = (data(1, 300_000), data(2, 5_000));
    let conf = b"spark.executor.memory=2g\n".to_vec();
    let archive = zip_with("model/weights.bin", &data(3, 10_000));
    let digest = registry.push(
        "team/app",
        "1.0",
        &[
            Layer {
                title: "app.jar",
                data: &app,
                media_type: "application/java-archive",
            },
            Layer {
                title: "lib.jar",
                data: &lib,
                media_type: "application/java-archive",
            },
            Layer::new("app.conf", &conf),
        ],
    );
    registry.push("team/model", "v1", &[Layer::new("model.zip", &archive)]);
    let log4j = b"rootLogger.level=info\n".to_vec();
    registry.push(
        "team/conf",
        "2",
        &[
            Layer::new("log4j2.properties", &log4j),
            Layer::new("unwanted.txt", b"no"),
        ],
    );
    let host = registry.host();
    let out = sb
        .fetch()
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args([
            "--files",
            &format!("oci://{host}/team/conf:2#log4j2.properties"),
        ])
        .args(["--archives", &format!("oci://{host}/team/model:v1")])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), app);
    assert_eq!(std::fs::read(sb.jar("lib.jar")).unwrap(), lib);
    // Through --jars, a layer that is not a jar goes to the files, off the classpath.
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), conf);
    // #file selects one layer by its title.
    assert_eq!(
        std::fs::read(sb.files.join("log4j2.properties")).unwrap(),
        log4j
    );
    assert!(!sb.files.join("unwanted.txt").exists());
    assert_eq!(
        std::fs::read(sb.files.join("model.zip/model/weights.bin")).unwrap(),
        data(3, 10_000)
    );
    assert_eq!(
        sb.classpath(),
        format!("{}:{}\n", s(&sb.jar("app.jar")), s(&sb.jar("lib.jar")))
    );
    let a = sb.artifact("app.jar");
    assert_eq!(a["uri"], format!("oci://{host}/team/app:1.0#app.jar"));
    assert_eq!(a["sha256"], sha256_hex(&app));
    assert_eq!(a["oci"]["digest"], digest);
    assert_eq!(a["oci"]["layer"], format!("sha256:{}", sha256_hex(&app)));
    assert_eq!(a["oci"]["reference"], format!("oci://{host}/team/app:1.0"));
    assert_no_secrets("fetch output", &sb.all_output(&out));
    assert!(!sb.all_output(&out).contains(PASSWORD));
}

/// The registry's requests for `what` (`manifests/1.0`, `blobs/sha256:…`), from
/// its access log.
fn requests(registry: &Registry, what: &str) -> usize {
    registry
        .log()
        .lines()
        .filter(|l| l.contains(&format!("/{what} HTTP")) && l.contains("\"GET "))
        .count()
}

#[test]
fn oci_missing_tag_repository_and_file_are_named_and_not_retried() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    registry.push("team/app", "1.0", &[Layer::new("app.jar", b"jar bytes")]);
    let host = registry.host();
    let run = |uri: &str| {
        sb.fetch()
            .retry_delay("3s")
            .args(["--retries", "5", "--jars", uri])
            .arg("--registry-auth")
            .arg(&auth)
            .arg("--ca-cert")
            .arg(registry.ca_file())
            .run()
    };
    let out = run(&format!("oci://{host}/team/app:2.0"));
    out.expect_code(3)
        .expect_stderr(&format!("cannot resolve oci://{host}/team/app:2.0"))
        .expect_stderr("no such manifest");
    assert!(
        out.elapsed < std::time::Duration::from_secs(3),
        "retried? {out}"
    );
    assert_eq!(
        requests(&registry, "manifests/2.0"),
        2,
        "the 401, then one with credentials"
    );
    assert!(sb.term_log_text().unwrap().contains("team/app:2.0"));

    run(&format!("oci://{host}/team/nothing:1.0"))
        .expect_code(3)
        .expect_stderr("team/nothing:1.0");

    // #file names a title the manifest does not have: the titles are listed.
    run(&format!("oci://{host}/team/app:1.0#other.jar"))
        .expect_code(3)
        .expect_stderr("has no layer titled 'other.jar'")
        .expect_stderr("its layers are: app.jar");

    // A malformed reference is a configuration error, before any traffic.
    run(&format!("oci://{host}/Team/App:1.0"))
        .expect_code(2)
        .expect_stderr("invalid --jars")
        .expect_stderr("not a valid repository name");
}

#[test]
fn oci_wrong_or_missing_credentials_fail_at_once_without_secrets() {
    let Some((registry, sb, _)) = secured() else {
        return;
    };
    registry.push("team/app", "1.0", &[Layer::new("app.jar", b"jar bytes")]);
    let uri = format!("oci://{}/team/app:1.0", registry.host());
    let wrong = sb.write("wrong.json", registry.docker_config("not-the-pw-5551"));
    let out = sb
        .fetch()
        .retry_delay("3s")
        .args(["--retries", "5", "--jars", &uri])
        .arg("--registry-auth")
        .arg(&wrong)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(3)
        .expect_stderr("401")
        .expect_stderr(&format!("refused the credentials from {}", s(&wrong)))
        .expect_stderr("--registry-auth");
    assert!(
        out.elapsed < std::time::Duration::from_secs(3),
        "retried? {out}"
    );
    assert_eq!(requests(&registry, "manifests/1.0"), 2);
    let all = sb.all_output(&out);
    assert!(!all.contains("not-the-pw-5551"), "{all}");
    assert_no_secrets("output", &all);

    // No credentials at all: the registry asks, the error says where to put them.
    sb.fetch()
        .args(["--jars", &uri, "--ca-cert"])
        .arg(registry.ca_file())
        .run()
        .expect_code(3)
        .expect_stderr("asks for a user and password")
        .expect_stderr("anonymous (no --registry-auth or DOCKER_CONFIG)");

    // An unreadable or malformed auth file is a configuration error.
    let bad = sb.write("bad.json", "{\"auths\": {\"x\": {\"auth\": \"!!\"}}}");
    sb.fetch()
        .args(["--jars", &uri, "--registry-auth"])
        .arg(&bad)
        .run()
        .expect_code(2)
        .expect_stderr("invalid --registry-auth")
        .expect_stderr("not base64 of user:password");
    sb.fetch()
        .args(["--jars", &uri])
        .env(
            "SPARK_LOCALIZER_REGISTRY_AUTH",
            &s(&sb.root.join("missing.json")),
        )
        .run()
        .expect_code(2)
        .expect_stderr("SPARK_LOCALIZER_REGISTRY_AUTH")
        .expect_stderr("check that the registry Secret is mounted");
}

#[test]
fn oci_credentials_from_docker_config_and_the_env_twin() {
    let Some((registry, _keep, _)) = secured() else {
        return;
    };
    let jar = data(7, 20_000);
    registry.push("team/app", "1.0", &[Layer::new("app.jar", &jar)]);
    let uri = format!("oci://{}/team/app:1.0", registry.host());
    let ca = s(&registry.ca_file());

    // DOCKER_CONFIG=dir: dir/config.json, as docker and oras read it.
    let sb = Sandbox::new();
    let dir = sb.root.join("docker");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), registry.docker_config(PASSWORD)).unwrap();
    let out = sb
        .fetch()
        .args(["--jars", &uri, "--ca-cert", &ca])
        .env("DOCKER_CONFIG", &s(&dir))
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
    assert_no_secrets("output", &sb.all_output(&out));

    // The env twin, with the older .dockercfg layout (no "auths" wrapper), beats DOCKER_CONFIG.
    let sb = Sandbox::new();
    let cfg = registry.docker_config(PASSWORD);
    let inner = cfg
        .strip_prefix("{\"auths\":")
        .unwrap()
        .strip_suffix('}')
        .unwrap();
    let file = sb.write("dockercfg", inner);
    let out = sb
        .fetch()
        .args(["--jars", &uri, "--ca-cert", &ca])
        .env("SPARK_LOCALIZER_REGISTRY_AUTH", &s(&file))
        .env("DOCKER_CONFIG", &s(&sb.root.join("nowhere")))
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
}

#[test]
fn oci_plain_http_only_for_insecure_registries() {
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let jar = data(8, 4_000);
    registry.push("app", "latest", &[Layer::new("app.jar", &jar)]);
    let host = registry.host();
    let sb = Sandbox::new();
    // Without --insecure-registry: TLS is spoken, the hint names the flag.
    sb.fetch()
        .args(["--jars", &format!("oci://{host}/app")])
        .run()
        .expect_code(3)
        .expect_stderr("--insecure-registry");
    let out = sb
        .fetch()
        .args(["--jars", &format!("oci://{host}/app")])
        .env(
            "SPARK_LOCALIZER_INSECURE_REGISTRY",
            &format!("other:5000,{host}"),
        )
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
    sb.fetch()
        .args([
            "--jars",
            &format!("oci://{host}/app"),
            "--insecure-registry",
            "http://x/",
        ])
        .run()
        .expect_code(2)
        .expect_stderr("is not HOST[:PORT]");
    for bad in ["127.0.0.1:0", "127.0.0.1:", "127.0.0.1:99999"] {
        sb.fetch()
            .args(["--jars", &format!("oci://{host}/app")])
            .args(["--insecure-registry", bad])
            .run()
            .expect_code(2)
            .expect_stderr("is not HOST[:PORT]");
    }
}

#[test]
fn oci_a_layer_whose_bytes_do_not_match_its_digest_is_never_published() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    let (good, bad) = (data(9, 50_000), data(10, 60_000));
    registry.push(
        "team/app",
        "1.0",
        &[Layer::new("good.jar", &good), Layer::new("bad.jar", &bad)],
    );
    // The registry serves what its storage holds: flip bytes of one blob.
    let path = registry.blob_path(&format!("sha256:{}", sha256_hex(&bad)));
    let mut stored = std::fs::read(&path).unwrap();
    stored[100] ^= 0xff;
    std::fs::write(&path, stored).unwrap();
    let out = sb
        .fetch()
        .args(["--jars", &format!("oci://{}/team/app:1.0", registry.host())])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(4).expect_stderr("sha256 mismatch");
    assert!(!sb.jar("bad.jar").exists(), "a corrupt layer was published");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert_eq!(sb.artifact("bad.jar")["status"], "failed");
    assert!(sb.term_log_text().unwrap().contains("bad.jar"));

    // A --checksums pin (by title) that disagrees with the manifest: warned, exit 4.
    let pinned = Sandbox::new();
    let sums = pinned.write("sums", format!("{}  good.jar\n", "ab".repeat(32)));
    pinned
        .fetch()
        .args([
            "--jars",
            &format!("oci://{}/team/app:1.0#good.jar", registry.host()),
        ])
        .args(["--checksums", &s(&sums)])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run()
        .expect_code(4)
        .expect_stderr("but the registry's manifest names layer")
        .expect_stderr("sha256 mismatch");
    assert!(!pinned.jar("good.jar").exists());
}

#[test]
fn oci_a_moved_tag_keeps_the_digest_of_the_earlier_run() {
    let Some((registry, _keep, auth)) = secured() else {
        return;
    };
    let (v1, v2) = (data(11, 3_000), data(12, 4_000));
    let d1 = registry.push("team/app", "stable", &[Layer::new("app.jar", &v1)]);
    let uri = format!("oci://{}/team/app:stable", registry.host());
    let sb = Sandbox::new();
    let run = |sb: &Sandbox| {
        sb.fetch()
            .args(["--jars", &uri, "--ca-cert"])
            .arg(registry.ca_file())
            .arg("--registry-auth")
            .arg(&auth)
            .run()
    };
    run(&sb).expect_code(0);
    assert_eq!(sb.artifact("app.jar")["oci"]["digest"], d1);

    // The tag moves; the pod's rerun (same emptyDir) keeps the first digest.
    let d2 = registry.push("team/app", "stable", &[Layer::new("app.jar", &v2)]);
    assert_ne!(d1, d2);
    let out = run(&sb);
    out.expect_code(0)
        .expect_stderr(&format!("keeping {d1}"))
        .expect_stderr("summary: 0 fetched");
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), v1);
    assert_eq!(sb.artifact("app.jar")["oci"]["digest"], d1);

    // A new pod resolves the tag again.
    let fresh = Sandbox::new();
    run(&fresh).expect_code(0);
    assert_eq!(std::fs::read(fresh.jar("app.jar")).unwrap(), v2);
    assert_eq!(fresh.artifact("app.jar")["oci"]["digest"], d2);

    // After a failed run (a corrupt layer), a fixed tag heals the pod's rerun.
    let bad = data(19, 2_000);
    registry.push("team/app", "stable", &[Layer::new("app.jar", &bad)]);
    let path = registry.blob_path(&format!("sha256:{}", sha256_hex(&bad)));
    let mut stored = std::fs::read(&path).unwrap();
    stored[0] ^= 0xff;
    std::fs::write(&path, stored).unwrap();
    let healing = Sandbox::new();
    run(&healing).expect_code(4);
    registry.push("team/app", "stable", &[Layer::new("app.jar", &v2)]);
    let out = run(&healing);
    out.expect_code(0);
    assert!(!out.stderr.contains("keeping"), "{out}");
    assert_eq!(std::fs::read(healing.jar("app.jar")).unwrap(), v2);
}

/// A 1 GiB layer: fetched in parallel ranges, byte-exact; then again with the
/// registry killed and restarted in the middle (the parts resume).
#[test]
fn oci_a_large_layer_in_parallel_ranges_survives_a_registry_restart() {
    let Some(mut registry) = Registry::start(true, true) else {
        return;
    };
    let sb = Sandbox::new();
    let auth = sb.write("config.json", registry.docker_config(PASSWORD));
    let src = sb.root.join("big.bin");
    random_file(&src, 1 << 30);
    let big = std::fs::read(&src).unwrap();
    std::fs::remove_file(&src).unwrap();
    let want = sha256_hex(&big);
    let len = big.len();
    let digest = registry.push_owned("data/model", big);
    let manifest = registry.manifest_of(
        "data/model",
        &[("model.bin", digest, len, "application/octet-stream")],
    );
    registry.push_manifest(
        "data/model",
        "v1",
        "application/vnd.oci.image.manifest.v1+json",
        &manifest,
    );
    let uri = format!("oci://{}/data/model:v1", registry.host());
    let ca = s(&registry.ca_file());
    fn with<'a>(
        run: crate::support::Run<'a>,
        uri: &str,
        ca: &str,
        auth: &std::path::Path,
    ) -> crate::support::Run<'a> {
        run.env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
            .retry_delay("200ms")
            .args(["--retries", "12", "--deadline", "180s", "--files", uri])
            .args(["--ca-cert", ca])
            .arg("--registry-auth")
            .arg(auth)
    }
    let run = |sb: &Sandbox| with(sb.fetch(), &uri, &ca, &auth).run();
    let out = run(&sb);
    out.expect_code(0).expect_stderr("in 128 ranges");
    assert_eq!(sb.artifact("model.bin")["sha256"], want);
    assert_eq!(sha256_file(&sb.files.join("model.bin")), want);

    let sb2 = Sandbox::new();
    let running = with(sb2.fetch(), &uri, &ca, &auth).start();
    assert!(
        crate::support::wait_for(std::time::Duration::from_secs(60), || allocated(&sb2.files)
            > 200 << 20),
        "the transfer never got going: {}",
        running.stderr_so_far()
    );
    registry.stop();
    std::thread::sleep(std::time::Duration::from_secs(1));
    registry.restart();
    let out = running.finish();
    out.expect_code(0).expect_stderr("retrying");
    assert_eq!(sha256_file(&sb2.files.join("model.bin")), want);
    assert_no_secrets("output", &sb2.all_output(&out));
}

#[test]
fn oci_check_shows_the_registry_the_credential_and_the_resolved_digest() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    let jar = data(13, 1234);
    let digest = registry.push("team/app", "1.0", &[Layer::new("app.jar", &jar)]);
    let host = registry.host();
    let out = sb
        .check()
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(0);
    let text = &out.stdout;
    for want in [
        format!("oci registry     {host} (https)"),
        format!(
            "credentials    user 'spark' from {} (--registry-auth)",
            s(&auth)
        ),
        format!("oci reference    oci://{host}/team/app:1.0\n    resolved to    {digest}"),
        format!("layer sha256:{} of {digest}", sha256_hex(&jar)),
        format!("ok    oci://{host}/team/app:1.0#app.jar: 200 OK, size 1234 bytes, ranges yes"),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }
    assert!(!sb.jar("app.jar").exists(), "check wrote an artifact");
    assert_no_secrets("check output", &sb.all_output(&out));
    assert!(!sb.all_output(&out).contains(PASSWORD));

    // Anonymous: said, and the probe's failure says what to do.
    let out = sb
        .check()
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(3);
    assert!(
        out.stdout
            .contains("credentials    anonymous (no --registry-auth or DOCKER_CONFIG)")
            && out.stdout.contains("FAIL  cannot resolve")
            && out
                .stdout
                .contains("the registry asks for a user and password"),
        "{out}"
    );
}

/// Token auth as public registries do it: the registry's Bearer challenge
/// names a token realm; a basic token (credentials from --registry-auth) or an
/// anonymous one is asked once per repository and reused for every blob; blob
/// GETs redirected to another host (object storage) never carry it.
#[test]
fn oci_bearer_tokens_anonymous_and_basic_never_sent_to_a_redirect_host() {
    use crate::support::registry::TokenServer;
    use crate::support::FaultServer;
    let Some(mut registry) = Registry::start(true, false) else {
        return;
    };
    let (a, b) = (data(14, 30_000), data(15, 20_000));
    registry.push(
        "team/app",
        "1.0",
        &[Layer::new("a.jar", &a), Layer::new("b.jar", &b)],
    );
    let tool = data(16, 5_000);
    registry.push("public/tools", "1", &[Layer::new("tool.jar", &tool)]);
    // Object storage: another host (localhost, not 127.0.0.1) holding the blobs.
    let storage = FaultServer::start();
    for bytes in [&a, &b, &tool] {
        let hex = sha256_hex(bytes);
        storage.put(
            &format!("/docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]),
            bytes.to_vec(),
        );
    }
    let tokens = TokenServer::start();
    registry.reconfigure(
        Some(tokens.config()),
        Some(format!("http://localhost:{}", storage.port())),
    );
    let sb = Sandbox::new();
    let auth = sb.write("config.json", registry.docker_config(PASSWORD));
    let host = registry.host();
    let ca = s(&registry.ca_file());
    // The test's token realm is plain HTTP: credentials go there only when named.
    let realm_host = format!("127.0.0.1:{}", tokens.port);
    sb.fetch()
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args(["--ca-cert", &ca])
        .arg("--registry-auth")
        .arg(&auth)
        .run()
        .expect_code(3)
        .expect_stderr(&format!("is plain HTTP; credentials are not sent there unless its host is named with --insecure-registry {realm_host}"));
    assert!(tokens.requests().is_empty());
    let out = sb
        .fetch()
        .global(["-vv"])
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args(["--ca-cert", &ca, "--insecure-registry", &realm_host])
        .arg("--registry-auth")
        .arg(&auth)
        .run();
    out.expect_code(0)
        .expect_stderr("/token?")
        .expect_stderr("307");
    assert!(!out.stderr.contains("eyJ"), "a token in the log: {out}");
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), a);
    assert_eq!(std::fs::read(sb.jar("b.jar")).unwrap(), b);
    let asked = tokens.requests();
    assert_eq!(asked.len(), 1, "one token for the repository: {asked:?}");
    assert!(
        asked[0]
            .target
            .contains("scope=repository%3Ateam%2Fapp%3Apull"),
        "{asked:?}"
    );
    assert!(asked[0]
        .authorization
        .as_deref()
        .is_some_and(|a| a.starts_with("Basic ")));
    let served = storage.requests();
    assert!(
        served.len() >= 2,
        "the blobs did not come from the redirect: {served:?}"
    );
    for r in &served {
        assert_eq!(
            r.header("authorization"),
            None,
            "a credential went to the redirect host: {r:?}"
        );
    }
    assert_no_secrets("output", &sb.all_output(&out));

    // An identity token (`identitytoken`, as `docker login` to Azure or Harbor's
    // OIDC writes it): exchanged at the realm with an OAuth2 refresh grant.
    let ident = Sandbox::new();
    let file = ident.write(
        "config.json",
        format!(
            r#"{{"auths":{{"https://{host}/v1/":{{"identitytoken":"{}"}}}}}}"#,
            crate::support::registry::IDENTITY_TOKEN
        ),
    );
    let out = ident
        .fetch()
        .global(["-vv"])
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args(["--ca-cert", &ca, "--insecure-registry", &realm_host])
        .arg("--registry-auth")
        .arg(&file)
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(ident.jar("a.jar")).unwrap(), a);
    let last = tokens.requests().pop().unwrap();
    assert_eq!(last.method, "POST", "{last:?}");
    assert!(last.form.contains("grant_type=refresh_token"), "{last:?}");
    assert_eq!(last.authorization, None);
    assert_no_secrets("output", &ident.all_output(&out));

    // Anonymous: a token without credentials, for a repository that allows it.
    let anon = Sandbox::new();
    anon.fetch()
        .args(["--jars", &format!("oci://{host}/public/tools:1")])
        .args(["--ca-cert", &ca])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(anon.jar("tool.jar")).unwrap(), tool);
    let last = tokens.requests().pop().unwrap();
    assert_eq!(last.authorization, None, "{last:?}");

    // Anonymous where a credential is needed: refused, at once, said so.
    anon.fetch()
        .retry_delay("3s")
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args(["--ca-cert", &ca])
        .run()
        .expect_code(3)
        .expect_stderr("refused anonymous access");
    // Wrong credentials: the token realm refuses them.
    let wrong = anon.write("wrong.json", registry.docker_config("nope-nope-1"));
    let out = anon
        .fetch()
        .args(["--jars", &format!("oci://{host}/team/app:1.0")])
        .args(["--ca-cert", &ca, "--insecure-registry", &realm_host])
        .arg("--registry-auth")
        .arg(&wrong)
        .run();
    out.expect_code(3).expect_stderr("token realm");
    assert!(!anon.all_output(&out).contains("nope-nope-1"));
}

/// Connections cut in the middle of a layer (a proxy in front of the registry):
/// a small layer resumes with a ranged request, a large one retries only the
/// ranges that were cut; the bytes are the layer's.
#[test]
fn oci_layers_cut_mid_transfer_resume_with_ranges() {
    use crate::support::cut_proxy::CutProxy;
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let (small, large) = (data(17, 20 << 20), data(18, 80 << 20));
    registry.push("app", "1", &[Layer::new("small.jar", &small)]);
    registry.push("data", "1", &[Layer::new("large.bin", &large)]);
    let upstream: std::net::SocketAddr = registry.host().parse().unwrap();

    let proxy = CutProxy::start(upstream, 5 << 20, 1);
    let host = proxy.endpoint().trim_start_matches("http://").to_owned();
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--jars", &format!("oci://{host}/app:1")])
        .args(["--insecure-registry", &host])
        .run();
    out.expect_code(0).expect_stderr("resuming at byte");
    assert_eq!(proxy.cuts(), 1);
    assert_eq!(std::fs::read(sb.jar("small.jar")).unwrap(), small);
    assert_eq!(sb.artifact("small.jar")["attempts"], 2);

    let proxy = CutProxy::start(upstream, 3 << 20, 4);
    let host = proxy.endpoint().trim_start_matches("http://").to_owned();
    let out = sb
        .fetch()
        .args(["--files", &format!("oci://{host}/data:1")])
        .args(["--insecure-registry", &host])
        .run();
    out.expect_code(0).expect_stderr("range ");
    assert!(proxy.cuts() >= 4, "{out}");
    assert!(std::fs::read(sb.files.join("large.bin")).unwrap() == large);
}

/// An index (a multi-platform manifest list) is narrowed to the running
/// platform's manifest (a Docker schema 2 one here); a digest reference is
/// checked against the manifest's bytes.
#[test]
fn oci_an_index_gives_the_running_platforms_manifest_and_digests_pin_it() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let (other, native) = (data(20, 1_000), data(21, 2_000));
    let other_manifest = registry.manifest("multi/app", &[Layer::new("other.jar", &other)]);
    let other_digest = registry.push_manifest(
        "multi/app",
        &format!("sha256:{}", sha256_hex(&other_manifest)),
        "application/vnd.oci.image.manifest.v1+json",
        &other_manifest,
    );
    // A Docker schema 2 manifest for the running platform.
    let config = registry.push_blob("multi/app", b"{}");
    let layer = registry.push_blob("multi/app", &native);
    let docker = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": config, "size": 2},
        "layers": [{
            "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
            "digest": layer, "size": native.len(),
            "annotations": {"org.opencontainers.image.title": "native.jar"},
        }],
    }))
    .unwrap();
    let native_digest = registry.push_manifest(
        "multi/app",
        &format!("sha256:{}", sha256_hex(&docker)),
        "application/vnd.docker.distribution.manifest.v2+json",
        &docker,
    );
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other_digest,
             "size": other_manifest.len(), "platform": {"os": "linux", "architecture": "s390x"}},
            {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": native_digest,
             "size": docker.len(), "platform": {"os": "linux", "architecture": arch}},
        ],
    }))
    .unwrap();
    let index_digest = registry.push_manifest(
        "multi/app",
        "2",
        "application/vnd.oci.image.index.v1+json",
        &index,
    );
    let host = registry.host();
    let run_with = |sb: &Sandbox, uri: &str, extra: &[&std::ffi::OsStr]| {
        sb.fetch()
            .args(["--jars", uri, "--ca-cert"])
            .arg(registry.ca_file())
            .arg("--registry-auth")
            .arg(&auth)
            .args(extra)
            .run()
    };
    let run = |sb: &Sandbox, uri: &str| run_with(sb, uri, &[]);
    let strictly = [std::ffi::OsStr::new("--require-pins")];
    run(&sb, &format!("oci://{host}/multi/app:2")).expect_code(0);
    assert_eq!(std::fs::read(sb.jar("native.jar")).unwrap(), native);
    assert!(!sb.jar("other.jar").exists());
    let a = sb.artifact("native.jar");
    assert_eq!(a["oci"]["digest"], index_digest);
    assert_eq!(a["oci"]["platform_digest"], native_digest);

    // A tag pins nothing for --require-pins (it can move); a digest does.
    let strict = Sandbox::new();
    let out = run_with(&strict, &format!("oci://{host}/multi/app:2"), &strictly);
    out.expect_code(2).expect_stderr(&format!(
        "oci://{host}/multi/app:2#native.jar (--jars) is not pinned"
    ));
    assert!(!strict.jar("native.jar").exists());
    run_with(
        &strict,
        &format!("oci://{host}/multi/app@{index_digest}"),
        &strictly,
    )
    .expect_code(0);
    assert_eq!(std::fs::read(strict.jar("native.jar")).unwrap(), native);
    // A tag whose layer a --checksums line pins (by its title) is pinned.
    let titled = Sandbox::new();
    let pins = titled.write("pins", format!("{}  native.jar\n", sha256_hex(&native)));
    run_with(
        &titled,
        &format!("oci://{host}/multi/app:2"),
        &[strictly[0], "--checksums".as_ref(), pins.as_os_str()],
    )
    .expect_code(0);
    assert_eq!(std::fs::read(titled.jar("native.jar")).unwrap(), native);

    // By digest: the platform manifest directly.
    let pinned = Sandbox::new();
    run(&pinned, &format!("oci://{host}/multi/app@{other_digest}")).expect_code(0);
    assert_eq!(std::fs::read(pinned.jar("other.jar")).unwrap(), other);
    // A digest the repository does not have.
    let zeros = format!("sha256:{}", "0".repeat(64));
    run(&pinned, &format!("oci://{host}/multi/app@{zeros}"))
        .expect_code(3)
        .expect_stderr("no such manifest");
}

/// What black-box testing found: a bad URI elsewhere stops the run before the
/// registry is asked; a failed resolution writes the report (`ok: false`,
/// `error`) and removes an earlier run's classpath; every reference is tried
/// and the most severe failure wins whatever the order; a pin keyed by the
/// layer's URI as the report writes it applies; a digest in an earlier report
/// that is not a sha256 digest is ignored.
#[test]
fn oci_resolution_failures_are_planned_reported_and_ordered() {
    let Some((registry, sb, auth)) = secured() else {
        return;
    };
    let jar = data(20, 4_000);
    registry.push("team/app", "1.0", &[Layer::new("app.jar", &jar)]);
    registry.push("team/bad", "1.0", &[Layer::new("bad.jar", b"bad")]);
    let host = registry.host();
    let app = format!("oci://{host}/team/app:1.0");
    let with = |sb: &Sandbox, jars: &str| {
        sb.fetch()
            .args(["--retries", "0", "--jars", jars])
            .arg("--registry-auth")
            .arg(&auth)
            .arg("--ca-cert")
            .arg(registry.ca_file())
            .run()
    };

    // A bad URI beside the reference: exit 2, the registry never asked.
    let before = requests(&registry, "manifests/1.0");
    with(&sb, &format!("{app},ftp://x/y.jar"))
        .expect_code(2)
        .expect_stderr("unsupported scheme 'ftp'");
    assert_eq!(requests(&registry, "manifests/1.0"), before);

    // A good run, then one whose second reference does not resolve.
    with(&sb, &app).expect_code(0);
    assert!(sb.jars.join("classpath").exists());
    with(&sb, &format!("{app},oci://{host}/team/nothing:1"))
        .expect_code(3)
        .expect_stderr("team/nothing:1");
    let report = sb.report();
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["exit_code"], 3);
    assert!(report["error"].as_str().unwrap().contains("team/nothing:1"));
    assert!(
        !sb.jars.join("classpath").exists(),
        "an earlier classpath left"
    );

    // check goes on: the other reference is probed, the missing one is a FAIL.
    let out = sb
        .check()
        .args(["--jars", &format!("{app},oci://{host}/team/nothing:1")])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run();
    out.expect_code(3);
    assert!(out.stdout.contains("ok    oci://"), "{out}");
    assert!(out.stdout.contains("FAIL  cannot resolve oci://"), "{out}");
    assert!(out.stdout.contains("1 of 2 probes failed"), "{out}");

    // A manifest whose stored bytes no longer hash to its digest (exit 4)
    // beside a missing tag (exit 3): 4 in either order, both named.
    let manifest = registry.push("team/corrupt", "1.0", &[Layer::new("c.jar", b"c")]);
    let stored = registry.blob_path(&manifest);
    // Still a valid manifest (the registry parses it), but other bytes.
    let text = std::fs::read_to_string(&stored).unwrap();
    assert!(text.contains("\"c.jar\""));
    std::fs::write(&stored, text.replace("\"c.jar\"", "\"d.jar\"")).unwrap();
    let corrupt = format!("oci://{host}/team/corrupt@{manifest}");
    let missing = format!("oci://{host}/team/nothing:1");
    for jars in [
        format!("{missing},{corrupt}"),
        format!("{corrupt},{missing}"),
    ] {
        let sb = Sandbox::new();
        let out = with(&sb, &jars);
        out.expect_code(4)
            .expect_stderr("team/nothing:1")
            .expect_stderr("team/corrupt@sha256:");
    }

    // A manifest that declares another size than the blob has: exit 4.
    let blob = data(21, 200_000);
    let digest = registry.push_owned("team/sized", blob.clone());
    let manifest = registry.manifest_of(
        "team/sized",
        &[("sized.jar", digest, 1_000, "application/java-archive")],
    );
    registry.push_manifest(
        "team/sized",
        "1",
        "application/vnd.oci.image.manifest.v1+json",
        &manifest,
    );
    let sized = Sandbox::new();
    with(&sized, &format!("oci://{host}/team/sized:1"))
        .expect_code(4)
        .expect_stderr("the manifest declares 1000");
    assert!(!sized.jar("sized.jar").exists());

    // A pin keyed by the layer's URI as the report names it.
    let pinned = Sandbox::new();
    let sums = pinned.write("sums", format!("{}  {app}#app.jar\n", "ab".repeat(32)));
    pinned
        .fetch()
        .args(["--jars", &app, "--checksums", &s(&sums)])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run()
        .expect_code(4);

    // The same key with the scheme and registry in upper case.
    let upper = Sandbox::new();
    let key = format!("{app}#app.jar").replacen("oci://", "OCI://", 1);
    let sums = upper.write("sums", format!("{}  {key}\n", "ab".repeat(32)));
    upper
        .fetch()
        .args(["--jars", &app, "--checksums", &s(&sums)])
        .arg("--registry-auth")
        .arg(&auth)
        .arg("--ca-cert")
        .arg(registry.ca_file())
        .run()
        .expect_code(4);

    // An earlier report whose digest is not a sha256 digest: ignored.
    let kept = Sandbox::new();
    with(&kept, &app).expect_code(0);
    let path = kept.jars.join("spark-localizer-report.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let digest = kept.artifact("app.jar")["oci"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(&path, text.replace(&digest, "sha256:../../../v2/_catalog?")).unwrap();
    let out = with(&kept, &app);
    out.expect_code(0);
    assert!(!out.stderr.contains("keeping"), "{out}");
    assert_eq!(std::fs::read(kept.jar("app.jar")).unwrap(), jar);
}

/// A registry or token realm that does not answer is cut at --stall-timeout
/// and retried, not waited on until the deadline.
#[test]
fn oci_a_silent_token_realm_is_cut_at_the_stall_timeout() {
    use crate::support::server::{Fault, FaultServer};
    let server = FaultServer::start();
    let host = format!("127.0.0.1:{}", server.port());
    let challenge =
        format!("Bearer realm=\"http://{host}/token\",service=test,scope=\"repository:x/y:pull\"");
    server.put("/v2/x/y/manifests/1", "{}");
    server.always(
        "/v2/x/y/manifests/1",
        Fault::StatusWith(401, vec![("WWW-Authenticate".into(), challenge)]),
    );
    server.put("/token", r#"{"token":"t0k3n-value"}"#);
    server.always("/token", Fault::Hold(0));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--insecure-registry", &host, "--stall-timeout", "1s"])
        .args(["--retries", "1", "--jars", &format!("oci://{host}/x/y:1")])
        .run();
    server.release();
    out.expect_code(3)
        .expect_stderr("no answer within 1.0s (--stall-timeout)");
    assert!(out.elapsed < std::time::Duration::from_secs(10), "{out}");
}
