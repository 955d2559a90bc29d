//! Registry credentials as kubelet reads them: a `kubernetes.io/dockerconfigjson`
//! Secret (`{"auths": {...}}`, or the older `.dockercfg` map), keyed by
//! registry as users write it; and the `WWW-Authenticate` challenge a registry
//! answers 401 with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::util::redact::register_secret;

/// Credentials for one registry (values are registered as secrets when read).
#[derive(Clone)]
pub(crate) enum Credential {
    /// A user name and password (or token used as a password).
    Basic { username: String, password: String },
    /// An OAuth2 refresh token (`identitytoken`), exchanged at the token realm.
    Identity { token: String },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind())
    }
}

impl Credential {
    /// How `check` names it: never the secret.
    pub(crate) fn kind(&self) -> String {
        match self {
            Credential::Basic { username, .. } => format!("user '{username}'"),
            Credential::Identity { .. } => "identity token".to_owned(),
        }
    }
}

/// A docker config file, read once.
#[derive(Debug, Clone)]
pub(crate) struct AuthFile {
    pub path: PathBuf,
    /// Where the file was named (`--registry-auth`, `DOCKER_CONFIG`).
    pub origin: String,
    /// Normalized registry key (`host[:port]`, or `*.domain[:port]`) → credential.
    entries: Vec<(String, Credential)>,
}

#[derive(serde::Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

impl AuthFile {
    /// Reads and parses `path`; the error names the file and what is wrong
    /// (never a value).
    pub(crate) fn load(path: &Path, origin: String) -> Result<AuthFile, String> {
        let text = crate::util::fs::read_config_text(path).map_err(|e| {
            format!(
                "invalid {origin}: cannot read {}: {e}; check that the registry Secret is mounted there",
                path.display()
            )
        })?;
        let mut file = AuthFile::parse(&text)
            .map_err(|why| format!("invalid {origin}: {} {why}", path.display()))?;
        file.path = path.to_owned();
        file.origin = origin;
        Ok(file)
    }

    fn parse(text: &str) -> Result<AuthFile, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            format!(
                "is not JSON (line {}, column {}); it should hold a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson",
                e.line(),
                e.column()
            )
        })?;
        let map = match value.get("auths") {
            Some(auths) => auths.clone(),
            None => value,
        };
        let serde_json::Value::Object(map) = map else {
            return Err("has no \"auths\" object".to_owned());
        };
        let mut entries = Vec::new();
        for (key, raw) in map {
            let entry: Entry = serde_json::from_value(raw).map_err(|_| {
                format!("has an entry for '{key}' that is not an object of strings (auth, username, password, identitytoken)")
            })?;
            let credential = credential(&key, entry)?;
            entries.push((normalize_key(&key), credential));
        }
        Ok(AuthFile {
            path: PathBuf::new(),
            origin: String::new(),
            entries,
        })
    }

    /// The credential for `registry` (`host[:port]`): an exact key first, then
    /// a `*.domain` wildcard matching one leading label, as kubelet matches.
    pub(crate) fn lookup(&self, registry: &str) -> Option<&Credential> {
        let registry = registry.to_ascii_lowercase();
        let wanted = docker_hub_alias(&registry);
        let exact = self
            .entries
            .iter()
            .find(|(key, _)| docker_hub_alias(key) == wanted);
        exact
            .or_else(|| {
                self.entries
                    .iter()
                    .find(|(key, _)| wildcard_matches(key, &registry))
            })
            .map(|(_, c)| c)
    }

    /// The registries the file has credentials for (for `check`).
    pub(crate) fn registries(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }
}

fn credential(key: &str, entry: Entry) -> Result<Credential, String> {
    if let Some(token) = entry.identitytoken.filter(|t| !t.is_empty()) {
        register_secret(&token);
        return Ok(Credential::Identity { token });
    }
    if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
        register_secret(&auth);
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                format!("has an entry for '{key}' whose \"auth\" is not base64 of user:password")
            })?;
        let (username, password) = decoded.split_once(':').ok_or_else(|| {
            format!(
                "has an entry for '{key}' whose \"auth\" is not base64 of user:password (no ':')"
            )
        })?;
        register_secret(password);
        return Ok(Credential::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        });
    }
    match (entry.username, entry.password) {
        (Some(username), Some(password)) if !username.is_empty() => {
            register_secret(&password);
            Ok(Credential::Basic { username, password })
        }
        _ => Err(format!(
            "has an entry for '{key}' with neither \"auth\", \"username\"/\"password\" nor \"identitytoken\""
        )),
    }
}

/// `https://reg:5000/v1/` → `reg:5000`: scheme and path dropped, lower case.
fn normalize_key(key: &str) -> String {
    let key = key.trim();
    let key = key.split_once("://").map_or(key, |(_, rest)| rest);
    key.split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Docker Hub goes by several names; they share credentials.
fn docker_hub_alias(registry: &str) -> &str {
    match registry {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => "docker.io",
        other => other,
    }
}

/// `*.example.com` matches `a.example.com` (one label), ports equal.
fn wildcard_matches(key: &str, registry: &str) -> bool {
    let Some(suffix) = key.strip_prefix("*.") else {
        return false;
    };
    registry
        .split_once('.')
        .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix)
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Challenge {
    Basic,
    /// Token auth: `realm` answers `GET ?service=&scope=` with a token.
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses the first challenge this client can answer (`Bearer` before `Basic`).
pub(crate) fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = parse_params(params);
    Some(Challenge::Bearer {
        realm: params.get("realm")?.clone(),
        service: params.get("service").cloned(),
        scope: params.get("scope").cloned(),
    })
}

/// `k="v", k2=v2` (quoted values may hold commas) → map with lower-case keys.
fn parse_params(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            (
                quoted[..end].to_owned(),
                quoted.get(end + 1..).unwrap_or(""),
            )
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        out.insert(key, value);
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dockerconfigjson_keys_as_kubelet_does() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let text = format!(
            r#"{{"auths": {{
                "https://reg.example:5000/v1/": {{"auth": "{b64}"}},
                "*.corp.example": {{"username": "bob", "password": "pw"}},
                "https://index.docker.io/v1/": {{"identitytoken": "tok"}}
            }}}}"#
        );
        let file = AuthFile::parse(&text).unwrap();
        match file.lookup("REG.example:5000") {
            Some(Credential::Basic { username, password }) => {
                assert_eq!((username.as_str(), password.as_str()), ("alice", "s3cret"))
            }
            other => panic!("{other:?}"),
        }
        assert!(file.lookup("reg.example").is_none());
        assert!(matches!(
            file.lookup("r1.corp.example"),
            Some(Credential::Basic { .. })
        ));
        assert!(file.lookup("a.b.corp.example").is_none());
        assert!(matches!(
            file.lookup("registry-1.docker.io"),
            Some(Credential::Identity { .. })
        ));
        assert_eq!(
            format!("{:?}", file.lookup("reg.example:5000").unwrap()),
            "user 'alice'"
        );
        let old = AuthFile::parse(&format!(r#"{{"reg": {{"auth": "{b64}"}}}}"#)).unwrap();
        assert!(old.lookup("reg").is_some());
        for (bad, part) in [
            ("nope", "not JSON"),
            (r#"{"auths": {"r": {"auth": "!!"}}}"#, "not base64"),
            (r#"{"auths": {"r": {}}}"#, "neither"),
            (r#"{"auths": []}"#, "no \"auths\""),
        ] {
            let e = AuthFile::parse(bad).unwrap_err();
            assert!(e.contains(part), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_challenges() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge("Bearer service=x"), None);
    }
}
