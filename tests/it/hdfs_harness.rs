//! The test HDFS itself (`tests/hdfs/testhdfs.py`), driven by the real
//! hdfs-native client directly: multi-block reads checked byte for byte with
//! CRC32C and CRC32 packets, ranges across block boundaries, missing paths,
//! corrupt replicas, HA failover from a down or standby NameNode, SASL, and a
//! Kerberos-only server refusing a client without Kerberos.

use std::path::Path;
use std::time::{Duration, Instant};

use hdfs_native::{Client, ClientBuilder, HdfsError};
use serde_json::{json, Value};

use crate::support::data;
use crate::support::hdfs::TestHdfs;

const MIB: usize = 1 << 20;
const JAR: &str = "/user/spark/jars/a.jar";
/// Three 1 MiB blocks, the last one partial and not a whole number of chunks.
const JAR_LEN: usize = 2 * MIB + MIB / 2 + 123;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Writes `bytes` into `dir` and returns the path as the config's `source`.
fn source(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// One active NameNode, DataNodes dn1..dn3, the given files and extra keys.
fn cluster(files: Value, extra: Value) -> Option<TestHdfs> {
    let mut config = json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": [{"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}, {"id": "dn3", "port": 0}],
        "checksum": "CRC32C",
        "bytes_per_checksum": 512,
        "files": files,
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    TestHdfs::start(config)
}

fn client(url: &str, config: &[(&str, &str)]) -> Client {
    ClientBuilder::new()
        .with_url(url)
        .with_user("spark")
        .with_config(config.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .build()
        .unwrap()
}

async fn read_all(client: &Client, path: &str) -> Result<Vec<u8>, HdfsError> {
    let reader = client.read(path).await?;
    let len = reader.file_length();
    Ok(reader.read_range(0, len).await?.to_vec())
}

#[track_caller]
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {at}");
    }
}

#[test]
fn three_block_file_reads_byte_exact_with_crc32c_and_crc32() {
    for (seed, checksum) in [(71, "CRC32C"), (72, "CRC32")] {
        let tmp = tempfile::tempdir().unwrap();
        let body = data(seed, JAR_LEN);
        let files =
            json!([{"path": JAR, "source": source(tmp.path(), "a.jar", &body), "block_size": MIB}]);
        let Some(hdfs) = cluster(files, json!({"checksum": checksum})) else {
            return;
        };
        assert_eq!(
            hdfs.ready()["files"][0]["blocks"].as_array().unwrap().len(),
            3
        );
        let rt = runtime();
        rt.block_on(async {
            let c = client(&hdfs.url(), &[]);
            let status = c.get_file_info(JAR).await.unwrap();
            assert!(!status.isdir);
            assert_eq!(status.length, JAR_LEN);
            assert_eq!(status.blocksize, Some(MIB as u64));
            assert_eq!(status.owner, "spark");
            let dir = c.get_file_info("/user/spark/jars").await.unwrap();
            assert!(dir.isdir);
            let listing = c.list_status("/user/spark", true).await.unwrap();
            let paths: Vec<&str> = listing.iter().map(|s| s.path.as_str()).collect();
            assert_eq!(paths, ["/user/spark/jars", JAR]);

            let got = read_all(&c, JAR).await.unwrap();
            assert_same(&got, &body, checksum);
        });
        let reads = hdfs.log_lines(": OP_READ_BLOCK blk_");
        assert_eq!(reads.len(), 3, "one read per block:\n{}", hdfs.stderr());
        assert!(hdfs.stderr().contains(&format!("{checksum}/512")));
        let pid = hdfs.pid();
        drop(hdfs);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "server {pid} outlived Drop"
        );
    }
}

