//! Safe, streaming unpacking of `spark.archives` (zip / jar / tar / tar.gz / tgz).
//!
//! [`unpack`] writes into an empty directory the caller created beside the target;
//! the caller renames it into place, so nothing of a refused archive becomes visible.
//!
//! Every write is done here, not by the archive crates, so these rules hold:
//! - Entry names are normalized lexically (`a/../b` is `b`); a name that is absolute,
//!   starts with a Windows drive or `\`, holds a NUL or climbs out with `..` fails the
//!   whole unpack (uv-extract's `enclosed_name` idea).
//! - Nothing is written through a symlink: every existing component of an entry's
//!   parent must be a real directory, and files are created with `O_CREAT|O_EXCL`, so a
//!   duplicate entry is refused (a directory entry for an existing directory is fine).
//! - Symlinks (tar, and zip entries with a unix symlink mode) need a relative target
//!   that stays inside the root; the target may only climb with leading `..`
//!   components, so a chain of links cannot climb out either. Hard links (tar) must
//!   name a regular file this unpack already wrote.
//! - Devices, fifos and other special entries are refused.
//! - Modes keep the permission bits and drop setuid/setgid/sticky; files default to
//!   0o644; directories get at least 0o755, applied once all entries are written.
//! - Limits: entries, bytes written (counted while writing) and the ratio of bytes
//!   written to the archive's size (checked past 1 MiB; zip entries also against
//!   their own compressed size). A file whose declared size (tar header, zip
//!   directory) would cross one is refused before it is written; writing stops as
//!   soon as one is crossed. Names whose components or whole path the file system
//!   could not hold are refused like other hostile names.
//! - A `.tar.gz` is read member by member to its very end ([`gzip`]); after the
//!   tar's end-of-archive blocks only zero padding may follow.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Bytes written before the compression ratio is checked, so small archives of
/// empty or tiny files are never refused for their ratio.
const RATIO_FLOOR: u64 = 1024 * 1024;
/// Longest zip symlink target read from an entry's contents.
const MAX_LINK_TARGET: u64 = 4096;
const COPY_BUF: usize = 64 * 1024;
/// Longest name component a file system takes (Linux `NAME_MAX`).
const MAX_COMPONENT: usize = 255;
/// Longest entry path: the file system's 4096 bytes (`PATH_MAX`), with room left
/// for the directory the archive unpacks into.
const MAX_PATH: usize = 3072;

/// An archive format, detected from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Zip,
    Tar,
    TarGz,
}

impl Format {
    /// By file name, as Spark does: `.zip` and `.jar` are zip; `.tar` is tar;
    /// `.tar.gz` and `.tgz` are gzipped tar; anything else is `None` (copied as is).
    /// Case-insensitive.
    pub(crate) fn detect(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".zip") || lower.ends_with(".jar") {
            Some(Format::Zip)
        } else if lower.ends_with(".tar") {
            Some(Format::Tar)
        } else if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
            Some(Format::TarGz)
        } else {
            None
        }
    }
}

/// Limits on what one archive may unpack to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Total bytes written (`--archive-max-bytes`).
    pub max_bytes: u64,
    /// Number of entries of any kind (`--archive-max-entries`).
    pub max_entries: u64,
    /// Bytes written per byte of archive (`--archive-max-ratio`).
    pub max_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 8 * 1024 * 1024 * 1024,
            max_entries: 200_000,
            max_ratio: 200,
        }
    }
}

/// What an unpack wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unpacked {
    /// Entries processed (files, directories, links).
    pub entries: u64,
    /// Bytes of file contents written.
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ArchiveError {
    /// An entry breaks a safety rule.
    #[error("entry '{entry}' {reason}")]
    Refused { entry: String, reason: String },
    /// A limit was crossed.
    #[error("{what} exceeds the limit of {limit}; raise it with {flag} if the archive is trusted")]
    Limit {
        what: String,
        limit: u64,
        flag: &'static str,
    },
    /// The archive cannot be decoded (`at`: where, when known: " at entry '…'").
    #[error("archive is corrupt or unreadable{at}: {source}")]
    Corrupt {
        at: String,
        #[source]
        source: io::Error,
    },
    /// A local file operation failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ArchiveError {
    /// True for integrity failures (refused entry, limit, corrupt archive); false for
    /// local I/O errors.
    pub(crate) fn is_refusal(&self) -> bool {
        !matches!(self, ArchiveError::Io { .. })
    }
}

