//! The bearer token `stage upload` sends (`Authorization: Bearer`): the first
//! line of `--token-file`; else, only when the server asks for one (it answers an
//! empty upload with 401), the kubeconfig's user for the chosen context (a `token`,
//! a `tokenFile`, or the `status.token` of an `exec` credential plugin as `kubectl`
//! runs it: EKS, GKE, AKS); else none (a server with `--upload-auth none`).
//!
//! The kubeconfig is `--kubeconfig`, else the first file of `KUBECONFIG` that
//! exists, else `~/.kube/config`; relative paths in it are relative to its
//! directory, as for kubectl. Tokens are registered for redaction, never logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::stage::api;
use crate::util::fs::{read_config_text, read_regular};
use crate::util::redact::register_secret;

/// An exec credential plugin gets this long to print its token.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a plugin's stdout read (an ExecCredential is a few KiB).
const EXEC_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// Where the token came from (for the log) and the token.
pub(crate) struct Token {
    pub from: String,
    pub value: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize, Default)]
struct KubeConfig {
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
    #[serde(default)]
    contexts: Vec<Named<Context>>,
    #[serde(default)]
    users: Vec<Named<User>>,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "context", alias = "user")]
    value: Option<T>,
}

#[derive(Deserialize, Default)]
struct Context {
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    token_file: Option<PathBuf>,
    #[serde(default)]
    exec: Option<Exec>,
}

#[derive(Deserialize)]
pub(crate) struct Exec {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Option<Vec<EnvVar>>,
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
}

