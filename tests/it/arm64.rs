//! The arm64 (aarch64) static binary, run under Debian's user-mode emulator
//! `qemu-aarch64-static`: it is what arm64 nodes run (Graviton, Ampere), so it must
//! fetch, verify and write the classpath exactly as the x86_64 build does. Emulation
//! proves behaviour, not speed.
//!
//! The binary is the file named by `SPARK_LOCALIZER_STATIC_BIN_ARM64` (scripts/test.sh
//! builds it with `images/build-static.sh aarch64`); without it, or without qemu, these
//! tests are skipped locally and fail under CI. The one image tag serving amd64 and
//! arm64 nodes is tested in image.rs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::image::{built_bin, program_header_types, skip, BUDGET, PT_INTERP};
use crate::support::nginx::Nginx;
use crate::support::{data, sha256_hex, Sandbox, BIN};

/// ELF `e_machine` of AArch64.
const EM_AARCH64: u16 = 183;

/// The aarch64 binary from `SPARK_LOCALIZER_STATIC_BIN_ARM64`.
pub fn arm64_bin() -> Option<PathBuf> {
    built_bin(
        "SPARK_LOCALIZER_STATIC_BIN_ARM64",
        "bash images/build-static.sh aarch64",
    )
}

/// How to run the aarch64 binary here: itself on an aarch64 machine, else under
/// `qemu-aarch64-static` (Debian qemu-user-static, installed by scripts/setup/image.sh).
fn arm64_program() -> Option<Vec<OsString>> {
    let bin = arm64_bin()?;
    if std::env::consts::ARCH == "aarch64" {
        return Some(vec![bin.into()]);
    }
    let found = Command::new("qemu-aarch64-static")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        return skip(
            "qemu-aarch64-static is not installed (scripts/setup/image.sh cross aarch64 \
             installs qemu-user-static)",
        );
    }
    Some(vec!["qemu-aarch64-static".into(), bin.into()])
}

#[test]
fn the_arm64_binary_is_a_static_aarch64_executable_that_runs() {
    let (Some(bin), Some(program)) = (arm64_bin(), arm64_program()) else {
        return;
    };
    let bytes = std::fs::read(&bin).unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[18], bytes[19]]),
        EM_AARCH64,
        "{} is not an aarch64 ELF",
        bin.display()
    );
    let types = program_header_types(&bytes);
    assert!(
        !types.contains(&PT_INTERP),
        "{} has a PT_INTERP header (dynamically linked): {types:?}",
        bin.display()
    );
    assert!(
        (bytes.len() as u64) < BUDGET,
        "{} is {} bytes, over the 16 MiB budget",
        bin.display(),
        bytes.len()
    );

    // The same version line as this build, from an environment with nothing in it.
    let ours = Command::new(BIN).arg("--version").output().unwrap();
    let theirs = Command::new(&program[0])
        .args(&program[1..])
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    assert!(theirs.status.success(), "{theirs:?}");
    assert_eq!(
        String::from_utf8_lossy(&theirs.stdout),
        String::from_utf8_lossy(&ours.stdout)
    );
}

#[test]
fn the_arm64_binary_fetches_pinned_jars_from_nginx_and_writes_the_classpath() {
    let Some(program) = arm64_program() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("libs")).unwrap();
    let jars: Vec<(String, Vec<u8>)> = [
        ("celeborn-client-spark-3-shaded_2.12-0.5.4.jar", 1_500_000),
        ("libs/delta-spark_2.12-3.2.1.jar", 300_000),
        ("iceberg-spark-runtime-3.5_2.12-1.7.1.jar", 4_200_000),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (name, len))| (name.to_owned(), data(230 + i as u64, len)))
    .collect();
    for (name, bytes) in &jars {
        std::fs::write(root.path().join(name), bytes).unwrap();
    }
    let file = data(240, 70_000);
    std::fs::write(root.path().join("log4j2.properties"), &file).unwrap();
    let Some(nginx) = Nginx::start(root.path()) else {
        return;
    };
    let urls: Vec<String> = jars.iter().map(|(name, _)| nginx.url(name)).collect();
    let file_url = nginx.url("log4j2.properties");
    let base = |name: &str| name.rsplit('/').next().unwrap().to_owned();
    let pins: String = jars
        .iter()
        .map(|(name, bytes)| format!("{}  {}\n", sha256_hex(bytes), base(name)))
        .chain([format!("{}  log4j2.properties\n", sha256_hex(&file))])
        .collect();

    let sb = Sandbox::new();
    let pins_file = sb.write("sha256sums", &pins);
    let out = sb
        .fetch()
        .program(&program)
        .args(["--jars", &urls.join(","), "--files", &file_url])
        .arg("--checksums")
        .arg(&pins_file)
        .run();
    out.expect_code(0);
    for (name, bytes) in &jars {
        let got = std::fs::read(sb.jar(&base(name))).unwrap();
        assert!(got == *bytes, "{name}: not byte-exact");
        let artifact = sb.artifact(&base(name));
        assert_eq!(artifact["sha256"], sha256_hex(bytes), "{artifact:#}");
    }
    assert!(std::fs::read(sb.files.join("log4j2.properties")).unwrap() == file);
    // The classpath in declared order, as the file and as the sourced env snippet.
    let expected: Vec<String> = jars
        .iter()
        .map(|(name, _)| sb.jar(&base(name)).display().to_string())
        .collect();
    assert_eq!(sb.classpath().trim_end(), expected.join(":"), "{out}");
    assert_eq!(sb.sourced_classpath(None), expected.join(":"));
    assert_eq!(sb.report()["exit_code"], 0);
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());

    // A wrong pin: exit 4, that jar never published, the others still verified.
    let wrong = Sandbox::new();
    let bad = pins.replacen(&sha256_hex(&jars[1].1), &sha256_hex(b"not delta"), 1);
    let bad_file = wrong.write("sha256sums", bad);
    let out = wrong
        .fetch()
        .program(&program)
        .args(["--jars", &urls.join(",")])
        .arg("--checksums")
        .arg(&bad_file)
        .run();
    out.expect_code(4).expect_stderr(&urls[1]);
    assert!(
        !wrong.jar(&base(&jars[1].0)).exists(),
        "a jar failing its pin was published"
    );
    assert_eq!(wrong.artifact(&base(&jars[1].0))["status"], "failed");
    assert!(wrong.leftovers().is_empty(), "{:?}", wrong.leftovers());
    assert!(
        !wrong.jars.join("classpath").exists(),
        "a classpath was written by a failed run"
    );
}

/// The Kerberos-capable image is built for amd64 only: for a Kerberos cluster without
/// a delegation token, the arm64 binary points at the token, not at that image.
#[test]
fn the_arm64_binary_names_the_delegation_token_for_a_kerberos_cluster() {
    let Some(program) = arm64_program() else {
        return;
    };
    let sb = Sandbox::new();
    let conf = sb.root.join("hadoop-conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(
        conf.join("core-site.xml"),
        "<configuration><property><name>hadoop.security.authentication</name>\
         <value>kerberos</value></property></configuration>",
    )
    .unwrap();
    let out = sb
        .fetch()
        .program(&program)
        .arg("--hadoop-conf-dir")
        .arg(&conf)
        .args(["--jars", "hdfs://127.0.0.1:9/libs/a.jar"])
        .run();
    out.expect_code(2)
        .expect_stderr("on arm64 nodes give a delegation token with HADOOP_TOKEN_FILE_LOCATION");
    assert!(
        !out.stderr.contains("use the Kerberos-capable image"),
        "{out}"
    );
}