fn refused(entry: &[u8], reason: impl Into<String>) -> ArchiveError {
    ArchiveError::Refused {
        entry: escaped(entry),
        reason: reason.into(),
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates one directory (0755 until the entry's own mode is applied at the end).
fn make_dir(abs: &Path) -> Result<(), ArchiveError> {
    DirBuilder::new()
        .mode(0o755)
        .create(abs)
        .map_err(io_err(abs))
}

fn corrupt(source: io::Error) -> ArchiveError {
    ArchiveError::Corrupt {
        at: String::new(),
        source,
    }
}

/// An entry's name, escaped: it must not forge log or termination-message lines.
fn escaped(name: &[u8]) -> String {
    String::from_utf8_lossy(name).escape_debug().to_string()
}

/// Unpacks `archive` into the empty directory `into`; blocking (call from
/// `spawn_blocking`). On error `into` may hold a partial tree: the caller removes it.
pub(crate) fn unpack(
    archive: &Path,
    format: Format,
    into: &Path,
    limits: &Limits,
) -> Result<Unpacked, ArchiveError> {
    unpack_listing(archive, format, into, limits).map(|(unpacked, _)| unpacked)
}

/// [`unpack`], also returning the regular files written (relative paths), in the
/// archive's order.
pub(crate) fn unpack_listing(
    archive: &Path,
    format: Format,
    into: &Path,
    limits: &Limits,
) -> Result<(Unpacked, Vec<PathBuf>), ArchiveError> {
    let file = File::open(archive).map_err(io_err(archive))?;
    let archive_len = file.metadata().map_err(io_err(archive))?.len();
    let mut sink = Sink::new(into, limits, archive_len);
    match format {
        Format::Tar => walk_tar(BufReader::new(file), &mut sink)?,
        Format::TarGz => walk_tar(
            gzip::Members::new(BufReader::with_capacity(COPY_BUF, file)),
            &mut sink,
        )?,
        Format::Zip => unpack_zip(file, &mut sink)?,
    }
    let order = std::mem::take(&mut sink.order);
    Ok((sink.finish()?, order))
}

/// Normalizes an entry name lexically into a relative path inside the root.
/// `Ok(None)` is the root itself (`.`, `a/..`).
fn enclosed_name(name: &[u8]) -> Result<Option<PathBuf>, String> {
    if name.is_empty() {
        return Err("has an empty name".into());
    }
    if name.contains(&0) {
        return Err("has a NUL byte in its name".into());
    }
    if name[0] == b'/' {
        return Err("has an absolute path".into());
    }
    if name[0] == b'\\' {
        return Err("has a Windows root or UNC prefix".into());
    }
    if name.len() >= 2 && name[0].is_ascii_alphabetic() && name[1] == b':' {
        return Err("has a Windows drive prefix".into());
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                if parts.pop().is_none() {
                    return Err("climbs out of the unpack directory with '..'".into());
                }
            }
            _ if part.len() > MAX_COMPONENT => {
                return Err(format!(
                    "has a name component longer than {MAX_COMPONENT} bytes (the file system's limit)"
                ));
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    if parts.iter().map(|p| p.len() + 1).sum::<usize>() - 1 > MAX_PATH {
        return Err(format!(
            "has a path longer than {MAX_PATH} bytes (the file system's limit, with room for the unpack directory)"
        ));
    }
    Ok(Some(parts.iter().map(|p| OsStr::from_bytes(p)).collect()))
}

/// Resolves a symlink target lexically from the link's directory (`link` relative to
/// the root). Only leading `..` may climb: `..` after a name could climb through
/// another link, so it is refused.
pub(crate) fn enclosed_link_target(link: &Path, target: &[u8]) -> Result<(), String> {
    if target.is_empty() {
        return Err("is a symlink with an empty target".into());
    }
    if target.contains(&0) {
        return Err("is a symlink whose target holds a NUL byte".into());
    }
    if target[0] == b'/' {
        return Err("is a symlink to an absolute path".into());
    }
    if target.len() > 4095 {
        return Err("is a symlink whose target is longer than 4095 bytes".into());
    }
    let mut depth = link.parent().map_or(0, |p| p.components().count());
    let mut descended = false;
    for part in target.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." if descended => {
                return Err(
                    "is a symlink whose target uses '..' after a name (it could climb through another link)"
                        .into(),
                );
            }
            b".." => {
                if depth == 0 {
                    return Err("is a symlink pointing outside the unpack directory".into());
                }
                depth -= 1;
            }
            _ => descended = true,
        }
    }
    Ok(())
}

/// Strips setuid/setgid/sticky and makes the file readable by all: the init container
/// and the Spark container run as different users (65532 and 185 in the images), and
/// an entry written 0600 on the submitter's machine must still be readable by Spark.
fn file_mode(mode: Option<u32>) -> u32 {
    mode.map_or(0o644, |m| (m & 0o777) | 0o444)
}

fn dir_mode(mode: Option<u32>) -> u32 {
    mode.map_or(0o755, |m| (m & 0o777) | 0o755)
}

const SIZE_WHAT: &str = "unpacked size in bytes";
const MAX_BYTES_FLAG: &str = "--archive-max-bytes";
const RATIO_WHAT: &str = "compression ratio (bytes written per archive byte)";
const MAX_RATIO_FLAG: &str = "--archive-max-ratio";

/// The limits' counters for one archive: entries and bytes so far, checked
/// against [`Limits`] (shared by unpacking and by the walk-only validation).
pub(super) struct Budget<'a> {
    pub(super) limits: &'a Limits,
    archive_len: u64,
    pub(super) entries: u64,
    pub(super) bytes: u64,
}

