//! The source suite: the same cases run against every network source — a real
//! nginx for HTTP, a real SeaweedFS for S3, fake-gcs-server for GCS, Azurite
//! for Azure — so each source meets the one
//! contract (declared classpath order, archives, restart keeps, pins, a missing
//! object named and not retried, large objects in parallel ranges).

use std::path::PathBuf;
use std::time::Duration;

use crate::support::cloud::{Azurite, FakeGcs};
use crate::support::nginx::Nginx;
use crate::support::seaweed::Seaweed;
use crate::support::{data, s, tar_gz, Run, Sandbox};

const BUCKET: &str = "suite";

/// Where the suite's objects live and how a run reaches them.
enum Store {
    Http { nginx: Nginx, root: PathBuf },
    S3 { sw: Seaweed },
    Gcs { gcs: FakeGcs },
    Azure { az: Azurite },
}

impl Store {
    fn put(&self, key: &str, bytes: &[u8]) {
        match self {
            Store::Http { root, .. } => {
                let path = root.join(key);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
            Store::S3 { sw } => sw.put(BUCKET, key, bytes),
            Store::Gcs { gcs } => gcs.put(BUCKET, key, bytes),
            Store::Azure { az } => az.put(BUCKET, key, bytes),
        }
    }

    fn uri(&self, key: &str) -> String {
        match self {
            Store::Http { nginx, .. } => nginx.url(key),
            Store::S3 { .. } => format!("s3a://{BUCKET}/{key}"),
            Store::Gcs { .. } => format!("gs://{BUCKET}/{key}"),
            Store::Azure { .. } => Azurite::uri(BUCKET, key),
        }
    }

    fn run<'a>(&self, run: Run<'a>) -> Run<'a> {
        match self {
            Store::Http { .. } => run,
            Store::S3 { sw } => run
                .env("AWS_ACCESS_KEY_ID", Seaweed::ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", Seaweed::SECRET_KEY)
                .env("AWS_ENDPOINT_URL", &sw.endpoint())
                .env("AWS_ALLOW_HTTP", "true"),
            Store::Gcs { gcs } => run.env("STORAGE_EMULATOR_HOST", &gcs.host()),
            Store::Azure { az } => {
                run.env("AZURE_STORAGE_CONNECTION_STRING", &az.connection_string())
            }
        }
    }
}

fn conf_tgz(sb: &Sandbox) -> Vec<u8> {
    let tree = sb.root.join("tree");
    std::fs::create_dir_all(tree.join("conf")).unwrap();
    std::fs::write(
        tree.join("conf/log4j2.properties"),
        b"rootLogger.level=info\n",
    )
    .unwrap();
    let out = sb.root.join("conf.tgz");
    tar_gz(&tree, &out);
    std::fs::read(out).unwrap()
}

fn suite(store: &Store) {
    let jars = [
        ("libs/zeta-client.jar", data(21, 70_000)),
        ("libs/alpha-plugin.jar", data(22, 1_500_000)),
        ("libs/mid.jar", data(23, 10)),
    ];
    for (key, bytes) in &jars {
        store.put(key, bytes);
    }
    let file = data(24, 3000);
    store.put("conf/app.conf", &file);
    let large = data(25, 40 << 20);
    store.put("data/model.bin", &large);
    let sb = Sandbox::new();
    store.put("envs/conf.tgz", &conf_tgz(&sb));

    // Jars in declared order (not name order), a file, a large file, an archive.
    let jar_uris: Vec<String> = jars.iter().map(|(k, _)| store.uri(k)).collect();
    let fetch = |sb: &Sandbox| {
        store
            .run(sb.fetch())
            .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
            .args(["--jars", &jar_uris.join(",")])
            .args([
                "--files",
                &format!(
                    "{},{}",
                    store.uri("conf/app.conf"),
                    store.uri("data/model.bin")
                ),
            ])
            .args([
                "--archives",
                &format!("{}#logconf", store.uri("envs/conf.tgz")),
            ])
            .run()
    };
    let out = fetch(&sb);
    out.expect_code(0).expect_stderr("in 5 ranges");
    let want: Vec<String> = ["zeta-client.jar", "alpha-plugin.jar", "mid.jar"]
        .iter()
        .map(|n| s(&sb.jar(n)))
        .collect();
    assert_eq!(sb.classpath().trim_end(), want.join(":"));
    for (key, bytes) in &jars {
        let name = key.rsplit('/').next().unwrap();
        assert_eq!(&std::fs::read(sb.jar(name)).unwrap(), bytes, "{name}");
    }
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), file);
    assert!(std::fs::read(sb.files.join("model.bin")).unwrap() == large);
    assert!(sb.files.join("logconf/conf/log4j2.properties").is_file());

    // A restarted init container keeps everything.
    let out = fetch(&sb);
    out.expect_code(0).expect_stderr("summary: 0 fetched");
    assert_eq!(sb.artifact("mid.jar")["status"], "kept");

    // A wrong pin: exit 4, nothing under the name.
    let pinned = Sandbox::new();
    let sums = pinned.write("sums", format!("{}  mid.jar\n", "ab".repeat(32)));
    store
        .run(pinned.fetch())
        .args([
            "--jars",
            &store.uri("libs/mid.jar"),
            "--checksums",
            &s(&sums),
        ])
        .run()
        .expect_code(4)
        .expect_stderr("sha256 mismatch");
    assert!(!pinned.jar("mid.jar").exists());

    // A missing object: named, not retried, exit 3.
    let missing = store.uri("libs/no-such.jar");
    let out = store
        .run(pinned.fetch())
        .retry_delay("3s")
        .args(["--retries", "5", "--jars", &missing])
        .run();
    out.expect_code(3).expect_stderr(&format!("{missing}: "));
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");
    assert_eq!(pinned.artifact("no-such.jar")["attempts"], 1);
}

#[test]
fn http_from_nginx() {
    let root = tempfile::tempdir().unwrap();
    let Some(nginx) = Nginx::start(root.path()) else {
        return;
    };
    suite(&Store::Http {
        nginx,
        root: root.path().to_owned(),
    });
}

#[test]
fn s3_from_seaweedfs() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket(BUCKET);
    suite(&Store::S3 { sw });
}

#[test]
fn gcs_from_fake_gcs_server() {
    let Some(gcs) = FakeGcs::start() else { return };
    suite(&Store::Gcs { gcs });
}

#[test]
fn azure_from_azurite() {
    let Some(az) = Azurite::start() else { return };
    suite(&Store::Azure { az });
}
