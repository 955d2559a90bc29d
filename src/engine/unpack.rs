//! Publishes an archive's contents: unpack into a temp directory beside
//! `<files-dir>/<name>`, then swap it in; keep the directory when it was unpacked
//! from the same archive digest. The unpacking rules live in [`crate::archive`].

use std::path::Path;

use super::outcome::{Failure, FailureKind};
use crate::archive::{self, ArchiveError, Limits};
use crate::layout;
use crate::plan::{Artifact, Target};

/// What happened to the unpacked directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Published {
    /// Unpacked (fresh, or replacing an older unpack).
    Unpacked { entries: u64, bytes: u64 },
    /// Already unpacked from this very archive by an earlier run.
    Kept,
}

/// Unpacks the archive of `a` (kept at its target path, with digest `sha256`).
/// Blocking: run it on a blocking thread. Errors carry the failure kind and a
/// message naming the archive and, for a refusal, the offending entry.
pub(crate) fn publish(
    a: &Artifact,
    sha256: &str,
    limits: &Limits,
    fsync: bool,
) -> Result<Published, Failure> {
    let (Some(unpack), Target::Fetch { dir, path, .. }) = (&a.unpack, &a.target) else {
        return Ok(Published::Kept);
    };
    let marker = layout::unpacked_marker(dir, &a.name);
    let local = |what: &str, e: std::io::Error| local_failure(a, what, &unpack.into, e);
    // symlink_metadata: a symlink planted at the name is never taken for the tree.
    // A file a bundle's layer published is extracted again from the kept layer
    // every time: another artifact may have taken its name since.
    let is_tree = std::fs::symlink_metadata(&unpack.into).is_ok_and(|md| md.is_dir());
    let recorded = crate::util::fs::read_regular(&marker, 1024).unwrap_or_default();
    if is_tree && String::from_utf8_lossy(&recorded).trim() == sha256 {
        return Ok(Published::Kept);
    }
    let tmp = layout::temp_beside(&unpack.into, layout::UNPACK_SUFFIX);
    std::fs::create_dir(&tmp).map_err(|e| local("create a temp directory beside", e))?;
    let unpacked = match archive::unpack(path, unpack.format, &tmp, limits) {
        Ok(unpacked) => unpacked,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(refused(a, e));
        }
    };
    // A bundle's layer: what is published is the one path it holds.
    let published = match &unpack.strip {
        Some(strip) => match lifted(&tmp, strip) {
            Ok(inner) => inner,
            Err(why) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(Failure {
                    kind: FailureKind::Integrity,
                    message: format!(
                        "{}: layer refused, nothing of it was published: {why}",
                        a.display_uri
                    ),
                });
            }
        },
        None => tmp.clone(),
    };
    // Swap: the old tree moves aside under a reserved name, the new one takes its
    // place, the old one goes. A crash in between leaves only reserved names,
    // which the next run sweeps.
    let _ = std::fs::remove_file(&marker);
    let swap = || -> std::io::Result<()> {
        if std::fs::symlink_metadata(&unpack.into).is_ok() {
            let old = layout::temp_beside(&unpack.into, layout::OLD_SUFFIX);
            std::fs::rename(&unpack.into, &old)?;
            std::fs::rename(&published, &unpack.into)?;
            layout::remove_any(&old)
        } else {
            std::fs::rename(&published, &unpack.into)
        }
    };
    let swapped = swap();
    if swapped.is_err() || published != tmp {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if let Err(e) = swapped {
        return Err(local("move the unpacked archive into", e));
    }
    layout::write_atomic(&marker, sha256.as_bytes(), fsync)
        .map_err(|e| local("record the unpack of", e))?;
    Ok(Published::Unpacked {
        entries: unpacked.entries,
        bytes: unpacked.bytes,
    })
}

/// `strip` under `tmp`, where a layer was unpacked, when it is all the layer
/// holds: a file or a directory (not a link), and nothing beside the
/// directories leading to it.
pub(super) fn lifted(tmp: &Path, strip: &Path) -> Result<std::path::PathBuf, String> {
    let mut at = tmp.to_path_buf();
    for part in strip.components() {
        let std::path::Component::Normal(part) = part else {
            return Err(format!(
                "'{}' is not a plain relative path",
                strip.display()
            ));
        };
        let mut names: Vec<_> = std::fs::read_dir(&at)
            .and_then(|entries| entries.map(|e| e.map(|e| e.file_name())).collect())
            .map_err(|e| format!("cannot list what it holds: {e}"))?;
        names.retain(|n| n != part);
        if let Some(other) = names.first() {
            return Err(format!(
                "it holds '{}' beside '{}', the one path its annotation names",
                other.to_string_lossy().escape_debug(),
                strip.display()
            ));
        }
        at.push(part);
    }
    match std::fs::symlink_metadata(&at) {
        Ok(md) if md.is_file() => Ok(at),
        // Its links were checked against the unpack directory: they must stay
        // inside what is published.
        Ok(md) if md.is_dir() => {
            links_within(&at, Path::new(""))?;
            Ok(at)
        }
        Ok(_) => Err(format!("'{}' is a link", strip.display())),
        Err(_) => Err(format!(
            "it does not hold '{}', the path its annotation names",
            strip.display()
        )),
    }
}

