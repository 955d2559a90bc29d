//! The object-store pod templates play as pods (issue 38): s3-irsa, gcs-workload-identity,
//! azure-workload-identity, each against the suite's server for its store (SeaweedFS,
//! fake-gcs-server, Azurite) with the workload identity played by the suite's stand-ins
//! (`support::kube::Identity`: the projected token, or the one AKS's webhook injects, as a
//! ConfigMap; the stand-ins' endpoints in the init container's env): a fake STS, a stand-in
//! of the GKE metadata server, one of Entra ID. See `pods.rs` for what is asserted.

use crate::pods::{assert_ran, assert_stopped, CELEBORN_JAR, JARS};
use crate::support::aws_creds::{Sts, READER_ROLE_ARN};
use crate::support::cloud::{Azurite, EntraId, FakeGcs};
use crate::support::data;
use crate::support::kube::{documents, Identity, Played, Spec};
use crate::support::pki::Pki;
use crate::support::seaweed::Seaweed;
use crate::support::server::{Fault, FaultServer};

/// The templates' bucket and objects (all three families name the same ones).
const BUCKET: &str = "my-spark-libs";
const CELEBORN_KEY: &str = "celeborn/celeborn-client-spark-3-shaded_2.12-0.5.1.jar";
const JDBC_KEY: &str = "jdbc/postgresql-42.7.4.jar";
const JDBC_JAR: &str = "postgresql-42.7.4.jar";

/// The token the fake STS (or Entra ID) accepts.
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.PODTOKEN";

/// The jars of the templates, in their order: name → bytes.
fn jars() -> [(&'static str, Vec<u8>); 2] {
    [
        (CELEBORN_JAR, data(3811, 300_000)),
        (JDBC_JAR, data(3812, 120_000)),
    ]
}

/// Where EKS mounts the web identity token (the template's mount of `aws-iam-token`).
const EKS_TOKEN_DIR: &str = "/var/run/secrets/eks.amazonaws.com/serviceaccount";

/// An s3-irsa template on SeaweedFS, the token file holding `token`, exchanged at the fake
/// STS (TLS, the suite's CA) for a session of the reader role SeaweedFS knows.
fn s3_irsa(template: &str, token: &str) -> Option<(Played, Seaweed, Sts)> {
    let sw = Seaweed::start()?;
    sw.create_bucket(BUCKET);
    for ((_, bytes), key) in jars().iter().zip([CELEBORN_KEY, JDBC_KEY]) {
        sw.put(BUCKET, key, bytes);
    }
    let pki = Pki::new();
    let sts = Sts::start(&pki, TOKEN);
    let identity = Identity {
        volume: "aws-iam-token".into(),
        injected_at: None,
        // The fake STS's certificate is signed by the suite's CA (a real STS's by a public
        // one, in the bundled roots): its PEM beside the token.
        files: vec![
            ("token".into(), token.into()),
            ("ca.pem".into(), pki.ca_pem.clone()),
        ],
        env: vec![
            ("AWS_ENDPOINT_URL".into(), sw.endpoint()),
            // SeaweedFS speaks plain HTTP on 127.0.0.1.
            ("AWS_ALLOW_HTTP".into(), "true".into()),
            ("AWS_ENDPOINT_URL_STS".into(), sts.url()),
            (
                "SPARK_LOCALIZER_CA_CERT".into(),
                format!("{EKS_TOKEN_DIR}/ca.pem"),
            ),
        ],
    };
    let played = Spec::new(template)
        .replace(
            "arn:aws:iam::111122223333:role/spark-jars-read",
            READER_ROLE_ARN,
        )
        .identity(identity)
        .play()?;
    Some((played, sw, sts))
}

#[test]
fn s3_irsa_executor_and_driver_play() {
    let jars = jars();
    let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (*n, &b[..])).collect();
    for (template, args) in [
        ("s3-irsa/executor.yaml", "executor"),
        ("s3-irsa/driver.yaml", "driver"),
    ] {
        let Some((played, _sw, sts)) = s3_irsa(template, TOKEN) else {
            return;
        };
        let seen = assert_ran(&played, JARS, &jars);
        assert_eq!(seen.args, args);
        let calls = sts.requests();
        assert!(!calls.is_empty(), "the STS was not asked");
        assert_eq!(calls[0].query["Action"], "AssumeRoleWithWebIdentity");
        assert_eq!(calls[0].query["RoleArn"], READER_ROLE_ARN);
        assert_eq!(calls[0].query["WebIdentityToken"], TOKEN);
    }
}

