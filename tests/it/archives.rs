//! `--archives`: fetched like any artifact, unpacked into `<files-dir>/<name>`
//! atomically, kept when unchanged, replaced when changed, refused (with
//! nothing visible) when unsafe.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::nginx::Nginx;
use crate::support::{data, s, sha256_hex, tar_gz, FaultServer, Sandbox};

/// A tree with nested dirs, an empty dir, an executable and a unicode name.
fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("lib/python3/site")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("bin/python"), b"#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(
        root.join("bin/python"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(root.join("lib/python3/site/mod.py"), data(1, 5000)).unwrap();
    std::fs::write(root.join("lib/données.txt"), b"unicode\n").unwrap();
}

fn zip_with(out: &Path, entries: &[(&str, &[u8])]) {
    let spec: Vec<String> = entries
        .iter()
        .map(|(n, b)| format!("({n:?}, bytes.fromhex({:?}))", hex::encode(b)))
        .collect();
    let script = format!(
        "import zipfile\nwith zipfile.ZipFile({:?}, 'w', zipfile.ZIP_DEFLATED) as z:\n    for n, b in [{}]:\n        z.writestr(n, b)\n",
        s(out),
        spec.join(", ")
    );
    let ok = Command::new("python3")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success();
    assert!(ok, "python zipfile failed");
}

