//! The container images, built and run for real with podman: the static binary's
//! budgets (statically linked, under 16 MiB, `--version` in an empty chroot); the
//! static image (`FROM scratch`: the binary and a CA bundle) fetching over HTTP and
//! HTTPS into a host directory as UID 65532; the Kerberos-capable glibc image loading
//! libgssapi where the static one refuses, and authenticating to a Kerberos-only
//! NameNode against a real KDC with a mounted ticket cache or keytab.
//!
//! The static binary is the file named by `SPARK_LOCALIZER_STATIC_BIN` (scripts/test.sh
//! builds it with `images/build-static.sh` before `cargo test`); without it these tests
//! are skipped locally and fail under CI. Images are built with `images/build-image.sh`;
//! the Kerberos image from this test build's glibc binary (the recipe is the same as for
//! the release binary). Without podman the tests are skipped locally and fail under CI;
//! where podman is installed but cannot run a container, they are skipped with a message.
//! Every image and container lives in a throwaway storage (`support::podman`), removed
//! when the test process exits: the user's container storage is never written.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::json;

use crate::support::hdfs::TestHdfs;
use crate::support::nginx::Nginx;
use crate::support::pki::Pki;
use crate::support::podman::{output, text};
use crate::support::registry::Registry;
use crate::support::{data, is_root, sha256_hex, FaultServer, BIN};

/// The size budget of the static binary: under 16 MiB.
pub const BUDGET: u64 = 16 * 1024 * 1024;
/// The user the images run as.
const UID: u32 = 65532;
const STATIC_IMAGE: &str = "localhost/spark-localizer:test";
const KERBEROS_IMAGE: &str = "localhost/spark-localizer:test-kerberos";
/// Where the tests mount the jars directory inside the container.
const JARS: &str = "/opt/spark/extra-jars";

/// Skips (returns `None`) locally, panics under CI (env `CI` set).
pub fn skip<T>(why: &str) -> Option<T> {
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set: this test must run; `bash scripts/test.sh` provides it)");
    }
    eprintln!("SKIP: {why}");
    None
}

/// The static binary from `SPARK_LOCALIZER_STATIC_BIN`.
pub fn static_bin() -> Option<PathBuf> {
    built_bin("SPARK_LOCALIZER_STATIC_BIN", "bash images/build-static.sh")
}

/// The binary the file named by `var` holds (made by `build`, whose last line is its
/// path); skipped locally and failed under CI when `var` is not set.
pub fn built_bin(var: &str, build: &str) -> Option<PathBuf> {
    let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) else {
        return skip(&format!(
            "{var} is not set (build it with `{build}`, whose last line is its path)"
        ));
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "{var}={} is not a file", path.display());
    Some(path)
}

/// `podman` on the tests' throwaway storage (never the user's).
fn podman() -> Command {
    crate::support::podman::podman()
}

/// `podman run --rm` with host networking and the rlimits runc may set here.
fn podman_run() -> Command {
    let mut cmd = podman();
    cmd.args([
        "run",
        "--rm",
        "--network=host",
        "--ulimit",
        "nofile=4096:4096",
        "--ulimit",
        "nproc=4096:4096",
    ]);
    cmd
}

/// What trying podman found.
enum Podman {
    Works,
    Missing,
    CannotRun(String),
}

/// Whether podman can run a container here: `podman run --rootfs` of a directory
/// holding only the static binary, `--version`. Decided once per test process.
fn podman_works(static_bin: &Path) -> bool {
    static PODMAN: OnceLock<Podman> = OnceLock::new();
    let podman = PODMAN.get_or_init(|| {
        if Command::new("podman").arg("--version").output().is_err() {
            return Podman::Missing;
        }
        let root = tempfile::Builder::new()
            .prefix("sl-podman-probe-")
            .tempdir()
            .unwrap();
        std::fs::copy(static_bin, root.path().join("spark-localizer")).unwrap();
        let out = output(
            podman_run()
                .arg("--rootfs")
                .arg(root.path())
                .args(["/spark-localizer", "--version"]),
        );
        if out.status.success() {
            Podman::Works
        } else {
            Podman::CannotRun(text(&out))
        }
    });
    match podman {
        Podman::Works => true,
        Podman::Missing => {
            skip::<()>("podman is not installed (scripts/setup/image.sh installs podman and runc)");
            false
        }
        Podman::CannotRun(why) => {
            eprintln!("SKIP: podman is installed but cannot run a container here:\n{why}");
            false
        }
    }
}

