//! Kerberos-secured HDFS against a real MIT KDC (`support::kdc`): the test HDFS's
//! NameNode accepts only Kerberos (GSSAPI through Hadoop's SASL, the service key
//! from its keytab) and its DataNodes only reads with a valid block token. The
//! glibc test binary authenticates with a ticket cache, a keytab given by flag, or
//! Spark's `spark.kerberos.*` keys; every way of failing (expired ticket, stale
//! keytab, clock skew, no KDC, a KDC that never answers) ends in a clear error,
//! exit 3, nothing published. The Kerberos image runs the same under podman in
//! `image.rs`.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::hdfs::TestHdfs;
use crate::support::kdc::{kdc, Kdc, NAMENODE, USER};
use crate::support::{data, s, Sandbox};

pub(crate) const JAR: &str = "/apps/libs/celeborn-client.jar";
const BLOCK_KEY: &str = "block-key-1";

/// A Kerberos-only cluster serving `jar` as JAR (3 blocks), with block tokens.
pub(crate) fn secure_hdfs(kdc: &Kdc, source: &Path, extra: serde_json::Value) -> Option<TestHdfs> {
    let mut config = json!({
        "namenodes": [{"name": "nn1", "port": 0, "state": "active"}],
        "datanodes": [{"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}],
        "files": [{"path": JAR, "source": s(source), "block_size": 1 << 20}],
        "kerberos": {
            "keytab": s(&kdc.namenode_keytab()),
            "principal": NAMENODE,
            "krb5_config": s(&kdc.krb5_conf()),
        },
        "block_token_key": BLOCK_KEY,
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    TestHdfs::start(config)
}

/// core-site.xml of a Kerberos cluster, in the sandbox.
fn secure_conf(sb: &Sandbox) -> String {
    let dir = sb.root.join("hadoop-conf");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("core-site.xml"),
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>",
    )
    .unwrap();
    s(&dir)
}

fn setup(extra: serde_json::Value) -> Option<(&'static Kdc, Sandbox, TestHdfs, Vec<u8>)> {
    let kdc = kdc()?;
    let sb = Sandbox::new();
    let jar = data(211, (2 << 20) + 4321);
    let hdfs = secure_hdfs(kdc, &sb.write("hdfs-src.jar", &jar), extra)?;
    Some((kdc, sb, hdfs, jar))
}

/// `fetch` of the jar with the cluster's configuration, krb5.conf `krb5` and no
/// ticket cache unless the test names one.
fn fetch<'a>(sb: &'a Sandbox, hdfs: &TestHdfs, krb5: &Path) -> crate::support::Run<'a> {
    sb.fetch()
        .env("KRB5_CONFIG", &s(krb5))
        .env(
            "KRB5CCNAME",
            &format!("FILE:{}", s(&sb.root.join("no-such-cache"))),
        )
        .args(["--hadoop-conf-dir", &secure_conf(sb)])
        .args(["--retries", "0"])
        .args(["--jars", &format!("{}{JAR}", hdfs.url())])
}

#[track_caller]
fn assert_nothing_published(sb: &Sandbox) {
    assert!(!sb.jar("celeborn-client.jar").exists());
    assert!(!sb.jars.join("classpath").exists());
}

#[test]
fn a_ticket_cache_from_kinit_localizes_the_jar() {
    let Some((kdc, sb, hdfs, jar)) = setup(json!({})) else {
        return;
    };
    let cache = sb.root.join("krb5cc");
    kdc.kinit(&cache, None);
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
    assert!(sb.classpath().contains("celeborn-client.jar"));
    // The NameNode saw alice through GSSAPI; the DataNodes got valid block tokens.
    assert!(
        !hdfs
            .log_lines(&format!("Kerberos: authenticated {USER}"))
            .is_empty(),
        "{}",
        hdfs.stderr()
    );
    assert!(hdfs.log_lines("access token refused").is_empty());
    assert!(!hdfs.log_lines("sent blk_").is_empty(), "{}", hdfs.stderr());

    // check names the principal and when its ticket expires, never key material.
    let out = sb
        .check()
        .env("KRB5_CONFIG", &s(&kdc.krb5_conf()))
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .args(["--hadoop-conf-dir", &secure_conf(&sb)])
        .args(["--jars", &format!("{}{JAR}", hdfs.url())])
        .run();
    out.expect_code(0)
        .expect_stdout_or_stderr(&format!("Kerberos: {USER} (ticket cache FILE:"))
        .expect_stdout_or_stderr("ticket valid until");
}

#[test]
fn a_keytab_gets_its_own_ticket_in_memory_without_a_writable_cache() {
    let Some((kdc, sb, hdfs, jar)) = setup(json!({})) else {
        return;
    };
    // KRB5CCNAME names a file in a directory that does not exist: nothing can be
    // written, nothing is read; the keytab's ticket lives in memory.
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .args(["--kerberos-principal", USER])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
    assert!(!sb.root.join("no-such-cache").exists());
    assert!(!hdfs.log_lines(&format!("authenticated {USER}")).is_empty());

    // The env twins, and no principal: the keytab's first entry.
    let sb2 = Sandbox::new();
    let out = fetch(&sb2, &hdfs, &kdc.krb5_conf())
        .env("SPARK_LOCALIZER_KERBEROS_KEYTAB", &s(&kdc.user_keytab()))
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb2.jar("celeborn-client.jar")).unwrap(), jar);

    let out = sb
        .check()
        .env("KRB5_CONFIG", &s(&kdc.krb5_conf()))
        .args(["--hadoop-conf-dir", &secure_conf(&sb)])
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .args(["--jars", &format!("{}{JAR}", hdfs.url())])
        .run();
    out.expect_code(0).expect_stdout_or_stderr(&format!(
        "Kerberos: {USER} (keytab {} from --kerberos-keytab), ticket valid until",
        s(&kdc.user_keytab())
    ));
}