#[test]
fn tar_gz_from_nginx_with_alias_unpacks_keeps_and_replaces() {
    let www = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    tree(src.path());
    tar_gz(src.path(), &www.path().join("pyenv.tar.gz"));
    let Some(nginx) = Nginx::start(www.path()) else {
        return;
    };
    let sb = Sandbox::new();
    let uri = format!("{}#environment", nginx.url("pyenv.tar.gz"));
    sb.fetch().args(["--archives", &uri]).run().expect_code(0);
    let env = sb.files.join("environment");
    let first = std::fs::read(env.join("lib/python3/site/mod.py")).unwrap();
    assert!(first == data(1, 5000), "unpacked content differs");
    assert!(env.join("empty").is_dir());
    assert_eq!(
        std::fs::read(env.join("lib/données.txt")).unwrap(),
        b"unicode\n"
    );
    let mode = std::fs::metadata(env.join("bin/python"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "exec bits kept: {mode:o}");
    let report = sb.report();
    assert_eq!(report["artifacts"][0]["kind"], "archive");
    assert_eq!(report["artifacts"][0]["destination"], s(&env));

    // Rerun: the same archive digest keeps the directory.
    let marker = env.join("lib/marker-from-user");
    std::fs::write(&marker, b"x").unwrap();
    sb.fetch().args(["--archives", &uri]).run().expect_code(0);
    assert!(marker.exists(), "an unchanged archive was unpacked again");

    // Another archive under the same alias (a new version) replaces the directory.
    std::fs::write(src.path().join("lib/python3/site/mod.py"), data(2, 7000)).unwrap();
    tar_gz(src.path(), &www.path().join("pyenv-2.tar.gz"));
    let uri = format!("{}#environment", nginx.url("pyenv-2.tar.gz"));
    sb.fetch().args(["--archives", &uri]).run().expect_code(0);
    let now = std::fs::read(env.join("lib/python3/site/mod.py")).unwrap();
    assert!(
        now == data(2, 7000),
        "the new archive's content is not there"
    );
    assert!(!marker.exists(), "the old tree survived a changed archive");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn zip_and_jar_unpack_under_their_file_name_and_pins_check_the_archive() {
    let server = FaultServer::start();
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("conf.zip");
    zip_with(&zip, &[("conf/app.conf", b"a=1\n"), ("README", b"hello\n")]);
    let bytes = std::fs::read(&zip).unwrap();
    server.put("/conf.zip", bytes.clone());
    server.put("/models.jar", bytes.clone());
    let sb = Sandbox::new();
    let pins = sb.write("pins", format!("{}  conf.zip\n", sha256_hex(&bytes)));
    sb.fetch()
        .args([
            "--archives",
            &format!("{},{}", server.url("/conf.zip"), server.url("/models.jar")),
            "--checksums",
            &s(&pins),
        ])
        .run()
        .expect_code(0);
    assert_eq!(
        std::fs::read(sb.files.join("conf.zip/conf/app.conf")).unwrap(),
        b"a=1\n"
    );
    assert_eq!(
        std::fs::read(sb.files.join("models.jar/README")).unwrap(),
        b"hello\n"
    );

    let sb = Sandbox::new();
    let bad = sb.write("pins", format!("{}  conf.zip\n", "0".repeat(64)));
    sb.fetch()
        .args([
            "--archives",
            &server.url("/conf.zip"),
            "--checksums",
            &s(&bad),
        ])
        .run()
        .expect_code(4);
    assert!(!sb.files.join("conf.zip").exists());
}

#[test]
fn an_unsafe_archive_is_refused_with_nothing_visible_or_outside() {
    let server = FaultServer::start();
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("evil.zip");
    zip_with(
        &zip,
        &[("ok.txt", b"fine\n"), ("../../escaped.txt", b"evil\n")],
    );
    server.put("/evil.zip", std::fs::read(&zip).unwrap());
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args(["--archives", &server.url("/evil.zip")])
        .run();
    out.expect_code(4)
        .expect_stderr("evil.zip")
        .expect_stderr("../../escaped.txt");
    assert!(
        !sb.files.join("evil.zip").exists(),
        "a refused archive became visible"
    );
    assert!(
        !sb.root.join("escaped.txt").exists()
            && !sb.root.parent().unwrap().join("escaped.txt").exists()
    );
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert!(sb.term_log_text().unwrap().contains("evil.zip"));
}

#[test]
fn unknown_formats_are_copied_as_is_and_archive_jars_join_the_classpath_on_request() {
    let server = FaultServer::start();
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("libs.zip");
    zip_with(
        &zip,
        &[
            ("b.jar", b"jar-b"),
            ("a.jar", b"jar-a"),
            ("sub/c.jar", b"jar-c"),
        ],
    );
    server.put("/libs.zip", std::fs::read(&zip).unwrap());
    server.put("/data.bin", data(3, 100));
    server.put("/x.jar", data(4, 100));
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .args([
            "--archives",
            &format!("{},{}", server.url("/data.bin"), server.url("/libs.zip")),
        ])
        .args(["--jars", &server.url("/x.jar")])
        .run();
    out.expect_code(0).expect_stderr("copied as is");
    assert_eq!(
        std::fs::read(sb.files.join("data.bin")).unwrap(),
        data(3, 100)
    );
    assert_eq!(
        sb.classpath().trim_end(),
        s(&sb.jar("x.jar")),
        "archive jars only on request"
    );

    let sb = Sandbox::new();
    sb.fetch()
        .args([
            "--archives",
            &server.url("/libs.zip"),
            "--archive-classpath",
        ])
        .args(["--jars", &server.url("/x.jar")])
        .run()
        .expect_code(0);
    let libs = sb.files.join("libs.zip");
    // Jars come first in the plan, then files, then archives.
    let want = [
        s(&sb.jar("x.jar")),
        s(&libs.join("a.jar")),
        s(&libs.join("b.jar")),
    ]
    .join(":");
    assert_eq!(sb.classpath().trim_end(), want);
}

#[test]
fn a_tree_whose_name_the_plan_dropped_is_removed_even_after_a_failed_replacement() {
    let server = FaultServer::start();
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good.zip");
    zip_with(&good, &[("a.txt", b"a\n")]);
    let evil = work.path().join("evil.zip");
    zip_with(&evil, &[("../x", b"x\n")]);
    server.put("/good.zip", std::fs::read(&good).unwrap());
    server.put("/evil.zip", std::fs::read(&evil).unwrap());
    let sb = Sandbox::new();
    let env = sb.files.join("env");
    sb.fetch()
        .args(["--archives", &format!("{}#env", server.url("/good.zip"))])
        .run()
        .expect_code(0);
    assert!(env.join("a.txt").exists());
    // A failing replacement under the same name, then a plan without the name.
    sb.fetch()
        .args(["--archives", &format!("{}#env", server.url("/evil.zip"))])
        .run()
        .expect_code(4);
    sb.fetch()
        .args(["--archives", &format!("{}#other", server.url("/good.zip"))])
        .run()
        .expect_code(0);
    assert!(!env.exists(), "an orphaned tree survived");
    assert!(sb.files.join("other/a.txt").exists());
}

#[test]
fn unsafe_names_stay_off_the_classpath_and_zero_limits_are_config_errors() {
    let server = FaultServer::start();
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("libs.zip");
    zip_with(
        &zip,
        &[
            ("ok.jar", b"ok"),
            ("in:jected.jar", b"x"),
            ("new\nline.jar", b"y"),
        ],
    );
    server.put("/libs.zip", std::fs::read(&zip).unwrap());
    let sb = Sandbox::new();
    sb.fetch()
        .args([
            "--archives",
            &server.url("/libs.zip"),
            "--archive-classpath",
        ])
        .run()
        .expect_code(0)
        .expect_stderr("cannot go on the classpath");
    assert_eq!(
        sb.classpath(),
        format!("{}\n", s(&sb.files.join("libs.zip/ok.jar")))
    );

    for flag in [
        "--archive-max-bytes",
        "--archive-max-entries",
        "--archive-max-ratio",
    ] {
        let out = sb
            .fetch()
            .args(["--archives", &server.url("/libs.zip"), flag, "0"])
            .run();
        out.expect_code(2).expect_stderr(flag);
    }
}

/// A tar of `entries` (name, contents), as the tar crate writes it (GNU long
/// names for long paths).
fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, *bytes).unwrap();
    }
    builder.into_inner().unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// `file://` URI of `bytes` written as `name` in `dir`.