/// Every symlink under `root.join(rel)` points inside `root`.
fn links_within(root: &Path, rel: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(root.join(rel)).map_err(|e| format!("cannot list it: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list it: {e}"))?;
        let path = rel.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot list it: {e}"))?;
        if kind.is_dir() {
            links_within(root, &path)?;
        } else if kind.is_symlink() {
            use std::os::unix::ffi::OsStrExt as _;
            let target = std::fs::read_link(root.join(&path))
                .map_err(|e| format!("cannot read a link: {e}"))?;
            archive::enclosed_link_target(&path, target.as_os_str().as_bytes()).map_err(|why| {
                format!("'{}' {why} (here: the directory published)", path.display())
            })?;
        }
    }
    Ok(())
}

/// A local I/O failure while publishing `a` at `place`.
pub(super) fn local_failure(a: &Artifact, what: &str, place: &Path, e: std::io::Error) -> Failure {
    Failure {
        kind: FailureKind::LocalIo,
        message: format!(
            "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
            a.display_uri,
            place.display()
        ),
    }
}

/// An archive the unpacking rules refused (an integrity failure), or one that
/// could not be written.
pub(super) fn refused(a: &Artifact, e: ArchiveError) -> Failure {
    let message = crate::util::redact::error_chain(&e);
    if e.is_refusal() {
        Failure {
            kind: FailureKind::Integrity,
            message: format!(
                "{}: archive refused, nothing of it was unpacked: {message}",
                a.display_uri
            ),
        }
    } else {
        Failure {
            kind: FailureKind::LocalIo,
            message: format!(
                "{}: cannot unpack the archive: {message}; check free space and permissions of the volume",
                a.display_uri
            ),
        }
    }
}

/// The jars at the top level of an unpacked archive, by name (`--archive-classpath`).
pub(crate) fn top_level_jars(into: &Path) -> Vec<std::path::PathBuf> {
    let mut jars: Vec<_> = std::fs::read_dir(into)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| classpath_jar(p))
        .collect();
    jars.sort();
    jars
}

/// Whether `p` is a jar that can go on the classpath (as Java's `dir/*` takes
/// them: regular `.jar` files); warns about one whose path the classpath cannot hold.
pub(crate) fn classpath_jar(p: &Path) -> bool {
    if !(p.is_file() && p.extension().is_some_and(|x| x.eq_ignore_ascii_case("jar"))) {
        return false;
    }
    // The classpath is ':'-separated, one line: such names cannot go on it.
    let name = p.to_string_lossy();
    let safe = !name.contains(':') && !name.chars().any(char::is_control);
    if !safe {
        tracing::warn!(
            "{} cannot go on the classpath (':' or a control character in its path); skipped",
            name.escape_debug()
        );
    }
    safe
}

#[cfg(test)]
mod tests {
    use super::lifted;
    use std::path::Path;

    #[test]
    fn a_bundle_layer_publishes_its_one_path_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        std::fs::create_dir_all(t.join("jars")).unwrap();
        std::fs::write(t.join("jars/a.jar"), "a").unwrap();
        assert_eq!(
            lifted(t, Path::new("jars/a.jar")).unwrap(),
            t.join("jars/a.jar")
        );
        // Another path than the annotation names.
        let err = lifted(t, Path::new("jars/b.jar")).unwrap_err();
        assert!(err.contains("'a.jar' beside 'jars/b.jar'"), "{err}");
        // Something beside it, at any level.
        std::fs::write(t.join("evil"), "x").unwrap();
        let err = lifted(t, Path::new("jars/a.jar")).unwrap_err();
        assert!(err.contains("'evil'"), "{err}");
        std::fs::remove_file(t.join("evil")).unwrap();
        // A link is not published.
        std::os::unix::fs::symlink("/etc/passwd", t.join("jars/l.jar")).unwrap();
        std::fs::remove_file(t.join("jars/a.jar")).unwrap();
        let err = lifted(t, Path::new("jars/l.jar")).unwrap_err();
        assert!(err.contains("is a link"), "{err}");
        assert!(lifted(t, Path::new("../x")).is_err());
        // A tree, whose links stay inside it.
        std::fs::remove_file(t.join("jars/l.jar")).unwrap();
        std::fs::create_dir_all(t.join("jars/model/deep")).unwrap();
        std::os::unix::fs::symlink("../x", t.join("jars/model/deep/in")).unwrap();
        assert_eq!(
            lifted(t, Path::new("jars/model")).unwrap(),
            t.join("jars/model")
        );
        // One that climbs out of what is published (not out of the unpack directory).
        std::os::unix::fs::symlink("../../x", t.join("jars/model/deep/out")).unwrap();
        let err = lifted(t, Path::new("jars/model")).unwrap_err();
        assert!(err.contains("deep/out"), "{err}");
    }
}
