//! `s3://` and `s3a://` against a real SeaweedFS (`weed server -s3`: SigV4
//! signatures checked, ranges and ETags served), through every credential source.

use std::path::Path;
use std::time::Duration;

use crate::support::aws_creds::{PodIdentityAgent, Sts, READER_ROLE_ARN};
use crate::support::cut_proxy::CutProxy;
use crate::support::pki::Pki;
use crate::support::seaweed::Seaweed;
use crate::support::{
    allocated, data, random_file, s, sha256_file, sha256_hex, tar_gz, wait_for, Run, Sandbox,
};

/// The standard AWS variables pointing at `endpoint` with the test identity.
fn aws_env<'a>(run: Run<'a>, endpoint: &str) -> Run<'a> {
    run.env("AWS_ACCESS_KEY_ID", Seaweed::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", Seaweed::SECRET_KEY)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
}

/// The highest resident set size (VmHWM, KiB) of `pid`, polled until it exits.
fn peak_rss_kib(pid: u32) -> u64 {
    let mut peak = 0;
    loop {
        // A process that exited (a zombie until reaped) has no Vm lines any more.
        let hwm = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            });
        match hwm {
            Some(kib) => peak = kib,
            None => return peak,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn s3_and_s3a_jars_files_and_archives_localize_and_a_rerun_keeps_them() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("spark");
    let jar = data(1, 300_000);
    let conf = b"spark.shuffle.manager=celeborn\n".to_vec();
    sw.put("spark", "libs/celeborn-client.jar", &jar);
    sw.put("spark", "conf/app.conf", &conf);
    let sb = Sandbox::new();
    let tree = sb.root.join("tree");
    std::fs::create_dir_all(tree.join("bin")).unwrap();
    std::fs::write(tree.join("bin/tool"), b"#!/bin/sh\n").unwrap();
    let tgz = sb.root.join("env.tar.gz");
    tar_gz(&tree, &tgz);
    sw.put("spark", "envs/env.tar.gz", &std::fs::read(&tgz).unwrap());

    let fetch = |sb: &Sandbox| {
        aws_env(sb.fetch(), &sw.endpoint())
            .args([
                "--jars",
                "s3a://spark/libs/celeborn-client.jar",
                "--files",
                "s3://spark/conf/app.conf",
                "--archives",
                "s3a://spark/envs/env.tar.gz#pyenv",
            ])
            .run()
    };
    fetch(&sb).expect_code(0);
    assert_eq!(std::fs::read(sb.jar("celeborn-client.jar")).unwrap(), jar);
    assert_eq!(std::fs::read(sb.files.join("app.conf")).unwrap(), conf);
    assert!(sb.files.join("pyenv/bin/tool").is_file());
    assert!(sb.classpath().contains("celeborn-client.jar"));
    assert_eq!(
        sb.artifact("celeborn-client.jar")["sha256"],
        sha256_hex(&jar).as_str()
    );

    // A restarted init container keeps what is there and correct.
    fetch(&sb).expect_code(0);
    assert_eq!(sb.artifact("celeborn-client.jar")["status"], "kept");
}

