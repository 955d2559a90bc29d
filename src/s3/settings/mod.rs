//! Where an S3 bucket's credentials, endpoint, region and addressing come from.
//!
//! Credentials, first match wins (the same order `check` prints):
//! 1. `--s3-credentials-dir` (a mounted Secret: `access-key`, `secret-key`,
//!    optional `session-token`; re-read on every request);
//! 2. the properties file: `spark.hadoop.fs.s3a.bucket.<bucket>.{access.key,
//!    secret.key,session.token}`, else `spark.hadoop.fs.s3a.{…}`; or anonymous when
//!    `fs.s3a.aws.credentials.provider` names `AnonymousAWSCredentialsProvider`;
//! 3. `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`);
//! 4. web identity / IRSA: `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`
//!    (STS at `AWS_ENDPOINT_URL_STS`, else `https://sts.<region>.amazonaws.com`);
//! 5. EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` +
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`; ECS: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`;
//! 6. the shared config files of a laptop: `~/.aws/credentials` and `~/.aws/config`,
//!    profile `AWS_PROFILE` (static keys or `credential_process`; see [`profile`]);
//! 7. EC2 instance metadata (the node's role).
//!
//! Endpoint: `fs.s3a.[bucket.<b>.]endpoint`, else `AWS_ENDPOINT_URL_S3`, else
//! `AWS_ENDPOINT_URL`, else AWS. Region: `fs.s3a.[bucket.<b>.]endpoint.region`,
//! else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`. Addressing:
//! `fs.s3a.[bucket.<b>.]path.style.access`, else `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`,
//! else path-style for a custom endpoint (as the AWS CLI does) and virtual-hosted for AWS.

mod credentials;
pub(crate) mod profile;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use url::Url;

pub(crate) use super::secret_dir::{
    has_control, ACCESS_KEY_FILE, SECRET_KEY_FILE, SESSION_TOKEN_FILE,
};
use crate::env_vars::aws;
use crate::origin::Origin;
use crate::properties::Properties;

/// The prefix of the Hadoop S3A keys in a Spark properties file.
pub(crate) const HADOOP_PREFIX: &str = "spark.hadoop.fs.s3a.";

/// Everything S3 configuration is made of: the flag, the properties file's S3A keys
/// and a snapshot of the `AWS_*` environment.
#[derive(Debug, Clone)]
pub(crate) struct S3Settings {
    pub credentials_dir: Option<(PathBuf, Origin)>,
    /// `spark.hadoop.fs.s3a.*` keys as written, with their values.
    hadoop: BTreeMap<String, String>,
    properties_path: PathBuf,
    env: BTreeMap<&'static str, String>,
    /// The shared config files' profile (read once; a problem is reported only
    /// when the chain gets to it).
    profile: Result<Option<profile::Profile>, String>,
}

impl Default for S3Settings {
    fn default() -> Self {
        S3Settings {
            credentials_dir: None,
            hadoop: BTreeMap::new(),
            properties_path: PathBuf::new(),
            env: BTreeMap::new(),
            profile: Ok(None),
        }
    }
}

/// How requests to one bucket are signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// Files re-read on every request.
    Dir(PathBuf),
    Static {
        key_id: String,
        secret: String,
        token: Option<String>,
    },
    WebIdentity {
        token_file: String,
        role_arn: String,
        session_name: Option<String>,
        sts_endpoint: Option<String>,
    },
    PodIdentity {
        full_uri: String,
        token_file: String,
    },
    EcsTask {
        relative_uri: String,
    },
    Instance {
        endpoint: Option<String>,
    },
    /// A shared profile's `credential_process`, run when the bucket is first used.
    Process {
        command: String,
    },
    Anonymous,
}