#[test]
fn s3_irsa_refused_token_stops_the_pod_before_spark() {
    let Some((played, _sw, _sts)) = s3_irsa("s3-irsa/executor.yaml", "a-revoked-token") else {
        return;
    };
    assert_stopped(&played, 3, "AccessDenied");
}

/// The GKE metadata server's token endpoint.
const GCE_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// Where the harness mounts its properties file (GKE needs none: see below).
const PLAY_CONF: &str = "/etc/spark-localizer-play";

/// The gcs-workload-identity executor on fake-gcs-server, its token from a stand-in of
/// the GKE metadata server (`GCE_METADATA_HOST`) answering `token` (a JSON body) or
/// `refuse` (a status).
fn gcs_workload_identity(token: Result<&str, u16>) -> Option<(Played, FakeGcs, FaultServer)> {
    let gcs = FakeGcs::start()?;
    for ((_, bytes), key) in jars().iter().zip([CELEBORN_KEY, JDBC_KEY]) {
        gcs.put(BUCKET, key, bytes);
    }
    let metadata = FaultServer::start();
    match token {
        Ok(body) => metadata.put(GCE_TOKEN_PATH, body),
        Err(status) => metadata.always(GCE_TOKEN_PATH, Fault::Status(status)),
    }
    let host = format!("127.0.0.1:{}", metadata.port());
    let identity = Identity {
        // On GKE, with no key file, the metadata server is the credential (rule 6 of
        // `cloud::gcs`); with an emulator's endpoint (STORAGE_EMULATOR_HOST) the default
        // is anonymous (rule 4), so the harness names the metadata server as GKE's
        // default would choose it: `fs.gs.auth.type=COMPUTE_ENGINE`, in a properties
        // file it mounts.
        volume: "play-properties".into(),
        injected_at: Some(PLAY_CONF.into()),
        files: vec![(
            "spark.conf".into(),
            "spark.hadoop.fs.gs.auth.type=COMPUTE_ENGINE\n".into(),
        )],
        env: vec![
            ("STORAGE_EMULATOR_HOST".into(), gcs.host()),
            ("GCE_METADATA_HOST".into(), host.clone()),
            ("GCE_METADATA_IP".into(), host),
            (
                "SPARK_LOCALIZER_PROPERTIES_FILE".into(),
                format!("{PLAY_CONF}/spark.conf"),
            ),
        ],
    };
    let played = Spec::new("gcs-workload-identity/executor.yaml")
        .identity(identity)
        .play()?;
    Some((played, gcs, metadata))
}

#[test]
fn gcs_workload_identity_executor_plays() {
    let jars = jars();
    let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (*n, &b[..])).collect();
    let body = r#"{"access_token":"ya29.pod-token","expires_in":3599,"token_type":"Bearer"}"#;
    let Some((played, _gcs, metadata)) = gcs_workload_identity(Ok(body)) else {
        return;
    };
    let seen = assert_ran(&played, JARS, &jars);
    assert_eq!(seen.args, "executor");
    let asked = metadata.requests_for(GCE_TOKEN_PATH);
    assert!(!asked.is_empty(), "the metadata server was not asked");
    assert_eq!(asked[0].header("metadata-flavor"), Some("Google"));
    assert!(!played.logs(&played.init()).contains("ya29.pod-token"));
}