impl<'a> Budget<'a> {
    pub(super) fn new(limits: &'a Limits, archive_len: u64) -> Self {
        Budget {
            limits,
            archive_len: archive_len.max(1),
            entries: 0,
            bytes: 0,
        }
    }

    pub(super) fn count_entry(&mut self) -> Result<(), ArchiveError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ArchiveError::Limit {
                what: "entry count".into(),
                limit: self.limits.max_entries,
                flag: "--archive-max-entries",
            });
        }
        Ok(())
    }

    pub(super) fn ratio_limit(&self) -> ArchiveError {
        ArchiveError::Limit {
            what: RATIO_WHAT.into(),
            limit: self.limits.max_ratio,
            flag: MAX_RATIO_FLAG,
        }
    }

    pub(super) fn size_limit(&self) -> ArchiveError {
        ArchiveError::Limit {
            what: SIZE_WHAT.into(),
            limit: self.limits.max_bytes,
            flag: MAX_BYTES_FLAG,
        }
    }

    /// Refuses the file `name` before anything of it is written when the `size`
    /// its header declares would cross a limit.
    pub(super) fn check_declared(&self, name: &[u8], size: u64) -> Result<(), ArchiveError> {
        let total = self.bytes.saturating_add(size);
        let (what, limit, flag) = if total > self.limits.max_bytes {
            (SIZE_WHAT, self.limits.max_bytes, MAX_BYTES_FLAG)
        } else if total > RATIO_FLOOR
            && total > self.limits.max_ratio.saturating_mul(self.archive_len)
        {
            (RATIO_WHAT, self.limits.max_ratio, MAX_RATIO_FLAG)
        } else {
            return Ok(());
        };
        Err(ArchiveError::Limit {
            what: format!(
                "entry '{}' declares {size} bytes: the {what}",
                escaped(name)
            ),
            limit,
            flag,
        })
    }

    /// Accounts for `n` more bytes before they are written.
    pub(super) fn add_bytes(&mut self, n: u64) -> Result<(), ArchiveError> {
        let total = self.bytes.saturating_add(n);
        if total > self.limits.max_bytes {
            return Err(self.size_limit());
        }
        if total > RATIO_FLOOR && total > self.limits.max_ratio.saturating_mul(self.archive_len) {
            return Err(self.ratio_limit());
        }
        self.bytes = total;
        Ok(())
    }

    pub(super) fn unpacked(&self) -> Unpacked {
        Unpacked {
            entries: self.entries,
            bytes: self.bytes,
        }
    }
}

struct Sink<'a> {
    root: &'a Path,
    budget: Budget<'a>,
    /// Directories (relative) known to be real directories created by this unpack.
    dirs: HashSet<PathBuf>,
    /// Regular files (relative) written by this unpack: valid hard link targets.
    files: HashSet<PathBuf>,
    /// The same, in the archive's order.
    order: Vec<PathBuf>,
    /// Explicit directory entries and their modes, applied at the end.
    dir_modes: Vec<(PathBuf, u32)>,
    buf: Vec<u8>,
}

impl<'a> Sink<'a> {
    fn new(root: &'a Path, limits: &'a Limits, archive_len: u64) -> Self {
        Sink {
            root,
            budget: Budget::new(limits, archive_len),
            dirs: HashSet::new(),
            files: HashSet::new(),
            order: Vec::new(),
            dir_modes: Vec::new(),
            buf: vec![0; COPY_BUF],
        }
    }

