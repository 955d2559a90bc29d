//! The archive walker of `spark.archives` (tar, tar.gz, zip), and the staging
//! server's walk-only check of uploaded bundles.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::archive::validate::{list_tar_gz, Kind};
use crate::archive::{unpack_listing, ArchiveError, Format, Limits, Unpacked};

/// Small limits, so that fuzzed inputs reach them.
const LIMITS: Limits = Limits {
    max_bytes: 1 << 20,
    max_entries: 64,
    max_ratio: 200,
};

/// Fuzz entry point: an archive; the first byte picks how the rest is read (a
/// tar, a tar gzipped here so that mutations reach the tar, raw gzip, a zip).
/// Whatever is accepted wrote only inside its root: no path outside it exists,
/// every symlink resolves inside it, no setuid or setgid bit, within the limits;
/// accepted or not, the files on disk never hold more than the byte limit.
/// For tar.gz, the staging server's walk-only check accepts exactly what unpack
/// accepts, with the same totals and entries; and every gzip member is read: the
/// same tar split into several members (the rest of the first byte says where)
/// unpacks to the same entries as in one.
pub fn archive(data: &[u8]) {
    let Some((&how, body)) = data.split_first() else {
        return;
    };
    let (format, bytes) = match how % 4 {
        0 => (Format::Tar, body.to_vec()),
        1 => (Format::TarGz, gzip(body)),
        2 => (Format::TarGz, body.to_vec()),
        _ => (Format::Zip, body.to_vec()),
    };
    let whole = unpack_checked(format, &bytes);
    let members = match how % 4 {
        1 => Some(split_members(body, usize::from(how / 4))),
        // Raw gzip read in full (all its members, nothing after them): the same
        // tar in one member.
        2 => {
            let mut tar = Vec::new();
            flate2::read::MultiGzDecoder::new(body)
                .read_to_end(&mut tar)
                .ok()
                .map(|_| gzip(&tar))
        }
        _ => None,
    };
    if let Some(other) = members {
        let again = unpack_checked(Format::TarGz, &other);
        match (&whole, &again) {
            (Some(a), Some(b)) => assert_eq!(a, b, "members unpack to other entries"),
            (None, None) => {}
            _ => panic!("one member and several disagree: {whole:?} vs {again:?}"),
        }
    }
}

/// `tar` gzipped as members: cut at `at`/64 of its length, with an empty member
/// between the halves when `at` is odd.
fn split_members(tar: &[u8], at: usize) -> Vec<u8> {
    let cut = tar.len() * (at % 64) / 64;
    let mut out = gzip(&tar[..cut]);
    if at % 2 == 1 {
        out.extend(gzip(b""));
    }
    out.extend(gzip(&tar[cut..]));
    out
}

/// Unpacks `bytes` as `format`, checking every invariant; what was unpacked
/// (totals and files, in order) or `None` when refused.
fn unpack_checked(format: Format, bytes: &[u8]) -> Option<(Unpacked, Vec<PathBuf>)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("archive");
    std::fs::write(&file, bytes).expect("the archive written");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).expect("the root");
    let unpacked = unpack_listing(&file, format, &root, &LIMITS);
    // Nothing beside the root, whatever happened.
    let mut beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    beside.sort();
    assert_eq!(
        beside,
        ["archive", "root"],
        "something was written beside the root"
    );
    let mut inodes = HashSet::new();
    let on_disk: u64 = walk(&root)
        .iter()
        .filter(|(_, meta)| meta.is_file() && inodes.insert(meta.ino()))
        .map(|(_, meta)| meta.len())
        .sum();
    assert!(
        on_disk <= LIMITS.max_bytes,
        "{on_disk} bytes on disk, over the limit ({unpacked:?})"
    );
    // A tar entry writes what its header declares: one too large for the limit
    // is refused from its header, before a byte of it is written.
    if let Err(e @ ArchiveError::Limit { flag, .. }) = &unpacked {
        if *flag == "--archive-max-bytes" && format != Format::Zip {
            assert!(e.to_string().contains(" declares "), "refused late: {e}");
        }
    }
    let listed = (format == Format::TarGz).then(|| list_tar_gz(&file, &LIMITS));
    let Ok((totals, files)) = unpacked else {
        if let Some(listed) = listed {
            assert!(
                listed.is_err(),
                "the walk accepts what unpack refuses: {:?}",
                unpacked.err()
            );
        }
        return None;
    };
    assert!(totals.entries <= LIMITS.max_entries && totals.bytes <= LIMITS.max_bytes);
    let mut written = 0;
    let mut inodes = HashSet::new();
    let tree = walk(&root);
    for (path, meta) in &tree {
        let mode = meta.permissions().mode();
        assert_eq!(mode & 0o6000, 0, "{} has setuid or setgid", path.display());
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).unwrap();
            let inside = lexically_inside(&root, path.parent().unwrap(), &target);
            assert!(
                inside,
                "{} -> {} leaves the root",
                path.display(),
                target.display()
            );
        } else if meta.is_file() && inodes.insert(meta.ino()) {
            written += meta.len();
        }
    }
    assert_eq!(written, totals.bytes, "bytes on disk and counted differ");
    for f in &files {
        let meta = std::fs::symlink_metadata(root.join(f)).expect("a listed file is missing");
        assert!(meta.is_file(), "{} is listed as a file", f.display());
    }
    if let Some(listed) = listed {
        let listing =
            listed.unwrap_or_else(|e| panic!("the walk refuses what unpack accepts: {e}"));
        assert_eq!(listing.unpacked, totals);
        for (path, kind) in &listing.entries {
            let meta = std::fs::symlink_metadata(root.join(path))
                .unwrap_or_else(|e| panic!("{} listed, not unpacked: {e}", path.display()));
            let ok = match kind {
                Kind::Dir => meta.is_dir(),
                Kind::File | Kind::HardLink => meta.is_file(),
                Kind::Symlink => meta.file_type().is_symlink(),
            };
            assert!(ok, "{} listed as {kind:?}", path.display());
        }
    }
    Some((totals, files))
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    out.write_all(data).unwrap();
    out.finish().unwrap()
}

/// Every path under `root` (not following symlinks), with its metadata.
fn walk(root: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path.clone());
            }
            out.push((path, meta));
        }
    }
    out
}

/// Whether `target`, a symlink's target in `dir`, resolves inside `root`, every
/// symlink on the way followed as the kernel would (a loop of more than 40 hops
/// resolves to nothing).
fn lexically_inside(root: &Path, dir: &Path, target: &Path) -> bool {
    let mut hops = 0;
    let mut path = dir.join(target);
    'resolve: loop {
        let parts: Vec<Component<'_>> = path.components().collect();
        let mut at = PathBuf::new();
        for (i, part) in parts.iter().enumerate() {
            match part {
                Component::ParentDir => {
                    at.pop();
                }
                Component::CurDir => {}
                other => at.push(other),
            }
            if !at.starts_with(root) {
                continue;
            }
            if let Ok(link) = std::fs::read_link(&at) {
                hops += 1;
                if hops > 40 {
                    return true;
                }
                let rest: PathBuf = parts[i + 1..].iter().collect();
                path = at.parent().unwrap().join(link).join(rest);
                continue 'resolve;
            }
        }
        return at.starts_with(root);
    }
}