#[test]
fn read_range_across_block_boundaries() {
    let tmp = tempfile::tempdir().unwrap();
    let body = data(73, JAR_LEN);
    let files = json!([{
        "path": JAR, "source": source(tmp.path(), "a.jar", &body), "block_size": MIB,
        "replicas": [["dn1", "dn2"], ["dn2", "dn3"], ["dn3", "dn1"]],
    }]);
    let Some(hdfs) = cluster(files, json!({})) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let c = client(&hdfs.url(), &[]);
        let reader = c.read(JAR).await.unwrap();
        // Never past the end: hdfs-native's read_range_stream panics there.
        for (offset, len) in [
            (MIB - 700, 1_500),           // across the first boundary, unaligned
            (MIB - 512, 1_024),           // chunk-aligned on both sides
            (2 * MIB - 3, 10),            // a few bytes either side of the second
            (MIB / 2, 2 * MIB),           // all three blocks
            (0, 1),                       // first byte
            (JAR_LEN - 1, 1),             // last byte
            (JAR_LEN - 100_000, 100_000), // the tail of the partial last block
            (12_345, 0),                  // nothing
        ] {
            let got = reader.read_range(offset, len).await.unwrap();
            assert_same(
                &got,
                &body[offset..offset + len],
                &format!("[{offset}, +{len})"),
            );
        }
    });
}

#[test]
fn missing_paths_are_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let files =
        json!([{"path": JAR, "source": source(tmp.path(), "a.jar", b"tiny"), "block_size": MIB}]);
    let Some(hdfs) = cluster(files, json!({})) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let c = client(&hdfs.url(), &[]);
        // getFileInfo without an `fs` field: hdfs-native's own FileNotFound.
        match c.get_file_info("/user/spark/jars/missing.jar").await {
            Err(HdfsError::FileNotFound(p)) => assert_eq!(p, "/user/spark/jars/missing.jar"),
            other => panic!("get_file_info: {other:?}"),
        }
        // getBlockLocations throws on the NameNode: the RPC error as such.
        match c.read("/user/spark/jars/missing.jar").await {
            Err(HdfsError::RPCError(class, msg)) => {
                assert_eq!(class, "java.io.FileNotFoundException");
                assert_eq!(msg, "File does not exist: /user/spark/jars/missing.jar");
            }
            other => panic!("read: {:?}", other.map(|r| r.file_length())),
        }
        match c.read("/user/spark/jars").await {
            Err(HdfsError::RPCError(class, msg)) => {
                assert_eq!(class, "java.io.FileNotFoundException");
                assert_eq!(msg, "Path is not a file: /user/spark/jars");
            }
            other => panic!("read a directory: {:?}", other.map(|r| r.file_length())),
        }
        // A file of 4 bytes: one short chunk.
        assert_eq!(read_all(&c, JAR).await.unwrap(), b"tiny");
    });
}

#[test]
fn a_corrupt_or_down_replica_is_skipped_for_a_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let body = data(74, JAR_LEN);
    let files = json!([{
        "path": JAR, "source": source(tmp.path(), "a.jar", &body), "block_size": MIB,
        "replicas": [["dn1", "dn2"], ["dn4", "dn3"], ["dn3", "dn1"]],
        "corrupt": [{"block": 0, "datanode": "dn1"}],
    }]);
    // dn4 is down: its port is reserved but refuses connections.
    let datanodes = json!([
        {"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}, {"id": "dn3", "port": 0},
        {"id": "dn4", "port": 0, "down": true},
    ]);
    let Some(hdfs) = cluster(files, json!({"datanodes": datanodes})) else {
        return;
    };
    assert!(std::net::TcpStream::connect(hdfs.datanode_addr("dn4")).is_err());
    assert!(std::net::TcpStream::connect(hdfs.datanode_addr("dn1")).is_ok());
    let rt = runtime();
    rt.block_on(async {
        let c = client(&hdfs.url(), &[]);
        assert_same(&read_all(&c, JAR).await.unwrap(), &body, "read");
    });
    let block0 = hdfs.ready()["files"][0]["blocks"][0]["id"]
        .as_u64()
        .unwrap();
    let tried: Vec<String> = hdfs.log_lines(&format!("OP_READ_BLOCK blk_{block0}_"));
    assert!(
        tried
            .iter()
            .any(|l| l.contains("] dn1 ") && l.contains("CORRUPT")),
        "dn1's corrupt replica was not tried first:\n{}",
        hdfs.stderr()
    );
    assert!(
        tried
            .iter()
            .any(|l| l.contains("] dn2 ") && !l.contains("CORRUPT")),
        "no read from dn2:\n{}",
        hdfs.stderr()
    );
    let block1 = hdfs.ready()["files"][0]["blocks"][1]["id"]
        .as_u64()
        .unwrap();
    let served: Vec<String> = hdfs.log_lines(&format!("OP_READ_BLOCK blk_{block1}_"));
    assert_eq!(served.len(), 1, "{}", hdfs.stderr());
    assert!(served[0].contains("] dn3 "), "{}", served[0]);
}