    /// Makes sure every component of `rel`'s parent is a real directory, creating the
    /// missing ones; refuses symlinks and non-directories on the way.
    fn prepare_parent(&mut self, name: &[u8], rel: &Path) -> Result<(), ArchiveError> {
        let Some(parent) = rel.parent() else {
            return Ok(());
        };
        if parent.as_os_str().is_empty() || self.dirs.contains(parent) {
            return Ok(());
        }
        let mut cur = PathBuf::new();
        for comp in parent.components() {
            let Component::Normal(c) = comp else {
                return Err(refused(name, "has an unexpected path component"));
            };
            cur.push(c);
            if self.dirs.contains(&cur) {
                continue;
            }
            let abs = self.root.join(&cur);
            match fs::symlink_metadata(&abs) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refused(name, "would be written through a symlink"));
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(refused(name, "has a parent that is not a directory"));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    make_dir(&abs)?;
                }
                Err(e) => return Err(io_err(&abs)(e)),
            }
            self.dirs.insert(cur.clone());
        }
        Ok(())
    }

    fn dir(&mut self, name: &[u8], mode: Option<u32>) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let Some(rel) = enclosed_name(name).map_err(|r| refused(name, r))? else {
            return Ok(()); // the root itself
        };
        self.prepare_parent(name, &rel)?;
        let abs = self.root.join(&rel);
        if !self.dirs.contains(&rel) {
            match fs::symlink_metadata(&abs) {
                Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {}
                Ok(_) => return Err(refused(name, "duplicates an existing entry")),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    make_dir(&abs)?;
                }
                Err(e) => return Err(io_err(&abs)(e)),
            }
            self.dirs.insert(rel.clone());
        }
        self.dir_modes.push((abs, dir_mode(mode)));
        Ok(())
    }

    /// Writes a regular file from `data`; `per_entry_ratio_base` is the entry's own
    /// compressed size (zip), checked like the archive-wide ratio.
    fn file(
        &mut self,
        name: &[u8],
        mode: Option<u32>,
        data: &mut dyn Read,
        per_entry_ratio_base: Option<u64>,
    ) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a file named like the unpack directory"))?;
        self.prepare_parent(name, &rel)?;
        let abs = self.root.join(&rel);
        let mut out = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&abs)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(refused(name, "duplicates an existing entry"));
            }
            Err(e) => return Err(io_err(&abs)(e)),
        };
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.copy(data, &mut out, &abs, &mut buf, per_entry_ratio_base);
        self.buf = buf;
        result?;
        out.set_permissions(Permissions::from_mode(file_mode(mode)))
            .map_err(io_err(&abs))?;
        self.order.push(rel.clone());
        self.files.insert(rel);
        Ok(())
    }

    fn copy(
        &mut self,
        data: &mut dyn Read,
        out: &mut File,
        abs: &Path,
        buf: &mut [u8],
        per_entry_ratio_base: Option<u64>,
    ) -> Result<(), ArchiveError> {
        let mut written: u64 = 0;
        loop {
            let n = match data.read(buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(corrupt(e)),
            };
            self.budget.add_bytes(n as u64)?;
            written += n as u64;
            if let Some(base) = per_entry_ratio_base {
                if written > RATIO_FLOOR
                    && written > self.budget.limits.max_ratio.saturating_mul(base.max(1))
                {
                    return Err(self.budget.ratio_limit());
                }
            }
            out.write_all(&buf[..n]).map_err(io_err(abs))?;
        }
    }

    fn symlink(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a symlink named like the unpack directory"))?;
        enclosed_link_target(&rel, target).map_err(|r| refused(name, r))?;
        self.prepare_parent(name, &rel)?;
        let abs = self.root.join(&rel);
        match std::os::unix::fs::symlink(OsStr::from_bytes(target), &abs) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(refused(name, "duplicates an existing entry"))
            }
            Err(e) => Err(io_err(&abs)(e)),
        }
    }

    fn hard_link(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        self.budget.count_entry()?;
        let rel = enclosed_name(name)
            .map_err(|r| refused(name, r))?
            .ok_or_else(|| refused(name, "is a hard link named like the unpack directory"))?;
        let target_rel = match enclosed_name(target) {
            Ok(Some(t)) if self.files.contains(&t) => t,
            _ => {
                return Err(refused(
                    name,
                    "is a hard link to something other than a file earlier in the archive",
                ));
            }
        };
        self.prepare_parent(name, &rel)?;
        let abs = self.root.join(&rel);
        match fs::hard_link(self.root.join(&target_rel), &abs) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(refused(name, "duplicates an existing entry"))
            }
            Err(e) => Err(io_err(&abs)(e)),
        }
    }

    /// Applies directory modes, deepest first, once nothing more is written.
    fn finish(mut self) -> Result<Unpacked, ArchiveError> {
        self.dir_modes
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (abs, mode) in &self.dir_modes {
            fs::set_permissions(abs, Permissions::from_mode(*mode)).map_err(io_err(abs))?;
        }
        Ok(self.budget.unpacked())
    }
}

