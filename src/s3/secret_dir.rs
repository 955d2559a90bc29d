//! Credentials from a mounted Kubernetes Secret directory, read on every request
//! so a rotated Secret (the kubelet swaps the files in place) is picked up by the
//! next retry without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use object_store::aws::AwsCredential;
use object_store::CredentialProvider;

/// The files of a credentials Secret directory.
pub(crate) const ACCESS_KEY_FILE: &str = "access-key";
pub(crate) const SECRET_KEY_FILE: &str = "secret-key";
pub(crate) const SESSION_TOKEN_FILE: &str = "session-token";

/// A credential with a control character cannot go into a request header.
pub(crate) fn has_control(value: &str) -> bool {
    value.chars().any(char::is_control)
}

/// A credentials Secret directory: `access-key`, `secret-key`, optionally
/// `session-token`.
#[derive(Debug)]
pub(crate) struct SecretDir {
    dir: PathBuf,
}

/// A credential file that cannot be read: names the file, never its content.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the S3 credential file {}: {reason}", path.display())]
pub(crate) struct SecretDirError {
    pub path: PathBuf,
    pub reason: String,
}

impl SecretDir {
    pub(crate) fn new(dir: &Path) -> Self {
        SecretDir {
            dir: dir.to_owned(),
        }
    }

    fn read(&self, name: &str, required: bool) -> Result<Option<String>, SecretDirError> {
        let path = self.dir.join(name);
        match crate::util::fs::read_config_text(&path) {
            Ok(text) => {
                let value = text.trim().to_owned();
                if value.is_empty() {
                    return if required {
                        Err(SecretDirError {
                            path,
                            reason: "the file is empty".into(),
                        })
                    } else {
                        Ok(None)
                    };
                }
                crate::util::redact::register_secret(&value);
                if has_control(&value) {
                    return Err(SecretDirError {
                        path,
                        reason: "it contains a control character (a stray line break?)".into(),
                    });
                }
                Ok(Some(value))
            }
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SecretDirError {
                path,
                reason: e.to_string(),
            }),
        }
    }

    /// The credential as the files hold it now.
    pub(crate) fn load(&self) -> Result<AwsCredential, SecretDirError> {
        let key_id = self.read(ACCESS_KEY_FILE, true)?.unwrap_or_default();
        let secret_key = self.read(SECRET_KEY_FILE, true)?.unwrap_or_default();
        let token = self.read(SESSION_TOKEN_FILE, false)?;
        Ok(AwsCredential {
            key_id,
            secret_key,
            token,
        })
    }
}

#[async_trait]
impl CredentialProvider for SecretDir {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.load()
            .map(Arc::new)
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rotated_files_each_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ACCESS_KEY_FILE), "AK1\n").unwrap();
        std::fs::write(dir.path().join(SECRET_KEY_FILE), "SK1\n").unwrap();
        let p = SecretDir::new(dir.path());
        let c = p.load().unwrap();
        assert_eq!((c.key_id.as_str(), c.secret_key.as_str()), ("AK1", "SK1"));
        assert!(c.token.is_none());
        std::fs::write(dir.path().join(SECRET_KEY_FILE), "SK2").unwrap();
        std::fs::write(dir.path().join(SESSION_TOKEN_FILE), "T2").unwrap();
        let c = p.load().unwrap();
        assert_eq!(
            (c.secret_key.as_str(), c.token.as_deref()),
            ("SK2", Some("T2"))
        );
        std::fs::remove_file(dir.path().join(ACCESS_KEY_FILE)).unwrap();
        let e = p.load().unwrap_err().to_string();
        assert!(e.contains("access-key") && !e.contains("SK2"), "{e}");
    }
}
