//! Reproducible OCI images of a directory of localized files, as `bundle`
//! pushes them: one gzip'd tar layer per jar, file or unpacked archive, a last
//! layer for the classpath outputs, a config and a manifest per platform and an
//! index over them. The same files give the same bytes: entries sorted, every
//! mtime 0, owner 0:0 with no names, modes 0644 (0755 for directories and
//! executables), gzip without a name or a time.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::manifest::{OCI_INDEX, OCI_MANIFEST};

/// A layer's media type: a gzip'd tar, as container runtimes unpack it.
pub(crate) const LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// An image config's media type.
pub(crate) const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// The annotation saying which path of the image a layer holds.
pub(crate) const LAYER_PATH: &str = "io.github.spark-localizer.path";
/// The path annotation of the last layer (the classpath outputs and the SBOM).
pub(crate) const OUTPUTS_PATH: &str = "classpath";
/// The prefix of an OCI whiteout: a runtime hides the name it follows, so no
/// entry of an image may start with it.
pub(crate) const WHITEOUT: &str = ".wh.";
/// The platforms every bundle is pushed for (its files are the same on each).
pub(crate) const PLATFORMS: [&str; 2] = ["amd64", "arm64"];

/// Read and written at a time: the stop flag is looked at between two.
const CHUNK: usize = 1 << 20;

/// One layer written to a file: its blob's digest and size, and the digest of
/// the uncompressed tar (the config's `diff_id`).
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub blob: PathBuf,
    pub digest: String,
    pub size: u64,
    pub diff_id: String,
    /// The path in the image the layer holds (`jars/x.jar`, or the last
    /// layer's name).
    pub path: String,
}

/// Why a layer could not be written.
#[derive(Debug)]
pub(crate) enum PackError {
    Io(PathBuf, io::Error),
    /// Something other than a regular file, a directory or a symlink, or a
    /// name an image cannot hold.
    Unsupported(PathBuf),
    Stopped,
}

impl std::fmt::Display for PackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PackError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            PackError::Unsupported(path) => write!(
                f,
                "{}: not a file, a directory or a symlink, or its name is not UTF-8 or starts with {WHITEOUT} (an OCI whiteout); it cannot go in an image",
                path.display()
            ),
            PackError::Stopped => f.write_str("stopped"),
        }
    }
}

/// A writer that hashes and counts what goes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    count: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            hash: Sha256::new(),
            count: 0,
        }
    }

    fn digest(&self) -> String {
        format!("sha256:{}", hex::encode(self.hash.clone().finalize()))
    }
}

/// What one layer holds: entries under `at` (a path in the image), read from
/// `from` (a file or a directory tree), or the classpath outputs' files given
/// as bytes (the layer of [`OUTPUTS_PATH`]).
pub(crate) enum Content<'a> {
    Tree {
        from: &'a Path,
        at: &'a str,
    },
    /// Files `names` of `dir`, in that order, under `at` (a layer of several
    /// jars: its path is `at/`).
    Group {
        dir: &'a Path,
        names: &'a [String],
        at: &'a str,
    },
    Outputs(&'a [(String, Vec<u8>)]),
}

