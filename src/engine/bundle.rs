//! Publishes a staging bundle flat, as the original init container laid it out:
//! every file at the top of the bundle becomes `<dir>/<file>`, each replaced
//! atomically and recorded as coming from the bundle; a marker names the bundle's
//! digest and files, so a restarted run keeps a bundle whose files still verify.

use std::path::{Path, PathBuf};

use super::outcome::{BundleEntry, Failure, FailureKind};
use super::unpack::{local_failure, refused, Published};
use crate::archive::{self, Limits};
use crate::layout;
use crate::plan::{Artifact, Target};

/// The marker of a published staging bundle: its digest and its files, in order.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct BundleMarker {
    sha256: String,
    entries: Vec<BundleEntry>,
}

fn read_marker(artifact: &Artifact) -> Option<BundleMarker> {
    let Target::Fetch { dir, .. } = &artifact.target else {
        return None;
    };
    let text =
        crate::util::fs::read_regular(&layout::unpacked_marker(dir, &artifact.name), 16 << 20)
            .ok()?;
    serde_json::from_slice(&text).ok()
}

/// The files staging bundle `artifact` published, in the bundle's order, if it was
/// published from the bundle with digest `sha256`.
pub(crate) fn bundle_entries(artifact: &Artifact, sha256: &str) -> Option<Vec<BundleEntry>> {
    read_marker(artifact)
        .filter(|marker| marker.sha256 == sha256)
        .map(|marker| marker.entries)
}

/// Paths (as resolved) that artifacts of the plan or spark-localizer's own
/// outputs take, with who takes each: a bundle's file may not land on them.
pub(crate) type Claims = std::collections::HashMap<PathBuf, String>;

/// Publishes staging bundle `artifact` (kept at its target path, with digest
/// `sha256`). Kept when an earlier run published this very bundle and every file
/// still verifies. Blocking.
pub(crate) fn publish_bundle(
    artifact: &Artifact,
    sha256: &str,
    limits: &Limits,
    claims: &mut Claims,
    fsync: bool,
) -> Result<Published, Failure> {
    let Target::Fetch {
        dir,
        path,
        real_dir,
        ..
    } = &artifact.target
    else {
        return Ok(Published::Kept);
    };
    let bundle = Bundle {
        artifact,
        dir,
        real_dir,
        sha256,
        fsync,
    };
    let old = read_marker(artifact);
    if let Some(marker) = old.as_ref().filter(|marker| marker.sha256 == sha256) {
        if bundle.intact(marker, claims) {
            bundle.claim_all(&marker.entries, claims);
            return Ok(Published::Kept);
        }
        tracing::debug!(uri = %artifact.display_uri, "files of the bundle changed since it was published; publishing them again");
    }
    let temp = layout::temp_beside(&dir.join(&artifact.name), layout::UNPACK_SUFFIX);
    std::fs::create_dir(&temp).map_err(|e| bundle.local("create a temp directory in", e))?;
    let result = (|| {
        let (unpacked, order) =
            archive::unpack_listing(path, archive::Format::TarGz, &temp, limits)
                .map_err(|e| refused(artifact, e))?;
        // A `bundle` image's layer of several jars: they are under its path.
        let (root, order) = match artifact.unpack.as_ref().and_then(|u| u.strip.as_ref()) {
            Some(strip) => {
                let root = super::unpack::lifted(&temp, strip)
                    .map_err(|why| bundle.not_flat(&strip.to_string_lossy(), &why))?;
                let order = order
                    .iter()
                    .map(|p| p.strip_prefix(strip).map(Path::to_path_buf))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| {
                        bundle.not_flat(&strip.to_string_lossy(), "holds files outside it")
                    })?;
                (root, order)
            }
            None => (temp.clone(), order),
        };
        let names = bundle.flat_names(&order, &root, claims)?;
        let entries = bundle.hash_entries(&root, names)?;
        bundle.replace_files(&root, &entries, old.as_ref())?;
        bundle.claim_all(&entries, claims);
        Ok(Published::Unpacked {
            entries: unpacked.entries,
            bytes: unpacked.bytes,
        })
    })();
    let _ = std::fs::remove_dir_all(&temp);
    result
}

/// One bundle being published into `dir` (`real_dir` resolved).
struct Bundle<'a> {
    artifact: &'a Artifact,
    dir: &'a Path,
    real_dir: &'a Path,
    sha256: &'a str,
    fsync: bool,
}

