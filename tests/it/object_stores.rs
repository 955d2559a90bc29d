//! gs:// and abfss:// beyond the shared source suite, on the real servers
//! (fake-gcs-server, Azurite): each credential source, refusals named once (no
//! retries) and without secrets, and a 1 GiB object in parallel ranges that
//! survives its server's restart.

use std::time::Duration;

use crate::support::cloud::{entra_token, Azurite, FakeGcs};
use crate::support::pki::Pki;
use crate::support::server::{Fault, FaultServer};
use crate::support::{allocated, data, random_file, s, sha256_file, wait_for, Run, Sandbox};

const TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// A service-account key file with a fresh RSA key (openssl), as
/// `gcloud iam service-accounts keys create` writes one.
fn key_file(sb: &Sandbox) -> (std::path::PathBuf, String) {
    let pem = sb.root.join("key.pem");
    let status = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    let private_key = std::fs::read_to_string(&pem).unwrap();
    let json = serde_json::json!({
        "type": "service_account",
        "project_id": "test",
        "private_key_id": "0123456789abcdef",
        "private_key": private_key,
        "client_email": "localizer@test.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
    });
    let path = sb.write("sa.json", json.to_string());
    // A line of the key's body: it must never be shown.
    let secret_line = private_key.lines().nth(5).unwrap().to_owned();
    (path, secret_line)
}

#[test]
fn gcs_a_service_account_key_signs_every_request() {
    let Some(gcs) = FakeGcs::start() else { return };
    let jar = data(41, 50_000);
    gcs.put("keyed", "libs/app.jar", &jar);
    let sb = Sandbox::new();
    let (key, secret_line) = key_file(&sb);
    let props = sb.write(
        "spark.conf",
        format!(
            "spark.hadoop.fs.gs.auth.service.account.json.keyfile={}\n",
            key.display()
        ),
    );
    let run = |r: Run<'_>| {
        r.env("STORAGE_EMULATOR_HOST", &gcs.host())
            .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
            .args(["--properties-file", &s(&props)])
            .args(["--jars", "gs://keyed/libs/app.jar"])
            .run()
    };
    let out = run(sb.fetch());
    out.expect_code(0).expect_stderr("[auth: Bearer]");
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
    assert!(!sb.all_output(&out).contains(&secret_line));
    let out = run(sb.check());
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("service-account key {}", key.display()))
            && out
                .stdout
                .contains("spark.hadoop.fs.gs.auth.service.account.json.keyfile"),
        "{out}"
    );

    // The same key through GOOGLE_APPLICATION_CREDENTIALS.
    let sb2 = Sandbox::new();
    let out = sb2
        .fetch()
        .env("STORAGE_EMULATOR_HOST", &gcs.host())
        .env("GOOGLE_APPLICATION_CREDENTIALS", &s(&key))
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--jars", "gs://keyed/libs/app.jar"])
        .run();
    out.expect_code(0).expect_stderr("[auth: Bearer]");
    assert_eq!(std::fs::read(sb2.jar("app.jar")).unwrap(), jar);

    // A key file of a kind not read: a configuration error naming it, nothing shown of it.
    let bad = sb.write(
        "external.json",
        r#"{"type":"external_account","audience":"SECRETAUDIENCE"}"#,
    );
    let out = sb
        .fetch()
        .env("STORAGE_EMULATOR_HOST", &gcs.host())
        .env("GOOGLE_APPLICATION_CREDENTIALS", &s(&bad))
        .args(["--jars", "gs://keyed/libs/app.jar"])
        .run();
    out.expect_code(2)
        .expect_stderr("GOOGLE_APPLICATION_CREDENTIALS")
        .expect_stderr("external_account");
    assert!(!out.stderr.contains("SECRETAUDIENCE"), "{out}");
}

