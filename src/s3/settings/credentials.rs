//! The credential chain of a bucket, in order (the first source configured wins;
//! a source configured wrongly is an error, not a reason to try the next):
//! the `--s3-credentials-dir` Secret directory, S3A's anonymous provider, the S3A
//! key pair of the properties file, the AWS key pair of the environment, web
//! identity (IRSA), EKS Pod Identity, the ECS task role, the shared config files'
//! profile, then the EC2 instance metadata service. [`S3Settings::explain`] says,
//! for `check`, which sources are set and which one is used.

use std::path::Path;

use super::{check_credentials_dir, has_control, key_of, parse_endpoint, Credentials, S3Settings};
use crate::env_vars::aws;

/// A source of the chain: `Ok(None)` when it is not configured (the next is
/// tried), else the credentials and a description naming where they come from.
type Step = Result<Option<(Credentials, String)>, String>;

/// The sources of the chain, in order, as `check` names them.
const CHAIN: [&str; 9] = [
    "--s3-credentials-dir",
    "S3A anonymous provider",
    "S3A keys (properties)",
    "AWS_* keys",
    "web identity (IRSA)",
    "EKS Pod Identity",
    "ECS task role",
    "shared config files",
    "EC2 instance metadata",
];

impl S3Settings {
    /// Picks the credential source of `bucket`: the first of the chain that is
    /// configured; also its place in [`CHAIN`]. The sources after it are not
    /// looked at.
    pub(super) fn credentials(&self, bucket: &str) -> Result<(Credentials, String, usize), String> {
        let steps: [&dyn Fn() -> Step; 8] = [
            &|| self.secret_dir(),
            &|| self.anonymous(bucket),
            &|| self.s3a_keys(bucket),
            &|| self.aws_keys(),
            &|| self.web_identity(),
            &|| self.pod_identity(),
            &|| self.ecs_task(),
            &|| self.shared_profile(),
        ];
        for (i, step) in steps.iter().enumerate() {
            if let Some((credentials, source)) = step()? {
                return Ok((credentials, source, i));
            }
        }
        let (credentials, source) = self.instance_metadata();
        Ok((credentials, source, CHAIN.len() - 1))
    }

    /// For `check`: each source of the chain, in order, with what of it is set,
    /// and which one is used (`winner`, its place in [`CHAIN`]).
    pub(super) fn explain(&self, bucket: &str, winner: usize) -> Vec<String> {
        let set = self.what_is_set(bucket);
        CHAIN
            .iter()
            .zip(set)
            .enumerate()
            .map(|(i, (label, set))| {
                let state = match (i.cmp(&winner), set.is_empty()) {
                    (std::cmp::Ordering::Equal, _) => "USED".to_owned(),
                    (_, true) if i == CHAIN.len() - 1 => "not used (the last resort)".to_owned(),
                    (_, true) => "not set".to_owned(),
                    (std::cmp::Ordering::Greater, false) => {
                        format!(
                            "set ({}), ignored: a source before it is used",
                            set.join(", ")
                        )
                    }
                    // Set but passed over: set without what it needs to be used.
                    (std::cmp::Ordering::Less, false) => {
                        format!("incomplete, not used ({})", set.join(", "))
                    }
                };
                format!("{}. {label:<24} {state}", i + 1)
            })
            .collect()
    }

    /// What of each source of [`CHAIN`] is set (names of variables, keys, files;
    /// never values).
    fn what_is_set(&self, bucket: &str) -> [Vec<String>; 9] {
        let env = |names: &[&'static str]| -> Vec<String> {
            names
                .iter()
                .filter(|n| self.env(n).is_some())
                .map(|n| (*n).to_owned())
                .collect()
        };
        let hadoop = |suffixes: &[&str]| -> Vec<String> {
            suffixes
                .iter()
                .filter_map(|suffix| self.hadoop(bucket, suffix))
                .map(|(_, origin)| super::key_of(&origin))
                .collect()
        };
        let anonymous = self
            .hadoop(bucket, "aws.credentials.provider")
            .filter(|(providers, _)| providers.contains("AnonymousAWSCredentialsProvider"))
            .map(|(_, origin)| vec![super::key_of(&origin)])
            .unwrap_or_default();
        let profile = match &self.profile {
            Ok(Some(p)) if p.has_credentials() => vec![p.label()],
            Ok(_) => Vec::new(),
            Err(e) => vec![e.clone()],
        };
        [
            self.credentials_dir
                .iter()
                .map(|(dir, origin)| format!("{origin} {}", dir.display()))
                .collect(),
            anonymous,
            hadoop(&["access.key", "secret.key", "session.token"]),
            env(&[
                aws::ACCESS_KEY_ID,
                aws::SECRET_ACCESS_KEY,
                aws::SESSION_TOKEN,
            ]),
            env(&[aws::WEB_IDENTITY_TOKEN_FILE, aws::ROLE_ARN]),
            env(&[
                aws::CONTAINER_CREDENTIALS_FULL_URI,
                aws::CONTAINER_AUTHORIZATION_TOKEN_FILE,
            ]),
            env(&[aws::CONTAINER_CREDENTIALS_RELATIVE_URI]),
            profile,
            env(&[aws::EC2_METADATA_SERVICE_ENDPOINT]),
        ]
    }