impl Bundle<'_> {
    fn local(&self, what: &str, e: std::io::Error) -> Failure {
        local_failure(self.artifact, what, self.dir, e)
    }

    /// A file of the bundle may not land where another artifact or an output goes.
    fn claim(&self, claims: &Claims, name: &str) -> Result<(), Failure> {
        match claims.get(&self.real_dir.join(name)) {
            Some(who) => Err(Failure {
                kind: FailureKind::Integrity,
                message: format!(
                    "{}: the bundle holds {name}, which {who} also puts at {}; rename one of them",
                    self.artifact.display_uri,
                    self.dir.join(name).display()
                ),
            }),
            None => Ok(()),
        }
    }

    fn claim_all(&self, entries: &[BundleEntry], claims: &mut Claims) {
        for entry in entries {
            claims.insert(
                self.real_dir.join(&entry.name),
                self.artifact.display_uri.clone(),
            );
        }
    }

    /// Whether every file an earlier publish of this bundle left is still there,
    /// unchanged, and free to take.
    fn intact(&self, marker: &BundleMarker, claims: &Claims) -> bool {
        marker.entries.iter().all(|entry| {
            let file = self.dir.join(&entry.name);
            self.claim(claims, &entry.name).is_ok()
                && std::fs::symlink_metadata(&file).is_ok_and(|md| md.is_file())
                && layout::hash_file(&file).is_ok_and(|(size, digest)| {
                    size == entry.size && hex::encode(digest) == entry.sha256
                })
        })
    }

    fn not_flat(&self, entry: &str, what: &str) -> Failure {
        Failure {
            kind: FailureKind::Integrity,
            message: format!(
                "{}: bundle refused, nothing of it was published: entry '{}' {what}; {}",
                self.artifact.display_uri,
                entry.escape_debug(),
                if self.artifact.oci.is_some() {
                    "a layer of several jars holds regular files under jars/ only (as `spark-localizer bundle` makes it)"
                } else {
                    "a staging bundle holds regular files at its top level only (as stage upload makes it)"
                }
            ),
        }
    }

    /// The names of the unpacked files, in the bundle's order: each a regular file
    /// at the top level, with a valid destination name nobody else claims.
    fn flat_names(
        &self,
        order: &[PathBuf],
        temp: &Path,
        claims: &Claims,
    ) -> Result<Vec<String>, Failure> {
        let mut names = Vec::with_capacity(order.len());
        for relative in order {
            let name = layout::bundle_file_name(relative)
                .map_err(|why| self.not_flat(&relative.to_string_lossy(), why))?;
            self.claim(claims, name)?;
            names.push(name.to_owned());
        }
        let listing =
            std::fs::read_dir(temp).map_err(|e| self.local("list the unpacked bundle in", e))?;
        for entry in listing {
            let entry = entry.map_err(|e| self.local("list the unpacked bundle in", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let regular = entry.file_type().is_ok_and(|kind| kind.is_file());
            if !regular || !names.contains(&name) {
                return Err(self.not_flat(&name, "is not a regular file"));
            }
        }
        Ok(names)
    }

    fn hash_entries(&self, temp: &Path, names: Vec<String>) -> Result<Vec<BundleEntry>, Failure> {
        names
            .into_iter()
            .map(|name| {
                let (size, digest) = layout::hash_file(&temp.join(&name))
                    .map_err(|e| self.local("read the unpacked bundle in", e))?;
                Ok(BundleEntry {
                    name,
                    size,
                    sha256: hex::encode(digest),
                })
            })
            .collect()
    }

    /// Forgets the marker, then each file replaces its name atomically and is
    /// recorded as this bundle's (an interrupted run leaves only files of this
    /// bundle, which the next run publishes again); files an earlier publish of
    /// this bundle had and this one does not go; the marker is written last.
    fn replace_files(
        &self,
        temp: &Path,
        entries: &[BundleEntry],
        old: Option<&BundleMarker>,
    ) -> Result<(), Failure> {
        let dir = self.dir;
        let bundle_key = self.artifact.record_key();
        let marker = layout::unpacked_marker(dir, &self.artifact.name);
        let _ = std::fs::remove_file(&marker);
        for entry in entries {
            let target = dir.join(&entry.name);
            layout::remove_record(dir, &entry.name);
            if std::fs::symlink_metadata(&target).is_ok_and(|md| md.is_dir()) {
                layout::remove_any(&target).map_err(|e| self.local("replace a directory in", e))?;
            }
            std::fs::rename(temp.join(&entry.name), &target)
                .map_err(|e| self.local("move a file of the bundle into", e))?;
            let record = layout::Record {
                uri_sha256: bundle_key.clone(),
                size: entry.size,
                sha256: entry.sha256.clone(),
            };
            layout::write_record(dir, &entry.name, &record, self.fsync)
                .map_err(|e| self.local("record a file of the bundle in", e))?;
        }
        for gone in old.iter().flat_map(|marker| &marker.entries) {
            let ours = layout::read_record(dir, &gone.name)
                .is_some_and(|record| record.uri_sha256 == bundle_key);
            if ours && !entries.iter().any(|entry| entry.name == gone.name) {
                layout::remove_record(dir, &gone.name);
                let _ = layout::remove_any(&dir.join(&gone.name));
            }
        }
        let json = serde_json::to_vec(&BundleMarker {
            sha256: self.sha256.to_owned(),
            entries: entries.to_vec(),
        })
        .expect("marker serializes");
        layout::write_atomic(&marker, &json, self.fsync)
            .map_err(|e| self.local("record the publish of the bundle in", e))
    }
}