#[test]
fn gcs_workload_identity_unbound_account_stops_the_pod_before_spark() {
    // The metadata server refuses: the service account has no workload identity binding.
    let Some((played, _gcs, _metadata)) = gcs_workload_identity(Err(403)) else {
        return;
    };
    assert_stopped(&played, 3, "metadata server");
}

/// Where AKS's webhook mounts the projected token, and the file it names.
const AZURE_TOKEN_DIR: &str = "/var/run/secrets/azure/tokens";
const AZURE_TENANT: &str = "tenant-1";

/// The azure-workload-identity executor on Azurite (HTTPS, OAuth), `token` in the
/// federated token file, exchanged at Entra ID's stand-in, which accepts only `TOKEN`
/// for the client id of the template's ServiceAccount.
fn azure_workload_identity(token: &str) -> Option<(Played, Azurite, EntraId)> {
    let pki = Pki::new();
    let az = Azurite::start_oauth(&pki)?;
    for ((_, bytes), key) in jars().iter().zip([CELEBORN_KEY, JDBC_KEY]) {
        az.put("libs", key, bytes);
    }
    let account = &documents("azure-workload-identity/serviceaccount.yaml")[0];
    let client_id = account["metadata"]["annotations"]["azure.workload.identity/client-id"]
        .as_str()
        .expect("the ServiceAccount names its client id")
        .to_owned();
    let entra = EntraId::start(AZURE_TENANT, &client_id, TOKEN);
    let identity = Identity {
        // What the webhook injects into every container of a pod labelled
        // azure.workload.identity/use: the projected token volume and the env naming it.
        volume: "azure-identity-token".into(),
        injected_at: Some(AZURE_TOKEN_DIR.into()),
        // Azurite's certificate is signed by the suite's CA (Azure's by a public one, in
        // the bundled roots): its PEM beside the token.
        files: vec![
            ("azure-identity-token".into(), token.into()),
            ("ca.pem".into(), pki.ca_pem.clone()),
        ],
        env: vec![
            ("AZURE_CLIENT_ID".into(), client_id),
            ("AZURE_TENANT_ID".into(), AZURE_TENANT.into()),
            (
                "AZURE_FEDERATED_TOKEN_FILE".into(),
                format!("{AZURE_TOKEN_DIR}/azure-identity-token"),
            ),
            ("AZURE_AUTHORITY_HOST".into(), entra.authority()),
            // Azurite's endpoint for the account (Azure's is the URI's host).
            ("AZURE_STORAGE_CONNECTION_STRING".into(), az.endpoint_only()),
            (
                "SPARK_LOCALIZER_CA_CERT".into(),
                format!("{AZURE_TOKEN_DIR}/ca.pem"),
            ),
        ],
    };
    let played = Spec::new("azure-workload-identity/executor.yaml")
        // Azurite has one account, its development account.
        .replace("@mysparklibs.", format!("@{}.", Azurite::ACCOUNT))
        .identity(identity)
        .play()?;
    Some((played, az, entra))
}

#[test]
fn azure_workload_identity_executor_plays() {
    let jars = jars();
    let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (*n, &b[..])).collect();
    let Some((played, _az, entra)) = azure_workload_identity(TOKEN) else {
        return;
    };
    let seen = assert_ran(&played, JARS, &jars);
    assert_eq!(seen.args, "executor");
    let asked = entra.requests();
    assert_eq!(asked.len(), 1, "one token for the pod: {asked:?}");
    assert_eq!(asked[0].query["client_assertion"], TOKEN);
    assert!(!played.logs(&played.init()).contains(TOKEN));
}

#[test]
fn azure_workload_identity_foreign_token_stops_the_pod_before_spark() {
    // A token no federated credential of the identity trusts (another cluster's issuer).
    let Some((played, _az, _entra)) = azure_workload_identity("eyJ.another-cluster.token") else {
        return;
    };
    assert_stopped(&played, 3, "AADSTS700213");
}
