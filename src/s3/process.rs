//! A shared profile's `credential_process`, as object_store's credential
//! provider: run through `sh -c` when the bucket is first used (stdin closed), in
//! a process group of its own that is killed whole when the run no longer waits
//! for it (the deadline, a stop, the time limit), its `Version: 1` JSON read as
//! the AWS CLI reads it, the keys kept for the rest of the run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::aws::AwsCredential;
use tokio::io::AsyncReadExt;
use tokio::sync::OnceCell;

/// The most output read from the process.
const MAX_OUTPUT: u64 = 64 << 10;

/// Why the process gave no credentials.
#[derive(Debug, thiserror::Error)]
#[error("credential_process: {0}")]
pub(crate) struct ProcessError(pub String);

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Output {
    version: u32,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

/// The provider: the command, and its keys once it gave them.
#[derive(Debug)]
pub(crate) struct Process {
    command: String,
    keys: OnceCell<Arc<AwsCredential>>,
}

impl Process {
    pub(crate) fn new(command: &str) -> Self {
        Process {
            command: command.to_owned(),
            keys: OnceCell::new(),
        }
    }
}

#[async_trait]
impl object_store::CredentialProvider for Process {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.keys
            .get_or_try_init(|| async { run(&self.command).await.map(Arc::new) })
            .await
            .cloned()
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })
    }
}

/// Kills the process group when dropped before the process ended.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: a signal to a process group this run started.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// Runs `command` and reads the keys it prints.
pub(crate) async fn run(command: &str) -> Result<AwsCredential, ProcessError> {
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ProcessError(format!("cannot run it: {e}")))?;
    let mut group = Group(child.id().and_then(|id| i32::try_from(id).ok()));
    let mut stdout = child.stdout.take().expect("piped").take(MAX_OUTPUT);
    let mut stderr = child.stderr.take().expect("piped").take(MAX_OUTPUT);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (_, _, status) = tokio::join!(
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err),
        child.wait()
    );
    let status = status.map_err(|e| ProcessError(format!("cannot wait for it: {e}")))?;
    group.0 = None;
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let said = said
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        let said = crate::util::redact::scrub(&said.chars().take(300).collect::<String>());
        return Err(ProcessError(if said.is_empty() {
            format!("it failed ({status})")
        } else {
            format!("it failed ({status}): {said}")
        }));
    }
    let parsed: Output = serde_json::from_slice(&out).map_err(|e| {
        ProcessError(format!(
            "its output is not the JSON the AWS CLI expects (Version, AccessKeyId, SecretAccessKey): {e}"
        ))
    })?;
    if parsed.version != 1 {
        return Err(ProcessError(format!(
            "its output has Version {}; only 1 is defined",
            parsed.version
        )));
    }
    crate::util::redact::register_secret(&parsed.secret_access_key);
    if let Some(token) = &parsed.session_token {
        crate::util::redact::register_secret(token);
    }
    Ok(AwsCredential {
        key_id: parsed.access_key_id,
        secret_key: parsed.secret_access_key,
        token: parsed.session_token.filter(|t| !t.is_empty()),
    })
}

/// How long the process may run before the bucket's requests give up on it.
pub(crate) const TIME_LIMIT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_credential_process_is_run_and_read() {
        let keys = run(
            r#"printf '{"Version": 1, "AccessKeyId": "AKIDPROC", "SecretAccessKey": "proc-secret", "SessionToken": "proc-token"}'"#,
        )
        .await
        .unwrap();
        assert_eq!(keys.key_id, "AKIDPROC");
        assert_eq!(keys.token.as_deref(), Some("proc-token"));
        let err = run("echo 'run aws sso login first' >&2; exit 3")
            .await
            .unwrap_err();
        assert!(
            err.0.contains("failed") && err.0.contains("run aws sso login first"),
            "{err}"
        );
        assert!(run("echo not json")
            .await
            .unwrap_err()
            .0
            .contains("not the JSON"));
        let v2 = r#"printf '{"Version": 2, "AccessKeyId": "a", "SecretAccessKey": "b"}'"#;
        assert!(run(v2).await.unwrap_err().0.contains("Version 2"));
    }

    #[tokio::test]
    async fn a_process_cut_short_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let cut = tokio::time::timeout(Duration::from_millis(500), run(&command)).await;
        assert!(cut.is_err());
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild is gone (or a zombie about to be reaped by init).
        let mut alive = true;
        for _ in 0..50 {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            alive = status
                .lines()
                .any(|l| l.starts_with("State:") && !l.contains('Z'));
            if !alive {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive, "sleep {pid} survived");
    }
}
