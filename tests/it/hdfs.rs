//! `hdfs://` through the real hdfs-native client against the protocol-level test
//! HDFS (`tests/hdfs/testhdfs.py`: Hadoop RPC for the NameNode calls the client
//! makes, DataTransferProtocol with checksummed packets for the DataNodes).
//! What that server does not cover (SASL with tokens or Kerberos, real DataNode
//! behaviour) is listed in `tests/hdfs/README.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::support::hdfs::TestHdfs;
use crate::support::{data, is_root, populate_chroot, s, tar_gz, Sandbox};

/// Writes `bytes` under the sandbox and returns the path (the server's source file).
fn source(sb: &Sandbox, name: &str, bytes: &[u8]) -> PathBuf {
    let path = sb.root.join("hdfs-src").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

fn three_datanodes() -> serde_json::Value {
    json!([{"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}, {"id": "dn3", "port": 0}])
}

fn deps_tgz(sb: &Sandbox) -> Vec<u8> {
    let tree = sb.root.join("tree");
    std::fs::create_dir_all(tree.join("py")).unwrap();
    std::fs::write(tree.join("py/job.py"), b"print('hi')\n").unwrap();
    let out = sb.root.join("deps.tgz");
    tar_gz(&tree, &out);
    std::fs::read(out).unwrap()
}

#[test]
fn jars_files_and_archives_localize_from_hdfs_across_blocks() {
    let sb = Sandbox::new();
    let jar = data(41, (2 << 20) + 123_456); // three 1 MiB blocks
    let conf = b"spark.executor.memory=4g\n".to_vec();
    let large = data(42, 40 << 20); // 3 MiB blocks: the 8 MiB ranges start and end mid-block
    let deps = deps_tgz(&sb);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [
            {"path": "/apps/libs/celeborn-client.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20,
             "replicas": [["dn1", "dn2"], ["dn2", "dn3"], ["dn3", "dn1"]]},
            {"path": "/apps/conf/app.conf", "source": s(&source(&sb, "app.conf", &conf)), "block_size": 1 << 20},
            {"path": "/apps/data/model.bin", "source": s(&source(&sb, "model.bin", &large)), "block_size": 3 << 20},
            {"path": "/apps/deps.tgz", "source": s(&source(&sb, "deps.tgz", &deps)), "block_size": 1 << 20},
        ],
    })) else {
        return;
    };
    let base = hdfs.url();
    let out = sb
        .fetch()
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--jars", &format!("{base}/apps/libs/celeborn-client.jar")])
        .args([
            "--files",
            &format!("{base}/apps/conf/app.conf,{base}/apps/data/model.bin"),
        ])
        .args(["--archives", &format!("{base}/apps/deps.tgz#pydeps")])
        .run();
    out.expect_code(0).expect_stderr("in 5 ranges");
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), conf);
    assert!(std::fs::read(sb.files.join("model.bin")).unwrap() == large);
    assert!(sb.files.join("pydeps/py/job.py").is_file());
    assert!(sb.classpath().contains("celeborn-client.jar"));

    // check: the cluster, how it is reached, and a probe per file.
    let out = sb
        .check()
        .args([
            "--jars",
            &format!("{base}/apps/libs/celeborn-client.jar,{base}/apps/libs/missing.jar"),
        ])
        .run();
    out.expect_code(3);
    assert!(
        out.stdout.contains(&format!("hdfs cluster     {base}")),
        "{out}"
    );
    assert!(out.stdout.contains("auth           simple"), "{out}");
    assert!(out.stdout.contains("ok    hdfs://"), "{out}");
    assert!(
        out.stdout.contains("FAIL  hdfs://") && out.stdout.contains("no such file"),
        "{out}"
    );
}