/// Builds `variant` with `images/build-image.sh` under `tag`, once per test process.
fn build_image(
    cell: &'static OnceLock<String>,
    variant: &str,
    image: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> String {
    cell.get_or_init(|| {
        let tag = image.rsplit_once(':').unwrap().1;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/build-image.sh");
        let started = std::time::Instant::now();
        let out = output(
            Command::new("bash")
                .arg(&script)
                .args([variant, tag])
                .env(
                    crate::support::podman::ROOT_VAR,
                    crate::support::podman::root(),
                )
                .envs(env.iter().copied())
                .stdin(Stdio::null()),
        );
        assert!(
            out.status.success(),
            "{script:?} {variant} failed\n{}",
            text(&out)
        );
        eprintln!(
            "built {image} in {:?}:\n{}",
            started.elapsed(),
            String::from_utf8_lossy(&out.stderr)
        );
        image.to_owned()
    })
    .clone()
}

/// The static image (binary from `SPARK_LOCALIZER_STATIC_BIN`), or `None` after
/// printing why it cannot be built and run here. With `SPARK_LOCALIZER_STATIC_BIN_ARM64`
/// too (as scripts/test.sh sets it) the tag is a manifest list of amd64 and arm64 images,
/// which podman resolves to this machine's platform; without it, the amd64 image alone.
pub fn static_image() -> Option<String> {
    static IMAGE: OnceLock<String> = OnceLock::new();
    let bin = static_bin()?;
    if !podman_works(&bin) {
        return None;
    }
    let arm64 = std::env::var_os("SPARK_LOCALIZER_STATIC_BIN_ARM64").filter(|p| !p.is_empty());
    let mut env = vec![("SPARK_LOCALIZER_STATIC_BIN", bin.as_os_str())];
    match &arm64 {
        Some(arm64) => env.push(("SPARK_LOCALIZER_STATIC_BIN_ARM64", arm64)),
        None => env.push(("SPARK_LOCALIZER_PLATFORMS", "linux/amd64".as_ref())),
    }
    Some(build_image(&IMAGE, "static", STATIC_IMAGE, &env))
}

/// The Kerberos-capable image, from this test build's glibc binary.
pub(crate) fn kerberos_image() -> Option<String> {
    static IMAGE: OnceLock<String> = OnceLock::new();
    let bin = static_bin()?;
    if !podman_works(&bin) {
        return None;
    }
    Some(build_image(
        &IMAGE,
        "kerberos",
        KERBEROS_IMAGE,
        &[("SPARK_LOCALIZER_GLIBC_BIN", BIN.as_ref())],
    ))
}

/// A temp dir the container user (65532) may write to (and read from).
fn shared_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The ELF program header types of `bin` (ELF64, little-endian).
pub fn program_header_types(bin: &[u8]) -> Vec<u32> {
    assert!(
        bin.len() > 64 && bin.starts_with(b"\x7fELF") && bin[4] == 2 && bin[5] == 1,
        "not a little-endian ELF64 file"
    );
    let u16_at = |at: usize| u16::from_le_bytes(bin[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(bin[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count)
        .map(|i| {
            let at = phoff + i * size;
            u32::from_le_bytes(bin[at..at + 4].try_into().unwrap())
        })
        .collect()
}

pub const PT_INTERP: u32 = 3;

#[test]
fn the_static_binary_is_static_small_and_runs_in_an_empty_chroot() {
    let Some(bin) = static_bin() else { return };
    let bytes = std::fs::read(&bin).unwrap();
    let headers = program_header_types(&bytes);
    assert!(
        !headers.contains(&PT_INTERP),
        "{} has a PT_INTERP header: it needs a dynamic loader, it is not static",
        bin.display()
    );
    let size = bytes.len() as u64;
    eprintln!(
        "static binary: {size} bytes ({:.2} MiB), budget {BUDGET}",
        size as f64 / 1048576.0
    );
    assert!(
        size < BUDGET,
        "{} is {size} bytes: over the 16 MiB budget ({BUDGET} bytes)",
        bin.display()
    );

    // --version from a root holding nothing but the binary.
    let root = tempfile::Builder::new()
        .prefix("sl-empty-root-")
        .tempdir()
        .unwrap();
    std::fs::copy(&bin, root.path().join("spark-localizer")).unwrap();
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot (coreutils) is installed");
    let mut cmd = if is_root() {
        Command::new(chroot)
    } else if Command::new("unshare")
        .args(["-r", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let mut cmd = Command::new("unshare");
        cmd.args(["-r", chroot]);
        cmd
    } else {
        eprintln!("SKIP: --version in an empty chroot: not root and `unshare -r` does not work");
        return;
    };
    let out = output(
        cmd.arg(root.path())
            .args(["/spark-localizer", "--version"])
            .env_clear(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("spark-localizer {}", env!("CARGO_PKG_VERSION"))
    );
}

/// The files of an image's root filesystem, from `podman export` of a created container.
fn image_files(image: &str) -> Vec<String> {
    let out = output(podman().args(["create", image]));
    assert!(out.status.success(), "podman create\n{}", text(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let tar = output(podman().args(["export", &id]));
    output(podman().args(["rm", &id]));
    assert!(tar.status.success(), "podman export\n{}", text(&tar));
    let mut archive = tar::Archive::new(&tar.stdout[..]);
    let mut files: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.header().entry_type().is_dir())
        .map(|e| {
            let mode = e.header().mode().unwrap() & 0o7777;
            let uid = e.header().uid().unwrap();
            format!("/{} {mode:o} {uid}", e.path().unwrap().display())
        })
        .collect();
    files.sort();
    files
}

fn image_config(image: &str, field: &str) -> String {
    let out = output(podman().args([
        "image",
        "inspect",
        "--format",
        &format!("{{{{json .Config.{field}}}}}"),
        image,
    ]));
    assert!(out.status.success(), "podman image inspect\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_static_image_holds_only_the_binary_and_a_ca_bundle() {
    let Some(image) = static_image() else { return };
    assert_eq!(
        image_files(&image),
        [
            "/etc/ssl/certs/ca-certificates.crt 644 0",
            "/spark-localizer 755 0",
        ]
    );
    assert_eq!(image_config(&image, "User"), r#""65532:65532""#);
    assert_eq!(
        image_config(&image, "Entrypoint"),
        r#"["/spark-localizer"]"#
    );
    let out = output(podman_run().args([&image, "--version"]));
    assert!(out.status.success(), "{}", text(&out));
}

/// The bytes of `path` in a layer blob (a tar, gzip-compressed or not).
fn file_in_layer(layer: &[u8], path: &str) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let tar: Box<dyn std::io::Read + '_> = if layer.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(layer))
    } else {
        Box::new(layer)
    };
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        if name.trim_start_matches("./").trim_start_matches('/') == path {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            return Some(bytes);
        }
    }
    None
}

/// The images are built in the tests' throwaway storage, never in the user's (issue
/// 35: a manifest list left there whose instance was gone made `podman images` fail):
/// the tag is in the throwaway storage, under its root, and the user's `podman images`
/// (read only) still works.
#[test]
fn images_are_built_in_a_throwaway_storage() {
    let Some(image) = static_image() else { return };
    let exists = output(podman().args(["image", "exists", &image]));
    assert!(
        exists.status.success(),
        "{image} is not in the tests' storage\n{}",
        text(&exists)
    );
    let root = crate::support::podman::root();
    let out = output(podman().args(["info", "--format", "{{.Store.GraphRoot}}"]));
    let graph = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        Path::new(&graph).starts_with(root),
        "{graph} is not under {}",
        root.display()
    );
    let users = output(Command::new("podman").arg("images").stdin(Stdio::null()));
    assert!(
        users.status.success(),
        "the user's podman images fails\n{}",
        text(&users)
    );
}

/// One tag for amd64 and arm64 nodes: the static image's tag is a manifest list. Pushed
/// with `podman manifest push --all` to a real registry (Debian's docker-registry), its
/// index names both platforms, and each platform's manifest, config and layers hold the
/// binary built for it: what a node's container runtime resolves and pulls.
#[test]
fn one_image_tag_serves_amd64_and_arm64_nodes() {
    let Some(arm64) = crate::arm64::arm64_bin() else {
        return;
    };
    let Some(image) = static_image() else { return };
    let amd64 = static_bin().unwrap();
    let Some(registry) = Registry::start(false, false) else {
        return;
    };
    let dest = format!("docker://{}/spark-localizer:multi", registry.host());
    let out = output(podman().args([
        "manifest",
        "push",
        "--all",
        "--tls-verify=false",
        &image,
        &dest,
    ]));
    assert!(out.status.success(), "podman manifest push\n{}", text(&out));

    let (kind, body) = registry.get(
        "spark-localizer/manifests/multi",
        "application/vnd.oci.image.index.v1+json, \
         application/vnd.docker.distribution.manifest.list.v2+json",
    );
    assert!(
        kind == "application/vnd.oci.image.index.v1+json"
            || kind == "application/vnd.docker.distribution.manifest.list.v2+json",
        "the tag is not a manifest list: {kind}"
    );
    let index: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mut found = Vec::new();
    for entry in index["manifests"].as_array().expect("manifests") {
        let (os, arch) = (&entry["platform"]["os"], &entry["platform"]["architecture"]);
        assert_eq!(os, "linux", "{entry}");
        let (want, arch) = match arch.as_str() {
            Some("amd64") => (&amd64, "amd64"),
            Some("arm64") => (&arm64, "arm64"),
            other => panic!("an unexpected platform {other:?} in {index:#}"),
        };
        let digest = entry["digest"].as_str().unwrap();
        let (_, body) = registry.get(
            &format!("spark-localizer/manifests/{digest}"),
            "application/vnd.oci.image.manifest.v1+json, \
             application/vnd.docker.distribution.manifest.v2+json",
        );
        assert_eq!(format!("sha256:{}", sha256_hex(&body)), digest);
        let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let blob = |digest: &serde_json::Value| {
            let digest = digest.as_str().unwrap();
            let (_, bytes) = registry.get(&format!("spark-localizer/blobs/{digest}"), "*/*");
            assert_eq!(format!("sha256:{}", sha256_hex(&bytes)), digest);
            bytes
        };
        let config: serde_json::Value =
            serde_json::from_slice(&blob(&manifest["config"]["digest"])).unwrap();
        assert_eq!(config["architecture"], arch, "{config:#}");
        assert_eq!(config["os"], "linux", "{config:#}");
        assert_eq!(config["config"]["User"], "65532:65532", "{config:#}");
        assert_eq!(config["config"]["Entrypoint"], json!(["/spark-localizer"]));
        let binary = manifest["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|layer| file_in_layer(&blob(&layer["digest"]), "spark-localizer"))
            .unwrap_or_else(|| panic!("no /spark-localizer in the {arch} image"));
        assert!(
            binary == std::fs::read(want).unwrap(),
            "the {arch} image does not hold {}",
            want.display()
        );
        found.push(arch);
    }
    found.sort_unstable();
    assert_eq!(found, ["amd64", "arm64"], "{index:#}");
}

#[test]
fn the_static_image_fetches_over_http_into_a_host_dir_as_65532() {
    let Some(image) = static_image() else { return };
    let server = FaultServer::start();
    let (a, b) = (data(71, 300_000), data(72, 5_000));
    server.put("/repo/a.jar", a.clone());
    server.put("/repo/b.jar", b.clone());
    let jars = shared_dir("sl-image-jars-");
    let pins = shared_dir("sl-image-pins-");
    std::fs::write(
        pins.path().join("sha256sums"),
        format!("{}  a.jar\n{}  b.jar\n", sha256_hex(&a), sha256_hex(&b)),
    )
    .unwrap();
    // As the README's pod template: args, and the URIs in the env twin.
    let uris = format!(
        "{},{}",
        server.url("/repo/a.jar"),
        server.url("/repo/b.jar")
    );
    let out = output(
        podman_run()
            .arg("-v")
            .arg(format!("{}:{JARS}", jars.path().display()))
            .arg("-v")
            .arg(format!("{}:/etc/pins:ro", pins.path().display()))
            .args(["-e", &format!("SPARK_LOCALIZER_JARS={uris}")])
            .args([
                &image,
                "fetch",
                "--no-progress",
                "--deadline",
                "60s",
                "--jars-dir",
                JARS,
                "--checksums",
                "/etc/pins/sha256sums",
            ]),
    );
    assert!(out.status.success(), "{}", text(&out));
    for name in ["a.jar", "b.jar", "classpath", "spark-classpath.env"] {
        let meta = std::fs::metadata(jars.path().join(name)).unwrap();
        assert_eq!(meta.uid(), UID, "owner of {name}");
    }
    assert_eq!(std::fs::read(jars.path().join("a.jar")).unwrap(), a);
    assert_eq!(std::fs::read(jars.path().join("b.jar")).unwrap(), b);
    // The outputs name the jars by their paths in the container.
    assert_eq!(
        std::fs::read_to_string(jars.path().join("classpath")).unwrap(),
        format!("{JARS}/a.jar:{JARS}/b.jar\n")
    );
    let env = std::fs::read_to_string(jars.path().join("spark-classpath.env")).unwrap();
    assert!(
        env.contains(&format!("SPARK_CLASSPATH='{JARS}/a.jar:{JARS}/b.jar'")),
        "{env}"
    );
}

#[test]
fn the_static_image_fetches_over_https_with_a_mounted_ca() {
    let Some(image) = static_image() else { return };
    let pki = Pki::new();
    let served = tempfile::tempdir().unwrap();
    let body = data(73, 200_000);
    std::fs::write(served.path().join("c.jar"), &body).unwrap();
    let Some(nginx) = Nginx::start_tls(served.path(), &pki) else {
        return;
    };
    let ca = shared_dir("sl-image-ca-");
    std::fs::write(ca.path().join("ca.pem"), &pki.ca_pem).unwrap();
    let jars = shared_dir("sl-image-jars-");
    let fetch = |ca_flag: &[&str]| {
        output(
            podman_run()
                .arg("-v")
                .arg(format!("{}:{JARS}", jars.path().display()))
                .arg("-v")
                .arg(format!("{}:/etc/test-ca:ro", ca.path().display()))
                .args([
                    &image,
                    "fetch",
                    "--no-progress",
                    "--retries",
                    "0",
                    "--deadline",
                    "60s",
                    "--jars-dir",
                    JARS,
                    "--jars",
                    &nginx.url("c.jar"),
                ])
                .args(ca_flag),
        )
    };
    // The test CA is neither bundled nor in the image's CA file: refused, exit 3.
    let out = fetch(&[]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(shown.contains("--ca-cert"), "{shown}");
    assert!(!jars.path().join("c.jar").exists());
    let out = fetch(&["--ca-cert", "/etc/test-ca/ca.pem"]);
    assert!(out.status.success(), "{}", text(&out));
    let path = jars.path().join("c.jar");
    assert_eq!(std::fs::read(&path).unwrap(), body);
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), UID);
}

#[test]
fn the_kerberos_image_loads_gssapi_where_the_static_image_refuses() {
    let Some(static_image) = static_image() else {
        return;
    };
    let Some(kerberos_image) = kerberos_image() else {
        return;
    };
    let files = image_files(&kerberos_image);
    for needed in [
        "/spark-localizer 755 0",
        "/etc/ssl/certs/ca-certificates.crt 644 0",
        "/lib64/ld-linux-x86-64.so.2",
        "/libgssapi_krb5.so.2 ",
        "/libkrb5.so.3 ",
        "/libc.so.6 ",
    ] {
        assert!(
            files.iter().any(|f| f.contains(needed)),
            "{needed} missing from {files:#?}"
        );
    }
    assert_eq!(image_config(&kerberos_image, "User"), r#""65532:65532""#);

    let conf = shared_dir("sl-image-hadoop-conf-");
    std::fs::write(
        conf.path().join("core-site.xml"),
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>",
    )
    .unwrap();
    let check = |image: &str| {
        output(
            podman_run()
                .arg("-v")
                .arg(format!("{}:/opt/hadoop/conf:ro", conf.path().display()))
                .args([
                    image,
                    "check",
                    "--jars-dir",
                    JARS,
                    "--hadoop-conf-dir",
                    "/opt/hadoop/conf",
                    "--connect-timeout",
                    "1s",
                    "--jars",
                    "hdfs://127.0.0.1:1/apps/a.jar",
                ]),
        )
    };
    // The glibc image loads libgssapi: the plan is valid (Kerberos from the ticket
    // cache); only the probe fails (nothing listens on port 1).
    let out = check(&kerberos_image);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(
        shown.contains("Kerberos, but the login failed") && shown.contains("run kinit"),
        "{shown}"
    );
    assert!(!shown.contains("cannot load libgssapi"), "{shown}");
    // The static image never can: a configuration error before any traffic.
    let out = check(&static_image);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("cannot load libgssapi_krb5.so.2")
            && shown.contains("Kerberos-capable image"),
        "{shown}"
    );

    // And GSSAPI really runs in the image: a Kerberos-only NameNode, no ticket cache.
    let jars = shared_dir("sl-image-jars-");
    let source = jars.path().join("source.jar");
    std::fs::write(&source, data(74, 1000)).unwrap();
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": [{"id": "dn1", "port": 0}],
        "kerberos": true,
        "files": [{"path": "/apps/a.jar", "source": source}],
    })) else {
        return;
    };
    let out = output(
        podman_run()
            .arg("-v")
            .arg(format!("{}:/opt/hadoop/conf:ro", conf.path().display()))
            .arg("-v")
            .arg(format!("{}:{JARS}", jars.path().display()))
            .args([
                &kerberos_image,
                "fetch",
                "--no-progress",
                "--retries",
                "0",
                "--deadline",
                "60s",
                "--jars-dir",
                JARS,
                "--hadoop-conf-dir",
                "/opt/hadoop/conf",
                "--jars",
                &format!("{}/apps/a.jar", hdfs.url()),
            ]),
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    // MIT krb5's own words, from inside the image, as UID 65532.
    let krb5 = "No Kerberos credentials available (default cache: FILE:/tmp/krb5cc_65532)";
    assert!(
        shown.contains(krb5) && shown.contains("run kinit"),
        "{shown}"
    );
    assert!(!jars.path().join("a.jar").exists());
}

#[test]
fn the_kerberos_image_localizes_with_a_mounted_ticket_cache_or_keytab() {
    let Some(kerberos_image) = kerberos_image() else {
        return;
    };
    let Some(kdc) = crate::support::kdc::kdc() else {
        return;
    };
    // What a pod mounts: krb5.conf (a ConfigMap), the Hadoop configuration, and a
    // ticket cache or a keytab (Secrets), readable by UID 65532.
    let mounts = shared_dir("sl-image-krb5-");
    let m = mounts.path();
    std::fs::copy(kdc.krb5_conf(), m.join("krb5.conf")).unwrap();
    std::fs::create_dir_all(m.join("conf")).unwrap();
    std::fs::write(
        m.join("conf/core-site.xml"),
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>",
    )
    .unwrap();
    kdc.kinit(&m.join("krb5cc"), None);
    std::fs::copy(kdc.user_keytab(), m.join("alice.keytab")).unwrap();
    for f in ["krb5.conf", "krb5cc", "alice.keytab", "conf/core-site.xml"] {
        std::fs::set_permissions(m.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let jar = data(212, (1 << 20) + 777);
    let source = m.join("source.jar");
    std::fs::write(&source, &jar).unwrap();
    let Some(hdfs) = crate::kerberos::secure_hdfs(kdc, &source, json!({})) else {
        return;
    };
    let url = format!("{}{}", hdfs.url(), crate::kerberos::JAR);
    let run = |jars: &Path, how: &[&str]| {
        output(
            podman_run()
                .arg("-v")
                .arg(format!(
                    "{}:/etc/krb5.conf:ro",
                    m.join("krb5.conf").display()
                ))
                .arg("-v")
                .arg(format!("{}:/opt/hadoop/conf:ro", m.join("conf").display()))
                .arg("-v")
                .arg(format!("{}:/var/run/krb5:ro", m.display()))
                .arg("-v")
                .arg(format!("{}:{JARS}", jars.display()))
                .args(how)
                .args([
                    &kerberos_image,
                    "fetch",
                    "--no-progress",
                    "--retries",
                    "0",
                    "--deadline",
                    "60s",
                    "--jars-dir",
                    JARS,
                    "--hadoop-conf-dir",
                    "/opt/hadoop/conf",
                    "--jars",
                    &url,
                ]),
        )
    };
    // 1. The ticket cache `kinit -kt` made, mounted, named by KRB5CCNAME.
    let jars = shared_dir("sl-image-krb5-jars-");
    let out = run(jars.path(), &["-e", "KRB5CCNAME=FILE:/var/run/krb5/krb5cc"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read(jars.path().join("celeborn-client.jar")).unwrap(),
        jar
    );
    // 2. The keytab: the image has no /tmp, so the ticket lives in memory.
    let jars = shared_dir("sl-image-krb5-jars-");
    let out = run(
        jars.path(),
        &[
            "-e",
            "SPARK_LOCALIZER_KERBEROS_KEYTAB=/var/run/krb5/alice.keytab",
            "-e",
            &format!(
                "SPARK_LOCALIZER_KERBEROS_PRINCIPAL={}",
                crate::support::kdc::USER
            ),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read(jars.path().join("celeborn-client.jar")).unwrap(),
        jar
    );
    assert_eq!(
        hdfs.log_lines(&format!("authenticated {}", crate::support::kdc::USER))
            .len(),
        2,
        "{}",
        hdfs.stderr()
    );
    // No ticket at all: MIT krb5's words from inside the image, nothing published.
    let jars = shared_dir("sl-image-krb5-jars-");
    let out = run(jars.path(), &[]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(
        shown.contains("No Kerberos credentials available"),
        "{shown}"
    );
    assert!(!jars.path().join("celeborn-client.jar").exists());
}