#[test]
fn rpc_protection_integrity_and_privacy_wrap_every_namenode_call() {
    // hadoop.rpc.protection=integrity|privacy: after the exchange every RPC frame,
    // both ways, travels inside a SASL WRAP signed (or encrypted) with the context;
    // the NameNode drops the connection at the first frame that is not.
    for qop in ["integrity", "privacy"] {
        let Some(kdc) = kdc() else {
            return;
        };
        let sb = Sandbox::new();
        let jar = data(213, (2 << 20) + 99);
        let mut kerberos = json!({
            "keytab": s(&kdc.namenode_keytab()),
            "principal": NAMENODE,
            "krb5_config": s(&kdc.krb5_conf()),
        });
        kerberos["qop"] = json!(qop);
        let Some(hdfs) = secure_hdfs(
            kdc,
            &sb.write("hdfs-src.jar", &jar),
            json!({"kerberos": kerberos}),
        ) else {
            return;
        };
        let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
            .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
            .run();
        out.expect_code(0);
        assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
        assert!(
            !hdfs
                .log_lines(&format!("authenticated {USER} (qop {qop})"))
                .is_empty(),
            "{}",
            hdfs.stderr()
        );
        assert!(!hdfs.log_lines("getBlockLocations").is_empty());
        assert!(hdfs.log_lines("unwrapped frame").is_empty());
    }
}

#[test]
fn sparks_kerberos_keys_in_the_properties_file_are_used() {
    let Some((kdc, sb, hdfs, jar)) = setup(json!({})) else {
        return;
    };
    let props = sb.write(
        "spark.properties",
        format!(
            "spark.kerberos.keytab={}\nspark.kerberos.principal={USER}\n",
            s(&kdc.user_keytab())
        ),
    );
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--properties-file", &s(&props)])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);

    // A keytab the properties name but this container lacks (Spark reads it on the
    // submitting machine): a warning, and the ticket cache is used instead.
    let cache = sb.root.join("krb5cc");
    kdc.kinit(&cache, None);
    let props = sb.write(
        "spark2.properties",
        "spark.kerberos.keytab=/home/submitter/alice.keytab\n",
    );
    let sb2 = Sandbox::new();
    let out = fetch(&sb2, &hdfs, &kdc.krb5_conf())
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .args(["--properties-file", &s(&props)])
        .run();
    out.expect_code(0)
        .expect_stderr("spark.kerberos.keytab in")
        .expect_stderr("does not exist in this container");
    assert_eq!(std::fs::read(sb2.jar("celeborn-client.jar")).unwrap(), jar);
}