#[test]
fn wrong_secret_fails_at_once_naming_the_credential_source() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    sw.put("bkt", "a.jar", &data(2, 1000));
    let sb = Sandbox::new();
    let out = aws_env(sb.fetch(), &sw.endpoint())
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret-0123")
        .retry_delay("3s")
        .args(["--retries", "5", "--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(3)
        .expect_stderr("SignatureDoesNotMatch")
        .expect_stderr("credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");
    assert_eq!(sb.artifact("a.jar")["attempts"], 1);
    assert!(!out.stderr.contains("not-the-secret-0123"), "{out}");

    let out = aws_env(sb.fetch(), &sw.endpoint())
        .env("AWS_ACCESS_KEY_ID", "NOSUCHKEY")
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(3).expect_stderr("InvalidAccessKeyId");
}

#[test]
fn missing_objects_and_buckets_are_named_and_not_retried() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let sb = Sandbox::new();
    let out = aws_env(sb.fetch(), &sw.endpoint())
        .retry_delay("3s")
        .args([
            "--retries",
            "5",
            "--jars",
            "s3a://bkt/libs/missing.jar",
            "--files",
            "s3://nosuchbucket/x.txt",
        ])
        .run();
    out.expect_code(3)
        .expect_stderr("s3a://bkt/libs/missing.jar: no such object in bucket 'bkt' (NoSuchKey)")
        .expect_stderr("s3://nosuchbucket/x.txt: bucket 'nosuchbucket' does not exist");
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");

    // check says the same, per URI, with the credential source and endpoint.
    sw.put("bkt", "ok.jar", &data(3, 10));
    let out = aws_env(sb.check(), &sw.endpoint())
        .args(["--jars", "s3a://bkt/ok.jar,s3a://bkt/libs/missing.jar"])
        .run();
    out.expect_code(3);
    assert!(
        out.stdout
            .contains("ok    s3a://bkt/ok.jar: 200 OK, size 10 bytes"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("FAIL  s3a://bkt/libs/missing.jar: no such object"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("credentials    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{out}"
    );
    assert!(
        out.stdout.contains(&format!(
            "endpoint       {} (path-style, AWS_ENDPOINT_URL)",
            sw.endpoint()
        )),
        "{out}"
    );
}

/// One 1 GiB object: fetched in parallel ranges, byte-exact, in bounded memory;
/// then again with the server killed and restarted in the middle.
#[test]
fn a_large_object_in_parallel_ranges_survives_a_server_restart() {
    let Some(mut sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("big");
    let sb = Sandbox::new();
    let src = sb.root.join("big.bin");
    random_file(&src, 1 << 30);
    let want = sha256_file(&src);
    sw.put_file("big", "data/big.bin", &src);
    std::fs::remove_file(&src).unwrap();

    let running = aws_env(sb.fetch(), &sw.endpoint())
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--files", "s3a://big/data/big.bin"])
        .start();
    let peak = peak_rss_kib(running.pid());
    let out = running.finish();
    out.expect_code(0).expect_stderr("in 128 ranges");
    assert_eq!(sha256_file(&sb.files.join("big.bin")), want);
    assert!(peak > 0 && peak < 96 * 1024, "peak RSS {peak} KiB\n{out}");
    eprintln!("1 GiB over S3 in {:?}, peak RSS {peak} KiB", out.elapsed);

    // Killed after some 200 MiB arrived, restarted a few seconds later.
    let sb2 = Sandbox::new();
    let running = aws_env(sb2.fetch(), &sw.endpoint())
        .retry_delay("200ms")
        .args([
            "--retries",
            "12",
            "--deadline",
            "120s",
            "--files",
            "s3a://big/data/big.bin",
        ])
        .start();
    assert!(
        wait_for(Duration::from_secs(60), || allocated(&sb2.files)
            > 200 << 20),
        "the transfer never got going: {}",
        running.stderr_so_far()
    );
    sw.stop();
    std::thread::sleep(Duration::from_secs(1));
    sw.restart();
    let out = running.finish();
    out.expect_code(0).expect_stderr("retrying");
    assert_eq!(sha256_file(&sb2.files.join("big.bin")), want);
    eprintln!("with a server restart: {:?}\n{}", out.elapsed, out.stderr);
}

/// Connections cut in the middle of bodies: a small object resumes with a ranged,
/// ETag-checked request; a large one retries only the ranges that were cut.
#[test]
fn bodies_cut_mid_transfer_resume_with_ranges() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let small = data(4, 20 << 20);
    let large = data(5, 80 << 20);
    sw.put("bkt", "small.jar", &small);
    sw.put("bkt", "large.bin", &large);

    let proxy = CutProxy::start(sw.addr(), 5 << 20, 1);
    let sb = Sandbox::new();
    let out = aws_env(sb.fetch(), &proxy.endpoint())
        .args(["--jars", "s3a://bkt/small.jar"])
        .run();
    out.expect_code(0).expect_stderr("resuming at byte");
    assert_eq!(proxy.cuts(), 1);
    assert_eq!(std::fs::read(sb.jar("small.jar")).unwrap(), small);
    assert_eq!(sb.artifact("small.jar")["attempts"], 2);

    let proxy = CutProxy::start(sw.addr(), 3 << 20, 4);
    let out = aws_env(sb.fetch(), &proxy.endpoint())
        .args(["--files", "s3a://bkt/large.bin"])
        .run();
    out.expect_code(0).expect_stderr("range ");
    assert!(proxy.cuts() >= 4, "{out}");
    assert_eq!(std::fs::read(sb.files.join("large.bin")).unwrap(), large);
}

#[test]
fn credentials_and_endpoint_from_the_properties_file_with_a_bucket_override() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("spark");
    let jar = data(6, 5000);
    sw.put("spark", "a.jar", &jar);
    let sb = Sandbox::new();
    let host = sw.endpoint().trim_start_matches("http://").to_owned();
    let props = sb.write(
        "spark.properties",
        format!(
            "spark.jars=s3a://spark/a.jar\n\
             spark.hadoop.fs.s3a.endpoint={host}\n\
             spark.hadoop.fs.s3a.connection.ssl.enabled=false\n\
             spark.hadoop.fs.s3a.path.style.access=true\n\
             spark.hadoop.fs.s3a.access.key={}\n\
             spark.hadoop.fs.s3a.secret.key=the-wrong-global-secret\n\
             spark.hadoop.fs.s3a.bucket.spark.secret.key={}\n",
            Seaweed::ACCESS_KEY,
            Seaweed::SECRET_KEY
        ),
    );
    let out = sb.check().arg("--properties-file").arg(&props).run();
    out.expect_code(0);
    assert!(
        out.stdout.contains("spark.hadoop.fs.s3a.access.key in")
            && out
                .stdout
                .contains("spark.hadoop.fs.s3a.bucket.spark.secret.key"),
        "{out}"
    );
    assert!(!out.stdout.contains(Seaweed::SECRET_KEY), "{out}");
    sb.fetch()
        .arg("--properties-file")
        .arg(&props)
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);
}

/// A mounted Secret directory, rotated while the fetch is retrying: the next
/// attempt reads the new files.
#[test]
fn a_rotated_secret_directory_is_read_again_on_retry() {
    let Some(mut sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("bkt");
    let jar = data(7, 4000);
    sw.put("bkt", "a.jar", &jar);
    sw.stop();
    let sb = Sandbox::new();
    let secret = sb.root.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    let put = |name: &str, value: &str| {
        // As the kubelet does: a new file renamed into place.
        let tmp = secret.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, value).unwrap();
        std::fs::rename(&tmp, secret.join(name)).unwrap();
    };
    put("access-key", Seaweed::ACCESS_KEY);
    put("secret-key", "an-old-rotated-secret");
    let running = sb
        .fetch()
        .env("AWS_ENDPOINT_URL", &sw.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "ignored-because-the-dir-wins")
        .env("AWS_SECRET_ACCESS_KEY", "ignored-secret-value")
        .retry_delay("300ms")
        .args(["--retries", "30", "--s3-credentials-dir"])
        .arg(&secret)
        .args(["--jars", "s3a://bkt/a.jar"])
        .start();
    assert!(wait_for(Duration::from_secs(20), || running
        .stderr_so_far()
        .contains("retrying")));
    put("secret-key", Seaweed::SECRET_KEY);
    sw.restart();
    let out = running.finish();
    out.expect_code(0);
    assert!(!out.stderr.contains("SignatureDoesNotMatch"), "{out}");
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);

    let out = sb
        .check()
        .env("AWS_ENDPOINT_URL", &sw.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .arg("--s3-credentials-dir")
        .arg(&secret)
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout.contains("credentials    Secret directory"),
        "{out}"
    );

    // A directory without the keys is a configuration error naming them.
    let empty = sb.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    sb.fetch()
        .arg("--s3-credentials-dir")
        .arg(&empty)
        .args(["--jars", "s3a://bkt/a.jar"])
        .run()
        .expect_code(2)
        .expect_stderr("no readable 'access-key'");
}

