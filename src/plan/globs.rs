//! `local:///opt/extra/*.jar` and `file:///mnt/jars/*.jar`: a pattern (`*`, `?`,
//! `[…]`, as a shell reads them) in the path of a file on the node expands to
//! the regular files it matches, in sorted order, each then planned as if
//! declared one by one (pins apply to each). Spark 3 stopped expanding them.
//! A pattern that matches nothing is an error naming it; so is a pattern with
//! an `#alias` (one name for many files).

use std::path::PathBuf;

use crate::config::Declared;

/// The characters that make a path a pattern.
const GLOB_CHARS: &[char] = &['*', '?', '['];

/// `declared`, with every pattern replaced by the files it matches.
pub(super) fn expand(declared: &[Declared], problems: &mut Vec<String>) -> Vec<Declared> {
    let mut out = Vec::with_capacity(declared.len());
    for d in declared {
        match pattern_of(&d.uri) {
            None => out.push(d.clone()),
            Some((scheme, pattern)) => match matches(&d.uri, &pattern) {
                Ok(paths) => out.extend(paths.into_iter().filter_map(|p| {
                    let uri = uri_of(scheme, &p)?;
                    Some(Declared {
                        uri,
                        origin: d.origin.clone(),
                    })
                })),
                Err(reason) => problems.push(format!("invalid {}: {reason}", d.origin)),
            },
        }
    }
    out
}

/// The scheme (`file` or `local`) and the decoded path pattern of `raw`, when
/// it is a pattern of files on the node.
fn pattern_of(raw: &str) -> Option<(&'static str, String)> {
    let (scheme, rest) = raw.split_once(':')?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "file" => "file",
        "local" => "local",
        _ => return None,
    };
    // file:/p, file:///p and file://localhost/p all name /p.
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let slash = after.find('/')?;
            let host = &after[..slash];
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return None;
            }
            &after[slash..]
        }
        None => rest,
    };
    let path = path.split('#').next().unwrap_or(path);
    if !path.contains(GLOB_CHARS) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned();
    Some((scheme, decoded))
}

/// The regular files `pattern` matches, sorted; an error when none does.
fn matches(raw: &str, pattern: &str) -> Result<Vec<PathBuf>, String> {
    let shown = crate::util::redact::redact_url(raw);
    if raw.contains('#') {
        return Err(format!(
            "{shown}: a pattern names many files, so it cannot take one #alias"
        ));
    }
    if !pattern.starts_with('/') {
        return Err(format!("{shown}: the pattern must be an absolute path"));
    }
    // `**` would walk symlinked directories (loops among them) without end.
    if pattern.contains("**") {
        return Err(format!(
            "{shown}: `**` is not supported (a walk through symlinked directories has no end); name each directory, e.g. /dir/*.jar,/dir/sub/*.jar"
        ));
    }
    // The walker's own leading-dot rule drops hidden names even where the
    // pattern spells the dot, so it is applied here instead (see `hidden_ok`).
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    let found = glob::glob_with(pattern, options)
        .map_err(|e| format!("{shown} is not a valid pattern: {e}"))?;
    let dotted: Vec<glob::Pattern> = pattern
        .split('/')
        .filter(|c| c.starts_with('.') && *c != "." && *c != "..")
        .filter_map(|c| glob::Pattern::new(c).ok())
        .collect();
    let mut paths = Vec::new();
    for entry in found {
        let path = entry.map_err(|e| format!("{shown}: cannot read {}", e.path().display()))?;
        if path.is_file() && hidden_ok(&path, &dotted) {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(format!(
            "{shown} matches no file (a pattern must match at least one; is the volume mounted?)"
        ));
    }
    paths.sort();
    Ok(paths)
}

/// A name starting with `.` is matched only by a pattern part that starts with
/// `.` too, as a shell matches (`*.jar` skips `.hidden.jar`, `.*.jar` takes it).
fn hidden_ok(path: &std::path::Path, dotted: &[glob::Pattern]) -> bool {
    path.components().all(|c| {
        let name = c.as_os_str().to_string_lossy();
        !name.starts_with('.') || dotted.iter().any(|p| p.matches(&name))
    })
}

/// `file:///p` or `local:///p` for the path `p`, percent-encoded.
fn uri_of(scheme: &str, path: &std::path::Path) -> Option<String> {
    let file = url::Url::from_file_path(path).ok()?;
    Some(match scheme {
        "local" => format!("local{}", &file.as_str()["file".len()..]),
        _ => file.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::Origin;

    fn declared(uri: &str) -> Declared {
        Declared {
            uri: uri.to_owned(),
            origin: Origin::Flag("jars"),
        }
    }

    #[test]
    fn patterns_expand_to_sorted_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.jar", "a.jar", "c.txt", ".hidden.jar", "with space.jar"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/x.jar"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("d.jar")).unwrap();
        let d = dir.path().display();
        let mut problems = Vec::new();
        let out = expand(
            &[
                declared(&format!("local://{d}/*.jar")),
                declared("https://host/keep.jar"),
                declared(&format!("file:{d}/?.jar")),
                declared(&format!("local://{d}/.*.jar")),
            ],
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let uris: Vec<&str> = out.iter().map(|d| d.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                format!("local://{d}/a.jar"),
                format!("local://{d}/b.jar"),
                format!("local://{d}/with%20space.jar"),
                "https://host/keep.jar".to_owned(),
                format!("file://{d}/a.jar"),
                format!("file://{d}/b.jar"),
                format!("local://{d}/.hidden.jar"),
            ]
        );
    }

    #[test]
    fn an_empty_match_or_an_alias_is_an_error_naming_the_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let mut problems = Vec::new();
        let out = expand(
            &[
                declared(&format!("file://{d}/*.jar")),
                declared(&format!("local://{d}/*.jar#one.jar")),
                declared(&format!("local://{d}/**/*.jar")),
            ],
            &mut problems,
        );
        assert!(out.is_empty());
        assert!(problems[0].contains("matches no file"), "{problems:?}");
        assert!(problems[0].contains(&format!("{d}/*.jar")), "{problems:?}");
        assert!(problems[1].contains("#alias"), "{problems:?}");
        assert!(
            problems[2].contains("`**` is not supported"),
            "{problems:?}"
        );
    }

    #[test]
    fn plain_paths_and_other_schemes_are_left_alone() {
        assert!(pattern_of("file:///opt/a.jar").is_none());
        assert!(pattern_of("https://host/*.jar").is_none());
        assert!(pattern_of("file://otherhost/*.jar").is_none());
        assert_eq!(
            pattern_of("file://localhost/opt/*.jar").unwrap(),
            ("file", "/opt/*.jar".to_owned())
        );
    }
}