#[derive(Deserialize)]
struct EnvVar {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct ExecCredential {
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
struct ExecStatus {
    token: Option<String>,
}

/// The first token line of `path`.
fn first_line(path: &Path, what: &str) -> Result<String, String> {
    let text = read_config_text(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    first_token(&text)
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} {} holds no token", path.display()))
}

/// The first token of a token file's text ([`api::token_lines`]: a BOM, CR/LF,
/// blank lines and `#` comments are not part of it).
pub(crate) fn first_token(text: &str) -> Option<&str> {
    api::token_lines(text).next().map(|(_, token)| token)
}

/// Whether an `Authorization: Bearer` header can carry `token`: visible ASCII.
pub(crate) fn header_safe(token: &str) -> bool {
    api::token_header_safe(token)
}

/// The kubeconfig to read: `--kubeconfig`, else `KUBECONFIG`'s first existing
/// file, else `~/.kube/config` when it exists.
fn kubeconfig_path(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = given {
        return Some(path.to_owned());
    }
    if let Some(list) = std::env::var_os(crate::env_vars::KUBECONFIG).filter(|v| !v.is_empty()) {
        return std::env::split_paths(&list).find(|p| p.is_file());
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".kube/config")).filter(|p| p.is_file())
}

/// A token as an Authorization header can carry it: visible ASCII.
fn usable(token: Token) -> Result<Token, String> {
    register_secret(&token.value);
    if header_safe(&token.value) {
        Ok(token)
    } else {
        Err(format!(
            "the token of {} has characters an Authorization header cannot carry (only visible ASCII)",
            token.from
        ))
    }
}

/// `--token-file`'s token, if given.
pub(crate) fn from_file(token_file: Option<&Path>) -> Result<Option<Token>, String> {
    let Some(path) = token_file else {
        return Ok(None);
    };
    let value = first_line(path, "--token-file")?;
    usable(Token {
        from: format!("--token-file {}", path.display()),
        value,
    })
    .map(Some)
}

/// The kubeconfig's token, for a server that asked for one: an error when there is
/// a kubeconfig but no bearer token in it, `None` when there is no kubeconfig.
pub(crate) async fn from_kubeconfig_for(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Option<Token>, String> {
    let Some(path) = kubeconfig_path(kubeconfig) else {
        if context.is_some() || kubeconfig.is_some() {
            return Err(
                "--context needs a kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config)"
                    .to_owned(),
            );
        }
        return Ok(None);
    };
    match from_kubeconfig(&path, context).await? {
        Some(token) => usable(token).map(Some),
        None => Err(format!(
            "the staging server asks for an upload token, and the kubeconfig {} gives none for {} (no current-context, or a user with only client certificates, which cannot be sent): give --token-file FILE, or --context NAME",
            path.display(),
            context.map_or("its current context".to_owned(), |c| format!("context {c}"))
        )),
    }
}

/// Whether `--context` or `--kubeconfig` name something that must be readable.
pub(crate) fn kubeconfig_named(kubeconfig: Option<&Path>, context: Option<&str>) -> bool {
    kubeconfig.is_some() || context.is_some()
}

async fn from_kubeconfig(path: &Path, context: Option<&str>) -> Result<Option<Token>, String> {
    let shown = path.display().to_string();
    let bytes = read_regular(path, crate::util::fs::CONFIG_LIMIT)
        .map_err(|e| format!("kubeconfig {shown}: {e}"))?;
    let Some(chosen) = choose(&bytes, context, &shown)? else {
        return Ok(None);
    };
    // Relative paths in a kubeconfig are relative to its directory.
    let dir = path.parent().unwrap_or(Path::new("."));
    let from = format!(
        "kubeconfig {shown}, context {}, user {}",
        chosen.context, chosen.user
    );
    let value = match chosen.how {
        How::Token(token) => token,
        How::TokenFile(file) => first_line(&dir.join(file), &format!("{from}: tokenFile"))?,
        How::Exec(exec) => run_exec(&exec, dir, &from).await?,
    };
    Ok(Some(Token { from, value }))
}

/// The context and user a kubeconfig's token is for, and how it is got.
pub(crate) struct Chosen {
    pub context: String,
    pub user: String,
    pub how: How,
}

/// How the user's bearer token is got, in kubectl's order.
pub(crate) enum How {
    Token(String),
    TokenFile(PathBuf),
    Exec(Exec),
}

/// Picks the user of `context` (else the current context) in a kubeconfig's
/// bytes (`shown` names it in errors). `None`: no context chosen, or a user with
/// no bearer token (client certificates).
pub(crate) fn choose(
    bytes: &[u8],
    context: Option<&str>,
    shown: &str,
) -> Result<Option<Chosen>, String> {
    let config: KubeConfig = serde_yaml_ng::from_slice(bytes)
        .map_err(|e| format!("kubeconfig {shown} is not a kubeconfig: {e}"))?;
    let Some(name) = context.map(str::to_owned).or(config.current_context) else {
        return Ok(None);
    };
    let ctx = config
        .contexts
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("kubeconfig {shown} has no context {name:?}"))?;
    let Some(user_name) = ctx.value.as_ref().and_then(|c| c.user.clone()) else {
        return Ok(None);
    };
    let user = config
        .users
        .into_iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.value)
        .ok_or_else(|| format!("kubeconfig {shown}: context {name:?} names user {user_name:?}, which it does not define"))?;
    let how = if let Some(token) = user.token.filter(|t| !t.is_empty()) {
        How::Token(token)
    } else if let Some(file) = user.token_file {
        How::TokenFile(file)
    } else if let Some(exec) = user.exec {
        How::Exec(exec)
    } else {
        // Client certificates and the like: no bearer token to send.
        return Ok(None);
    };
    Ok(Some(Chosen {
        context: name,
        user: user_name,
        how,
    }))
}

/// Runs an exec credential plugin as kubectl does and reads its `status.token`.
async fn run_exec(exec: &Exec, dir: &Path, from: &str) -> Result<String, String> {
    let api = exec
        .api_version
        .clone()
        .unwrap_or_else(|| "client.authentication.k8s.io/v1".to_owned());
    let info = serde_json::json!({
        "apiVersion": api,
        "kind": "ExecCredential",
        "spec": {"interactive": false},
    });
    // A command with a slash is a path (relative to the kubeconfig); without, PATH.
    let program = if exec.command.contains('/') {
        dir.join(&exec.command)
    } else {
        PathBuf::from(&exec.command)
    };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&exec.args)
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let env: BTreeMap<&str, &str> = exec
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    cmd.envs(env);
    let child = cmd
        .spawn()
        .map_err(|e| format!("{from}: cannot run the exec plugin {}: {e}", exec.command))?;
    let run = tokio::time::timeout(EXEC_TIMEOUT, bounded_output(child)).await;
    let (status, stdout, stderr) = match run {
        Err(_) => {
            return Err(format!(
                "{from}: the exec plugin {} did not finish within {}s",
                exec.command,
                EXEC_TIMEOUT.as_secs()
            ))
        }
        Ok(Err(e)) => return Err(format!("{from}: the exec plugin {}: {e}", exec.command)),
        Ok(Ok(out)) => out,
    };
    if !status.success() {
        let said = String::from_utf8_lossy(&stderr);
        let said: Vec<&str> = said.lines().rev().take(5).collect();
        let said: Vec<&str> = said.into_iter().rev().collect();
        return Err(format!(
            "{from}: the exec plugin {} failed ({status}){}",
            exec.command,
            if said.is_empty() {
                String::new()
            } else {
                format!(": {}", said.join(" / "))
            }
        ));
    }
    let credential: ExecCredential = serde_json::from_slice(&stdout).map_err(|e| {
        format!(
            "{from}: the exec plugin {} printed no ExecCredential: {e}",
            exec.command
        )
    })?;
    credential
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{from}: the exec plugin {} gave no token (client certificates are not supported for uploads)", exec.command))
}

