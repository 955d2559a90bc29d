//! The AWS shared config files of a laptop: `~/.aws/credentials` and
//! `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`), profile
//! `AWS_PROFILE` (else `default`). The last credential source before instance
//! metadata; pods rarely have them.
//!
//! Read: a profile's static keys (`aws_access_key_id`, `aws_secret_access_key`,
//! `aws_session_token`), its `credential_process` (run by [`crate::s3::process`]
//! when the bucket is first used), and its `region`. Profiles that assume a role or use IAM Identity
//! Center (SSO) are named with the command that turns them into keys.
//!
//! The files' format is the AWS CLI's INI dialect: `[section]` headers (`[profile
//! name]` in the config file, `[name]` in the credentials file, `[default]` in
//! both), `key = value` lines, `#` and `;` comments, and indented continuation
//! lines for nested settings (skipped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest shared file read.
const MAX_FILE: u64 = 1 << 20;

/// One profile's settings, each with the file it came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Profile {
    pub name: String,
    /// Whether `AWS_PROFILE` named it (else it is `default`).
    pub named: bool,
    settings: BTreeMap<String, (String, PathBuf)>,
}

/// Where the shared files are, from the environment.
pub(crate) struct Files {
    pub credentials: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

impl Files {
    /// `AWS_SHARED_CREDENTIALS_FILE` / `AWS_CONFIG_FILE`, else under `$HOME/.aws/`.
    pub(crate) fn locate(
        credentials: Option<&str>,
        config: Option<&str>,
        home: Option<&str>,
    ) -> Files {
        let under_home = |name: &str| home.map(|h| Path::new(h).join(".aws").join(name));
        Files {
            credentials: credentials
                .map(PathBuf::from)
                .or_else(|| under_home("credentials")),
            config: config.map(PathBuf::from).or_else(|| under_home("config")),
        }
    }
}

impl Profile {
    /// Reads profile `name` (`AWS_PROFILE`, else `default`) from the shared files;
    /// `Ok(None)` when neither file has it and it was not asked for by name.
    pub(crate) fn load(files: &Files, asked: Option<&str>) -> Result<Option<Profile>, String> {
        let name = asked.unwrap_or("default");
        let mut profile = Profile {
            name: name.to_owned(),
            named: asked.is_some(),
            settings: BTreeMap::new(),
        };
        let config_section = if name == "default" {
            "default".to_owned()
        } else {
            format!("profile {name}")
        };
        // The credentials file wins over the config file, as in the AWS CLI.
        let sources = [
            (files.config.as_deref(), config_section),
            (files.credentials.as_deref(), name.to_owned()),
        ];
        let mut found = false;
        for (path, section) in sources {
            let Some(path) = path else { continue };
            let text = match crate::util::fs::read_config_text(path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: cannot read it: {e}", path.display())),
            };
            if text.len() as u64 > MAX_FILE {
                return Err(format!("{}: larger than 1 MiB", path.display()));
            }
            if let Some(values) = section_of(&text, &section) {
                found = true;
                for (key, value) in values {
                    profile.settings.insert(key, (value, path.to_owned()));
                }
            }
        }
        if !found {
            return match asked {
                Some(name) => Err(format!(
                    "{}={name}: no such profile in {} or {}",
                    crate::env_vars::aws::PROFILE,
                    shown(files.credentials.as_deref()),
                    shown(files.config.as_deref())
                )),
                None => Ok(None),
            };
        }
        for key in ["aws_secret_access_key", "aws_session_token"] {
            if let Some((value, _)) = profile.settings.get(key) {
                crate::util::redact::register_secret(value);
            }
        }
        Ok(Some(profile))
    }

    /// A setting and the file it came from.
    pub(crate) fn get(&self, key: &str) -> Option<(&str, &Path)> {
        self.settings
            .get(key)
            .map(|(value, path)| (value.as_str(), path.as_path()))
    }

