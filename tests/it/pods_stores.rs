//! The object-store pod templates play as pods (issue 38): s3-irsa, gcs-workload-identity,
//! azure-workload-identity, each against the suite's server for its store (SeaweedFS,
//! fake-gcs-server, Azurite) with the workload identity played by the suite's stand-ins
//! (`support::kube::Identity`: the projected token as a ConfigMap, the stand-ins'
//! endpoints in the init container's env). See `pods.rs` for what is asserted.

use crate::pods::{assert_ran, assert_stopped, CELEBORN_JAR, JARS};
use crate::support::aws_creds::{Sts, READER_ROLE_ARN};
use crate::support::data;
use crate::support::kube::{Identity, Played, Spec};
use crate::support::pki::Pki;
use crate::support::seaweed::Seaweed;

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