/// A bucket's resolved configuration.
#[derive(Debug, Clone)]
pub(crate) struct BucketConfig {
    pub bucket: String,
    /// The endpoint handed to object_store (with the bucket in the host when
    /// virtual-hosted on a custom endpoint); `None` for AWS's own.
    pub endpoint: Option<String>,
    /// The endpoint as users read it (`check`, errors).
    pub shown_endpoint: String,
    pub region: String,
    /// Where the region came from (`check`).
    pub region_origin: String,
    pub virtual_hosted: bool,
    pub allow_http: bool,
    pub credentials: Credentials,
    /// Where the credentials come from (names only, never values).
    pub credential_source: String,
    /// Each source of the credential chain, in order, and whether it is set,
    /// used or ignored (`check`).
    pub credential_chain: Vec<String>,
}

impl S3Settings {
    /// Collects the S3 inputs: the flag, the properties file and the environment.
    pub(crate) fn new(
        credentials_dir: Option<(PathBuf, Origin)>,
        props: Option<&Properties>,
    ) -> Self {
        let env = aws::ALL
            .iter()
            .filter_map(|&name| {
                let value = std::env::var(name).ok()?;
                let value = value.trim();
                (!value.is_empty()).then(|| (name, value.to_owned()))
            })
            .collect();
        Self::from_parts(credentials_dir, props, env)
    }