/// What a tar walk does with each entry: write it ([`Sink`]) or only check it
/// (the staging server's [`validate`] walk) — one walk, so both apply the same
/// entry-type rules.
pub(super) trait Entries {
    fn budget(&self) -> &Budget<'_>;
    fn count_entry(&mut self) -> Result<(), ArchiveError>;
    fn dir(&mut self, name: &[u8], mode: Option<u32>) -> Result<(), ArchiveError>;
    fn file(
        &mut self,
        name: &[u8],
        mode: Option<u32>,
        data: &mut dyn Read,
    ) -> Result<(), ArchiveError>;
    fn symlink(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError>;
    fn hard_link(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError>;
}

impl Entries for Sink<'_> {
    fn budget(&self) -> &Budget<'_> {
        &self.budget
    }
    fn count_entry(&mut self) -> Result<(), ArchiveError> {
        self.budget.count_entry()
    }
    fn dir(&mut self, name: &[u8], mode: Option<u32>) -> Result<(), ArchiveError> {
        Sink::dir(self, name, mode)
    }
    fn file(
        &mut self,
        name: &[u8],
        mode: Option<u32>,
        data: &mut dyn Read,
    ) -> Result<(), ArchiveError> {
        Sink::file(self, name, mode, data, None)
    }
    fn symlink(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        Sink::symlink(self, name, target)
    }
    fn hard_link(&mut self, name: &[u8], target: &[u8]) -> Result<(), ArchiveError> {
        Sink::hard_link(self, name, target)
    }
}

pub(super) fn walk_tar<R: Read>(reader: R, sink: &mut dyn Entries) -> Result<(), ArchiveError> {
    let mut archive = tar::Archive::new(reader);
    // Where a header that cannot be parsed sits: the crate's error cannot name it.
    let mut previous: Option<String> = None;
    for (index, entry) in archive.entries().map_err(corrupt)?.enumerate() {
        let position = index + 1;
        let mut entry = entry.map_err(|source| ArchiveError::Corrupt {
            at: match &previous {
                Some(name) => format!(" at the entry after '{name}' (entry {position})"),
                None => " at the first entry".into(),
            },
            source: tidy(source),
        })?;
        let name = entry.path_bytes().into_owned();
        walk_entry(&name, &mut entry, sink).map_err(|e| match e {
            ArchiveError::Corrupt { at, source } if at.is_empty() => ArchiveError::Corrupt {
                at: format!(" at entry '{}'", escaped(&name)),
                source,
            },
            e => e,
        })?;
        previous = Some(escaped(&name));
    }
    read_past_the_end(archive.into_inner())
}

/// The tar crate names a GNU sparse header's owner ("group:user") where it
/// means the entry; the entry is named by the caller.
fn tidy(e: io::Error) -> io::Error {
    let message = e.to_string();
    match message.find(" when getting real_size for ") {
        Some(at) => io::Error::new(
            e.kind(),
            format!("{} (the real size in a GNU sparse header)", &message[..at]),
        ),
        None => e,
    }
}