/// A plugin's exit status and its stdout and stderr, each read up to a limit (a
/// plugin printing without end is cut off, not buffered).
async fn bounded_output(
    mut child: tokio::process::Child,
) -> std::io::Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>, limit: u64| async move {
        let mut out = Vec::new();
        if let Some(pipe) = pipe {
            pipe.take(limit + 1).read_to_end(&mut out).await?;
        }
        Ok::<_, std::io::Error>(out)
    };
    let stdout = child
        .stdout
        .take()
        .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Unpin + Send>);
    let stderr = child
        .stderr
        .take()
        .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Unpin + Send>);
    let (out, err) = tokio::join!(read(stdout, EXEC_OUTPUT_LIMIT), read(stderr, 64 * 1024));
    let (out, err) = (out?, err?);
    if out.len() as u64 > EXEC_OUTPUT_LIMIT {
        let _ = child.kill().await;
        return Err(std::io::Error::other(format!(
            "printed more than {EXEC_OUTPUT_LIMIT} bytes; an ExecCredential is a few KiB"
        )));
    }
    Ok((child.wait().await?, out, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tokens_from_a_file_and_each_kind_of_kubeconfig_user() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("t"), "# upload token\n  tok-1  \nother\n").unwrap();
        let t = from_file(Some(&d.join("t"))).unwrap().unwrap();
        assert_eq!(t.value, "tok-1");
        std::fs::write(d.join("sa-token"), "from-file\n").unwrap();
        std::fs::write(
            d.join("plugin.sh"),
            "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec-'$SUFFIX'\"}}'\n",
        )
        .unwrap();
        std::fs::set_permissions(
            d.join("plugin.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {{cluster: c, user: inline}}\n- name: b\n  context: {{cluster: c, user: file}}\n- name: e\n  context: {{cluster: c, user: plugin}}\n- name: cert\n  context: {{cluster: c, user: cert}}\nusers:\n- name: inline\n  user: {{token: tok-inline}}\n- name: file\n  user: {{tokenFile: {}}}\n- name: plugin\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      env: [{{name: SUFFIX, value: x}}]\n- name: cert\n  user: {{client-certificate-data: AAAA}}\n",
            d.join("sa-token").display(),
            d.join("plugin.sh").display()
        );
        std::fs::write(d.join("config"), kubeconfig).unwrap();
        let k = Some(d.join("config"));
        let get = |ctx: Option<&'static str>| {
            let k = k.clone();
            async move { from_kubeconfig_for(k.as_deref(), ctx).await }
        };
        assert_eq!(get(None).await.unwrap().unwrap().value, "tok-inline");
        assert_eq!(get(Some("b")).await.unwrap().unwrap().value, "from-file");
        assert_eq!(get(Some("e")).await.unwrap().unwrap().value, "from-exec-x");
        assert!(get(Some("cert"))
            .await
            .unwrap_err()
            .contains("client certificates"));
        assert!(get(Some("nope")).await.unwrap_err().contains("no context"));
        std::fs::write(d.join("bad"), "[: not yaml").unwrap();
        assert!(from_kubeconfig_for(Some(&d.join("bad")), None)
            .await
            .unwrap_err()
            .contains("not a kubeconfig"));
    }
}
