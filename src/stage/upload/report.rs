//! What `stage upload` prints on stdout: one JSON line per bundle, or a Kubernetes
//! Secret manifest in the layout the apache-spark-on-k8s init container reads
//! ([`SECRET_MOUNT_PATH`]), with the Spark properties and the mount that go with it
//! as comments.

use serde::Serialize;

use super::{UploadError, Uploaded};
use crate::cli::StageKind;
use crate::stage::api::{FILES_SECRET_KEY, JARS_SECRET_KEY, SECRET_MOUNT_PATH};

/// The JSON printed on stdout (field order as documented).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'a> {
    resource_id: &'a str,
    resource_secret: &'a str,
    server: &'a str,
    kind: &'a str,
    files: Vec<&'a str>,
    sha256: &'a str,
}

/// One JSON line per uploaded bundle.
pub(super) fn json_lines(server: &str, uploaded: &[Uploaded]) -> Result<String, UploadError> {
    let mut out = String::new();
    for bundle in uploaded {
        let printed = Printed {
            resource_id: &bundle.submitted.resource_id,
            resource_secret: &bundle.submitted.resource_secret,
            server,
            kind: bundle.kind.name(),
            files: bundle.names.iter().map(String::as_str).collect(),
            sha256: &bundle.bundled.sha256,
        };
        let json = serde_json::to_string(&printed).map_err(UploadError::Print)?;
        out.push_str(&json);
        out.push('\n');
    }
    Ok(out)
}

/// A Kubernetes Secret holding each resource secret under the key the init container
/// reads, then (as YAML comments) the properties and the mount that go with them.
pub(super) fn secret_manifest(
    name: &str,
    namespace: Option<&str>,
    server: &str,
    uploaded: &[Uploaded],
) -> String {
    let key_of = |kind: StageKind| match kind {
        StageKind::Jars => (JARS_SECRET_KEY, "Jars"),
        StageKind::Files => (FILES_SECRET_KEY, "Files"),
    };
    // JSON strings are YAML double-quoted scalars.
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let mut yaml = String::new();
    yaml.push_str("apiVersion: v1\nkind: Secret\nmetadata:\n");
    yaml.push_str(&format!("  name: {name}\n"));
    if let Some(ns) = namespace {
        yaml.push_str(&format!("  namespace: {ns}\n"));
    }
    yaml.push_str("type: Opaque\nstringData:\n");
    for bundle in uploaded {
        let (key, _) = key_of(bundle.kind);
        yaml.push_str(&format!(
            "  {key}: {}\n",
            quoted(&bundle.submitted.resource_secret)
        ));
    }
    for bundle in uploaded {
        yaml.push_str(&format!(
            "# Staged on {} as resource {} ({}): {} file(s), bundle sha256 {}:\n",
            one_line(server),
            bundle.submitted.resource_id,
            bundle.kind.name(),
            bundle.names.len(),
            bundle.bundled.sha256
        ));
        for file in &bundle.names {
            yaml.push_str(&format!("#   {}\n", one_line(file)));
        }
    }
    yaml.push_str(&format!(
        "# Spark properties for the driver and executors (spark-submit --conf or the pod template):\n\
         #   spark.kubernetes.resourceStagingServer.uri={server}\n\
         #   spark.kubernetes.resourceStagingServer.internal.uri={server}   (if pods reach it at another URL, put that here)\n",
        server = one_line(server),
    ));
    for bundle in uploaded {
        let (key, which) = key_of(bundle.kind);
        yaml.push_str(&format!(
            "#   spark.kubernetes.initcontainer.download{which}ResourceIdentifier={id}\n\
             #   spark.kubernetes.initcontainer.download{which}SecretLocation={SECRET_MOUNT_PATH}/{key}\n",
            id = bundle.submitted.resource_id,
        ));
    }
    yaml.push_str(&format!(
        "# Mount this Secret in the init container at {SECRET_MOUNT_PATH}:\n\
         #   volumes:      [{{ name: spark-init-secret, secret: {{ secretName: {name} }} }}]\n\
         #   volumeMounts: [{{ name: spark-init-secret, mountPath: {SECRET_MOUNT_PATH}, readOnly: true }}]\n"
    ));
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::api::SubmittedResource;
    use crate::stage::upload::bundle::Bundled;

    #[test]
    fn manifest_layout() {
        let uploaded = |kind, id: &str, secret: &str, names: &[&str]| Uploaded {
            kind,
            submitted: SubmittedResource {
                resource_id: id.into(),
                resource_secret: secret.into(),
            },
            bundled: Bundled {
                sha256: "ab".repeat(32),
                bytes: 10,
            },
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        let files = uploaded(
            StageKind::Files,
            "0123456789abcdef0123456789abcdef",
            "-s3cr3t_value",
            &["a.txt"],
        );
        let y = secret_manifest("app-init", Some("spark"), "https://stage:10000", &[files]);
        assert!(y.starts_with("apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-init\n  namespace: spark\ntype: Opaque\nstringData:\n  downloadSubmittedFilesSecret: \"-s3cr3t_value\"\n"), "{y}");
        assert!(y.contains(
            "#   spark.kubernetes.initcontainer.downloadFilesResourceIdentifier=0123456789abcdef0123456789abcdef\n"
        ));
        assert!(y.contains("#   spark.kubernetes.resourceStagingServer.uri=https://stage:10000\n"));
        assert!(y.contains("/mnt/secrets/spark-init/downloadSubmittedFilesSecret"));
        let jars = uploaded(StageKind::Jars, "1".repeat(32).as_str(), "j", &[]);
        let files = uploaded(StageKind::Files, "2".repeat(32).as_str(), "f", &["x"]);
        let both = secret_manifest("x", None, "http://s", &[jars, files]);
        assert!(!both.contains("namespace:"));
        assert!(both.contains("stringData:\n  downloadSubmittedJarsSecret: \"j\"\n  downloadSubmittedFilesSecret: \"f\"\n"), "{both}");
        assert!(both.contains(&format!(
            "downloadJarsResourceIdentifier={}\n",
            "1".repeat(32)
        )));
        assert!(both.contains(&format!(
            "downloadFilesResourceIdentifier={}\n",
            "2".repeat(32)
        )));
        assert_eq!(both.matches("apiVersion").count(), 1);
    }
}