    fn secret_dir(&self) -> Step {
        let Some((dir, origin)) = &self.credentials_dir else {
            return Ok(None);
        };
        check_credentials_dir(dir).map_err(|e| format!("{origin} {}: {e}", dir.display()))?;
        if let Err(e) = crate::s3::secret_dir::SecretDir::new(dir).load() {
            return Err(format!("{origin}: {e}"));
        }
        Ok(Some((
            Credentials::Dir(dir.clone()),
            format!("Secret directory {} ({origin})", dir.display()),
        )))
    }

    fn anonymous(&self, bucket: &str) -> Step {
        Ok(self
            .hadoop(bucket, "aws.credentials.provider")
            .filter(|(providers, _)| providers.contains("AnonymousAWSCredentialsProvider"))
            .map(|(_, origin)| (Credentials::Anonymous, format!("anonymous ({origin})"))))
    }

    /// `spark.hadoop.fs.s3a[.bucket.<bucket>].{access,secret}.key` (and session token).
    fn s3a_keys(&self, bucket: &str) -> Step {
        let key = self.hadoop(bucket, "access.key");
        let secret = self.hadoop(bucket, "secret.key");
        let token = self.hadoop(bucket, "session.token");
        let ((key_id, key_origin), (secret, secret_origin)) = match (key, secret) {
            (Some(key), Some(secret)) => (key, secret),
            (Some((_, origin)), None) => {
                return Err(format!(
                    "{origin} is set but no secret.key is: set spark.hadoop.fs.s3a.bucket.{bucket}.secret.key or spark.hadoop.fs.s3a.secret.key too"
                ))
            }
            (None, Some((_, origin))) => {
                return Err(format!(
                    "{origin} is set but no access.key is: set spark.hadoop.fs.s3a.bucket.{bucket}.access.key or spark.hadoop.fs.s3a.access.key too"
                ))
            }
            (None, None) => {
                return match token {
                    Some((_, origin)) => Err(format!(
                        "{origin} is set without an access.key and secret.key; a session token belongs to a key pair"
                    )),
                    None => Ok(None),
                }
            }
        };
        for (value, origin) in [(key_id, &key_origin), (secret, &secret_origin)]
            .into_iter()
            .chain(token.as_ref().map(|(v, o)| (*v, o)))
        {
            if has_control(value) {
                return Err(format!(
                    "{origin} contains a control character (a stray line break?)"
                ));
            }
        }
        let mut source = format!("{key_origin} and {}", key_of(&secret_origin));
        if let Some((_, origin)) = &token {
            source.push_str(&format!(" and {}", key_of(origin)));
        }
        Ok(Some((
            Credentials::Static {
                key_id: key_id.to_owned(),
                secret: secret.to_owned(),
                token: token.map(|(t, _)| t.to_owned()),
            },
            source,
        )))
    }

    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`).
    fn aws_keys(&self) -> Step {
        let (key_id, secret) = match (
            self.env(aws::ACCESS_KEY_ID),
            self.env(aws::SECRET_ACCESS_KEY),
        ) {
            (Some(key_id), Some(secret)) => (key_id, secret),
            (Some(_), None) | (None, Some(_)) => {
                return Err(format!(
                    "only one of {} and {} is set; set both",
                    aws::ACCESS_KEY_ID,
                    aws::SECRET_ACCESS_KEY
                ))
            }
            (None, None) if self.env(aws::SESSION_TOKEN).is_some() => {
                return Err(format!(
                    "{} is set without {} and {}; a session token belongs to a key pair",
                    aws::SESSION_TOKEN,
                    aws::ACCESS_KEY_ID,
                    aws::SECRET_ACCESS_KEY
                ))
            }
            (None, None) => return Ok(None),
        };
        let token = self.env(aws::SESSION_TOKEN).map(str::to_owned);
        for (name, value) in [
            (aws::ACCESS_KEY_ID, Some(key_id)),
            (aws::SECRET_ACCESS_KEY, Some(secret)),
            (aws::SESSION_TOKEN, token.as_deref()),
        ] {
            if value.is_some_and(has_control) {
                return Err(format!(
                    "{name} contains a control character (a stray line break?)"
                ));
            }
        }
        let source = if token.is_some() {
            format!(
                "{}, {} and {}",
                aws::ACCESS_KEY_ID,
                aws::SECRET_ACCESS_KEY,
                aws::SESSION_TOKEN
            )
        } else {
            format!("{} and {}", aws::ACCESS_KEY_ID, aws::SECRET_ACCESS_KEY)
        };
        Ok(Some((
            Credentials::Static {
                key_id: key_id.to_owned(),
                secret: secret.to_owned(),
                token,
            },
            source,
        )))
    }

    /// IRSA: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`, exchanged with STS.
    fn web_identity(&self) -> Step {
        let Some(token_file) = self.env(aws::WEB_IDENTITY_TOKEN_FILE) else {
            return Ok(None);
        };
        let Some(role_arn) = self.env(aws::ROLE_ARN) else {
            return Err(format!(
                "{} is set but {} is not; IRSA sets both (check the service account's eks.amazonaws.com/role-arn annotation)",
                aws::WEB_IDENTITY_TOKEN_FILE,
                aws::ROLE_ARN
            ));
        };
        match crate::util::fs::read_config_text(Path::new(token_file)) {
            Ok(token) if token.trim().is_empty() => {
                return Err(format!(
                    "{}={token_file}: the token file is empty; the projected service-account token belongs there (check the pod's service account and its eks.amazonaws.com/role-arn annotation)",
                    aws::WEB_IDENTITY_TOKEN_FILE
                ))
            }
            // The token is a bearer credential: never in any output.
            Ok(token) => crate::util::redact::register_secret(token.trim()),
            Err(e) => {
                return Err(format!(
                    "{}={token_file}: cannot read the token file: {e}",
                    aws::WEB_IDENTITY_TOKEN_FILE
                ))
            }
        }
        let sts = self.env(aws::ENDPOINT_URL_STS).map(str::to_owned);
        if let Some(sts) = &sts {
            match parse_endpoint(sts) {
                Ok(url) if url.scheme() == "https" => {}
                Ok(_) => {
                    return Err(format!(
                        "{} must be https: the web identity token is a bearer credential",
                        aws::ENDPOINT_URL_STS
                    ))
                }
                Err(why) => return Err(format!("{}: {why}", aws::ENDPOINT_URL_STS)),
            }
        }
        let source = format!(
            "web identity (IRSA): {}={token_file}, {}={role_arn}, STS {}",
            aws::WEB_IDENTITY_TOKEN_FILE,
            aws::ROLE_ARN,
            sts.as_deref()
                .unwrap_or("https://sts.<region>.amazonaws.com")
        );
        Ok(Some((
            Credentials::WebIdentity {
                token_file: token_file.to_owned(),
                role_arn: role_arn.to_owned(),
                session_name: self.env(aws::ROLE_SESSION_NAME).map(str::to_owned),
                sts_endpoint: sts,
            },
            source,
        )))
    }