#[test]
fn crc32_checksums_and_a_missing_file() {
    let sb = Sandbox::new();
    let jar = data(43, 3 << 20);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32",
        "bytes_per_checksum": 512,
        "files": [{"path": "/a.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20}],
    })) else {
        return;
    };
    sb.fetch()
        .args(["--jars", &format!("{}/a.jar", hdfs.url())])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);

    let missing = format!("{}/no/such.jar", hdfs.url());
    let out = sb
        .fetch()
        .retry_delay("3s")
        .args(["--jars", &missing])
        .run();
    out.expect_code(3)
        .expect_stderr(&format!("{missing}: no such file"));
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");
}

#[test]
fn a_corrupt_replica_is_skipped_and_all_corrupt_is_an_integrity_failure() {
    let sb = Sandbox::new();
    let jar = data(44, (2 << 20) + 7);
    let src = s(&source(&sb, "a.jar", &jar));
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [
            {"path": "/one-bad.jar", "source": src, "block_size": 1 << 20,
             "replicas": [["dn1", "dn2"], ["dn1", "dn2"], ["dn1", "dn2"]],
             "corrupt": [{"block": 1, "datanode": "dn1"}, {"block": 2, "datanode": "dn2"}]},
            {"path": "/all-bad.jar", "source": src, "block_size": 1 << 20,
             "replicas": [["dn1", "dn2"], ["dn2", "dn3"], ["dn3"]],
             "corrupt": [{"block": 1, "datanode": "dn2"}, {"block": 1, "datanode": "dn3"}]},
        ],
    })) else {
        return;
    };
    sb.fetch()
        .args(["--jars", &format!("{}/one-bad.jar", hdfs.url())])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("one-bad.jar")).unwrap(), jar);

    let out = sb
        .fetch()
        .args(["--jars", &format!("{}/all-bad.jar", hdfs.url())])
        .run();
    out.expect_code(4).expect_stderr("checksum");
    assert!(!sb.jar("all-bad.jar").exists());
}

/// An HA nameservice from a Hadoop configuration directory.
fn ha_cluster(sb: &Sandbox, first: &str, jar: &[u8]) -> Option<TestHdfs> {
    TestHdfs::start(json!({
        "nameservice": "ns1",
        "namenodes": [
            {"name": "nn1", "port": 0, "state": first},
            {"name": "nn2", "port": 0, "state": "active"},
        ],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [{"path": "/libs/a.jar", "source": s(&source(sb, "a.jar", jar)), "block_size": 1 << 20}],
    }))
}

#[test]
fn ha_fails_over_from_a_down_or_standby_namenode() {
    for first in ["down", "standby"] {
        let sb = Sandbox::new();
        let jar = data(45, 1_500_000);
        let Some(hdfs) = ha_cluster(&sb, first, &jar) else {
            return;
        };
        let conf = hdfs.write_hadoop_conf(&sb.root.join("hadoop-conf"));
        let out = sb
            .fetch()
            .args([
                "--hadoop-conf-dir",
                &s(&conf),
                "--jars",
                "hdfs://ns1/libs/a.jar",
            ])
            .run();
        out.expect_code(0);
        assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar, "{first}");
        // The same through HADOOP_CONF_DIR, as Spark's pods have it.
        let sb2 = Sandbox::new();
        sb2.fetch()
            .env("HADOOP_CONF_DIR", &s(&conf))
            .args(["--jars", "hdfs://ns1/libs/a.jar"])
            .run()
            .expect_code(0);
    }
}

#[test]
fn no_namenode_answering_is_a_clear_error_within_the_deadline() {
    let sb = Sandbox::new();
    let jar = data(46, 1000);
    let Some(hdfs) = ha_cluster(&sb, "down", &jar) else {
        return;
    };
    let conf = hdfs.write_hadoop_conf(&sb.root.join("hadoop-conf"));
    drop(hdfs); // every NameNode gone
                // A NameNode address that is not host:port is a configuration error.
    let props = sb.write(
        "bad.properties",
        "spark.hadoop.dfs.namenode.rpc-address.ns1.nn2=notaport\n",
    );
    sb.fetch()
        .args([
            "--hadoop-conf-dir",
            &s(&conf),
            "--properties-file",
            &s(&props),
        ])
        .args(["--jars", "hdfs://ns1/libs/a.jar"])
        .run()
        .expect_code(2)
        .expect_stderr("dfs.namenode.rpc-address.ns1.nn2 is 'notaport', not host:port");
    let out = sb
        .fetch()
        .args([
            "--hadoop-conf-dir",
            &s(&conf),
            "--deadline",
            "10s",
            "--connect-timeout",
            "2s",
        ])
        .args(["--jars", "hdfs://ns1/libs/a.jar"])
        .run();
    assert!(matches!(out.code, Some(3 | 5)), "{out}");
    assert!(out.elapsed < Duration::from_secs(13), "{out}");
    out.expect_stderr("nameservice ns1 (NameNodes nn1 127.0.0.1:")
        .expect_stderr("nn2 127.0.0.1:");
}

