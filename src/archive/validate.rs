//! Walk-only validation of a tar.gz: the rules of [`super::unpack`] without
//! writing anything.
//!
//! The staging server checks every uploaded bundle with [`list_tar_gz`] so that
//! a bundle it accepts is one the localizer's unpack accepts too. Every entry is
//! read to its end (a corrupt gzip stream or a short entry is found), and the same
//! name, link, entry-type and limit rules apply; where unpack would find a symlink
//! or a file on the way to an entry (or a duplicate), the walk finds it in its own
//! record of the entries seen so far.

use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::{corrupt, enclosed_link_target, enclosed_name, refused, ArchiveError, Limits};
use super::{Budget, Unpacked, COPY_BUF};

/// What an entry (or an earlier entry) made a path into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    /// A hard link to a file earlier in the archive (a file where it lands).
    HardLink,
}

/// What a valid archive holds: its totals and its entries in order (the
/// relative path each takes, and what it is; the root itself is not listed).
#[derive(Debug)]
pub(crate) struct Listing {
    pub unpacked: Unpacked,
    pub entries: Vec<(PathBuf, Kind)>,
}

/// The entries seen so far, with the limits' counters.
struct Walk<'a> {
    budget: Budget<'a>,
    seen: HashMap<PathBuf, Kind>,
    order: Vec<(PathBuf, Kind)>,
}

/// [`list_tar_gz`] without the listing (the tests' shorthand).
#[cfg(test)]
pub(crate) fn validate_tar_gz(archive: &Path, limits: &Limits) -> Result<Unpacked, ArchiveError> {
    list_tar_gz(archive, limits).map(|listing| listing.unpacked)
}

/// Checks the gzipped tar at `archive` as [`super::unpack`] with
/// [`super::Format::TarGz`] would, writing nothing, and lists its entries;
/// blocking (call from `spawn_blocking`).
pub(crate) fn list_tar_gz(archive: &Path, limits: &Limits) -> Result<Listing, ArchiveError> {
    let io_err = |source| ArchiveError::Io {
        path: archive.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(archive).map_err(io_err)?;
    let archive_len = file.metadata().map_err(io_err)?.len();
    let mut walk = Walk {
        budget: Budget::new(limits, archive_len),
        seen: HashMap::new(),
        order: Vec::new(),
    };
    super::walk_tar(
        super::gzip::Members::new(BufReader::with_capacity(COPY_BUF, file)),
        &mut walk,
    )?;
    Ok(Listing {
        unpacked: walk.budget.unpacked(),
        entries: walk.order,
    })
}

impl Walk<'_> {
    /// Reads an entry's contents to the end, counting them against the limits.
    fn read_contents(&mut self, data: &mut dyn Read) -> Result<(), ArchiveError> {
        let mut buf = vec![0u8; COPY_BUF];
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(corrupt(e)),
            };
            self.budget.add_bytes(n)?;
        }
    }

    /// Every component of `rel`'s parent must be a directory (seen or implied).
    fn check_parent(&mut self, name: &[u8], rel: &Path) -> Result<(), ArchiveError> {
        let Some(parent) = rel.parent() else {
            return Ok(());
        };
        let mut cur = PathBuf::new();
        for comp in parent.components() {
            cur.push(comp);
            match self.seen.get(&cur) {
                Some(Kind::Symlink) => {
                    return Err(refused(name, "would be written through a symlink"));
                }
                Some(Kind::File | Kind::HardLink) => {
                    return Err(refused(name, "has a parent that is not a directory"));
                }
                Some(Kind::Dir) => {}
                None => {
                    self.seen.insert(cur.clone(), Kind::Dir);
                }
            }
        }
        Ok(())
    }

    /// Records a new non-directory entry; a second entry at one path is refused.
    fn add(&mut self, name: &[u8], rel: PathBuf, kind: Kind) -> Result<(), ArchiveError> {
        self.check_parent(name, &rel)?;
        if self.seen.contains_key(&rel) {
            return Err(refused(name, "duplicates an existing entry"));
        }
        // For what lies on the way to later entries, a hard link is a file.
        let seen = if kind == Kind::HardLink {
            Kind::File
        } else {
            kind
        };
        self.seen.insert(rel.clone(), seen);
        self.order.push((rel, kind));
        Ok(())
    }

    fn dir(&mut self, name: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let Some(rel) = enclosed_name(name).map_err(|r| refused(name, r))? else {
            return Ok(());
        };
        self.check_parent(name, &rel)?;
        match self.seen.get(&rel) {
            None | Some(Kind::Dir) => {
                self.seen.insert(rel.clone(), Kind::Dir);
                self.order.push((rel, Kind::Dir));
                Ok(())
            }
            Some(_) => Err(refused(name, "duplicates an existing entry")),
        }
    }

    fn file(&mut self, name: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a file named like the unpack directory"))?;
        self.add(name, rel, Kind::File)
    }

    fn symlink(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a symlink named like the unpack directory"))?;
        enclosed_link_target(&rel, target).map_err(|r| refused(name, r))?;
        self.add(name, rel, Kind::Symlink)
    }

    fn hard_link(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a hard link named like the unpack directory"))?;
        match enclosed_name(target) {
            Ok(Some(t)) if self.seen.get(&t) == Some(&Kind::File) => {}
            _ => {
                return Err(refused(
                    name,
                    "is a hard link to something other than a file earlier in the archive",
                ));
            }
        }
        self.add(name, rel, Kind::HardLink)
    }
}