    /// EKS Pod Identity: the agent's URI and the token file it checks.
    fn pod_identity(&self) -> Step {
        let Some(full_uri) = self.env(aws::CONTAINER_CREDENTIALS_FULL_URI) else {
            return Ok(None);
        };
        let Some(token_file) = self.env(aws::CONTAINER_AUTHORIZATION_TOKEN_FILE) else {
            return Err(format!(
                "{} is set but {} is not; EKS Pod Identity sets both",
                aws::CONTAINER_CREDENTIALS_FULL_URI,
                aws::CONTAINER_AUTHORIZATION_TOKEN_FILE
            ));
        };
        // object_store reads the file itself, on a blocking thread: a fifo would
        // hang it for good. Checked here, as every credential file is.
        match crate::util::fs::read_config_text(Path::new(token_file)) {
            Ok(token) if token.trim().is_empty() => {
                return Err(format!(
                    "{}={token_file}: the token file is empty; the EKS Pod Identity token belongs there",
                    aws::CONTAINER_AUTHORIZATION_TOKEN_FILE
                ))
            }
            Ok(token) => crate::util::redact::register_secret(token.trim()),
            Err(e) => {
                return Err(format!(
                    "{}={token_file}: cannot read the token file: {e}",
                    aws::CONTAINER_AUTHORIZATION_TOKEN_FILE
                ))
            }
        }
        Ok(Some((
            Credentials::PodIdentity {
                full_uri: full_uri.to_owned(),
                token_file: token_file.to_owned(),
            },
            format!(
                "EKS Pod Identity: {}={full_uri}, {}={token_file}",
                aws::CONTAINER_CREDENTIALS_FULL_URI,
                aws::CONTAINER_AUTHORIZATION_TOKEN_FILE
            ),
        )))
    }