/// Writes one layer to `blob`: a gzip'd tar of `content`, with the parent
/// directories of its paths first. Checks `stop` between chunks.
pub(crate) fn write_layer(
    content: &Content<'_>,
    blob: &Path,
    stop: &AtomicBool,
) -> Result<Layer, PackError> {
    let io_err = |e| PackError::Io(blob.to_owned(), e);
    let file = File::create(blob).map_err(io_err)?;
    let compressed = Hashing::new(io::BufWriter::with_capacity(CHUNK, file));
    // No name, no time, "unknown" OS: the same tar gives the same bytes.
    let gzip = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(compressed, flate2::Compression::default());
    let mut tar = tar::Builder::new(Hashing::new(gzip));
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    let path = match content {
        Content::Tree { from, at } => {
            parents(&mut tar, at).map_err(io_err)?;
            append_tree(&mut tar, from, at, stop)?;
            (*at).to_owned()
        }
        Content::Group { dir, names, at } => {
            parents(&mut tar, &format!("{at}/x")).map_err(io_err)?;
            for name in names.iter() {
                append_tree(&mut tar, &dir.join(name), &format!("{at}/{name}"), stop)?;
            }
            format!("{at}/")
        }
        Content::Outputs(files) => {
            for (name, bytes) in files.iter() {
                parents(&mut tar, name).map_err(io_err)?;
                append(
                    &mut tar,
                    name,
                    tar::EntryType::Regular,
                    0o644,
                    bytes.len() as u64,
                    &bytes[..],
                )
                .map_err(io_err)?;
            }
            OUTPUTS_PATH.to_owned()
        }
    };
    let uncompressed = tar.into_inner().map_err(io_err)?;
    let diff_id = uncompressed.digest();
    let compressed = uncompressed.inner.finish().map_err(io_err)?;
    let digest = compressed.digest();
    let size = compressed.count;
    let file = compressed
        .inner
        .into_inner()
        .map_err(|e| io_err(e.into_error()))?;
    file.sync_all().map_err(io_err)?;
    Ok(Layer {
        blob: blob.to_owned(),
        digest,
        size,
        diff_id,
        path,
    })
}

/// The directories above `path` (`jars/` for `jars/x.jar`), each an entry.
fn parents<W: Write>(tar: &mut tar::Builder<W>, path: &str) -> io::Result<()> {
    let parts: Vec<&str> = path.split('/').collect();
    for i in 1..parts.len() {
        let dir = format!("{}/", parts[..i].join("/"));
        append(tar, &dir, tar::EntryType::Directory, 0o755, 0, io::empty())?;
    }
    Ok(())
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    kind: tar::EntryType,
    mode: u32,
    size: u64,
    data: impl Read,
) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    tar.append_data(&mut header, path, data)
}

/// `from` (a file, or a directory walked in name order) as entries under `at`.
fn append_tree<W: Write>(
    tar: &mut tar::Builder<W>,
    from: &Path,
    at: &str,
    stop: &AtomicBool,
) -> Result<(), PackError> {
    if stop.load(Ordering::Relaxed) {
        return Err(PackError::Stopped);
    }
    let io_err = |e| PackError::Io(from.to_owned(), e);
    let meta = std::fs::symlink_metadata(from).map_err(io_err)?;
    let kind = meta.file_type();
    if kind.is_file() {
        let file = File::open(from).map_err(io_err)?;
        let reader = Stoppable { inner: file, stop };
        // An executable (an unpacked archive's bin/python) stays one.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        append(tar, at, tar::EntryType::Regular, mode, meta.len(), reader).map_err(|e| {
            if stop.load(Ordering::Relaxed) {
                PackError::Stopped
            } else {
                io_err(e)
            }
        })
    } else if kind.is_dir() {
        append(
            tar,
            &format!("{at}/"),
            tar::EntryType::Directory,
            0o755,
            0,
            io::empty(),
        )
        .map_err(io_err)?;
        let mut names: Vec<_> = std::fs::read_dir(from)
            .map_err(io_err)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io_err)?;
        names.sort();
        for name in names {
            let text = name
                .to_str()
                .filter(|n| !n.starts_with(WHITEOUT))
                .ok_or_else(|| PackError::Unsupported(from.join(&name)))?;
            let child = format!("{at}/{text}");
            append_tree(tar, &from.join(&name), &child, stop)?;
        }
        Ok(())
    } else if kind.is_symlink() {
        let target = std::fs::read_link(from).map_err(io_err)?;
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_mode(0o777);
        header.set_size(0);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_link(&mut header, at, target).map_err(io_err)
    } else {
        Err(PackError::Unsupported(from.to_owned()))
    }
}

/// A reader that fails once `stop` is set (a large file is not read to the end
/// after a stop).
struct Stoppable<'a, R> {
    inner: R,
    stop: &'a AtomicBool,
}