#[test]
fn an_expired_ticket_is_named_and_nothing_is_published() {
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let cache = sb.root.join("krb5cc");
    kdc.kinit(&cache, Some("2s"));
    std::thread::sleep(Duration::from_millis(2500));
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .run();
    out.expect_code(3)
        .expect_stderr("tickets in the ticket cache FILE:")
        .expect_stderr("have expired: run kinit again");
    assert_nothing_published(&sb);
    // No ticket reached the NameNode.
    assert!(hdfs.log_lines("authenticated").is_empty());
}

#[test]
fn a_stale_keytab_is_refused_by_the_kdc_and_named() {
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.stale_keytab())])
        .args(["--kerberos-principal", USER])
        .run();
    out.expect_code(3)
        .expect_stderr("the KDC does not accept the key in the keytab")
        .expect_stderr("Preauthentication failed");
    assert_nothing_published(&sb);

    // Not a keytab at all: a configuration error before any traffic.
    let bogus = sb.write("bogus.keytab", "not a keytab");
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&bogus)])
        .run();
    out.expect_code(2)
        .expect_stderr("--kerberos-keytab")
        .expect_stderr("is not a usable keytab (not a keytab");
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&sb.root.join("missing.keytab"))])
        .run();
    out.expect_code(2).expect_stderr("cannot read keytab");
    assert_nothing_published(&sb);
}