#[test]
fn gcs_workload_identity_gets_its_token_from_the_metadata_server() {
    let Some(gcs) = FakeGcs::start() else { return };
    let jar = data(42, 30_000);
    gcs.put("wibk", "app.jar", &jar);
    // The GKE metadata server's token endpoint (the one request it gets).
    let metadata = FaultServer::start();
    metadata.put(
        TOKEN_PATH,
        r#"{"access_token":"ya29.test-token-value","expires_in":3599,"token_type":"Bearer"}"#,
    );
    let host = format!("127.0.0.1:{}", metadata.port());
    let sb = Sandbox::new();
    let props = sb.write(
        "spark.conf",
        "spark.hadoop.fs.gs.auth.type=COMPUTE_ENGINE\n",
    );
    let run = |sb: &Sandbox| {
        sb.fetch()
            .env("STORAGE_EMULATOR_HOST", &gcs.host())
            .env("GCE_METADATA_HOST", &host)
            .env("GCE_METADATA_IP", &host)
            .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
            .args(["--properties-file", &s(&props)])
            .args(["--retries", "3", "--jars", "gs://wibk/app.jar"])
            .run()
    };
    let out = run(&sb);
    out.expect_code(0).expect_stderr("[auth: Bearer]");
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
    let asked = metadata.requests_for(TOKEN_PATH);
    assert!(!asked.is_empty(), "the metadata server was not asked");
    assert_eq!(asked[0].header("metadata-flavor"), Some("Google"));
    assert!(!out.stderr.contains("ya29.test-token-value"));

    // The metadata server refuses (no workload identity binding): final, named, fast.
    metadata.always(TOKEN_PATH, Fault::Status(403));
    let sb2 = Sandbox::new();
    let out = run(&sb2);
    out.expect_code(3).expect_stderr("metadata server");
    assert_eq!(sb2.artifact("app.jar")["attempts"], 1, "{out}");
    assert!(out.elapsed < Duration::from_secs(10), "{out}");
    assert!(!sb2.jar("app.jar").exists());
}

/// Runs `fetch` of `uri` against Azurite with the connection string naming
/// only the endpoint: the credentials come from `with`.
fn azure_fetch<'a>(az: &Azurite, sb: &'a Sandbox, uri: &str) -> Run<'a> {
    sb.fetch()
        .env("AZURE_STORAGE_CONNECTION_STRING", &az.endpoint_only())
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--retries", "3", "--jars", uri])
}

#[test]
fn azure_each_credential_source_reaches_azurite() {
    let Some(az) = Azurite::start() else { return };
    let jar = data(43, 60_000);
    az.put("creds", "libs/app.jar", &jar);
    let uri = Azurite::uri("creds", "libs/app.jar");
    let wasbs = format!(
        "wasbs://creds@{}.blob.core.windows.net/libs/app.jar",
        Azurite::ACCOUNT
    );
    let fetched = |sb: &Sandbox, out: &crate::support::Outcome, signed: &str| {
        out.expect_code(0).expect_stderr(signed);
        assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar, "{out}");
    };

    // A mounted Secret with the account key.
    let sb = Sandbox::new();
    let dir = sb.root.join("azure-secret");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("account-key"), Azurite::KEY).unwrap();
    let out = azure_fetch(&az, &sb, &uri)
        .args(["--azure-credentials-dir", &s(&dir)])
        .run();
    fetched(&sb, &out, "[auth: SharedKey]");

    // The ABFS account-key property users already have.
    let sb = Sandbox::new();
    let props = sb.write(
        "spark.conf",
        format!(
            "spark.hadoop.fs.azure.account.key.{}.dfs.core.windows.net={}\n",
            Azurite::ACCOUNT,
            Azurite::KEY
        ),
    );
    let out = azure_fetch(&az, &sb, &uri)
        .args(["--properties-file", &s(&props)])
        .run();
    fetched(&sb, &out, "[auth: SharedKey]");

    // A container SAS: as the WASB property, and as AZURE_STORAGE_SAS_TOKEN.
    let sas = az.container_sas("creds");
    let sb = Sandbox::new();
    let props = sb.write(
        "spark.conf",
        format!(
            "spark.hadoop.fs.azure.sas.creds.{}.blob.core.windows.net={sas}\n",
            Azurite::ACCOUNT
        ),
    );
    let out = azure_fetch(&az, &sb, &wasbs)
        .args(["--properties-file", &s(&props)])
        .run();
    fetched(&sb, &out, "sig=***");
    let signature = sas.rsplit("sig=").next().unwrap().to_owned();
    assert!(!sb.all_output(&out).contains(&signature), "{out}");
    let sb = Sandbox::new();
    let out = azure_fetch(&az, &sb, &uri)
        .env("AZURE_STORAGE_SAS_TOKEN", &sas)
        .run();
    fetched(&sb, &out, "sig=***");

    // A wrong key: refused once, named with its source, the key never shown.
    let wrong = base64_of(&data(44, 64));
    let sb = Sandbox::new();
    let out = azure_fetch(&az, &sb, &uri)
        .env("AZURE_STORAGE_ACCOUNT_KEY", &wrong)
        .run();
    out.expect_code(3)
        .expect_stderr("refused the credentials from AZURE_STORAGE_ACCOUNT_KEY");
    assert_eq!(sb.artifact("app.jar")["attempts"], 1, "{out}");
    assert!(!sb.all_output(&out).contains(&wrong), "{out}");

    // A missing container: named, not retried.
    let sb = Sandbox::new();
    let out = sb
        .fetch()
        .env("AZURE_STORAGE_CONNECTION_STRING", &az.connection_string())
        .args([
            "--retries",
            "3",
            "--jars",
            &Azurite::uri("nocontainer", "a.jar"),
        ])
        .run();
    out.expect_code(3)
        .expect_stderr("container 'nocontainer' does not exist");
    assert!(!out.stderr.contains(Azurite::KEY), "{out}");
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A 1 GiB file of random bytes and its sha256.
fn gib(sb: &Sandbox) -> (Vec<u8>, String) {
    let src = sb.root.join("big.bin");
    random_file(&src, 1 << 30);
    let bytes = std::fs::read(&src).unwrap();
    std::fs::remove_file(&src).unwrap();
    let sum = crate::support::sha256_hex(&bytes);
    (bytes, sum)
}

