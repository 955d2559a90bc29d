//! The settings of `oci://` URIs: where registry credentials come from and which
//! registries are spoken to in plain HTTP; later, the layers their references
//! resolved to (filled in before the plan, see `cmd::oci`).

use std::collections::HashMap;
use std::path::PathBuf;

use super::layers::Layers;
use super::{table, ConfigError, Problems};
use crate::cli::FetchArgs;
use crate::env_vars as env;

/// `--registry-auth`, `--insecure-registry` and the resolved layers.
#[derive(Debug, Default)]
pub(crate) struct OciSettings {
    /// The docker config file and where it was named.
    pub auth_file: Option<(PathBuf, String)>,
    /// `host[:port]`s spoken to in plain HTTP.
    pub insecure: Vec<String>,
    /// The layers of resolved references, by the internal URI of each.
    pub layers: HashMap<String, crate::oci::Pinned>,
}

pub(super) fn settings(
    args: &FetchArgs,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> OciSettings {
    let auth_file = match &args.registry_auth {
        Some(path) => Some((
            path.clone(),
            layers.origin(&table::REGISTRY_AUTH).to_string(),
        )),
        None => std::env::var_os(env::DOCKER_CONFIG)
            .filter(|dir| !dir.is_empty())
            .map(|dir| {
                (
                    PathBuf::from(dir).join("config.json"),
                    format!("{}/config.json", env::DOCKER_CONFIG),
                )
            }),
    };
    let mut insecure = Vec::new();
    for host in &args.insecure_registry {
        let host = host.trim();
        if host.is_empty() {
            continue;
        }
        // HOST[:PORT] as a URL authority: the port a number up to 65535.
        let valid = !host.contains("://")
            && !host.contains('/')
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
            && !host.ends_with(':')
            && url::Url::parse(&format!("http://{host}/"))
                .is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()) && u.port() != Some(0));
        if valid {
            insecure.push(host.to_ascii_lowercase());
        } else {
            problems.push(ConfigError::Invalid {
                what: layers.origin(&table::INSECURE_REGISTRY).to_string(),
                reason: format!(
                    "'{host}' is not HOST[:PORT]; name the registry as oci:// URIs do (e.g. registry.local:5000), without a scheme or path"
                ),
            });
        }
    }
    OciSettings {
        auth_file,
        insecure,
        layers: HashMap::new(),
    }
}
