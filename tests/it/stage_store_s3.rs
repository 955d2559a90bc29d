//! `stage serve --store s3://bucket/prefix` against a real SeaweedFS: the bucket
//! layout, two replicas sharing one prefix, a restart, unused-TTL expiry, refusals
//! at start-up, and the object store dying in the middle of a download.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::stage_serve::{bundle, Stage};
use crate::support::seaweed::Seaweed;
use crate::support::{data, sha256_hex, wait_for, BIN};

/// The AWS variables pointing at `sw` with the test identity (or `secret`).
fn aws_env(sw: &Seaweed, secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", Seaweed::ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", secret.to_owned()),
        ("AWS_ENDPOINT_URL", sw.endpoint()),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_REGION", Seaweed::REGION.to_owned()),
    ]
}

/// A `stage serve` on `store` with the test identity; its temp dir (where it
/// spools uploads) is `tmp`.
fn serve(sw: &Seaweed, store: &str, tmp: &Path, extra: &[(&'static str, String)]) -> Stage {
    let mut env = aws_env(sw, Seaweed::SECRET_KEY);
    env.push(("TMPDIR", tmp.to_str().unwrap().to_owned()));
    env.extend(extra.iter().cloned());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Stage::start_with_env(Path::new(store), &[], &env)
}

/// Every key under `prefix` in `bucket`, sorted.
fn keys(sw: &Seaweed, bucket: &str, prefix: &str) -> Vec<String> {
    let store = sw.store(bucket);
    let prefix = Key::parse(prefix).unwrap();
    let listed: Vec<_> = sw
        .block_on(store.list(Some(&prefix)).try_collect::<Vec<_>>())
        .unwrap();
    let mut keys: Vec<String> = listed.into_iter().map(|o| o.location.to_string()).collect();
    keys.sort();
    keys
}

fn object(sw: &Seaweed, bucket: &str, key: &str) -> Vec<u8> {
    let store = sw.store(bucket);
    let key = Key::parse(key).unwrap();
    sw.block_on(async { store.get(&key).await?.bytes().await })
        .unwrap()
        .to_vec()
}

fn auth(secret: &str) -> [(&str, &str); 1] {
    [("Authorization", secret)]
}

#[test]
fn s3_store_is_shared_by_two_replicas_and_survives_a_restart() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("stage-shared");
    let store = "s3://stage-shared/team/a";
    let (tmp_a, tmp_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = serve(&sw, store, tmp_a.path(), &[]);
    let b = serve(&sw, store, tmp_b.path(), &[]);

    // Past the single-PUT size: a multipart upload of several parts.
    let big = bundle(&[("big.jar", &data(1, 20 << 20))]);
    let small = bundle(&[("small.jar", &data(2, 5000)), ("conf", b"a=b\n")]);
    let (big_id, big_secret) = a.stage(&big);
    let (small_id, small_secret) = a.stage(&small);
    assert_eq!(
        keys(&sw, "stage-shared", "team/a"),
        {
            let mut want = vec![
                format!("team/a/bundles/{big_id}/bundle.tar.gz"),
                format!("team/a/bundles/{big_id}/meta.json"),
                format!("team/a/bundles/{small_id}/bundle.tar.gz"),
                format!("team/a/bundles/{small_id}/meta.json"),
            ];
            want.sort();
            want
        },
        "{}",
        a.stderr_text()
    );
    let meta_key = format!("team/a/bundles/{big_id}/meta.json");
    let meta = String::from_utf8(object(&sw, "stage-shared", &meta_key)).unwrap();
    assert!(!meta.contains(&big_secret), "the secret is stored: {meta}");
    assert!(meta.contains(&sha256_hex(&big)), "{meta}");

    // Uploaded through A, served by B: GET, HEAD, Range, and a wrong secret.
    let path = format!("/api/v0/resources/{big_id}");
    let got = b.get(&path, &auth(&big_secret));
    assert_eq!(got.status, 200, "{}", b.stderr_text());
    assert!(got.body == big, "bundle differs ({} bytes)", got.body.len());
    assert_eq!(
        got.header("X-Resource-Sha256"),
        Some(sha256_hex(&big).as_str())
    );
    let head = b.send("HEAD", &path, &auth(&big_secret), &[]);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("Content-Length"),
        Some(big.len().to_string().as_str())
    );
    let start = 9 << 20;
    let range = format!("bytes={start}-{}", start + 999);
    let part = b.get(&path, &[("Authorization", &big_secret), ("Range", &range)]);
    assert_eq!(part.status, 206);
    assert!(part.body == big[start..start + 1000]);
    assert_eq!(b.get(&path, &auth("wrong")).status, 401);
    // The first download is recorded in the bucket.
    let meta: serde_json::Value =
        serde_json::from_slice(&object(&sw, "stage-shared", &meta_key)).unwrap();
    assert!(meta["first_download_ms"].is_u64(), "{meta}");

    // Deleted through B: gone for A at once, from the bucket too.
    assert_eq!(b.send("DELETE", &path, &auth(&big_secret), &[]).status, 204);
    assert_eq!(a.get(&path, &auth(&big_secret)).status, 404);
    assert_eq!(a.send("HEAD", &path, &auth(&big_secret), &[]).status, 404);
    assert_eq!(a.send("DELETE", &path, &auth(&big_secret), &[]).status, 404);
    assert_eq!(keys(&sw, "stage-shared", "team/a").len(), 2);
    assert_eq!(a.metric("bundles_stored"), 1);
    assert_eq!(b.metric("bundles_stored"), 1);

    for (stage, tmp) in [(a, &tmp_a), (b, &tmp_b)] {
        let (code, stderr) = stage.stop();
        assert_eq!(code, Some(0), "{stderr}");
        assert!(!stderr.contains(&big_secret), "a secret leaked:\n{stderr}");
        assert!(
            !stderr.contains(Seaweed::SECRET_KEY),
            "the S3 key leaked:\n{stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "spool left behind: {left:?}");
    }

    // A new process finds what was committed.
    let a = serve(&sw, store, tmp_a.path(), &[]);
    let small_path = format!("/api/v0/resources/{small_id}");
    let got = a.get(&small_path, &auth(&small_secret));
    assert_eq!(got.status, 200);
    assert!(got.body == small);
    assert_eq!(a.metric("bundles_stored"), 1);
    // Another prefix of the same bucket is another store.
    let other = serve(&sw, "s3a://stage-shared/team/b", tmp_b.path(), &[]);
    assert_eq!(other.get(&small_path, &auth(&small_secret)).status, 404);
    assert_eq!(other.metric("bundles_stored"), 0);
}

#[test]
fn s3_store_unused_bundles_expire() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("stage-expiry");
    let tmp = tempfile::tempdir().unwrap();
    let ttl = [("SPARK_LOCALIZER_STAGE_UNUSED_TTL", "2s".to_owned())];
    let stage = serve(&sw, "s3://stage-expiry", tmp.path(), &ttl);
    let payload = bundle(&[("a.txt", b"a")]);
    let (unused, unused_secret) = stage.stage(&payload);
    let (used, used_secret) = stage.stage(&payload);
    let used_path = format!("/api/v0/resources/{used}");
    assert_eq!(stage.get(&used_path, &auth(&used_secret)).status, 200);
    let expired = wait_for(Duration::from_secs(10), || {
        stage.metric("expirations_total") == 1
    });
    assert!(expired, "not expired:\n{}", stage.stderr_text());
    let unused_path = format!("/api/v0/resources/{unused}");
    assert_eq!(stage.get(&unused_path, &auth(&unused_secret)).status, 404);
    assert_eq!(stage.get(&used_path, &auth(&used_secret)).status, 200);
    assert_eq!(
        keys(&sw, "stage-expiry", "bundles"),
        [
            format!("bundles/{used}/bundle.tar.gz"),
            format!("bundles/{used}/meta.json")
        ]
    );
    let (_, stderr) = stage.stop();
    assert!(
        stderr.contains(&format!("bundle {unused} expired")),
        "{stderr}"
    );
}

/// `stage serve` that must not start: its exit code and stderr.
fn refused(store: &str, env: &[(&'static str, String)], args: &[&str]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "stage",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        store,
    ])
    .args(args)
    .env("TMPDIR", tmp.path())
    .env("SPARK_LOCALIZER_STAGE_UPLOAD_AUTH", "none");
    for (name, _) in std::env::vars() {
        if name.starts_with("SPARK_LOCALIZER_") || name.starts_with("AWS_") {
            cmd.env_remove(&name);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let started = Instant::now();
    let out = cmd.output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30), "slow refusal");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "it listened:\n{stderr}"
    );
    (out.status.code(), stderr)
}