#[test]
fn token_files_are_checked_before_use() {
    let sb = Sandbox::new();
    let jar = data(47, 1000);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [{"path": "/a.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20}],
    })) else {
        return;
    };
    let uri = format!("{}/a.jar", hdfs.url());
    // Truncated, wrong magic, garbage: a configuration error naming the file.
    for (name, bytes) in [
        ("truncated", &b"HDTS\x00\x01\x05ab"[..]),
        ("magic", &b"NOTATOKENFILE"[..]),
        ("empty", &b""[..]),
    ] {
        let file = sb.write(name, bytes);
        sb.fetch()
            .env("HADOOP_TOKEN_FILE_LOCATION", &s(&file))
            .args(["--jars", &uri])
            .run()
            .expect_code(2)
            .expect_stderr(&format!("HADOOP_TOKEN_FILE_LOCATION={}", s(&file)));
    }
    // Not a regular file (a device would be read forever).
    sb.fetch()
        .env("HADOOP_TOKEN_FILE_LOCATION", "/dev/zero")
        .args(["--jars", &uri])
        .run()
        .expect_code(2)
        .expect_stderr("not a regular file");
    // A well-formed file: check names its token (never its secret parts); fetch works.
    let file = sb.write("tokens", token_file("127.0.0.1:8020"));
    let out = sb
        .check()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&file))
        .args(["--jars", &uri])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout
            .contains("HDFS_DELEGATION_TOKEN for 127.0.0.1:8020"),
        "{out}"
    );
    sb.fetch()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&file))
        .args(["--jars", &uri])
        .run()
        .expect_code(0);
}

/// A Writable token file (Hadoop's `Credentials.writeTokenStorageFile`) with one
/// HDFS delegation token.
pub(crate) fn token_file(service: &str) -> Vec<u8> {
    token_file_until(service, 4_100_000_000_000)
}

/// [`token_file`], renewable until `max_date_ms`.
fn token_file_until(service: &str, max_date_ms: i64) -> Vec<u8> {
    fn vlong(out: &mut Vec<u8>, v: i64) {
        if (-112..=127).contains(&v) {
            out.push(v as u8);
            return;
        }
        let (neg, mut x) = if v < 0 { (true, !v) } else { (false, v) };
        let mut bytes = Vec::new();
        while x != 0 {
            bytes.push((x & 0xff) as u8);
            x >>= 8;
        }
        let len = bytes.len() as i64;
        out.push(if neg {
            (-120 - len) as u8
        } else {
            (-112 - len) as u8
        });
        out.extend(bytes.iter().rev());
    }
    fn text(out: &mut Vec<u8>, s: &str) {
        vlong(out, s.len() as i64);
        out.extend_from_slice(s.as_bytes());
    }
    let mut id = vec![0u8];
    for s in ["spark", "yarn", ""] {
        text(&mut id, s);
    }
    for v in [1_500_000_000_000i64, max_date_ms, 7, 3] {
        vlong(&mut id, v);
    }
    let mut out = b"HDTS\0".to_vec();
    vlong(&mut out, 1);
    text(&mut out, service);
    vlong(&mut out, id.len() as i64);
    out.extend(&id);
    vlong(&mut out, 8);
    out.extend(b"PASSWORD");
    text(&mut out, "HDFS_DELEGATION_TOKEN");
    text(&mut out, service);
    vlong(&mut out, 0);
    out
}