#[test]
fn all_replicas_corrupt_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let body = data(75, JAR_LEN);
    let files = json!([{
        "path": JAR, "source": source(tmp.path(), "a.jar", &body), "block_size": MIB,
        "replicas": [["dn1", "dn2"], ["dn2", "dn3"], ["dn3", "dn1"]],
        "corrupt": [{"block": 1, "datanode": "dn2"}, {"block": 1, "datanode": "dn3"}],
    }]);
    let Some(hdfs) = cluster(files, json!({})) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let c = client(&hdfs.url(), &[]);
        match read_all(&c, JAR).await {
            Err(HdfsError::DataTransferError(msg)) => {
                assert!(msg.starts_with("All DataNodes failed"), "{msg}")
            }
            other => panic!("{:?}", other.map(|b| b.len())),
        }
        // Block 0 alone is fine.
        let reader = c.read(JAR).await.unwrap();
        assert_same(
            &reader.read_range(0, MIB).await.unwrap(),
            &body[..MIB],
            "block 0",
        );
    });
}

/// nn1 in `first` state, nn2 active, nameservice ns1.
fn ha_cluster(tmp: &Path, first: &str, body: &[u8]) -> Option<TestHdfs> {
    TestHdfs::start(json!({
        "nameservice": "ns1",
        "namenodes": [
            {"name": "nn1", "port": 0, "state": first},
            {"name": "nn2", "port": 0, "state": "active"},
        ],
        "datanodes": [{"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}],
        "files": [{"path": JAR, "source": source(tmp, "a.jar", body), "block_size": MIB}],
    }))
}

#[test]
fn ha_fails_over_from_a_down_namenode_via_config_map() {
    let tmp = tempfile::tempdir().unwrap();
    let body = data(76, JAR_LEN);
    let Some(hdfs) = ha_cluster(tmp.path(), "down", &body) else {
        return;
    };
    let conf = hdfs.hadoop_config();
    let rt = runtime();
    rt.block_on(async {
        let c = ClientBuilder::new()
            .with_url(hdfs.ns_url())
            .with_user("spark")
            .with_config(conf)
            .build()
            .unwrap();
        let started = Instant::now();
        let got = read_all(&c, JAR).await.unwrap();
        eprintln!("read via ns1 with nn1 down: {:?}", started.elapsed());
        assert_same(&got, &body, "read");
    });
    assert!(hdfs.log_lines("nn1(").is_empty(), "{}", hdfs.stderr());
    assert!(!hdfs.log_lines("nn2(active) ").is_empty());
}

#[test]
fn ha_fails_over_from_a_standby_namenode_via_conf_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let body = data(77, JAR_LEN);
    let Some(hdfs) = ha_cluster(tmp.path(), "standby", &body) else {
        return;
    };
    let conf_dir = hdfs.write_hadoop_conf(&tmp.path().join("hadoop-conf"));
    let rt = runtime();
    rt.block_on(async {
        // No URL: fs.defaultFS from core-site.xml, as with HADOOP_CONF_DIR.
        let c = ClientBuilder::new()
            .with_config_dir(conf_dir.to_str().unwrap())
            .with_user("spark")
            .build()
            .unwrap();
        let started = Instant::now();
        let got = read_all(&c, JAR).await.unwrap();
        eprintln!("read via ns1 with nn1 standby: {:?}", started.elapsed());
        assert_same(&got, &body, "read");
    });
    let refused = hdfs.log_lines("org.apache.hadoop.ipc.StandbyException");
    assert!(!refused.is_empty(), "{}", hdfs.stderr());
    assert!(refused.iter().all(|l| l.contains("nn1(standby)")));
}

#[test]
fn a_security_enabled_client_switches_to_simple_over_sasl() {
    // A SIMPLE-only Hadoop server answers the client's SASL NEGOTIATE with
    // SUCCESS; one that lists SIMPLE gets an INITIATE(SIMPLE) and no reply.
    for reply in ["success", "negotiate"] {
        let tmp = tempfile::tempdir().unwrap();
        let body = data(78, 100_000);
        let files = json!([{"path": JAR, "source": source(tmp.path(), "a.jar", &body)}]);
        let Some(hdfs) = cluster(files, json!({"simple_sasl_reply": reply})) else {
            return;
        };
        let rt = runtime();
        rt.block_on(async {
            let c = client(
                &hdfs.url(),
                &[("hadoop.security.authentication", "kerberos")],
            );
            assert_same(&read_all(&c, JAR).await.unwrap(), &body, reply);
        });
        assert!(
            !hdfs.log_lines("auth protocol SASL").is_empty(),
            "{}",
            hdfs.stderr()
        );
        assert!(
            !hdfs.log_lines("SASL NEGOTIATE []").is_empty(),
            "{}",
            hdfs.stderr()
        );
        if reply == "negotiate" {
            assert!(!hdfs.log_lines("SASL INITIATE [('SIMPLE', '')]").is_empty());
        }
    }
}

#[test]
fn a_kerberos_only_namenode_refuses_a_client_without_kerberos() {
    let tmp = tempfile::tempdir().unwrap();
    let files = json!([{"path": JAR, "source": source(tmp.path(), "a.jar", b"secret")}]);
    let Some(hdfs) = cluster(files, json!({"kerberos": true})) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        // SIMPLE client (no SASL at all): the server's FATAL reply carries call
        // id -33, which hdfs-native does not match to the call, so it only sees
        // the connection close and retries it as an IO error with failover
        // (15 attempts with backoff by default: minutes; 1 here).
        let c = client(&hdfs.url(), &[("dfs.client.failover.max.attempts", "1")]);
        let started = Instant::now();
        let err = c.get_file_info(JAR).await.unwrap_err();
        eprintln!("simple client: {:?}: {err:?}", started.elapsed());
        assert!(matches!(err, HdfsError::IOError(_)), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(20));

        // Kerberos client without a ticket: GSSAPI fails at once, no failover.
        let c = client(
            &hdfs.url(),
            &[("hadoop.security.authentication", "kerberos")],
        );
        let started = Instant::now();
        let err = c.get_file_info(JAR).await.unwrap_err();
        eprintln!("kerberos client: {:?}: {err:?}", started.elapsed());
        assert!(
            matches!(err, HdfsError::GSSAPIError(..) | HdfsError::SASLError(_)),
            "{err:?}"
        );
    });
    // The server logs from its own threads: give its lines a moment to land.
    for needle in [
        "SIMPLE authentication is not enabled",
        "offering ['KERBEROS']",
    ] {
        assert!(
            crate::support::wait_for(Duration::from_secs(5), || !hdfs
                .log_lines(needle)
                .is_empty()),
            "no {needle:?} in the server's log:\n{}",
            hdfs.stderr()
        );
    }
    assert!(
        hdfs.log_lines("getFileInfo").is_empty(),
        "{}",
        hdfs.stderr()
    );
}

