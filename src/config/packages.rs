//! `--packages` and its companions (repositories, excludes, the resolution
//! mode), and `--lock`: a lockfile's jars become declared jars, each pinned.

use std::path::PathBuf;

use super::checksums::Checksums;
use super::layers::{Found, Layers};
use super::table;
use super::{ConfigError, Declared, Problems, Sourced};
use crate::cli::{FetchArgs, Resolution};
use crate::maven::coord::{Coord, Exclusion};
use crate::maven::{Mode, Request};
use crate::origin::Origin;

/// What `--packages` asks for, and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct PackagesSettings {
    /// `None` when no package is declared.
    pub request: Option<Request>,
    /// Where the packages were declared (for messages and `check`).
    pub origin: Origin,
    /// A lockfile given with `--lock`: its path and its `# packages:` line.
    pub lock: Option<Sourced<PathBuf>>,
    /// The jars the lockfile pins, with the coordinate and path its comments
    /// give each (for the SBOM).
    pub locked: Option<crate::maven::Resolution>,
    /// `--verify-signatures` and `--trusted-keys`, read (`None`: off).
    pub trust: Option<crate::maven::signatures::Trust>,
}

/// Reads `--packages`, `--repositories`, `--exclude-packages`,
/// `--only-repositories`, `--resolution` (and their twins and Spark keys), and
/// `--lock`.
pub(crate) fn settings(
    args: &FetchArgs,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> PackagesSettings {
    let split = |setting: &table::Setting, given: &[String]| -> Vec<(String, Origin)> {
        layers
            .lists(setting, given)
            .into_iter()
            .flat_map(|v| {
                v.value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| (s.to_owned(), v.origin.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let packages_given = split(&table::PACKAGES, &args.packages);
    let origin = packages_given
        .first()
        .map(|(_, o)| o.clone())
        .unwrap_or_else(|| layers.origin(&table::PACKAGES));
    let packages = parse_packages(&packages_given, problems);
    let mut excludes = Vec::new();
    for (spec, origin) in split(&table::EXCLUDE_PACKAGES, &args.exclude_packages) {
        match Exclusion::parse(&spec) {
            Ok(e) => excludes.push(e),
            Err(reason) => problems.push(ConfigError::Invalid {
                what: origin.to_string(),
                reason,
            }),
        }
    }
    let user: Vec<(String, Origin)> = split(&table::REPOSITORIES, &args.repositories);
    for (url, origin) in &user {
        crate::util::redact::register_url_secrets(url);
        if let Err(reason) = crate::maven::repo::Repo::new(url) {
            problems.push(ConfigError::Invalid {
                what: origin.to_string(),
                reason,
            });
        }
    }
    let urls: Vec<String> = user.into_iter().map(|(u, _)| u).collect();
    let ivy_given =
        args.ivy_settings.is_some() || layers.find(&table::IVY_SETTINGS, None::<String>).is_some();
    if args.only_repositories && urls.is_empty() && !packages.is_empty() && !ivy_given {
        problems.push(ConfigError::Invalid {
            what: layers.origin(&table::ONLY_REPOSITORIES).to_string(),
            reason: "no --repositories are given: --packages would have no repository to use"
                .into(),
        });
    }
    let ivy = match layers.find(&table::IVY_SETTINGS, args.ivy_settings.clone()) {
        None => None,
        Some(found) => {
            let (path, origin) = match found {
                Found::Given(g) => (g.value, g.origin),
                Found::Property(p) => (PathBuf::from(p.value), p.origin),
            };
            match crate::maven::ivy::load(&path) {
                Ok(repos) => Some(repos),
                Err(reason) => {
                    problems.push(ConfigError::Invalid {
                        what: format!("{origin} {}", path.display()),
                        reason,
                    });
                    None
                }
            }
        }
    };
    let mut repositories = crate::maven::Request::repositories(&urls, !args.only_repositories, ivy)
        .unwrap_or_default();
    if let Some(dir) = &args.repository_credentials_dir {
        let origin = layers.origin(&table::REPOSITORY_CREDENTIALS_DIR);
        if let Err(reason) = add_credentials(dir, &mut repositories) {
            problems.push(ConfigError::Invalid {
                what: format!("{origin} {}", dir.display()),
                reason,
            });
        }
    }
    let lock = args.lock.clone().map(|path| Sourced {
        value: path,
        origin: layers.origin(&table::LOCK),
    });
    let request = (!packages.is_empty()).then_some(Request {
        packages,
        repositories,
        excludes,
        mode: match args.resolution {
            Resolution::Spark => Mode::Spark,
            Resolution::Maven => Mode::Maven,
        },
    });
    let trust = trust(args, layers, problems);
    PackagesSettings {
        request,
        origin,
        lock,
        locked: None,
        trust,
    }
}

/// `--verify-signatures` with the keys of `--trusted-keys`, each file read and parsed
/// (its problems named with the flag); `None` when off.
fn trust(
    args: &FetchArgs,
    layers: &Layers<'_>,
    problems: &mut Problems,
) -> Option<crate::maven::signatures::Trust> {
    use crate::maven::signatures::{Mode as Signatures, Trust};
    let mode = match args.verify_signatures {
        crate::cli::VerifySignatures::Off => Signatures::Off,
        crate::cli::VerifySignatures::Warn => Signatures::Warn,
        crate::cli::VerifySignatures::Require => Signatures::Require,
    };
    let specs: Vec<String> = args
        .trusted_keys
        .iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    match Trust::load(mode, &specs) {
        Ok(trust) => (mode != Signatures::Off || !specs.is_empty()).then_some(trust),
        Err(why) => {
            let origin = if specs.is_empty() {
                layers.origin(&table::VERIFY_SIGNATURES)
            } else {
                layers.origin(&table::TRUSTED_KEYS)
            };
            for reason in why {
                problems.push(ConfigError::Invalid {
                    what: origin.to_string(),
                    reason,
                });
            }
            None
        }
    }
}

/// The coordinates of `--packages` (each once), or the problem with each.
fn parse_packages(given: &[(String, Origin)], problems: &mut Problems) -> Vec<Coord> {
    let mut packages = Vec::new();
    for (spec, origin) in given {
        // The jar is published as `group_artifact-version[-classifier].jar`:
        // a name the jars directory cannot take is refused before any traffic.
        let named = Coord::parse_package(spec).and_then(|c| {
            crate::layout::check_name(&c.spark_name())
                .map(|()| c.clone())
                .map_err(|why| {
                    format!(
                        "'{spec}' would name its jar {}: that name {why}; a package's group, artifact and version must fit",
                        c.spark_name()
                    )
                })
        });
        match named {
            Ok(c) if !packages.contains(&c) => packages.push(c),
            Ok(_) => {}
            Err(reason) => problems.push(ConfigError::Invalid {
                what: origin.to_string(),
                reason,
            }),
        }
    }
    packages
}

/// A Secret directory of repository credentials: the file named after a
/// repository's host holds `username:password` for it. A repository URL's own
/// userinfo wins.
fn add_credentials(
    dir: &std::path::Path,
    repositories: &mut [crate::maven::repo::Repo],
) -> Result<(), String> {
    for repo in repositories.iter_mut() {
        if repo.root.username().is_empty() {
            apply_credentials(dir, &mut repo.root)?;
        }
    }
    Ok(())
}

/// Puts the credentials `dir` holds for `url`'s host into its userinfo.
fn apply_credentials(dir: &std::path::Path, url: &mut url::Url) -> Result<(), String> {
    if !dir.is_dir() {
        return Err("not a directory (mount the Secret there)".into());
    }
    let Some(host) = url.host_str().map(str::to_owned) else {
        return Ok(());
    };
    let path = dir.join(&host);
    let text = match crate::util::fs::read_config_text(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let Some((user, password)) = text.trim().split_once(':').filter(|(u, _)| !u.is_empty()) else {
        return Err(format!(
            "{}: holds no username:password (the key named after the host {host} must)",
            path.display()
        ));
    };
    crate::util::redact::register_secret(password);
    let _ = url.set_username(user);
    let _ = url.set_password(Some(password));
    Ok(())
}

/// `fetch --lock FILE`: every entry of the lockfile becomes a jar (its URL with
/// the `#name` Spark gives `--packages` jars), pinned by the lockfile's sha256;
/// the pins join `--checksums`'. A lockfile for other packages than the ones
/// declared is refused (run `resolve` again). Returns the jars the lockfile
/// pins, as its comments describe them.
pub(crate) fn load_lock(
    lock: &Sourced<PathBuf>,
    declared: Option<&Request>,
    credentials_dir: Option<&std::path::Path>,
    jars: &mut Vec<Declared>,
    checksums: &mut Option<Sourced<Checksums>>,
    problems: &mut Problems,
) -> Option<crate::maven::Resolution> {
    let path = &lock.value;
    let invalid = |reason: String| ConfigError::Invalid {
        what: format!("{} {}", lock.origin, path.display()),
        reason,
    };
    let text = match crate::util::fs::read_config_text(path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(invalid(format!(
                "cannot read the lockfile: {e}; check --lock and that its ConfigMap is mounted"
            )));
            return None;
        }
    };
    let pins = match Checksums::parse_lockfile(&text, &path.display().to_string()) {
        Ok(pins) => pins,
        Err(e) => {
            problems.push(e);
            return None;
        }
    };
    if let Err(why) = pins_as_said(&text, pins.len()) {
        problems.push(invalid(why));
        return None;
    }
    if let Some(request) = declared {
        let locked: Option<Vec<String>> = text
            .lines()
            .find_map(|l| l.strip_prefix("# packages: "))
            .map(|l| l.split(',').map(|s| s.trim().to_owned()).collect());
        if locked.is_none() {
            problems.push(invalid(
                "it has no '# packages:' line, so it cannot be checked against the declared packages; run `spark-localizer resolve` again".into(),
            ));
            return None;
        }
        let mut wanted: Vec<String> = request.packages.iter().map(ToString::to_string).collect();
        wanted.sort();
        if let Some(mut locked) = locked {
            locked.sort();
            if locked != wanted {
                problems.push(ConfigError::Invalid {
                    what: format!("{} {}", lock.origin, path.display()),
                    reason: format!(
                        "it was resolved for the packages {}, but {} are declared; run `spark-localizer resolve` again",
                        locked.join(","),
                        wanted.join(",")
                    ),
                });
                return None;
            }
        }
    }
    let origin = Origin::Flag("lock");
    for key in pins.keys() {
        let ok = !key.contains(char::is_whitespace)
            && url::Url::parse(key).is_ok_and(|u| u.fragment().is_some_and(|f| !f.is_empty()));
        if !ok {
            problems.push(ConfigError::Invalid {
                what: format!("{} {}", lock.origin, path.display()),
                reason: format!(
                    "'{}' is not a lockfile entry (a URL with the jar's #name, as `spark-localizer resolve` writes)",
                    crate::util::redact::redact_url(key)
                ),
            });
            continue;
        }
        // The lock holds no credentials: a Secret directory may give them.
        let mut uri = url::Url::parse(key).expect("checked above");
        if let Some(dir) = credentials_dir {
            if let Err(reason) = apply_credentials(dir, &mut uri) {
                problems.push(ConfigError::Invalid {
                    what: format!("--repository-credentials-dir {}", dir.display()),
                    reason,
                });
                return None;
            }
        }
        let uri = uri.to_string();
        if !jars.iter().any(|d| d.uri == uri) {
            jars.push(Declared {
                uri,
                origin: origin.clone(),
            });
        }
    }
    match checksums {
        Some(existing) => {
            if let Err(e) = existing.value.merge(&pins, &path.display().to_string()) {
                problems.push(e);
            }
        }
        None => {
            *checksums = Some(Sourced {
                value: pins,
                origin: lock.origin.clone(),
            })
        }
    }
    Some(crate::maven::lock::read(&text))
}

/// Whether a lockfile holds as many pins as its `# jars:` line says, and some
/// unless it was written for a resolution of nothing (`# jars: 0`): any other
/// lockfile without a pin is empty, truncated or mis-mounted.
fn pins_as_said(text: &str, pins: usize) -> Result<(), String> {
    let said = text
        .lines()
        .find_map(|l| l.strip_prefix("# jars: "))
        .and_then(|n| n.trim().parse::<usize>().ok());
    if let Some(said) = said.filter(|&n| n != pins) {
        return Err(format!(
            "it says it pins {said} jar(s) but holds {pins} (a truncated or edited lockfile); write it again with `spark-localizer resolve --lock`"
        ));
    }
    let resolved_to_nothing = text.starts_with("# spark-localizer lockfile:") && said == Some(0);
    if pins == 0 && !resolved_to_nothing {
        return Err("it pins no jar (an empty or mis-mounted lockfile would start the job without its jars); write it with `spark-localizer resolve --lock`".into());
    }
    Ok(())
}