/// A Kerberos cluster and a binary that cannot load libgssapi (as the static
/// build never can): a fast, clear failure. Run from an empty chroot holding
/// only the binary and its loader, so no GSSAPI library exists.
#[test]
fn a_kerberos_cluster_without_gssapi_fails_fast_and_clearly() {
    if !is_root() {
        eprintln!("SKIP: the chroot test needs root");
        return;
    }
    let sb = Sandbox::new();
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "kerberos": true,
        "files": [{"path": "/a.jar", "source": s(&source(&sb, "a.jar", b"x")), "block_size": 1 << 20}],
    })) else {
        return;
    };
    let root = tempfile::Builder::new()
        .prefix("sl-chroot-")
        .tempdir()
        .unwrap();
    assert!(populate_chroot(
        Path::new(env!("CARGO_BIN_EXE_spark-localizer")),
        root.path()
    ));
    std::fs::create_dir_all(root.path().join("conf")).unwrap();
    std::fs::write(
        root.path().join("conf/core-site.xml"),
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>",
    )
    .unwrap();
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chroot");
    let started = std::time::Instant::now();
    let out = std::process::Command::new(chroot)
        .arg(root.path())
        .args([
            "/spark-localizer",
            "fetch",
            "--no-progress",
            "--jars-dir",
            "/out",
        ])
        .args([
            "--hadoop-conf-dir",
            "/conf",
            "--jars",
            &format!("{}/a.jar", hdfs.url()),
        ])
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Kerberos-capable image") && stderr.contains("delegation token"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A token file, but no HDFS delegation token for this cluster: the same.
    std::fs::write(root.path().join("tokens"), token_file("ha-hdfs:another")).unwrap();
    let out = std::process::Command::new(chroot)
        .arg(root.path())
        .args([
            "/spark-localizer",
            "fetch",
            "--no-progress",
            "--jars-dir",
            "/out",
        ])
        .args([
            "--hadoop-conf-dir",
            "/conf",
            "--jars",
            &format!("{}/a.jar", hdfs.url()),
        ])
        .env_clear()
        .env("HADOOP_TOKEN_FILE_LOCATION", "/tokens")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no HDFS delegation token for it"),
        "{stderr}"
    );
}

/// viewfs:// through a mount table in core-site.xml.
#[test]
fn viewfs_resolves_through_the_mount_table() {
    let sb = Sandbox::new();
    let jar = data(48, 300_000);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [{"path": "/apps/libs/a.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20}],
    })) else {
        return;
    };
    let conf = sb.root.join("viewfs-conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("core-site.xml"),
        format!(
            "<configuration><property><name>fs.viewfs.mounttable.cluster.link./libs</name><value>{0}/apps/libs</value></property>\
             <property><name>fs.viewfs.mounttable.cluster.linkFallback</name><value>{0}/</value></property></configuration>",
            hdfs.url()
        ),
    )
    .unwrap();
    sb.fetch()
        .args([
            "--hadoop-conf-dir",
            &s(&conf),
            "--jars",
            "viewfs://cluster/libs/a.jar",
        ])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);
}