    fn ecs_task(&self) -> Step {
        Ok(self
            .env(aws::CONTAINER_CREDENTIALS_RELATIVE_URI)
            .map(|relative_uri| {
                (
                    Credentials::EcsTask {
                        relative_uri: relative_uri.to_owned(),
                    },
                    format!(
                        "ECS task role ({})",
                        aws::CONTAINER_CREDENTIALS_RELATIVE_URI
                    ),
                )
            }))
    }

    /// The shared config files' profile: its static keys, or what its
    /// `credential_process` prints (run when needed). Profiles that assume a role or use
    /// SSO are refused with the command that turns them into keys.
    fn shared_profile(&self) -> Step {
        let profile = match &self.profile {
            Ok(Some(profile)) => profile,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.clone()),
        };
        let label = profile.label();
        let export = format!(
            "eval \"$(aws configure export-credentials --profile {} --format env)\"",
            profile.name
        );
        let key_id = profile.get("aws_access_key_id");
        let secret = profile.get("aws_secret_access_key");
        if let (Some((key_id, path)), Some((secret, _))) = (key_id, secret) {
            if has_control(key_id) || has_control(secret) {
                return Err(format!(
                    "{label} in {}: a key contains a control character",
                    path.display()
                ));
            }
            let token = profile.get("aws_session_token").map(|(t, _)| t.to_owned());
            return Ok(Some((
                Credentials::Static {
                    key_id: key_id.to_owned(),
                    secret: secret.to_owned(),
                    token,
                },
                format!(
                    "{label} in {} (shared config files: aws_access_key_id and aws_secret_access_key)",
                    path.display()
                ),
            )));
        }
        if let Some((_, path)) = key_id.or(secret) {
            return Err(format!(
                "{label} in {} has only one of aws_access_key_id and aws_secret_access_key; set both",
                path.display()
            ));
        }
        if let Some((command, path)) = profile.get("credential_process") {
            return Ok(Some((
                Credentials::Process {
                    command: command.to_owned(),
                },
                format!(
                    "{label} in {} (shared config files: credential_process, run when the bucket is first used)",
                    path.display()
                ),
            )));
        }
        for (key, what) in [
            ("sso_session", "signs in with IAM Identity Center (SSO)"),
            ("sso_start_url", "signs in with IAM Identity Center (SSO)"),
            ("role_arn", "assumes a role"),
        ] {
            if let Some((_, path)) = profile.get(key) {
                return Err(format!(
                    "{label} in {} {what}, which spark-localizer does not do; turn it into keys first: {export}",
                    path.display()
                ));
            }
        }
        Ok(None)
    }

    /// The last resort: the EC2 instance metadata service.
    fn instance_metadata(&self) -> (Credentials, String) {
        let endpoint = self
            .env(aws::EC2_METADATA_SERVICE_ENDPOINT)
            .map(str::to_owned);
        (
            Credentials::Instance {
                endpoint: endpoint.clone(),
            },
            format!(
                "EC2 instance metadata at {} (no other S3 credentials are configured)",
                endpoint.as_deref().unwrap_or("http://169.254.169.254")
            ),
        )
    }
}
