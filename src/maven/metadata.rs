//! `maven-metadata.xml`, as a repository serves it: the versions of a module
//! (`<versioning><versions><version>`, for ranges) and the timestamped file of a
//! `-SNAPSHOT` version (`<snapshotVersion>`, Maven 3; `<snapshot>`, Maven 2).
//! Every version read becomes part of a path and a file name, so each must be one
//! ([`super::coord::check_part`]); a value that is not is never used.

use super::coord::{check_part, Coord};

/// The largest `maven-metadata.xml` read.
pub(crate) const MAX_METADATA: usize = 4 << 20;

fn document(bytes: &[u8]) -> Result<roxmltree::Document<'_>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    roxmltree::Document::parse(text).map_err(|e| format!("not well-formed XML: {e}"))
}

/// The text of `node`'s child element `name`, trimmed.
fn text_of(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    node.children()
        .find(|n| n.is_element() && n.tag_name().name() == name)
        .and_then(|n| n.text())
        .map(|t| t.trim().to_owned())
}

/// The versions an HTML directory listing names: every link to a
/// subdirectory (`href="4.2.3/"`, absolute or relative) whose name can be a
/// version; parents, queries and files are not.
pub(crate) fn listed_versions(html: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("href=") {
        rest = &rest[at + 5..];
        let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let Some(end) = rest[1..].find(quote) else {
            break;
        };
        let link = &rest[1..1 + end];
        rest = &rest[1 + end..];
        let Some(dir) = link.strip_suffix('/') else {
            continue;
        };
        let name = dir.rsplit('/').next().unwrap_or_default();
        let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
        if !link.contains(['?', '#'])
            && usable_part(&name)
            && !name.starts_with('.')
            && !out.iter().any(|v| v == &*name)
        {
            out.push(name.into_owned());
        }
    }
    out
}

/// Whether `part` (a version, group or artifact read from a repository) can name
/// a directory and a file.
/// Also no URL delimiter: `?` and `#` would cut the path short, `%` escape it.
pub(crate) fn usable_part(part: &str) -> bool {
    check_part(part).is_ok() && !part.contains(['?', '#', '%', ':'])
}

/// Every usable version listed under `<versions>`, in document order.
pub(crate) fn versions(bytes: &[u8]) -> Result<Vec<String>, String> {
    let doc = document(bytes)?;
    Ok(doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "version")
        .filter(|n| {
            n.parent()
                .is_some_and(|p| p.tag_name().name() == "versions")
        })
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .filter(|v| usable_part(v))
        .collect())
}

/// The timestamped version (`1.0-20240102.030405-7`) of `c`'s file, a
/// `-SNAPSHOT` version, as the metadata names it; `None` when it names none
/// usable (the plain name is then used).
pub(crate) fn snapshot_version(bytes: &[u8], c: &Coord) -> Result<Option<String>, String> {
    let doc = document(bytes)?;
    let classifier = c.classifier.clone().unwrap_or_default();
    // Maven 3: one <snapshotVersion> per extension and classifier.
    let listed = doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "snapshotVersion")
        .find(|n| {
            text_of(*n, "extension").as_deref() == Some(c.ext.as_str())
                && text_of(*n, "classifier").unwrap_or_default() == classifier
        })
        .and_then(|n| text_of(n, "value"));
    // Maven 2: <snapshot><timestamp/><buildNumber/></snapshot> for every file.
    let value = listed.or_else(|| {
        let snapshot = doc
            .descendants()
            .find(|n| n.is_element() && n.tag_name().name() == "snapshot")?;
        let timestamp = text_of(snapshot, "timestamp")?;
        let build = text_of(snapshot, "buildNumber")?;
        let base = c.version.trim_end_matches("-SNAPSHOT");
        Some(format!("{base}-{timestamp}-{build}"))
    });
    Ok(value.filter(|v| usable_part(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_that_are_no_path_part_are_never_listed() {
        let xml = b"<metadata><versioning><versions><version>1.0</version>\
            <version> 1.1 </version><version>../../../evil</version><version>a/b</version>\
            <version></version><version>2.0?x</version><version>.hidden</version>\
            </versions></versioning></metadata>";
        assert_eq!(versions(xml).unwrap(), ["1.0", "1.1"]);
        assert!(versions(b"<metadata>").unwrap_err().contains("well-formed"));
        assert!(versions(b"\xff").unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn snapshot_files_stay_in_their_directory() {
        let mut c = Coord::new("g", "a", "1.0-SNAPSHOT");
        let m3 = |value: &str| {
            format!(
                "<metadata><versioning><snapshotVersions><snapshotVersion>\
                 <extension>jar</extension><value>{value}</value>\
                 </snapshotVersion></snapshotVersions></versioning></metadata>"
            )
        };
        let ok = m3("1.0-20240102.030405-7");
        assert_eq!(
            snapshot_version(ok.as_bytes(), &c).unwrap().as_deref(),
            Some("1.0-20240102.030405-7")
        );
        for bad in ["../x", "a\\b", "x y", "1.0#f", "1.0?q", "1%2f", ""] {
            assert_eq!(
                snapshot_version(m3(bad).as_bytes(), &c).unwrap(),
                None,
                "{bad:?}"
            );
        }
        let m2 = b"<metadata><versioning><snapshot><timestamp>20240102.030405</timestamp>\
            <buildNumber>3</buildNumber></snapshot></versioning></metadata>";
        assert_eq!(
            snapshot_version(m2, &c).unwrap().as_deref(),
            Some("1.0-20240102.030405-3")
        );
        c.classifier = Some("tests".into());
        assert_eq!(snapshot_version(ok.as_bytes(), &c).unwrap(), None);
    }

    #[test]
    fn listings_name_their_version_directories() {
        let html = r#"<html><a href="../">../</a><a href="4.2.3/">4.2.3/</a>
            <a href='/m2/g/a/5.0-rc1/'>5.0-rc1/</a><a href="maven-metadata.xml">x</a>
            <a href="?C=N;O=D/">sort</a><a href="..%2F..%2Fetc/">x</a><a href="4.2.3/">dup</a>"#;
        assert_eq!(listed_versions(html), vec!["4.2.3", "5.0-rc1"]);
    }
}