    /// How `check` and errors name it: `profile 'x' (AWS_PROFILE)`.
    pub(crate) fn label(&self) -> String {
        if self.named {
            format!(
                "profile '{}' ({})",
                self.name,
                crate::env_vars::aws::PROFILE
            )
        } else {
            format!("profile '{}'", self.name)
        }
    }

    /// Whether it holds anything that gives credentials.
    pub(crate) fn has_credentials(&self) -> bool {
        [
            "aws_access_key_id",
            "aws_secret_access_key",
            "credential_process",
            "role_arn",
            "sso_session",
            "sso_start_url",
        ]
        .iter()
        .any(|key| self.settings.contains_key(*key))
    }
}

fn shown(path: Option<&Path>) -> String {
    path.map_or_else(|| "(no HOME)".to_owned(), |p| p.display().to_string())
}

/// The `key = value` settings of `[section]` (the last of repeated sections'
/// keys win), or `None` when the file has no such section.
fn section_of(text: &str, section: &str) -> Option<Vec<(String, String)>> {
    let mut values = None::<Vec<(String, String)>>;
    let mut inside = false;
    for line in text.lines() {
        let indented = line.starts_with([' ', '\t']);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split(']').next().unwrap_or_default();
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            inside = name == section;
            if inside {
                values.get_or_insert_with(Vec::new);
            }
            continue;
        }
        if !inside || indented {
            continue; // another section, or a nested setting (`s3 =` + indented lines)
        }
        if let (Some(values), Some((key, value))) = (values.as_mut(), line.split_once('=')) {
            let value = value.trim();
            // A trailing comment needs whitespace before it; `#` may be in a value.
            let value = value
                .split_once(" #")
                .or_else(|| value.split_once(" ;"))
                .map_or(value, |(v, _)| v.trim_end());
            values.push((key.trim().to_ascii_lowercase(), value.to_owned()));
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_both_files_and_their_comments() {
        let config = "\
# comment
[default]
region = eu-west-1
[profile dev]
region=us-west-2 # trailing
s3 =
  max_concurrent_requests = 20
credential_process = /bin/echo a#b
[  profile   dev ]
output = json
";
        assert_eq!(
            section_of(config, "profile dev").unwrap(),
            vec![
                ("region".into(), "us-west-2".into()),
                ("s3".into(), "".into()),
                ("credential_process".into(), "/bin/echo a#b".into()),
                ("output".into(), "json".into()),
            ]
        );
        assert_eq!(
            section_of(config, "default").unwrap(),
            vec![("region".into(), "eu-west-1".into())]
        );
        assert!(section_of(config, "dev").is_none());
        assert!(section_of("[dev]\n", "dev").unwrap().is_empty());
    }

    #[test]
    fn the_credentials_file_wins_and_a_named_profile_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &credentials,
            "[dev]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s3cr3t-from-file\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[profile dev]\naws_access_key_id = AKIDCONFIG\nregion = eu-north-1\n",
        )
        .unwrap();
        let files = Files {
            credentials: Some(credentials.clone()),
            config: Some(config.clone()),
        };
        let dev = Profile::load(&files, Some("dev")).unwrap().unwrap();
        assert_eq!(
            dev.get("aws_access_key_id"),
            Some(("AKIDFILE", credentials.as_path()))
        );
        assert_eq!(dev.get("region"), Some(("eu-north-1", config.as_path())));
        assert!(dev.has_credentials());
        assert_eq!(dev.label(), "profile 'dev' (AWS_PROFILE)");
        // No [default] anywhere: nothing, unless asked for by name.
        assert!(Profile::load(&files, None).unwrap().is_none());
        let err = Profile::load(&files, Some("prod")).unwrap_err();
        assert!(err.contains("AWS_PROFILE=prod: no such profile"), "{err}");
        // Missing files are no profile, not an error.
        let none = Files::locate(None, None, Some("/nonexistent"));
        assert!(Profile::load(&none, None).unwrap().is_none());
    }
}