/// Fetches `uri` (1 GiB) while the server is killed after 200 MiB and restarted.
fn survives_restart<'a>(
    sb: &'a Sandbox,
    with: impl Fn(Run<'a>) -> Run<'a>,
    uri: &str,
    want: &str,
    restart: impl FnOnce(),
) {
    let running = with(sb.fetch())
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .retry_delay("200ms")
        .args(["--retries", "12", "--deadline", "180s", "--files", uri])
        .start();
    assert!(
        wait_for(Duration::from_secs(90), || allocated(&sb.files) > 200 << 20),
        "the transfer never got going: {}",
        running.stderr_so_far()
    );
    restart();
    let out = running.finish();
    out.expect_code(0)
        .expect_stderr("in 128 ranges")
        .expect_stderr("retrying");
    assert_eq!(sha256_file(&sb.files.join("big.bin")), want);
    eprintln!("1 GiB with a server restart: {:?}", out.elapsed);
}

#[test]
fn gcs_a_large_object_in_parallel_ranges_survives_a_server_restart() {
    let Some(mut gcs) = FakeGcs::start() else {
        return;
    };
    let sb = Sandbox::new();
    let (bytes, want) = gib(&sb);
    gcs.put("big", "data/big.bin", &bytes);
    drop(bytes);
    let host = gcs.host();
    survives_restart(
        &sb,
        |r| r.env("STORAGE_EMULATOR_HOST", &host),
        "gs://big/data/big.bin",
        &want,
        || {
            gcs.stop();
            std::thread::sleep(Duration::from_secs(1));
            gcs.restart();
        },
    );
}

#[test]
fn azure_a_large_object_in_parallel_ranges_survives_a_server_restart() {
    let Some(mut az) = Azurite::start() else {
        return;
    };
    let sb = Sandbox::new();
    let (bytes, want) = gib(&sb);
    az.put("big", "data/big.bin", &bytes);
    drop(bytes);
    let cs = az.connection_string();
    survives_restart(
        &sb,
        |r| r.env("AZURE_STORAGE_CONNECTION_STRING", &cs),
        &Azurite::uri("big", "data/big.bin"),
        &want,
        || {
            az.stop();
            std::thread::sleep(Duration::from_secs(1));
            az.restart();
        },
    );
}