#[test]
fn many_concurrent_readers_and_a_100_mib_file_stream_fast() {
    let tmp = tempfile::tempdir().unwrap();
    let small = data(79, JAR_LEN);
    let big = data(80, 100 * MIB);
    let files = json!([
        {"path": JAR, "source": source(tmp.path(), "a.jar", &small), "block_size": MIB},
        {"path": "/big.bin", "source": source(tmp.path(), "big.bin", &big), "block_size": 64 * MIB},
    ]);
    let Some(hdfs) = cluster(files, json!({})) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let c = client(&hdfs.url(), &[]);
        let reads = (0..16).map(|_| read_all(&c, JAR));
        for got in futures_util::future::join_all(reads).await {
            assert_same(&got.unwrap(), &small, "concurrent read");
        }
        // First read computes the CRC32C of every chunk; the second finds them cached.
        for round in ["first", "second"] {
            let started = Instant::now();
            let got = read_all(&c, "/big.bin").await.unwrap();
            let took = started.elapsed();
            eprintln!(
                "100 MiB, {round} read: {took:?} ({:.0} MiB/s)",
                100.0 / took.as_secs_f64()
            );
            assert_same(&got, &big, round);
            assert!(took < Duration::from_secs(60), "{round} read took {took:?}");
        }
    });
}