/// IRSA: the projected service-account token is exchanged at an STS over TLS
/// (trusted through --ca-cert) for a session SeaweedFS accepts.
#[test]
fn irsa_web_identity_through_an_sts_over_tls() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let jar = data(8, 12_345);
    sw.put("bkt", "libs/a.jar", &jar);
    let pki = Pki::new();
    let token = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.SECRETTOK";
    let sts = Sts::start(&pki, token);
    let sb = Sandbox::new();
    let token_file = sb.write("token", token);
    let ca = sb.write("ca.pem", &pki.ca_pem);
    fn irsa<'a>(run: Run<'a>, token_file: &Path, sts: &Sts, sw: &Seaweed) -> Run<'a> {
        run.env("AWS_WEB_IDENTITY_TOKEN_FILE", &s(token_file))
            .env("AWS_ROLE_ARN", READER_ROLE_ARN)
            .env("AWS_ENDPOINT_URL_STS", &sts.url())
            .env("AWS_ENDPOINT_URL", &sw.endpoint())
            .env("AWS_ALLOW_HTTP", "true")
            .args(["--jars", "s3a://bkt/libs/a.jar"])
    }

    let out = irsa(sb.check(), &token_file, &sts, &sw)
        .args(["--ca-cert", &s(&ca)])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout.contains("credentials    web identity (IRSA)")
            && out.stdout.contains(READER_ROLE_ARN),
        "{out}"
    );
    let out = irsa(sb.fetch(), &token_file, &sts, &sw)
        .args(["--ca-cert", &s(&ca)])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);
    let calls = sts.requests();
    assert!(!calls.is_empty());
    assert_eq!(calls[0].method, "POST");
    assert_eq!(calls[0].query["Action"], "AssumeRoleWithWebIdentity");
    assert_eq!(calls[0].query["RoleArn"], READER_ROLE_ARN);
    assert_eq!(calls[0].query["WebIdentityToken"], token);
    assert!(!out.stderr.contains("SECRETTOK"), "{out}");

    // The STS's certificate is not trusted without the CA: a TLS failure, at once.
    let sb2 = Sandbox::new();
    let out = irsa(sb2.fetch(), &token_file, &sts, &sw)
        .retry_delay("3s")
        .run();
    out.expect_code(3).expect_stderr("TLS");
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");

    // A token the STS refuses: AccessDenied, no retries, the source named.
    std::fs::write(&token_file, "a-revoked-token").unwrap();
    let out = irsa(sb2.fetch(), &token_file, &sts, &sw)
        .args(["--ca-cert", &s(&ca)])
        .retry_delay("3s")
        .run();
    out.expect_code(3)
        .expect_stderr("AccessDenied")
        .expect_stderr("web identity (IRSA)");
    assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");
}