impl<R: Read> Read for Stoppable<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("stopped"));
        }
        self.inner.read(buf)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor<'a> {
    media_type: &'a str,
    digest: &'a str,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<&'a str, &'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    platform: Option<Platform<'a>>,
}

#[derive(Serialize)]
struct Platform<'a> {
    architecture: &'a str,
    os: &'a str,
}

/// A manifest or config ready to push: its bytes, digest and media type.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub media_type: &'static str,
    pub bytes: Vec<u8>,
    pub digest: String,
}

impl Document {
    fn new(media_type: &'static str, value: &serde_json::Value) -> Document {
        let bytes = serde_json::to_vec(value).expect("a document serializes");
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        Document {
            media_type,
            bytes,
            digest,
        }
    }
}

/// The config, manifest per platform of [`PLATFORMS`] and the index over them.
pub(crate) struct Image {
    pub configs: Vec<Document>,
    pub manifests: Vec<Document>,
    pub index: Document,
}

/// The documents of an image of `layers` (in order), whose files are the
/// same on every platform; `annotations` go on the index and the manifests.
pub(crate) fn image(layers: &[Layer], annotations: &[(&str, &str)]) -> Image {
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.diff_id.as_str()).collect();
    let annotations: std::collections::BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let layer_descriptors: Vec<Descriptor<'_>> = layers
        .iter()
        .map(|l| Descriptor {
            media_type: LAYER_TAR_GZIP,
            digest: &l.digest,
            size: l.size,
            annotations: Some([(LAYER_PATH, l.path.as_str())].into_iter().collect()),
            platform: None,
        })
        .collect();
    let mut configs = Vec::new();
    let mut manifests = Vec::new();
    for arch in PLATFORMS {
        // No `created`, no history: nothing that changes from one run to the next.
        let config = Document::new(
            CONFIG,
            &serde_json::json!({
                "architecture": arch,
                "os": "linux",
                "config": {},
                "rootfs": { "type": "layers", "diff_ids": diff_ids },
            }),
        );
        let manifest = Document::new(
            OCI_MANIFEST,
            &serde_json::json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": Descriptor {
                    media_type: CONFIG,
                    digest: &config.digest,
                    size: config.bytes.len() as u64,
                    annotations: None,
                    platform: None,
                },
                "layers": layer_descriptors,
                "annotations": annotations,
            }),
        );
        configs.push(config);
        manifests.push(manifest);
    }
    let entries: Vec<Descriptor<'_>> = manifests
        .iter()
        .zip(PLATFORMS)
        .map(|(m, arch)| Descriptor {
            media_type: OCI_MANIFEST,
            digest: &m.digest,
            size: m.bytes.len() as u64,
            annotations: None,
            platform: Some(Platform {
                architecture: arch,
                os: "linux",
            }),
        })
        .collect();
    let index = Document::new(
        OCI_INDEX,
        &serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": entries,
            "annotations": annotations,
        }),
    );
    Image {
        configs,
        manifests,
        index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer_of(dir: &Path, at: &str, from: &Path) -> Layer {
        let stop = AtomicBool::new(false);
        write_layer(
            &Content::Tree { from, at },
            &dir.join(format!("{}.tgz", at.replace('/', "_"))),
            &stop,
        )
        .unwrap()
    }

    fn entries(blob: &Path) -> Vec<(String, u32, u64, u64, Vec<u8>)> {
        let gz = flate2::read::GzDecoder::new(File::open(blob).unwrap());
        let mut archive = tar::Archive::new(gz);
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let h = e.header().clone();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    h.mode().unwrap(),
                    h.mtime().unwrap(),
                    h.uid().unwrap(),
                    data,
                )
            })
            .collect()
    }

    #[test]
    fn the_same_files_give_the_same_layer_whatever_their_times_and_modes() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        for (dir, mode, secs) in [(&a, 0o600, 1_000_000), (&b, 0o664, 2_000_000)] {
            let tree = dir.path().join("conf");
            std::fs::create_dir_all(tree.join("z")).unwrap();
            std::fs::write(tree.join("b.txt"), b"bee").unwrap();
            std::fs::write(tree.join("z/a.txt"), b"a").unwrap();
            std::fs::write(tree.join("z/run"), b"#!/bin/sh\n").unwrap();
            let exec = if secs == 1_000_000 { 0o700 } else { 0o755 };
            std::fs::set_permissions(tree.join("z/run"), std::fs::Permissions::from_mode(exec))
                .unwrap();
            let file = dir.path().join("x.jar");
            std::fs::write(&file, b"jar bytes").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        let out_a = out.path().join("a");
        let out_b = out.path().join("b");
        std::fs::create_dir_all(&out_a).unwrap();
        std::fs::create_dir_all(&out_b).unwrap();
        for at in ["jars/x.jar", "files/conf"] {
            let name = at.rsplit('/').next().unwrap();
            let one = layer_of(&out_a, at, &a.path().join(name));
            let two = layer_of(&out_b, at, &b.path().join(name));
            assert_eq!(one.digest, two.digest, "{at}");
            assert_eq!(one.diff_id, two.diff_id, "{at}");
            assert_eq!(std::fs::read(&one.blob).unwrap().len() as u64, one.size);
        }
        let jar = entries(&out_a.join("jars_x.jar.tgz"));
        assert_eq!(
            jar,
            vec![
                ("jars/".into(), 0o755, 0, 0, vec![]),
                ("jars/x.jar".into(), 0o644, 0, 0, b"jar bytes".to_vec()),
            ]
        );
        let names: Vec<(String, u32)> = entries(&out_a.join("files_conf.tgz"))
            .into_iter()
            .map(|e| (e.0, e.1))
            .collect();
        let want = [
            ("files/", 0o755),
            ("files/conf/", 0o755),
            ("files/conf/b.txt", 0o644),
            ("files/conf/z/", 0o755),
            ("files/conf/z/a.txt", 0o644),
            ("files/conf/z/run", 0o755),
        ];
        let want: Vec<(String, u32)> = want.iter().map(|(n, m)| (n.to_string(), *m)).collect();
        assert_eq!(names, want);
    }

    #[test]
    fn long_names_survive_and_a_stop_ends_the_layer() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}.jar", "n".repeat(190));
        let file = dir.path().join(&name);
        std::fs::write(&file, vec![7u8; 3 << 20]).unwrap();
        let at = format!("jars/{name}");
        let layer = layer_of(dir.path(), &at, &file);
        let got = entries(&layer.blob);
        assert_eq!(got[1].0, at);
        assert_eq!(got[1].4.len(), 3 << 20);
        let stop = AtomicBool::new(true);
        let stopped = write_layer(
            &Content::Tree {
                from: &file,
                at: &at,
            },
            &dir.path().join("stopped.tgz"),
            &stop,
        );
        assert!(matches!(stopped, Err(PackError::Stopped)), "{stopped:?}");
    }

    #[test]
    fn the_index_names_a_manifest_per_platform_over_the_same_layers() {
        let layers = vec![Layer {
            blob: PathBuf::new(),
            digest: format!("sha256:{}", "a".repeat(64)),
            size: 10,
            diff_id: format!("sha256:{}", "b".repeat(64)),
            path: "jars/x.jar".into(),
        }];
        let image = image(&layers, &[("org.opencontainers.image.title", "deps")]);
        let again = super::image(&layers, &[("org.opencontainers.image.title", "deps")]);
        assert_eq!(image.index.digest, again.index.digest);
        let index: serde_json::Value = serde_json::from_slice(&image.index.bytes).unwrap();
        let archs: Vec<&str> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(archs, PLATFORMS);
        for (m, c) in image.manifests.iter().zip(&image.configs) {
            let manifest: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
            assert_eq!(manifest["config"]["digest"], c.digest.as_str());
            assert_eq!(manifest["layers"][0]["digest"], layers[0].digest.as_str());
            let config: serde_json::Value = serde_json::from_slice(&c.bytes).unwrap();
            assert_eq!(config["rootfs"]["diff_ids"][0], layers[0].diff_id.as_str());
        }
    }
}