impl super::Entries for Walk<'_> {
    fn budget(&self) -> &Budget<'_> {
        &self.budget
    }
    fn count_entry(&mut self) -> Result<(), ArchiveError> {
        self.budget.count_entry()
    }
    fn dir(&mut self, name: &[u8], _mode: Option<u32>) -> Result<(), ArchiveError> {
        Walk::dir(self, name)
    }
    fn file(
        &mut self,
        name: &[u8],
        _mode: Option<u32>,
        data: &mut dyn Read,
    ) -> Result<(), ArchiveError> {
        Walk::file(self, name)?;
        self.read_contents(data)
    }
    fn symlink(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        Walk::symlink(self, name, target)
    }
    fn hard_link(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        Walk::hard_link(self, name, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{unpack, Format};

    /// One tar entry: name, type byte, data or link target.
    type Entry<'a> = (&'a str, u8, &'a [u8]);

    /// A tar.gz with the given entries.
    fn tar_gz(entries: &[Entry<'_>]) -> tempfile::NamedTempFile {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::new(*kind));
            header.set_mode(0o644);
            {
                // Written raw: the crate's setters refuse the names under test.
                let raw = header.as_old_mut();
                raw.name[..name.len()].copy_from_slice(name.as_bytes());
            }
            if *kind == b'2' || *kind == b'1' {
                header.as_old_mut().linkname[..data.len()].copy_from_slice(data);
                header.set_size(0);
                header.set_cksum();
                builder.append(&header, &[][..]).unwrap();
            } else {
                header.set_size(data.len() as u64);
                header.set_cksum();
                builder.append(&header, *data).unwrap();
            }
        }
        let tar = builder.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), gz.finish().unwrap()).unwrap();
        file
    }

    /// Validation and a real unpack agree on each case.
    #[test]
    fn agrees_with_unpack() {
        let cases: &[(&str, &[Entry<'_>], bool)] = &[
            (
                "flat files",
                &[("a.jar", b'0', b"x"), ("b.txt", b'0', b"y")],
                true,
            ),
            (
                "dir then file",
                &[("d/", b'5', b""), ("d/f", b'0', b"z")],
                true,
            ),
            (
                "implied dir",
                &[("d/f", b'0', b"z"), ("d/", b'5', b"")],
                true,
            ),
            ("link inside", &[("a", b'0', b"x"), ("l", b'2', b"a")], true),
            ("hard link", &[("a", b'0', b"x"), ("h", b'1', b"a")], true),
            ("dot dot", &[("../escape", b'0', b"x")], false),
            ("absolute", &[("/etc/x", b'0', b"x")], false),
            ("link out", &[("l", b'2', b"../../etc")], false),
            ("link absolute", &[("l", b'2', b"/etc")], false),
            (
                "through link",
                &[("l", b'2', b"d"), ("l/f", b'0', b"x")],
                false,
            ),
            ("duplicate", &[("a", b'0', b"x"), ("a", b'0', b"y")], false),
            (
                "file then dir",
                &[("a", b'0', b"x"), ("a/b", b'0', b"y")],
                false,
            ),
            ("hard link out", &[("h", b'1', b"/etc/passwd")], false),
            ("fifo", &[("p", b'6', b"")], false),
        ];
        for (what, entries, ok) in cases {
            let archive = tar_gz(entries);
            let limits = Limits::default();
            let walked = validate_tar_gz(archive.path(), &limits);
            let dir = tempfile::tempdir().unwrap();
            let into = dir.path().join("out");
            std::fs::create_dir(&into).unwrap();
            let unpacked = unpack(archive.path(), Format::TarGz, &into, &limits);
            assert_eq!(walked.is_ok(), *ok, "{what}: validate gave {walked:?}");
            assert_eq!(unpacked.is_ok(), *ok, "{what}: unpack gave {unpacked:?}");
        }
    }

    #[test]
    fn refuses_what_is_not_gzip() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"PK\x03\x04 not a tar.gz").unwrap();
        let err = validate_tar_gz(file.path(), &Limits::default()).unwrap_err();
        assert!(matches!(err, ArchiveError::Corrupt { .. }), "{err:?}");
    }

    #[test]
    fn counts_entries_against_the_limit() {
        let archive = tar_gz(&[("a", b'0', b"x"), ("b", b'0', b"y")]);
        let limits = Limits {
            max_entries: 1,
            ..Limits::default()
        };
        let err = validate_tar_gz(archive.path(), &limits).unwrap_err();
        assert!(err.to_string().contains("--archive-max-entries"), "{err}");
    }
}
