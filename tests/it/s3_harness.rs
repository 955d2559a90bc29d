//! The SeaweedFS harness itself: a real S3 server that checks SigV4, serves
//! path-style URLs and byte ranges, names missing buckets and keys, and keeps
//! its objects across a SIGKILL and restart.

use std::net::TcpStream;
use std::time::Instant;

use object_store::path::Path as Key;
use object_store::{GetOptions, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};

use crate::support::data;
use crate::support::seaweed::Seaweed;

/// The `<Code>` of an S3 XML error body.
fn code(body: &str) -> &str {
    body.split("<Code>")
        .nth(1)
        .and_then(|rest| rest.split("</Code>").next())
        .unwrap_or("")
}

#[test]
fn seaweed_serves_signed_path_style_s3_and_survives_a_restart() {
    let started = Instant::now();
    let Some(mut sw) = Seaweed::start() else {
        return;
    };
    eprintln!("SeaweedFS ready in {:?}", started.elapsed());
    sw.create_bucket("smoke");
    let body = data(11, 100_000);
    sw.put("smoke", "dir/obj.bin", &body);

    // Through object_store, path-style, with the right key.
    let store = sw.store("smoke");
    let key = Key::parse("dir/obj.bin").unwrap();
    let got = sw.block_on(async { store.get(&key).await.unwrap().bytes().await.unwrap() });
    assert_eq!(got.as_ref(), body.as_slice());
    let meta = sw.block_on(store.head(&key)).unwrap();
    assert_eq!(meta.size, body.len() as u64);
    // A single PUT's ETag is the quoted MD5 of the body.
    let etag = meta.e_tag.clone().expect("an ETag");
    assert!(
        etag.len() == 34
            && etag.starts_with('"')
            && etag.ends_with('"')
            && etag[1..33].bytes().all(|b| b.is_ascii_hexdigit()),
        "ETag {etag}"
    );

    // A byte range: exactly those bytes.
    let ranged = sw.block_on(async {
        let options = GetOptions {
            range: Some((10..20).into()),
            ..GetOptions::default()
        };
        store
            .get_opts(&key, options)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    });
    assert_eq!(ranged.as_ref(), &body[10..20]);

    // Raw path-style requests: the signature is checked, errors are S3's.
    sw.put("smoke", "dir/hello.txt", b"hello, path-style");
    let (status, text) = sw.request("GET", "/smoke/dir/hello.txt", Seaweed::SECRET_KEY);
    assert_eq!((status, text.as_str()), (200, "hello, path-style"));
    let (status, err) = sw.request("GET", "/smoke/dir/obj.bin", "not-the-secret-0123");
    assert_eq!(
        (status, code(&err)),
        (403, "SignatureDoesNotMatch"),
        "{err}"
    );
    let (status, err) = sw.request("GET", "/smoke/dir/missing.bin", Seaweed::SECRET_KEY);
    assert_eq!((status, code(&err)), (404, "NoSuchKey"), "{err}");
    let (status, err) = sw.request("GET", "/nosuchbucket/x.bin", Seaweed::SECRET_KEY);
    assert_eq!((status, code(&err)), (404, "NoSuchBucket"), "{err}");
    let (status, err) = sw.request("HEAD", "/smoke/dir/missing.bin", Seaweed::SECRET_KEY);
    assert_eq!((status, err.as_str()), (404, ""), "HEAD has no body");
    let anonymous = sw.block_on(async {
        let response = reqwest::get(format!("{}/smoke/dir/obj.bin", sw.endpoint()))
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    assert_eq!((anonymous.0, code(&anonymous.1)), (403, "AccessDenied"));

    // object_store with wrong credentials is refused, not served.
    let wrong = sw.store_as("smoke", Seaweed::ACCESS_KEY, "not-the-secret-0123");
    let err = sw.block_on(wrong.get(&key)).unwrap_err().to_string();
    assert!(err.contains("SignatureDoesNotMatch"), "{err}");
    let unknown = sw.store_as("smoke", "NOSUCHKEY", Seaweed::SECRET_KEY);
    let err = sw.block_on(unknown.get(&key)).unwrap_err().to_string();
    assert!(err.contains("InvalidAccessKeyId"), "{err}");
    let err = sw.block_on(store.get(&Key::parse("dir/missing.bin").unwrap()));
    assert!(
        matches!(err, Err(object_store::Error::NotFound { .. })),
        "{err:?}"
    );

    // A multipart object (two 5 MiB parts): ETag `"<md5 of part md5s>-2"`.
    let parts = data(12, 10 << 20);
    let multi = Key::parse("multi/two-parts.bin").unwrap();
    let etag = sw.block_on(async {
        let mut upload = store.put_multipart(&multi).await.unwrap();
        for half in parts.chunks(5 << 20) {
            upload
                .put_part(PutPayload::from(half.to_vec()))
                .await
                .unwrap();
        }
        upload.complete().await.unwrap().e_tag.unwrap()
    });
    assert!(
        etag.ends_with("-2\"") || etag.ends_with("-2"),
        "ETag {etag}"
    );
    let got = sw.block_on(async { store.get(&multi).await.unwrap().bytes().await.unwrap() });
    assert!(got.as_ref() == parts.as_slice());

    // SIGKILL: the port goes dead; restarted on the same port, the objects are there.
    let pid = sw.pid().unwrap();
    sw.stop();
    assert!(TcpStream::connect(sw.addr()).is_err());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let restarted = Instant::now();
    sw.restart();
    eprintln!("SeaweedFS restarted in {:?}", restarted.elapsed());
    let got = sw.block_on(async { store.get(&key).await.unwrap().bytes().await.unwrap() });
    assert_eq!(got.as_ref(), body.as_slice());
    sw.put("smoke", "after-restart.bin", b"still writable");
    let (status, after) = sw.request("GET", "/smoke/after-restart.bin", Seaweed::SECRET_KEY);
    assert_eq!((status, after.as_str()), (200, "still writable"));

    // Dropped: no process left behind.
    let pid = sw.pid().unwrap();
    drop(sw);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

/// 1 GiB through `put_file` (multipart, bounded memory) and back by ranges. Slow
/// and disk-hungry: `cargo test --test it s3_harness -- --ignored`.
#[test]
#[ignore]
fn seaweed_stores_a_one_gib_object() {
    let Some(sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("big");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big.bin");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        for i in 0..64 {
            f.write_all(&data(100 + i, 16 << 20)).unwrap();
        }
        f.flush().unwrap();
    }
    let start = Instant::now();
    sw.put_file("big", "data/big.bin", &src);
    eprintln!("1 GiB uploaded in {:?}", start.elapsed());
    let store = sw.store("big");
    let key = Key::parse("data/big.bin").unwrap();
    let meta = sw.block_on(store.head(&key)).unwrap();
    eprintln!("ETag {:?}", meta.e_tag);
    assert_eq!(meta.size, 1 << 30);
    // Spot checks: the first bytes, a part boundary, the last bytes.
    for (seed, at) in [
        (100u64, 0u64),
        (101, 16 << 20),
        (163, (1 << 30) - (16 << 20)),
    ] {
        let want = data(seed, 16 << 20);
        let got = sw.block_on(store.get_range(&key, at..at + 4096)).unwrap();
        assert_eq!(got.as_ref(), &want[..4096], "at {at}");
    }
    let start = Instant::now();
    let mut stream = sw.block_on(store.get(&key)).unwrap().into_stream();
    let total = sw.block_on(async {
        use futures_util::StreamExt;
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            total += chunk.unwrap().len() as u64;
        }
        total
    });
    assert_eq!(total, 1 << 30);
    eprintln!("1 GiB downloaded in {:?}", start.elapsed());
}