/// EKS Pod Identity: the agent is asked with the pod's token for a session.
#[test]
fn eks_pod_identity_agent_credentials() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let jar = data(9, 777);
    sw.put("bkt", "a.jar", &jar);
    let token = "pod-identity-token-SECRETTOK";
    let agent = PodIdentityAgent::start(token, READER_ROLE_ARN);
    let sb = Sandbox::new();
    let token_file = sb.write("eks-pod-identity-token", token);
    let out = sb
        .fetch()
        .env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &agent.url())
        .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &s(&token_file))
        .env("AWS_ENDPOINT_URL", &sw.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);
    let calls = agent.requests();
    assert_eq!(calls[0].headers["authorization"], token);
    assert_eq!(
        (calls[0].method.as_str(), calls[0].path.as_str()),
        ("GET", "/v1/credentials")
    );
}

/// A slow body is not cut off by a whole-request timeout (object_store's default
/// is 30 s): only a stall (no byte for --stall-timeout) is.
#[test]
fn a_transfer_longer_than_thirty_seconds_is_not_cut_off() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let jar = data(10, 450_000);
    sw.put("bkt", "slow.jar", &jar);
    // ~450 KB at 4 KiB per 300 ms: about 33 s for the body alone.
    let proxy = CutProxy::slow(sw.addr(), 4096, Duration::from_millis(300));
    let sb = Sandbox::new();
    let out = aws_env(sb.fetch(), &proxy.endpoint())
        .args(["--stall-timeout", "5s", "--jars", "s3a://bkt/slow.jar"])
        .run();
    out.expect_code(0);
    assert!(out.elapsed > Duration::from_secs(30), "{out}");
    assert_eq!(sb.artifact("slow.jar")["attempts"], 1, "{out}");
    assert_eq!(std::fs::read(sb.jar("slow.jar")).unwrap(), jar);
}