    fn from_parts(
        credentials_dir: Option<(PathBuf, Origin)>,
        props: Option<&Properties>,
        env: BTreeMap<&'static str, String>,
    ) -> Self {
        let hadoop: BTreeMap<String, String> = props
            .map(|p| {
                p.iter()
                    .filter(|(k, v)| k.starts_with(HADOOP_PREFIX) && !v.trim().is_empty())
                    .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        for (key, value) in &hadoop {
            if is_secret_key(key) {
                crate::util::redact::register_secret(value);
            }
        }
        for name in [aws::SECRET_ACCESS_KEY, aws::SESSION_TOKEN] {
            if let Some(v) = env.get(name) {
                crate::util::redact::register_secret(v);
            }
        }
        let files = profile::Files::locate(
            env.get(aws::SHARED_CREDENTIALS_FILE).map(String::as_str),
            env.get(aws::CONFIG_FILE).map(String::as_str),
            env.get(aws::HOME).map(String::as_str),
        );
        let profile = profile::Profile::load(&files, env.get(aws::PROFILE).map(String::as_str));
        S3Settings {
            credentials_dir,
            hadoop,
            properties_path: props
                .and_then(|p| p.path().map(Path::to_owned))
                .unwrap_or_default(),
            env,
            profile,
        }
    }

    fn env(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }

    /// An S3A key for `bucket`: the per-bucket override, else the global key.
    fn hadoop(&self, bucket: &str, suffix: &str) -> Option<(&str, Origin)> {
        [
            format!("{HADOOP_PREFIX}bucket.{bucket}.{suffix}"),
            format!("{HADOOP_PREFIX}{suffix}"),
        ]
        .into_iter()
        .find_map(|key| {
            let value = self.hadoop.get(&key)?;
            Some((
                value.as_str(),
                Origin::Properties {
                    path: self.properties_path.clone(),
                    key,
                },
            ))
        })
    }

    fn hadoop_bool(&self, bucket: &str, suffix: &str) -> Result<Option<bool>, String> {
        match self.hadoop(bucket, suffix) {
            None => Ok(None),
            Some((value, origin)) => parse_bool(value)
                .map(Some)
                .ok_or_else(|| format!("{origin}: '{value}' is not true or false")),
        }
    }

    /// Resolves `bucket`'s configuration; every problem found is returned.
    pub(crate) fn resolve(&self, bucket: &str) -> Result<BucketConfig, Vec<String>> {
        let mut problems = Vec::new();
        let ssl = self
            .hadoop_bool(bucket, "connection.ssl.enabled")
            .unwrap_or_else(|e| {
                problems.push(e);
                None
            })
            .unwrap_or(true);
        let allow_http_env = match self.env(aws::ALLOW_HTTP) {
            None => false,
            Some(v) => parse_bool(v).unwrap_or_else(|| {
                problems.push(format!("{}: '{v}' is not true or false", aws::ALLOW_HTTP));
                false
            }),
        };
        let endpoint = self.endpoint(bucket, ssl, allow_http_env, &mut problems);
        let (region, region_origin) = self.region(bucket);
        // Bucket names with dots do not fit a TLS wildcard certificate: path-style.
        let path_style = self
            .path_style(bucket, &mut problems)
            .unwrap_or(endpoint.is_some() || bucket.contains('.'));
        let addressing = addressing(
            bucket,
            endpoint.as_ref(),
            path_style,
            &region,
            &mut problems,
        );
        let (credentials, credential_source, credential_chain) = match self.credentials(bucket) {
            Ok((credentials, source, winner)) => {
                (credentials, source, self.explain(bucket, winner))
            }
            Err(e) => {
                problems.push(e);
                (Credentials::Anonymous, String::new(), Vec::new())
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(BucketConfig {
            bucket: bucket.to_owned(),
            endpoint: addressing.endpoint,
            shown_endpoint: addressing.display,
            region,
            region_origin,
            virtual_hosted: !path_style,
            allow_http: addressing.allow_http,
            credentials,
            credential_source,
            credential_chain,
        })
    }

    /// A custom endpoint: the S3A key (no scheme means https, or http when ssl is
    /// disabled; the default AWS endpoint spelled out means AWS), else
    /// `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (plain http only when allowed).
    fn endpoint(
        &self,
        bucket: &str,
        ssl: bool,
        allow_http_env: bool,
        problems: &mut Vec<String>,
    ) -> Option<(Url, Origin)> {
        if let Some((value, origin)) = self.hadoop(bucket, "endpoint") {
            let with_scheme = if value.contains("://") {
                value.to_owned()
            } else if ssl {
                format!("https://{value}")
            } else {
                format!("http://{value}")
            };
            return match parse_endpoint(&with_scheme) {
                Ok(url) if is_global_aws(&url) => None,
                Ok(url) => Some((url, origin)),
                Err(why) => {
                    problems.push(format!("{origin}: {why}"));
                    None
                }
            };
        }
        let (name, value) = [aws::ENDPOINT_URL_S3, aws::ENDPOINT_URL]
            .iter()
            .find_map(|&n| self.env(n).map(|v| (n, v)))?;
        match parse_endpoint(value) {
            Ok(url) if url.scheme() == "http" && !allow_http_env => {
                problems.push(format!(
                    "{name} is plain http ({value}); set {}=true to allow it, or use https",
                    aws::ALLOW_HTTP
                ));
                None
            }
            Ok(url) => Some((url, Origin::Env(name))),
            Err(why) => {
                problems.push(format!("{name}: {why}"));
                None
            }
        }
    }

    /// The region and where it came from: the S3A key, `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`, the shared profile's `region`, else `us-east-1`.
    fn region(&self, bucket: &str) -> (String, String) {
        self.hadoop(bucket, "endpoint.region")
            .map(|(v, o)| (v.to_owned(), o.to_string()))
            .or_else(|| {
                [aws::REGION, aws::DEFAULT_REGION]
                    .iter()
                    .find_map(|&n| self.env(n).map(|v| (v.to_owned(), n.to_owned())))
            })
            .or_else(|| {
                let profile = self.profile.as_ref().ok()?.as_ref()?;
                let (region, path) = profile.get("region")?;
                Some((
                    region.to_owned(),
                    format!("{} in {}", profile.label(), path.display()),
                ))
            })
            .unwrap_or_else(|| ("us-east-1".to_owned(), "default".to_owned()))
    }

    /// Path-style addressing when configured: the S3A key, else the opposite of
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`.
    fn path_style(&self, bucket: &str, problems: &mut Vec<String>) -> Option<bool> {
        match self.hadoop_bool(bucket, "path.style.access") {
            Ok(Some(v)) => Some(v),
            Ok(None) => {
                let v = self.env(aws::VIRTUAL_HOSTED_STYLE_REQUEST)?;
                match parse_bool(v) {
                    Some(virtual_hosted) => Some(!virtual_hosted),
                    None => {
                        problems.push(format!(
                            "{}: '{v}' is not true or false",
                            aws::VIRTUAL_HOSTED_STYLE_REQUEST
                        ));
                        None
                    }
                }
            }
            Err(e) => {
                problems.push(e);
                None
            }
        }
    }
}

/// How requests reach a bucket: the endpoint object_store is given, how `check`
/// shows it, and whether it is plain http.
struct Addressing {
    endpoint: Option<String>,
    display: String,
    allow_http: bool,
}

/// The bucket's addressing at a custom `endpoint` (path-style or virtual-hosted),
/// or at AWS in `region`.
fn addressing(
    bucket: &str,
    endpoint: Option<&(Url, Origin)>,
    path_style: bool,
    region: &str,
    problems: &mut Vec<String>,
) -> Addressing {
    let Some((url, origin)) = endpoint else {
        return Addressing {
            endpoint: None,
            display: if path_style {
                format!("https://s3.{region}.amazonaws.com (AWS, path-style)")
            } else {
                format!("https://{bucket}.s3.{region}.amazonaws.com (AWS)")
            },
            allow_http: false,
        };
    };
    let base = url.as_str().trim_end_matches('/').to_owned();
    let store_endpoint = if path_style {
        base.clone()
    } else {
        let mut u = url.clone();
        let host = format!("{bucket}.{}", url.host_str().unwrap_or_default());
        if u.set_host(Some(&host)).is_err() {
            problems.push(format!(
                "bucket '{bucket}' cannot be put in the endpoint's host name for virtual-hosted addressing; enable path-style access"
            ));
        }
        u.as_str().trim_end_matches('/').to_owned()
    };
    let display = format!(
        "{} ({}, {origin})",
        if path_style { &base } else { &store_endpoint },
        if path_style {
            "path-style"
        } else {
            "virtual-hosted"
        },
    );
    Addressing {
        endpoint: Some(store_endpoint),
        display,
        allow_http: url.scheme() == "http",
    }
}

/// The key name of a properties origin (for compact credential descriptions).
fn key_of(origin: &Origin) -> String {
    match origin {
        Origin::Properties { key, .. } => key.clone(),
        other => other.to_string(),
    }
}

fn is_secret_key(key: &str) -> bool {
    key.ends_with(".secret.key") || key.ends_with(".session.token")
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Some(true),
        "false" | "no" | "0" | "off" => Some(false),
        _ => None,
    }
}

fn parse_endpoint(value: &str) -> Result<Url, String> {
    let url = Url::parse(value).map_err(|e| format!("'{value}' is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("'{value}' is not an http(s) endpoint"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("'{value}' has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the endpoint must not hold credentials; use the S3 credential settings".into(),
        );
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "'{value}' has a path, query or fragment; give scheme://host[:port] only"
        ));
    }
    Ok(url)
}

/// Hadoop's default endpoint, spelled out: the same as none.
fn is_global_aws(url: &Url) -> bool {
    url.scheme() == "https" && url.host_str() == Some("s3.amazonaws.com")
}

/// The credentials Secret directory must hold the two required files.
pub(crate) fn check_credentials_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read the directory: {e}"))?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    for file in [ACCESS_KEY_FILE, SECRET_KEY_FILE] {
        std::fs::metadata(dir.join(file)).map_err(|e| {
            format!("no readable '{file}' ({e}); the Secret needs the keys {ACCESS_KEY_FILE} and {SECRET_KEY_FILE} (and optionally {SESSION_TOKEN_FILE})")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(props: &str, env: &[(&'static str, &str)]) -> S3Settings {
        let props = Properties::parse(props).unwrap();
        S3Settings::from_parts(
            None,
            Some(&props),
            env.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        )
    }

    #[test]
    fn properties_beat_env_and_buckets_override() {
        let s = settings(
            "spark.hadoop.fs.s3a.access.key=AK\nspark.hadoop.fs.s3a.secret.key=SK\n\
             spark.hadoop.fs.s3a.bucket.special.access.key=BK\nspark.hadoop.fs.s3a.bucket.special.secret.key=BS\n",
            &[(aws::ACCESS_KEY_ID, "EK"), (aws::SECRET_ACCESS_KEY, "ES")],
        );
        let c = s.resolve("plain").unwrap();
        assert!(matches!(c.credentials, Credentials::Static { ref key_id, .. } if key_id == "AK"));
        assert!(c
            .credential_source
            .contains("spark.hadoop.fs.s3a.access.key"));
        let c = s.resolve("special").unwrap();
        assert!(matches!(c.credentials, Credentials::Static { ref key_id, .. } if key_id == "BK"));
        assert!(!c.credential_source.contains("BS"));
    }

    #[test]
    fn env_then_web_identity_then_instance() {
        let token = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(token.path(), "eyJ.token\n").unwrap();
        let token = token.path().to_str().unwrap();
        let s = settings(
            "",
            &[(aws::ACCESS_KEY_ID, "EK"), (aws::SECRET_ACCESS_KEY, "ES")],
        );
        assert_eq!(
            s.resolve("b").unwrap().credential_source,
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        );
        let s = settings(
            "",
            &[
                (aws::WEB_IDENTITY_TOKEN_FILE, token),
                (aws::ROLE_ARN, "arn:aws:iam::1:role/r"),
            ],
        );
        assert!(matches!(
            s.resolve("b").unwrap().credentials,
            Credentials::WebIdentity { .. }
        ));
        let s = settings("", &[(aws::WEB_IDENTITY_TOKEN_FILE, token)]);
        assert!(s.resolve("b").unwrap_err()[0].contains("AWS_ROLE_ARN"));
        let s = settings("", &[]);
        assert!(matches!(
            s.resolve("b").unwrap().credentials,
            Credentials::Instance { .. }
        ));
        let s = settings("", &[(aws::ACCESS_KEY_ID, "EK")]);
        assert!(s.resolve("b").unwrap_err()[0].contains("set both"));
    }

    #[test]
    fn endpoints_and_addressing() {
        // Hadoop style: no scheme, ssl disabled, path style.
        let s = settings(
            "spark.hadoop.fs.s3a.endpoint=minio:9000\nspark.hadoop.fs.s3a.connection.ssl.enabled=false\n",
            &[],
        );
        let c = s.resolve("b").unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("http://minio:9000"));
        assert!(c.allow_http && !c.virtual_hosted);
        // Virtual-hosted on a custom endpoint puts the bucket in the host.
        let s = settings(
            "spark.hadoop.fs.s3a.endpoint=https://s3.example.com\nspark.hadoop.fs.s3a.path.style.access=false\n",
            &[],
        );
        let c = s.resolve("b").unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("https://b.s3.example.com"));
        assert!(c.virtual_hosted);
        // AWS defaults: virtual-hosted, region from env.
        let s = settings("", &[(aws::REGION, "eu-west-1")]);
        let c = s.resolve("b").unwrap();
        assert!(c.endpoint.is_none() && c.virtual_hosted);
        assert_eq!(c.region, "eu-west-1");
        // Plain http from the environment needs AWS_ALLOW_HTTP.
        let s = settings("", &[(aws::ENDPOINT_URL, "http://127.0.0.1:8333")]);
        assert!(s.resolve("b").unwrap_err()[0].contains("AWS_ALLOW_HTTP"));
        let s = settings(
            "",
            &[
                (aws::ENDPOINT_URL, "http://127.0.0.1:8333"),
                (aws::ALLOW_HTTP, "true"),
            ],
        );
        assert_eq!(
            s.resolve("b").unwrap().endpoint.as_deref(),
            Some("http://127.0.0.1:8333")
        );
        // Per-bucket endpoint and region.
        let s = settings(
            "spark.hadoop.fs.s3a.bucket.x.endpoint=http://x:1\nspark.hadoop.fs.s3a.bucket.x.endpoint.region=r1\n",
            &[],
        );
        let c = s.resolve("x").unwrap();
        assert_eq!(
            (c.endpoint.as_deref(), c.region.as_str()),
            (Some("http://x:1"), "r1")
        );
        assert!(s.resolve("y").unwrap().endpoint.is_none());
    }

    #[test]
    fn bad_values_are_named() {
        let s = settings(
            "spark.hadoop.fs.s3a.path.style.access=maybe\nspark.hadoop.fs.s3a.endpoint=http://h/p\nspark.hadoop.fs.s3a.access.key=A\n",
            &[],
        );
        let problems = s.resolve("b").unwrap_err().join("\n");
        assert!(problems.contains("path.style.access"), "{problems}");
        assert!(problems.contains("has a path"), "{problems}");
        assert!(problems.contains("no secret.key"), "{problems}");
    }

    #[test]
    fn anonymous_provider() {
        let s = settings(
            "spark.hadoop.fs.s3a.aws.credentials.provider=org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider\n",
            &[(aws::ACCESS_KEY_ID, "EK"), (aws::SECRET_ACCESS_KEY, "ES")],
        );
        assert_eq!(s.resolve("b").unwrap().credentials, Credentials::Anonymous);
    }

    #[test]
    fn hostile_values_are_configuration_errors() {
        let token = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(token.path(), "eyJ.token\n").unwrap();
        let token = token.path().to_str().unwrap();
        let empty = tempfile::NamedTempFile::new().unwrap();
        let empty = empty.path().to_str().unwrap();
        for (env, why) in [
            (
                vec![
                    (aws::ENDPOINT_URL, "http://127.0.0.1:1#frag"),
                    (aws::ALLOW_HTTP, "true"),
                ],
                "fragment",
            ),
            (
                vec![
                    (aws::WEB_IDENTITY_TOKEN_FILE, token),
                    (aws::ROLE_ARN, "arn:aws:iam::1:role/r"),
                    (aws::ENDPOINT_URL_STS, "http://sts.local"),
                ],
                "must be https",
            ),
            (vec![(aws::SESSION_TOKEN, "tok")], "belongs to a key pair"),
            // An empty web identity token is refused, as every empty credential
            // file is (issue 15), not sent to STS.
            (
                vec![
                    (aws::WEB_IDENTITY_TOKEN_FILE, empty),
                    (aws::ROLE_ARN, "arn:aws:iam::1:role/r"),
                ],
                "the token file is empty",
            ),
            (
                vec![
                    (aws::ACCESS_KEY_ID, "AK"),
                    (aws::SECRET_ACCESS_KEY, "SK"),
                    (aws::SESSION_TOKEN, "to\nken"),
                ],
                "AWS_SESSION_TOKEN contains a control character",
            ),
        ] {
            let env: Vec<(&'static str, &str)> = env;
            let e = settings("", &env).resolve("bkt").unwrap_err().join("\n");
            assert!(e.contains(why), "{why}: {e}");
            assert!(!e.contains("to\nken"), "{e}");
        }
        let s = settings(
            "spark.hadoop.fs.s3a.endpoint=h:1#x\nspark.hadoop.fs.s3a.bucket.bkt.secret.key=S\n",
            &[],
        );
        let e = s.resolve("bkt").unwrap_err().join("\n");
        assert!(
            e.contains("fragment") && e.contains("fs.s3a.bucket.bkt.access.key"),
            "{e}"
        );
    }

    #[test]
    fn a_credentials_dir_must_hold_usable_files() {
        let dir = tempfile::tempdir().unwrap();
        let with_dir = |d: &Path| {
            S3Settings::from_parts(
                Some((d.to_owned(), Origin::Flag("s3-credentials-dir"))),
                None,
                BTreeMap::new(),
            )
            .resolve("bkt")
        };
        assert!(with_dir(dir.path()).unwrap_err()[0].contains("no readable 'access-key'"));
        std::fs::write(dir.path().join(ACCESS_KEY_FILE), "").unwrap();
        std::fs::write(dir.path().join(SECRET_KEY_FILE), "S").unwrap();
        assert!(with_dir(dir.path()).unwrap_err()[0].contains("empty"));
        std::fs::write(dir.path().join(ACCESS_KEY_FILE), "A\u{1}B").unwrap();
        assert!(with_dir(dir.path()).unwrap_err()[0].contains("control character"));
        std::fs::write(dir.path().join(ACCESS_KEY_FILE), "AK\n").unwrap();
        assert_eq!(
            with_dir(dir.path()).unwrap().credentials,
            Credentials::Dir(dir.path().to_owned())
        );
    }
}