/// AKS workload identity: the projected ServiceAccount token is exchanged at
/// Entra ID (a stand-in on 127.0.0.1, at AZURE_AUTHORITY_HOST) for an access
/// token that Azurite, over HTTPS, accepts as a bearer.
#[test]
fn azure_workload_identity_exchanges_the_federated_token() {
    let pki = Pki::new();
    let Some(az) = Azurite::start_oauth(&pki) else {
        return;
    };
    let jar = data(45, 40_000);
    az.put("wident", "app.jar", &jar);
    let entra = FaultServer::start();
    let token_path = "/tenant-1/oauth2/v2.0/token";
    entra.put(
        token_path,
        serde_json::json!({
            "token_type": "Bearer",
            "expires_in": 3599,
            "access_token": entra_token("tenant-1"),
        })
        .to_string(),
    );
    let sb = Sandbox::new();
    let ca = sb.write("ca.pem", &pki.ca_pem);
    let federated = sb.write(
        "azure-identity-token",
        "eyJhbGciOiJSUzI1NiJ9.projected.sa-token",
    );
    let authority = format!("http://127.0.0.1:{}", entra.port());
    let run = |sb: &Sandbox| {
        sb.fetch()
            .env("AZURE_STORAGE_CONNECTION_STRING", &az.endpoint_only())
            .env("AZURE_FEDERATED_TOKEN_FILE", &s(&federated))
            .env("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555")
            .env("AZURE_TENANT_ID", "tenant-1")
            .env("AZURE_AUTHORITY_HOST", &authority)
            .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
            .args(["--ca-cert", &s(&ca)])
            .args([
                "--retries",
                "3",
                "--jars",
                &Azurite::uri("wident", "app.jar"),
            ])
            .run()
    };
    let out = run(&sb);
    out.expect_code(0).expect_stderr("[auth: Bearer]");
    assert_eq!(std::fs::read(sb.jar("app.jar")).unwrap(), jar);
    let asked = entra.requests_for(token_path);
    assert_eq!(asked.len(), 1, "one token for the run");
    assert_eq!(asked[0].method, "POST");

    // The ABFS OAuth client-credentials keys: the client secret exchanged at the
    // tenant's endpoint, never shown.
    let client_path = "/tenant-2/oauth2/v2.0/token";
    entra.put(
        client_path,
        serde_json::json!({
            "token_type": "Bearer",
            "expires_in": 3599,
            "access_token": entra_token("tenant-2"),
        })
        .to_string(),
    );
    let sb3 = Sandbox::new();
    let props = sb3.write(
        "spark.conf",
        format!(
            "spark.hadoop.fs.azure.account.oauth2.client.endpoint={authority}/tenant-2/oauth2/token\n\
             spark.hadoop.fs.azure.account.oauth2.client.id=app-id\n\
             spark.hadoop.fs.azure.account.oauth2.client.secret=CLIENTSECRETVALUE\n"
        ),
    );
    let out = sb3
        .fetch()
        .env("AZURE_STORAGE_CONNECTION_STRING", &az.endpoint_only())
        .env("SPARK_LOCALIZER_LOG", "spark_localizer=debug")
        .args(["--ca-cert", &s(&ca), "--properties-file", &s(&props)])
        .args(["--jars", &Azurite::uri("wident", "app.jar")])
        .run();
    out.expect_code(0).expect_stderr("[auth: Bearer]");
    assert_eq!(std::fs::read(sb3.jar("app.jar")).unwrap(), jar);
    assert_eq!(entra.requests_for(client_path).len(), 1);
    assert!(!sb3.all_output(&out).contains("CLIENTSECRETVALUE"), "{out}");

    // Entra ID refuses the federated token (no federated credential for the
    // ServiceAccount): final, named with the credential source, fast.
    entra.always(token_path, Fault::Status(401));
    let sb2 = Sandbox::new();
    let out = run(&sb2);
    out.expect_code(3).expect_stderr("workload identity");
    assert_eq!(sb2.artifact("app.jar")["attempts"], 1, "{out}");
    assert!(out.elapsed < Duration::from_secs(10), "{out}");
}