/// A credential service answering with a token that cannot go into a header,
/// or with something that is not credentials: a clear failure naming the
/// source, at once, never a panic.
#[test]
fn unusable_answers_of_a_credential_service_fail_cleanly() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    sw.put("bkt", "a.jar", &data(11, 100));
    let agent = crate::support::FaultServer::start();
    agent.put(
        "/bad-token",
        r#"{"AccessKeyId":"AK","SecretAccessKey":"SK","Token":"to\u0001ken","Expiration":"2099-01-01T00:00:00Z"}"#,
    );
    agent.put("/not-credentials", r#"{"Message":"hello"}"#);
    let sb = Sandbox::new();
    let token_file = sb.write("token", "pod-token");
    for (path, why) in [
        ("/bad-token", "contains a control character"),
        ("/not-credentials", "its answer is not usable"),
    ] {
        let out = sb
            .fetch()
            .env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &agent.url(path))
            .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &s(&token_file))
            .env("AWS_ENDPOINT_URL", &sw.endpoint())
            .env("AWS_ALLOW_HTTP", "true")
            .retry_delay("3s")
            .args(["--jars", "s3a://bkt/a.jar"])
            .run();
        out.expect_code(3)
            .expect_stderr("S3 credentials from EKS Pod Identity")
            .expect_stderr(why);
        assert!(!out.stderr.contains("panicked"), "{out}");
        assert!(out.elapsed < Duration::from_secs(3), "retried? {out}");
    }
}

/// A fifo as the Pod Identity token file is refused at once (object_store would
/// block on it for good).
#[test]
fn a_fifo_as_the_pod_identity_token_file_is_refused() {
    let sb = Sandbox::new();
    let fifo = sb.root.join("token-fifo");
    crate::stage_serve::mkfifo(&fifo);
    let out = sb
        .fetch()
        .env(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://127.0.0.1:9/v1/credentials",
        )
        .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &s(&fifo))
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(2)
        .expect_stderr("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        .expect_stderr("not a regular file");
    assert!(out.elapsed < Duration::from_secs(3), "{out}");
}

/// Issue 15, defect 1: a credential endpoint that accepts connections and never
/// answers (an IMDSv2 hop limit of 1 inside a pod, a stuck Pod Identity agent)
/// is named within its own short time limit, not reported as a 30 s data stall
/// per attempt. No S3 server is needed: the credentials come first.
#[test]
fn a_hanging_credential_endpoint_is_named_within_seconds() {
    // The kernel completes the handshakes; nothing ever answers.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = format!("http://{}", hang.local_addr().unwrap());
    let sb = Sandbox::new();
    let token_file = sb.write("eks-pod-identity-token", "pod-token");
    type Setup<'a> = &'a dyn Fn(crate::support::Run<'a>) -> crate::support::Run<'a>;
    let imds: Setup = &|run| run.env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &at);
    let agent_uri = format!("{at}/v1/credentials");
    let pod_identity: Setup = &|run| {
        run.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &agent_uri)
            .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &s(&token_file))
    };
    for (setup, named, hint) in [
        (imds, "EC2 instance metadata", "hop-limit 2"),
        (pod_identity, "EKS Pod Identity", "eks-pod-identity-agent"),
    ] {
        // Three jars of the bucket, one at a time: the source is asked once, the
        // others fail with its answer at once (not 5 s each).
        let out = setup(sb.fetch())
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .env("AWS_ALLOW_HTTP", "true")
            .args(["--stall-timeout", "30s", "--parallelism", "1"])
            .args(["--jars", "s3a://bkt/a.jar,s3a://bkt/b.jar,s3a://bkt/c.jar"])
            .run();
        out.expect_code(3)
            .expect_stderr(&format!("cannot get S3 credentials from {named}"))
            .expect_stderr("none within 5.0s")
            .expect_stderr(hint);
        assert!(!out.stderr.contains("stall timeout"), "{out}");
        assert!(out.elapsed < Duration::from_secs(9), "{out}");
        assert_eq!(out.stderr.matches("none within 5.0s").count(), 3, "{out}");

        let out = setup(sb.check())
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .env("AWS_ALLOW_HTTP", "true")
            .args(["--jars", "s3a://bkt/a.jar"])
            .run();
        out.expect_code(3);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(
            all.contains(&format!("cannot get S3 credentials from {named}"))
                && all.contains("none within 5.0s"),
            "{out}"
        );
        assert!(out.elapsed < Duration::from_secs(15), "{out}");
    }
}

