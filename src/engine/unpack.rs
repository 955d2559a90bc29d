//! Publishes an archive's contents: unpack into a temp directory beside
//! `<files-dir>/<name>`, then swap it in; keep the directory when it was unpacked
//! from the same archive digest. The unpacking rules live in [`crate::archive`].

use std::path::Path;

use super::outcome::FailureKind;
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
/// Blocking: run it on a blocking thread. Errors carry the exit code and a
/// message naming the archive and, for a refusal, the offending entry.
pub(crate) fn publish(
    a: &Artifact,
    sha256: &str,
    limits: &Limits,
    fsync: bool,
) -> Result<Published, (FailureKind, String)> {
    let (Some(unpack), Target::Fetch { dir, path, .. }) = (&a.unpack, &a.target) else {
        return Ok(Published::Kept);
    };
    let marker = layout::unpacked_marker(dir, &a.name);
    let local = |what: &str, e: std::io::Error| {
        (
            FailureKind::LocalIo,
            format!(
                "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
                a.shown,
                unpack.into.display()
            ),
        )
    };
    // symlink_metadata: a symlink planted at the name is never taken for the tree.
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
    // Swap: the old tree moves aside under a reserved name, the new one takes its
    // place, the old one goes. A crash in between leaves only reserved names,
    // which the next run sweeps.
    let _ = std::fs::remove_file(&marker);
    let swap = || -> std::io::Result<()> {
        if std::fs::symlink_metadata(&unpack.into).is_ok() {
            let old = layout::temp_beside(&unpack.into, layout::OLD_SUFFIX);
            std::fs::rename(&unpack.into, &old)?;
            std::fs::rename(&tmp, &unpack.into)?;
            layout::remove_any(&old)
        } else {
            std::fs::rename(&tmp, &unpack.into)
        }
    };
    if let Err(e) = swap() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(local("move the unpacked archive into", e));
    }
    layout::write_atomic(&marker, sha256.as_bytes(), fsync)
        .map_err(|e| local("record the unpack of", e))?;
    Ok(Published::Unpacked {
        entries: unpacked.entries,
        bytes: unpacked.bytes,
    })
}

/// One file a staging bundle published.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BundleEntry {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// The marker of a published staging bundle: its digest and its files, in order.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct BundleMarker {
    sha256: String,
    entries: Vec<BundleEntry>,
}