#[test]
fn a_kdc_whose_clock_is_two_hours_ahead_is_named_as_clock_skew() {
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    // libkrb5 follows the KDC's clock for its own requests (kdc_timesync), so the
    // ticket is issued; the NameNode, on the true time, refuses it.
    let out = fetch(&sb, &hdfs, &kdc.skewed_krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .run();
    out.expect_code(3)
        .expect_stderr("refused the Kerberos ticket")
        .expect_stderr("clocks of this pod, the KDC and the NameNode disagree");
    assert_nothing_published(&sb);
    assert!(!hdfs.log_lines("Kerberos authentication failed").is_empty());
}

#[test]
fn an_unreachable_or_silent_kdc_fails_within_the_connect_timeout() {
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let out = fetch(&sb, &hdfs, &kdc.unreachable_krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .run();
    out.expect_code(3)
        .expect_stderr("no KDC of the realm answered")
        .expect_stderr("Cannot contact any KDC");
    assert_nothing_published(&sb);

    // A KDC that accepts the connection and never answers: libkrb5 alone would
    // wait about half a minute.
    let out = fetch(&sb, &hdfs, &kdc.silent_krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .args(["--connect-timeout", "2s"])
        .run();
    out.expect_code(3)
        .expect_stderr("no answer from the KDC within 2.0s (--connect-timeout)");
    assert!(out.elapsed < Duration::from_secs(10), "{out}");
    assert_nothing_published(&sb);
}

#[test]
fn a_datanode_that_cannot_verify_the_block_token_refuses_the_read() {
    // The NameNode signs block tokens with a key the DataNodes no longer hold.
    let Some((kdc, sb, hdfs, _)) = setup(json!({"block_token_key_seen_by_datanodes": "rolled"}))
    else {
        return;
    };
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .run();
    out.expect_code(3)
        .expect_stderr("Got access token error")
        .expect_stderr("refused the block access token the NameNode issued");
    assert!(
        !hdfs.log_lines("access token refused").is_empty(),
        "{}",
        hdfs.stderr()
    );
    assert_nothing_published(&sb);
}

#[test]
fn sasl_data_transfer_protection_authenticates_each_datanode_with_the_block_token() {
    // dfs.data.transfer.protection=authentication, as secure clusters without
    // privileged DataNode ports run: DIGEST-MD5 keyed by the block token before
    // each OP_READ_BLOCK; the DataNodes drop a connection that skips it.
    let Some((kdc, sb, hdfs, jar)) = setup(json!({"data_transfer_protection": true})) else {
        return;
    };
    let conf = secure_conf(&sb);
    std::fs::write(
        Path::new(&conf).join("hdfs-site.xml"),
        "<configuration><property><name>dfs.data.transfer.protection</name><value>authentication</value></property></configuration>",
    )
    .unwrap();
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
    assert!(
        !hdfs
            .log_lines("SASL: DIGEST-MD5 with the block token")
            .is_empty(),
        "{}",
        hdfs.stderr()
    );
    assert!(hdfs.log_lines("without the SASL handshake").is_empty());
}

#[test]
fn a_datanode_refusing_the_sasl_handshake_is_a_clear_failure_not_a_crash() {
    // The DataNodes hold another block key: each answers the DIGEST-MD5 response
    // with status ERROR and no payload (Hadoop's sendGenericSaslErrorMessage).
    let Some((kdc, sb, hdfs, _)) = setup(json!({
        "data_transfer_protection": true,
        "block_token_key_seen_by_datanodes": "rolled",
    })) else {
        return;
    };
    let conf = secure_conf(&sb);
    std::fs::write(
        Path::new(&conf).join("hdfs-site.xml"),
        "<configuration><property><name>dfs.data.transfer.protection</name><value>authentication</value></property></configuration>",
    )
    .unwrap();
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .run();
    out.expect_code(3)
        .expect_stderr("a DataNode refused the SASL handshake of dfs.data.transfer.protection");
    assert!(
        !hdfs.log_lines("SASL refused").is_empty(),
        "{}",
        hdfs.stderr()
    );
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert_nothing_published(&sb);
}

#[test]
fn a_corrupt_ticket_cache_is_refused_before_libkrb5_reads_it() {
    // libkrb5 1.20 crashes (SIGSEGV in krb5_cccol_have_content) on some of these.
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let dir = sb.root.join("cache-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let mut random = data(214, 300);
    random[0] = 0x17;
    for (name, bytes) in [
        ("empty", Some(Vec::new())),
        ("random", Some(random)),
        ("header-only", Some(vec![5, 4])),
        (
            "cut",
            Some(vec![5, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 20, b'L']),
        ),
        ("directory", None),
    ] {
        let path = match bytes {
            Some(bytes) => sb.write(name, bytes),
            None => dir.clone(),
        };
        let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
            .env("KRB5CCNAME", &format!("FILE:{}", s(&path)))
            .run();
        out.expect_code(3);
        assert!(
            out.stderr.contains("is not a valid ticket cache")
                || out.stderr.contains("cannot read the"),
            "{name}: {out}"
        );
        assert_nothing_published(&sb);
    }
}

#[test]
fn a_kdc_that_stops_answering_blocks_nothing_else() {
    // A ticket cache with only a TGT: the NameNode's service ticket comes from the
    // KDC inside hdfs-native's call, which waits half a minute on a silent KDC.
    // The deadline, the other transfers and the exit must not wait with it.
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let cache = sb.root.join("krb5cc");
    kdc.kinit(&cache, None);
    let web = crate::support::FaultServer::start();
    web.put("/web.jar", b"web jar".to_vec());
    let out = fetch(&sb, &hdfs, &kdc.silent_krb5_conf())
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .args(["--connect-timeout", "2s", "--deadline", "4s"])
        .args(["--jars", &web.url("/web.jar")])
        .run();
    assert!(out.elapsed < Duration::from_secs(8), "{out}");
    assert!(matches!(out.code, Some(3) | Some(5)), "{out}");
    assert_eq!(std::fs::read(sb.jar("web.jar")).unwrap(), b"web jar");
    assert!(!sb.jar("celeborn-client.jar").exists());

    // The keytab login against the silent KDC: bounded by --deadline too.
    let sb = Sandbox::new();
    let out = fetch(&sb, &hdfs, &kdc.silent_krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .args(["--deadline", "1s"])
        .run();
    out.expect_code(5);
    assert!(out.elapsed < Duration::from_secs(4), "{out}");
}

#[test]
fn keytab_and_principal_mistakes_are_configuration_errors() {
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    // A principal the keytab lacks: exit 2 naming what it holds.
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.user_keytab())])
        .args(["--kerberos-principal", crate::support::kdc::OTHER_USER])
        .run();
    out.expect_code(2)
        .expect_stderr("has no key in the keytab")
        .expect_stderr(&format!("which holds {USER}"));
    for bad in ["alice@", "alice/", "alice@@LOCALIZER.TEST"] {
        let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
            .args(["--kerberos-principal", bad])
            .run();
        out.expect_code(2)
            .expect_stderr("is not a Kerberos principal");
    }
    // Not a regular file: refused at once, never read (a fifo would block, /dev/zero
    // would never end).
    let fifo = sb.root.join("keytab.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for keytab in [s(&fifo), "/dev/zero".to_owned()] {
        let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
            .args(["--kerberos-keytab", &keytab])
            .run();
        out.expect_code(2).expect_stderr("cannot read keytab");
        assert!(out.elapsed < Duration::from_secs(5), "{out}");
    }
    // Given by flag, checked even when no HDFS URI is in the plan.
    let bogus = sb.write("bogus.keytab", "nope");
    let out = sb
        .fetch()
        .args(["--kerberos-keytab", &s(&bogus)])
        .args(["--jars", "local:///opt/spark/jars/x.jar"])
        .run();
    out.expect_code(2).expect_stderr("not a keytab");
    assert_nothing_published(&sb);

    // A second principal of one keytab, picked by name.
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .args(["--kerberos-keytab", &s(&kdc.both_keytab())])
        .args(["--kerberos-principal", "bob"])
        .run();
    out.expect_code(0);
    assert!(!hdfs
        .log_lines("authenticated bob@LOCALIZER.TEST")
        .is_empty());
}

#[test]
fn the_principal_named_is_the_one_the_namenode_sees() {
    // A DIR: collection holding alice and bob (bob primary): --kerberos-principal
    // alice must reach the NameNode as alice, not as the collection's primary.
    let Some((kdc, sb, hdfs, _)) = setup(json!({})) else {
        return;
    };
    let dir = sb.root.join("ccdir");
    std::fs::create_dir_all(&dir).unwrap();
    let collection = format!("DIR:{}", s(&dir));
    kdc.kinit_as(USER, &collection);
    kdc.kinit_as(crate::support::kdc::OTHER_USER, &collection);
    let out = fetch(&sb, &hdfs, &kdc.krb5_conf())
        .env("KRB5CCNAME", &collection)
        .args(["--kerberos-principal", USER])
        .run();
    out.expect_code(0);
    assert!(
        !hdfs.log_lines(&format!("authenticated {USER}")).is_empty(),
        "{}",
        hdfs.stderr()
    );
    assert!(
        hdfs.log_lines("authenticated bob@").is_empty(),
        "{}",
        hdfs.stderr()
    );

    // Properties naming a keytab this container lacks and a principal: both dropped,
    // the ticket cache (alice) is used.
    let cache = sb.root.join("krb5cc");
    kdc.kinit(&cache, None);
    let props = sb.write(
        "p.properties",
        "spark.kerberos.keytab=/submitter/bob.keytab\nspark.kerberos.principal=bob@LOCALIZER.TEST\n",
    );
    let sb2 = Sandbox::new();
    let out = fetch(&sb2, &hdfs, &kdc.krb5_conf())
        .env("KRB5CCNAME", &format!("FILE:{}", s(&cache)))
        .args(["--properties-file", &s(&props)])
        .run();
    out.expect_code(0);
}