/// Issue 15, `check` for the laptop: the shared config files (`~/.aws/credentials`
/// and `~/.aws/config`, `AWS_PROFILE`) are the last source before instance
/// metadata, with static keys or a `credential_process`; `check` lists the chain,
/// what of each source is set and which one is used. Before, they were ignored
/// and `check` claimed "no other S3 credentials are configured".
#[test]
fn the_shared_config_files_of_a_laptop_are_read_and_explained() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket("bkt");
    let jar = data(12, 4321);
    sw.put("bkt", "a.jar", &jar);
    let sb = Sandbox::new();
    let aws = sb.root.join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        format!(
            "[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n\n[dev]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            Seaweed::ACCESS_KEY,
            Seaweed::SECRET_KEY
        ),
    )
    .unwrap();
    let process = sb.write(
        "creds.sh",
        format!(
            "printf '{{\"Version\": 1, \"AccessKeyId\": \"{}\", \"SecretAccessKey\": \"{}\"}}'",
            Seaweed::ACCESS_KEY,
            Seaweed::SECRET_KEY
        ),
    );
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile dev]\nregion = eu-west-3\n[profile proc]\ncredential_process = sh {}\n[profile sso]\nsso_session = corp\n",
            s(&process)
        ),
    )
    .unwrap();
    let endpoint = sw.endpoint();
    let run = |run: crate::support::Run<'_>, profile: &str| {
        run.env("AWS_PROFILE", profile)
            .env("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/x")
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .args(["--jars", "s3a://bkt/a.jar"])
            .run()
    };

    let out = run(sb.check(), "dev");
    out.expect_code(0);
    for line in [
        &format!(
            "profile 'dev' (AWS_PROFILE) in {}",
            s(&aws.join("credentials"))
        ),
        "4. AWS_* keys               not set",
        "5. web identity (IRSA)      incomplete, not used (AWS_ROLE_ARN)",
        "8. shared config files      USED",
        "9. EC2 instance metadata    not used (the last resort)",
        "eu-west-3 (profile 'dev' (AWS_PROFILE) in",
    ] {
        assert!(out.stdout.contains(line), "{line}\n{out}");
    }
    assert!(!out.stdout.contains(Seaweed::SECRET_KEY), "{out}");

    let out = run(sb.fetch(), "dev");
    out.expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), jar);

    let sb2 = Sandbox::new();
    std::fs::create_dir_all(sb2.root.join(".aws")).unwrap();
    for name in ["credentials", "config"] {
        std::fs::copy(aws.join(name), sb2.root.join(".aws").join(name)).unwrap();
    }
    let out = run(sb2.fetch(), "proc");
    out.expect_code(0);
    assert_eq!(std::fs::read(sb2.jar("a.jar")).unwrap(), jar);

    // Keys of the environment come first: the profile is set, and ignored.
    let out = aws_env(sb2.check(), &endpoint)
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(0);
    assert!(
        out.stdout.contains(
            "8. shared config files      set (profile 'default'), ignored: a source before it is used"
        ),
        "{out}"
    );

    // A profile spark-localizer cannot turn into keys, or one that does not exist:
    // a configuration error naming it and what to do.
    let out = run(sb2.fetch(), "sso");
    out.expect_code(2)
        .expect_stderr("profile 'sso' (AWS_PROFILE)")
        .expect_stderr("aws configure export-credentials --profile sso");
    let out = run(sb2.fetch(), "nope");
    out.expect_code(2)
        .expect_stderr("AWS_PROFILE=nope: no such profile");
}