#[test]
fn s3_store_refuses_to_start_without_a_usable_bucket() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("stage-refusals");
    let store = "s3://stage-refusals/p";

    let wrong = "not-the-secret-key-42";
    let (code, stderr) = refused(store, &aws_env(&sw, wrong), &[]);
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains(&format!("--store {store}")), "{stderr}");
    assert!(stderr.contains("SignatureDoesNotMatch"), "{stderr}");
    assert!(!stderr.contains(wrong), "the secret leaked:\n{stderr}");

    let (code, stderr) = refused(
        "s3://no-such-bucket/p",
        &aws_env(&sw, Seaweed::SECRET_KEY),
        &[],
    );
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("NoSuchBucket"), "{stderr}");

    // Nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut env = aws_env(&sw, Seaweed::SECRET_KEY);
    env[2].1 = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, stderr) = refused(store, &env, &[]);
    assert_eq!(code, Some(6), "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");

    // Configuration errors: exit 2, before any request.
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    let (code, stderr) = refused(store, &[], &["--s3-credentials-dir", dir]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--s3-credentials-dir") && stderr.contains("access-key"),
        "{stderr}"
    );
    let (code, stderr) = refused("gs://bucket/p", &[], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unsupported scheme 'gs'"), "{stderr}");
    let (code, stderr) = refused("s3://key:pw-secret@bucket/p", &[], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("holds credentials"), "{stderr}");
    assert!(!stderr.contains("pw-secret"), "{stderr}");

    // The keys from a mounted Secret directory work.
    let secret_dir = tempfile::tempdir().unwrap();
    std::fs::write(secret_dir.path().join("access-key"), Seaweed::ACCESS_KEY).unwrap();
    std::fs::write(secret_dir.path().join("secret-key"), Seaweed::SECRET_KEY).unwrap();
    let env = [
        ("AWS_ENDPOINT_URL", sw.endpoint()),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        (
            "SPARK_LOCALIZER_STAGE_S3_CREDENTIALS_DIR",
            secret_dir.path().to_str().unwrap().to_owned(),
        ),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let stage = Stage::start_with_env(Path::new(store), &[], &env);
    let (id, secret) = stage.stage(&bundle(&[("x", b"x")]));
    let got = stage.get(&format!("/api/v0/resources/{id}"), &auth(&secret));
    assert_eq!(got.status, 200);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("Secret directory"), "{stderr}");
}