/// One tar entry, checked and handed to `sink`.
fn walk_entry<R: Read>(
    name: &[u8],
    entry: &mut tar::Entry<'_, R>,
    sink: &mut dyn Entries,
) -> Result<(), ArchiveError> {
    use tar::EntryType;
    // PAX sparse files (GNU.sparse.*) would come out as their raw map: refuse.
    let sparse = entry
        .pax_extensions()
        .ok()
        .flatten()
        .is_some_and(|mut exts| {
            exts.any(|e| e.is_ok_and(|e| e.key_bytes().starts_with(b"GNU.sparse")))
        });
    if sparse {
        return Err(refused(
            name,
            "is a PAX sparse file, which is not supported",
        ));
    }
    let header = entry.header();
    let kind = header.entry_type();
    let mode = header.mode().ok();
    match kind {
        EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
            // The size its header declares (a sparse file's real size) is what
            // it would write: refused before a byte of it is.
            sink.budget().check_declared(name, entry.size())?;
            sink.file(name, mode, entry)
        }
        EntryType::Directory => sink.dir(name, mode),
        EntryType::Symlink | EntryType::Link => {
            let target = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            if kind == EntryType::Symlink {
                sink.symlink(name, &target)
            } else {
                sink.hard_link(name, &target)
            }
        }
        // Global PAX headers carry defaults, not files.
        EntryType::XGlobalHeader => sink.count_entry(),
        EntryType::Char => Err(refused(name, "is a character device")),
        EntryType::Block => Err(refused(name, "is a block device")),
        EntryType::Fifo => Err(refused(name, "is a fifo")),
        other => Err(refused(
            name,
            format!(
                "has an unsupported tar entry type {:?}",
                other.as_byte() as char
            ),
        )),
    }
}

/// Reads on to the end, past the tar's end-of-archive blocks: a gzip stream's
/// CRC and length are checked only there, so a corrupt or truncated .tar.gz is
/// refused rather than unpacked. Only zero bytes (record padding: a tar record
/// is 10 KiB) may follow those blocks, at most [`MAX_TRAILING`] of them; data
/// there (a second archive appended) would be lost, so it is refused.
fn read_past_the_end(mut rest: impl Read) -> Result<(), ArchiveError> {
    let mut buf = [0u8; 8192];
    let mut trailing = 0u64;
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(e)),
        };
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(corrupt(io::Error::other(
                "data after the tar's end-of-archive blocks (a second archive appended? \
                 tar reads only the first)",
            )));
        }
        trailing += n as u64;
        if trailing > MAX_TRAILING {
            return Err(corrupt(io::Error::other(
                "more than 1 MiB of padding after the end of the archive",
            )));
        }
    }
}

/// Bytes allowed after a tar's end-of-archive blocks (record padding).
const MAX_TRAILING: u64 = 1 << 20;

/// Zip symlinks (unix mode `S_IFLNK`, as written by Info-ZIP `-y`) are supported
/// under the same rules as tar symlinks; the target is the entry's contents.
fn unpack_zip(file: File, sink: &mut Sink<'_>) -> Result<(), ArchiveError> {
    let zip_err = |e: zip::result::ZipError| corrupt(io::Error::other(e));
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_err)?;
    // The crate indexes entries by name and keeps one of each: refuse duplicates here,
    // or one of them would be skipped silently.
    if archive.has_duplicate_names() {
        return Err(refused(
            b"(central directory)",
            "lists the same entry name more than once (duplicate entries are refused)",
        ));
    }
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_err)?;
        let raw = entry.name_raw().to_vec();
        if raw.contains(&0) {
            return Err(refused(&raw, "has a NUL byte in its name"));
        }
        // Decoded (UTF-8 or CP437) but otherwise unsanitized; checked by `enclosed_name`.
        let name = entry.name().map_err(zip_err)?.as_bytes().to_vec();
        let mode = entry.unix_mode();
        let kind = mode.map(|m| m & 0o170000);
        match kind {
            Some(0o020000) => return Err(refused(&name, "is a character device")),
            Some(0o060000) => return Err(refused(&name, "is a block device")),
            Some(0o010000) => return Err(refused(&name, "is a fifo")),
            Some(0o140000) => return Err(refused(&name, "is a socket")),
            _ => {}
        }
        if entry.is_dir() {
            sink.dir(&name, mode)?;
        } else if entry.is_symlink() {
            let mut target = Vec::new();
            (&mut entry)
                .take(MAX_LINK_TARGET + 1)
                .read_to_end(&mut target)
                .map_err(corrupt)?;
            if target.len() as u64 > MAX_LINK_TARGET {
                return Err(refused(&name, "is a symlink with an overlong target"));
            }
            sink.symlink(&name, &target)?;
        } else {
            let size = entry.size();
            let compressed = entry.compressed_size().max(1);
            let budget = &sink.budget;
            if size > RATIO_FLOOR && size / compressed > budget.limits.max_ratio {
                return Err(budget.ratio_limit());
            }
            budget.check_declared(&name, size)?;
            sink.file(&name, mode, &mut entry, Some(compressed))?;
        }
    }
    Ok(())
}

mod gzip;
pub(crate) mod validate;
pub(crate) use validate::{list_tar_gz, Kind as EntryKind};

#[cfg(test)]
mod tests;