fn local_archive(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    format!("file://{}", s(&path))
}

#[test]
fn a_tgz_of_several_gzip_members_unpacks_every_member() {
    let work = tempfile::tempdir().unwrap();
    let tar = tar_of(&[
        ("first.txt", b"one\n"),
        ("second.txt", &data(5, 3000)),
        ("third.txt", b"three\n"),
    ]);
    // Split after the first entry (header and one data block): two gzip members,
    // as `cat a.gz b.gz`, BGZF or a parallel compressor writes them.
    let mut tgz = gzip(&tar[..1024]);
    tgz.extend(gzip(&tar[1024..]));
    let uri = local_archive(work.path(), "multi.tgz", &tgz);
    let listed = Command::new("tar")
        .arg("tzf")
        .arg(work.path().join("multi.tgz"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("third.txt"));
    let sb = Sandbox::new();
    sb.fetch().args(["--archives", &uri]).run().expect_code(0);
    let root = sb.files.join("multi.tgz");
    assert_eq!(std::fs::read(root.join("first.txt")).unwrap(), b"one\n");
    assert!(std::fs::read(root.join("second.txt")).unwrap() == data(5, 3000));
    assert_eq!(std::fs::read(root.join("third.txt")).unwrap(), b"three\n");

    // A damaged later member is caught (its CRC is checked too).
    let mut bad = gzip(&tar[..1024]);
    let mut second = gzip(&tar[1024..]);
    let crc_at = second.len() - 8;
    second[crc_at] ^= 0xff;
    bad.extend(second);
    let uri = local_archive(work.path(), "damaged.tgz", &bad);
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--archives", &uri])
        .run()
        .expect_code(4)
        .expect_stderr("damaged.tgz");
    assert!(!sb.files.join("damaged.tgz").exists());
}

#[test]
fn bytes_after_the_gzip_stream_are_refused_unless_they_are_zero_padding() {
    let work = tempfile::tempdir().unwrap();
    let tgz = gzip(&tar_of(&[("a.txt", b"a\n")]));
    let mut garbage = tgz.clone();
    garbage.extend(data(6, 2 << 20));
    let uri = local_archive(work.path(), "garbage.tgz", &garbage);
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--archives", &uri])
        .run()
        .expect_code(4)
        .expect_stderr("garbage.tgz")
        .expect_stderr("after the end of the gzip stream");
    assert!(!sb.files.join("garbage.tgz").exists());

    // Zero padding (a tape block, as gzip and tar accept it) is fine.
    let mut padded = tgz;
    padded.extend(vec![0u8; 10240]);
    let uri = local_archive(work.path(), "padded.tgz", &padded);
    let sb = Sandbox::new();
    sb.fetch().args(["--archives", &uri]).run().expect_code(0);
    assert_eq!(
        std::fs::read(sb.files.join("padded.tgz/a.txt")).unwrap(),
        b"a\n"
    );
}

#[test]
fn an_entry_declaring_more_than_the_limit_is_refused_from_its_header() {
    let work = tempfile::tempdir().unwrap();
    // A header declaring 10 GiB, followed by 256 KiB of its contents: refused
    // before anything is written (it used to be streamed to the limit).
    let mut header = tar::Header::new_gnu();
    header.set_path("big.bin").unwrap();
    header.set_size(10 << 30);
    header.set_mode(0o644);
    header.set_cksum();
    let mut tar = header.as_bytes().to_vec();
    tar.extend(vec![0u8; 256 << 10]);
    let uri = local_archive(work.path(), "big.tgz", &gzip(&tar));
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--archives", &uri])
        .run()
        .expect_code(4)
        .expect_stderr("big.tgz")
        .expect_stderr("'big.bin' declares 10737418240 bytes")
        .expect_stderr("--archive-max-bytes");
    assert!(!sb.files.join("big.tgz").exists());
}

#[test]
fn a_malformed_gnu_sparse_entry_is_named() {
    let work = tempfile::tempdir().unwrap();
    let mut tar = tar_of(&[("first.txt", b"one\n")]);
    tar.truncate(1024); // without its end-of-archive blocks
    let mut header = tar::Header::new_gnu();
    header.set_path("sparse.bin").unwrap();
    header.set_entry_type(tar::EntryType::GNUSparse);
    header.set_size(0);
    header.set_mode(0o644);
    header.as_gnu_mut().unwrap().realsize = *b"not a numbr\0";
    header.set_cksum();
    tar.extend(header.as_bytes());
    tar.extend(vec![0u8; 1024]);
    let uri = local_archive(work.path(), "sparse.tgz", &gzip(&tar));
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--archives", &uri]).run();
    out.expect_code(4)
        .expect_stderr("sparse.tgz")
        .expect_stderr("the entry after 'first.txt' (entry 2)");
    assert!(!out.stderr.contains("for :"), "{out}");
}

#[test]
fn a_name_component_longer_than_the_file_system_allows_is_refused_as_hostile() {
    let work = tempfile::tempdir().unwrap();
    let long = format!("dir/{}.txt", "n".repeat(300));
    let uri = local_archive(
        work.path(),
        "long.tgz",
        &gzip(&tar_of(&[("ok.txt", b"ok\n"), (long.as_str(), b"x\n")])),
    );
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--archives", &uri])
        .run()
        .expect_code(4)
        .expect_stderr("long.tgz")
        .expect_stderr("longer than 255 bytes");
    assert!(!sb.files.join("long.tgz").exists());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_zip_with_data_after_its_end_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("plain.zip");
    zip_with(&zip, &[("a.txt", b"a\n")]);
    let mut bytes = std::fs::read(&zip).unwrap();
    bytes.extend(data(7, 2 << 20));
    let uri = local_archive(work.path(), "trailing.zip", &bytes);
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--archives", &uri])
        .run()
        .expect_code(4)
        .expect_stderr("trailing.zip");
    assert!(!sb.files.join("trailing.zip").exists());
}