/// Sends a GET for `path` and reads the answer's head; the stream is left at the
/// start of the body. Returns the stream, the status and the Content-Length.
fn start_get(addr: &str, path: &str, secret: &str) -> (TcpStream, u16, usize) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(
            format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {secret}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "no answer head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or(0);
    (stream, status, length)
}

#[test]
fn s3_store_dying_mid_download_ends_the_answer() {
    let Some(mut sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("stage-dying");
    let tmp = tempfile::tempdir().unwrap();
    let stage = serve(&sw, "s3://stage-dying/p", tmp.path(), &[]);
    let payload = bundle(&[("big.jar", &data(3, 40 << 20))]);
    let (id, secret) = stage.stage(&payload);
    let path = format!("/api/v0/resources/{id}");

    let (mut stream, status, length) = start_get(&stage.addr, &path, &secret);
    assert_eq!((status, length), (200, payload.len()));
    let mut first = vec![0u8; 1 << 20];
    stream.read_exact(&mut first).unwrap();
    sw.stop();
    // The rest: cut short (EOF or reset) in bounded time, never a hang.
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let ended = stream.read_to_end(&mut rest);
    if let Err(e) = &ended {
        assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "the answer hung");
        assert_ne!(e.kind(), std::io::ErrorKind::TimedOut, "the answer hung");
    }
    assert!(
        first.len() + rest.len() < payload.len(),
        "the whole bundle came through without its store"
    );
    assert!(started.elapsed() < Duration::from_secs(60));

    // While it is down: an error, quickly.
    let started = Instant::now();
    let down = stage.get(&path, &auth(&secret));
    assert_eq!(down.status, 500, "{down:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(stage.get("/healthz", &[]).status == 200);

    // Back up: served again, whole.
    sw.restart();
    let got = stage.get(&path, &auth(&secret));
    assert_eq!(got.status, 200, "{}", stage.stderr_text());
    assert!(got.body == payload, "bundle differs after the restart");
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(Seaweed::SECRET_KEY), "{stderr}");
}