/// Issue 15, S3 errors that say what to do: the region S3 names for a bucket
/// (`x-amz-bucket-region` on its 301), a throttled or failing server with its
/// status, error code and endpoint, and `https` at a plain-HTTP endpoint.
#[test]
fn s3_errors_name_the_region_the_status_and_the_scheme() {
    let server = crate::support::FaultServer::start();
    server.always(
        "/bkt/moved.jar",
        crate::support::Fault::StatusBody(
            301,
            vec![("x-amz-bucket-region".into(), "eu-west-1".into())],
            "<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access must be addressed using the specified endpoint.</Message></Error>".into(),
        ),
    );
    server.always(
        "/bkt/slow.jar",
        crate::support::Fault::StatusBody(
            503,
            vec![],
            "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>".into(),
        ),
    );
    let endpoint = server.url("");
    let sb = Sandbox::new();
    let fetch = |run: crate::support::Run<'_>, endpoint: &str, jar: &str| {
        run.env("AWS_ACCESS_KEY_ID", "AKIDTEST")
            .env("AWS_SECRET_ACCESS_KEY", "secret-for-the-test")
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .args(["--retries", "1", "--jars", jar])
            .run()
    };
    let moved = "bucket 'bkt' is in region 'eu-west-1' (so S3 says), not in 'us-east-1' (default); set AWS_REGION=eu-west-1";
    let out = fetch(sb.fetch(), &endpoint, "s3a://bkt/moved.jar");
    out.expect_code(3).expect_stderr(moved);
    assert_eq!(server.gets("/bkt/moved.jar").len(), 1, "retried? {out}");
    let out = fetch(sb.check(), &endpoint, "s3a://bkt/moved.jar");
    out.expect_code(3);
    assert!(out.stdout.contains(moved), "{out}");
    assert!(!out.stdout.contains("Generic S3 error"), "{out}");
    // When a properties key decides the region, that key is what to change.
    let props = sb.write(
        "region.conf",
        "spark.hadoop.fs.s3a.endpoint.region=us-east-1\n",
    );
    let out = fetch(
        sb.fetch()
            .env("AWS_REGION", "eu-west-1")
            .args(["--properties-file", &s(&props)]),
        &endpoint,
        "s3a://bkt/moved.jar",
    );
    out.expect_code(3)
        .expect_stderr("; set spark.hadoop.fs.s3a.endpoint.region=eu-west-1");
    assert!(!out.stderr.contains("set AWS_REGION"), "{out}");

    let out = fetch(sb.fetch(), &endpoint, "s3a://bkt/slow.jar");
    out.expect_code(3)
        .expect_stderr("answered 503 SlowDown: Please reduce your request rate.")
        .expect_stderr(&format!("{endpoint} (path-style"))
        .expect_stderr("(after 2 attempts)");

    // A plain HTTP server answers a TLS handshake with an HTTP 400, as nginx,
    // SeaweedFS and MinIO do.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let https = format!("https://{}", plain.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in plain.incoming().take(4) {
            let Ok(mut conn) = conn else { continue };
            let mut hello = [0u8; 512];
            let _ = std::io::Read::read(&mut conn, &mut hello);
            let _ = std::io::Write::write_all(
                &mut conn,
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let out = fetch(sb.fetch(), &https, "s3a://bkt/moved.jar");
    out.expect_code(3)
        .expect_stderr("answered in plain HTTP, not TLS");
    assert!(!out.stderr.contains("--ca-cert"), "{out}");
}

/// A `credential_process` that hangs is bounded by the deadline and a stop, and
/// killed with its children (it runs when the bucket is first used, not while the
/// configuration is read).
#[test]
fn a_hanging_credential_process_obeys_the_deadline_and_is_killed() {
    let sb = Sandbox::new();
    let aws = sb.root.join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    let pid_file = sb.root.join("child.pid");
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile hang]\ncredential_process = sh -c 'sleep 300 & echo $! > {}; wait'\n",
            s(&pid_file)
        ),
    )
    .unwrap();
    let out = sb
        .fetch()
        .env("AWS_PROFILE", "hang")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .args(["--deadline", "3s", "--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(5);
    assert!(out.elapsed < Duration::from_secs(8), "{out}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
    assert!(
        !status
            .lines()
            .any(|l| l.starts_with("State:") && !l.contains('Z')),
        "the credential_process's child {pid} outlived the run"
    );
    // check shows the source without running it; a failing one shows what it said.
    std::fs::write(
        aws.join("config"),
        "[profile bad]\ncredential_process = sh -c 'echo \"token expired: run aws sso login\" >&2; exit 1'\n",
    )
    .unwrap();
    let out = sb
        .fetch()
        .env("AWS_PROFILE", "bad")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .args(["--jars", "s3a://bkt/a.jar"])
        .run();
    out.expect_code(3).expect_stderr(
        "credential_process: it failed (exit status: 1): token expired: run aws sso login",
    );
}