fn read_marker(a: &Artifact) -> Option<BundleMarker> {
    let Target::Fetch { dir, .. } = &a.target else {
        return None;
    };
    let text =
        crate::util::fs::read_regular(&layout::unpacked_marker(dir, &a.name), 16 << 20).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The files staging bundle `a` published, in the bundle's order, if it was
/// published from the bundle with digest `sha256`.
pub(crate) fn bundle_entries(a: &Artifact, sha256: &str) -> Option<Vec<BundleEntry>> {
    read_marker(a)
        .filter(|m| m.sha256 == sha256)
        .map(|m| m.entries)
}

/// Paths (as resolved) that artifacts of the plan or spark-localizer's own
/// outputs take, with who takes each: a bundle's file may not land on them.
pub(crate) type Claims = std::collections::HashMap<std::path::PathBuf, String>;

/// Publishes staging bundle `a` (kept at its target path, with digest `sha256`):
/// every file at the top of the bundle becomes `<dir>/<file>`, each replaced
/// atomically and recorded as coming from this bundle, as the original init
/// container laid them out. Kept when an earlier run published this very bundle
/// and every file still verifies. Blocking.
pub(crate) fn publish_bundle(
    a: &Artifact,
    sha256: &str,
    limits: &Limits,
    claims: &mut Claims,
    fsync: bool,
) -> Result<Published, (FailureKind, String)> {
    let Target::Fetch {
        dir,
        path,
        real_dir,
        ..
    } = &a.target
    else {
        return Ok(Published::Kept);
    };
    let local = |what: &str, e: std::io::Error| {
        (
            FailureKind::LocalIo,
            format!(
                "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
                a.shown,
                dir.display()
            ),
        )
    };
    let claim = |claims: &Claims, name: &str| -> Result<(), (FailureKind, String)> {
        match claims.get(&real_dir.join(name)) {
            Some(who) => Err((
                FailureKind::Integrity,
                format!(
                    "{}: the bundle holds {name}, which {who} also puts at {}; rename one of them",
                    a.shown,
                    dir.join(name).display()
                ),
            )),
            None => Ok(()),
        }
    };
    let bundle_uri = a.record_digest();
    let old = read_marker(a);
    if let Some(marker) = old.as_ref().filter(|m| m.sha256 == sha256) {
        let intact = marker.entries.iter().all(|e| {
            let file = dir.join(&e.name);
            claim(claims, &e.name).is_ok()
                && std::fs::symlink_metadata(&file).is_ok_and(|md| md.is_file())
                && layout::hash_file(&file)
                    .is_ok_and(|(size, digest)| size == e.size && hex::encode(digest) == e.sha256)
        });
        if intact {
            for e in &marker.entries {
                claims.insert(real_dir.join(&e.name), a.shown.clone());
            }
            return Ok(Published::Kept);
        }
        tracing::debug!(uri = %a.shown, "files of the bundle changed since it was published; publishing them again");
    }

    let tmp = layout::temp_beside(&dir.join(&a.name), layout::UNPACK_SUFFIX);
    std::fs::create_dir(&tmp).map_err(|e| local("create a temp directory in", e))?;
    let result = (|| {
        let (unpacked, order) =
            archive::unpack_listing(path, crate::archive::Format::TarGz, &tmp, limits)
                .map_err(|e| refused(a, e))?;
        let not_flat = |entry: &str, what: &str| {
            (
                FailureKind::Integrity,
                format!(
                    "{}: bundle refused, nothing of it was published: entry '{}' {what}; a staging bundle holds regular files at its top level only (as stage upload makes it)",
                    a.shown,
                    entry.escape_debug()
                ),
            )
        };
        let mut names = Vec::with_capacity(order.len());
        for rel in &order {
            let shown = rel.to_string_lossy();
            let mut parts = rel.components();
            let (Some(std::path::Component::Normal(first)), None) = (parts.next(), parts.next())
            else {
                return Err(not_flat(&shown, "is inside a directory"));
            };
            let name = first
                .to_str()
                .ok_or_else(|| not_flat(&shown, "has a name that is not UTF-8"))?;
            crate::layout::check_name(name).map_err(|why| not_flat(name, why))?;
            claim(claims, name)?;
            names.push(name.to_owned());
        }
        for entry in std::fs::read_dir(&tmp).map_err(|e| local("list the unpacked bundle in", e))? {
            let entry = entry.map_err(|e| local("list the unpacked bundle in", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let regular = entry.file_type().is_ok_and(|t| t.is_file());
            if !regular || !names.contains(&name) {
                return Err(not_flat(&name, "is not a regular file"));
            }
        }
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            let (size, digest) = layout::hash_file(&tmp.join(&name))
                .map_err(|e| local("read the unpacked bundle in", e))?;
            entries.push(BundleEntry {
                name,
                size,
                sha256: hex::encode(digest),
            });
        }
        // Publish: forget the marker, then each file replaces its name atomically
        // and is recorded as this bundle's (an interrupted run leaves only files
        // of this bundle, which the next run publishes again).
        let marker = layout::unpacked_marker(dir, &a.name);
        let _ = std::fs::remove_file(&marker);
        for e in &entries {
            let target = dir.join(&e.name);
            layout::remove_record(dir, &e.name);
            if std::fs::symlink_metadata(&target).is_ok_and(|md| md.is_dir()) {
                layout::remove_any(&target).map_err(|err| local("replace a directory in", err))?;
            }
            std::fs::rename(tmp.join(&e.name), &target)
                .map_err(|err| local("move a file of the bundle into", err))?;
            let record = layout::Record {
                uri_sha256: bundle_uri.clone(),
                size: e.size,
                sha256: e.sha256.clone(),
            };
            layout::write_record(dir, &e.name, &record, fsync)
                .map_err(|err| local("record a file of the bundle in", err))?;
        }
        // Files an earlier publish of this bundle had and this one does not.
        for gone in old.iter().flat_map(|m| &m.entries) {
            let ours =
                layout::read_record(dir, &gone.name).is_some_and(|r| r.uri_sha256 == bundle_uri);
            if ours && !entries.iter().any(|e| e.name == gone.name) {
                layout::remove_record(dir, &gone.name);
                let _ = layout::remove_any(&dir.join(&gone.name));
            }
        }
        let json = serde_json::to_vec(&BundleMarker {
            sha256: sha256.to_owned(),
            entries: entries.clone(),
        })
        .expect("marker serializes");
        layout::write_atomic(&marker, &json, fsync)
            .map_err(|e| local("record the publish of the bundle in", e))?;
        for e in &entries {
            claims.insert(real_dir.join(&e.name), a.shown.clone());
        }
        Ok(Published::Unpacked {
            entries: unpacked.entries,
            bytes: unpacked.bytes,
        })
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn refused(a: &Artifact, e: ArchiveError) -> (FailureKind, String) {
    let message = crate::util::redact::error_chain(&e);
    if e.is_refusal() {
        (
            FailureKind::Integrity,
            format!(
                "{}: archive refused, nothing of it was unpacked: {message}",
                a.shown
            ),
        )
    } else {
        (
            FailureKind::LocalIo,
            format!(
                "{}: cannot unpack the archive: {message}; check free space and permissions of the volume",
                a.shown
            ),
        )
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