/// Issue 15, `check` for HDFS: the user the NameNode sees and where it comes
/// from; a token file without a token for the cluster, or with one past its max
/// date, is warned about (by fetch too).
#[test]
fn check_shows_the_hdfs_user_and_warns_about_unusable_tokens() {
    let sb = Sandbox::new();
    let jar = data(48, 1000);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": three_datanodes(),
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [{"path": "/a.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20}],
    })) else {
        return;
    };
    let uri = format!("{}/a.jar", hdfs.url());
    let service = hdfs.url().trim_start_matches("hdfs://").to_owned();

    let out = sb
        .check()
        .env("HADOOP_USER_NAME", "alice")
        .args(["--jars", &uri])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout
            .contains("user           alice (HADOOP_USER_NAME; simple authentication)"),
        "{out}"
    );

    let good = sb.write("good", token_file(&service));
    let out = sb
        .check()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&good))
        .args(["--jars", &uri])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!(
            "user           spark (the HDFS delegation token for {service})"
        )),
        "{out}"
    );
    assert!(!out.stdout.contains("warning"), "{out}");

    let other = sb.write("other", token_file("ha-hdfs:elsewhere"));
    let out = sb
        .check()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&other))
        .args(["--jars", &uri])
        .run();
    assert!(
        out.stdout.contains(&format!(
            "warning        HADOOP_TOKEN_FILE_LOCATION holds no HDFS delegation token for {} (its HDFS tokens are for: ha-hdfs:elsewhere)",
            hdfs.url()
        )),
        "{out}"
    );

    let expired = sb.write("expired", token_file_until(&service, 1_600_000_000_000));
    let out = sb
        .check()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&expired))
        .args(["--jars", &uri])
        .run();
    let warning = format!(
        "the HDFS delegation token for {service} passed its max date (Sun, 13 Sep 2020 12:26:40 GMT)"
    );
    assert!(out.stdout.contains(&warning), "{out}");
    let out = sb
        .fetch()
        .env("HADOOP_TOKEN_FILE_LOCATION", &s(&expired))
        .args(["--jars", &uri])
        .run();
    out.expect_stderr(&warning);
}

/// Issue 15, `check` for HDFS: each NameNode of a nameservice is asked directly,
/// so the one that answers, the standby and the dead one are told apart.
#[test]
fn check_says_which_namenode_answers() {
    let sb = Sandbox::new();
    let jar = data(49, 1000);
    let Some(hdfs) = ha_cluster(&sb, "standby", &jar) else {
        return;
    };
    let conf = hdfs.write_hadoop_conf(&sb.root.join("hadoop-conf"));
    let out = sb
        .check()
        .args([
            "--hadoop-conf-dir",
            &s(&conf),
            "--jars",
            "hdfs://ns1/libs/a.jar",
        ])
        .run();
    out.expect_code(0);
    for line in [
        format!("namenode nn1   {}: standby", hdfs.namenode_addr(0)),
        format!("namenode nn2   {}: answers (active)", hdfs.namenode_addr(1)),
    ] {
        assert!(out.stdout.contains(&line), "{line}\n{out}");
    }
    let sb = Sandbox::new();
    let Some(hdfs) = ha_cluster(&sb, "down", &jar) else {
        return;
    };
    let conf = hdfs.write_hadoop_conf(&sb.root.join("hadoop-conf"));
    let out = sb
        .check()
        .args([
            "--hadoop-conf-dir",
            &s(&conf),
            "--jars",
            "hdfs://ns1/libs/a.jar",
        ])
        .run();
    out.expect_code(0);
    let line = format!("namenode nn1   {}: does not answer", hdfs.namenode_addr(0));
    assert!(out.stdout.contains(&line), "{line}\n{out}");
}

/// Issue 15: a block no DataNode can serve is named, with the DataNodes tried
/// and why each failed.
#[test]
fn a_block_no_datanode_serves_is_named_with_the_datanodes_tried() {
    let sb = Sandbox::new();
    let jar = data(50, 1_500_000);
    let Some(hdfs) = TestHdfs::start(json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": [{"id": "dn1", "port": 0, "down": true}, {"id": "dn2", "port": 0, "down": true}],
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": [{"path": "/a.jar", "source": s(&source(&sb, "a.jar", &jar)), "block_size": 1 << 20}],
    })) else {
        return;
    };
    let out = sb
        .fetch()
        .args(["--retries", "1", "--jars", &format!("{}/a.jar", hdfs.url())])
        .run();
    out.expect_code(3).expect_stderr(&format!(
        "block 0 (bytes 0-1048575): no DataNode holding it could serve it (tried {} (ConnectionRefused), {} (ConnectionRefused))",
        hdfs.datanode_addr("dn1"),
        hdfs.datanode_addr("dn2")
    ));
    assert!(!sb.jar("a.jar").exists());
}
