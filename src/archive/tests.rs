//! Tests of the unpacker: real archives (tar and zip crates, system tar, Python's
//! zipfile), malicious ones, limits; nothing outside the root may change.
use super::*;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use tar::{EntryType, Header};
use tempfile::TempDir;

/// `outer/box/into` is the unpack root; `outer/box/sentinel/keep.txt` and `outer`
/// itself must come out unchanged.
struct Sandbox {
    outer: TempDir,
    into: PathBuf,
    before: BTreeMap<String, String>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let outer = TempDir::new().unwrap();
        let bx = outer.path().join("box");
        fs::create_dir_all(bx.join("into")).unwrap();
        fs::create_dir_all(bx.join("sentinel")).unwrap();
        fs::write(bx.join("sentinel/keep.txt"), b"keep").unwrap();
        fs::write(outer.path().join("outer.txt"), b"outer").unwrap();
        let into = bx.join("into");
        let before = outside(outer.path(), &into);
        Sandbox {
            outer,
            into,
            before,
        }
    }

    fn archive_path(&self, name: &str) -> PathBuf {
        // Beside the sandbox, not inside it: created before the snapshot is compared.
        let dir = self.outer.path().join("..").join(format!(
            "{}-archives",
            self.outer.path().file_name().unwrap().to_string_lossy()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn unpack(&self, archive: &Path, limits: &Limits) -> Result<Unpacked, ArchiveError> {
        let format = Format::detect(&archive.file_name().unwrap().to_string_lossy()).unwrap();
        unpack(archive, format, &self.into, limits)
    }

    fn tree(&self) -> BTreeMap<String, String> {
        tree(&self.into)
    }

    fn assert_outside_untouched(&self) {
        assert_eq!(outside(self.outer.path(), &self.into), self.before);
        assert!(!Path::new("/etc/x").exists());
        assert!(!Path::new("/x").exists());
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let archives = self.archive_path("x");
        let _ = fs::remove_dir_all(archives.parent().unwrap());
        // Directories may have been left read-only by a test: make them writable.
        fn fix(dir: &Path) {
            let _ = fs::set_permissions(dir, Permissions::from_mode(0o755));
            if let Ok(rd) = fs::read_dir(dir) {
                for e in rd.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        fix(&e.path());
                    }
                }
            }
        }
        fix(self.outer.path());
    }
}

/// Everything under `root` except the `skip` subtree.
fn outside(root: &Path, skip: &Path) -> BTreeMap<String, String> {
    let mut all = tree(root);
    let prefix = skip
        .strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    all.retain(|k, _| k != &prefix && !k.starts_with(&format!("{prefix}/")));
    all
}

/// name -> "d 755" | "f 644 <contents>" | "l -> target" (hard links share an inode:
/// reported as "f ... nlink=2").
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, format!("l -> {}", t.display()));
            } else if m.is_dir() {
                out.insert(rel, format!("d {mode:o}"));
                walk(root, &p, out);
            } else {
                let data = fs::read(&p).unwrap();
                let data = if data.len() > 64 {
                    format!("<{} bytes>", data.len())
                } else {
                    String::from_utf8_lossy(&data).into_owned()
                };
                let links = if m.nlink() > 1 {
                    format!(" nlink={}", m.nlink())
                } else {
                    String::new()
                };
                out.insert(rel, format!("f {mode:o} {data}{links}"));
            }
        }
    }
    walk(root, root, &mut out);
    out
}

fn expect(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------- tar building ----------

/// A header whose name and link name bytes are written raw, bypassing the tar
/// crate's path checks, to build malicious archives.
fn raw(name: &[u8], kind: EntryType, link: &[u8], size: u64, mode: u32) -> Header {
    let mut h = Header::new_gnu();
    {
        let g = h.as_gnu_mut().unwrap();
        g.name[..name.len()].copy_from_slice(name);
        g.linkname[..link.len()].copy_from_slice(link);
    }
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_cksum();
    h
}

enum T<'a> {
    Dir(&'a str, u32),
    File(&'a str, u32, &'a [u8]),
    Sym(&'a str, &'a str),
    Hard(&'a str, &'a str),
    Other(&'a str, EntryType),
}

fn write_tar<W: Write>(w: W, entries: &[T<'_>]) -> W {
    let mut b = tar::Builder::new(w);
    for e in entries {
        match e {
            T::Dir(n, m) => b
                .append(
                    &raw(n.as_bytes(), EntryType::Directory, b"", 0, *m),
                    io::empty(),
                )
                .unwrap(),
            T::File(n, m, data) => b
                .append(
                    &raw(n.as_bytes(), EntryType::Regular, b"", data.len() as u64, *m),
                    *data,
                )
                .unwrap(),
            T::Sym(n, t) => b
                .append(
                    &raw(n.as_bytes(), EntryType::Symlink, t.as_bytes(), 0, 0o777),
                    io::empty(),
                )
                .unwrap(),
            T::Hard(n, t) => b
                .append(
                    &raw(n.as_bytes(), EntryType::Link, t.as_bytes(), 0, 0o644),
                    io::empty(),
                )
                .unwrap(),
            T::Other(n, k) => b
                .append(&raw(n.as_bytes(), *k, b"", 0, 0o644), io::empty())
                .unwrap(),
        }
    }
    b.into_inner().unwrap()
}

fn tar_file(sb: &Sandbox, name: &str, entries: &[T<'_>]) -> PathBuf {
    let path = sb.archive_path(name);
    let f = File::create(&path).unwrap();
    if name.ends_with(".tar") {
        write_tar(f, entries);
    } else {
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        write_tar(gz, entries).finish().unwrap();
    }
    path
}

fn long_name() -> String {
    format!("long/{}.txt", "n".repeat(150))
}

fn pax_name() -> String {
    format!("pax/{}.txt", "p".repeat(150))
}

/// A good tree through the tar crate's own builder: implicit parents, GNU long
/// name, PAX long name, links, modes.
fn good_tar<W: Write>(w: W) -> W {
    let mut b = tar::Builder::new(w);
    let add = |b: &mut tar::Builder<W>, name: &str, kind: EntryType, mode: u32, data: &[u8]| {
        let mut h = Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        b.append_data(&mut h, name, data).unwrap();
    };
    add(&mut b, "a/", EntryType::Directory, 0o755, b"");
    add(&mut b, "a/b/c.txt", EntryType::Regular, 0o644, b"nested");
    add(&mut b, "empty/", EntryType::Directory, 0o700, b"");
    add(&mut b, "bin/run", EntryType::Regular, 0o755, b"#!/bin/sh\n");
    add(&mut b, "suid", EntryType::Regular, 0o6755, b"s");
    add(&mut b, "sticky/", EntryType::Directory, 0o1777, b"");
    add(
        &mut b,
        "ünïcødé/文件.txt",
        EntryType::Regular,
        0o644,
        "çà".as_bytes(),
    );
    add(&mut b, &long_name(), EntryType::Regular, 0o600, b"gnu long");
    add(&mut b, "ro/", EntryType::Directory, 0o500, b"");
    add(&mut b, "ro/inner.txt", EntryType::Regular, 0o444, b"ro");
    // PAX long name: the ustar name is a stub, the pax `path` record is the real one.
    b.append_pax_extensions([("path", pax_name().as_bytes())])
        .unwrap();
    let mut h = Header::new_ustar();
    h.set_path("stub.txt").unwrap();
    h.set_entry_type(EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(3);
    h.set_cksum();
    b.append(&h, &b"pax"[..]).unwrap();
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    b.append_link(&mut h, "a/link", "b/c.txt").unwrap();
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::Link);
    h.set_size(0);
    h.set_mode(0o644);
    b.append_link(&mut h, "hard", "a/b/c.txt").unwrap();
    b.into_inner().unwrap()
}

fn good_expected() -> BTreeMap<String, String> {
    let mut e = expect(&[
        ("a", "d 755"),
        ("a/b", "d 755"),
        ("a/b/c.txt", "f 644 nested nlink=2"),
        ("a/link", "l -> b/c.txt"),
        ("empty", "d 755"),
        ("bin", "d 755"),
        ("bin/run", "f 755 #!/bin/sh\n"),
        ("suid", "f 755 s"),
        ("sticky", "d 777"),
        ("ünïcødé", "d 755"),
        ("ünïcødé/文件.txt", "f 644 çà"),
        ("long", "d 755"),
        ("ro", "d 755"),
        ("ro/inner.txt", "f 444 ro"),
        ("pax", "d 755"),
        ("hard", "f 644 nested nlink=2"),
    ]);
    // Written 0600: made readable by all (the Spark container runs as another user).
    e.insert(long_name(), "f 644 gnu long".into());
    e.insert(pax_name(), "f 644 pax".into());
    e
}

#[test]
fn detect_by_name_like_spark() {
    assert_eq!(Format::detect("env.zip"), Some(Format::Zip));
    assert_eq!(Format::detect("udfs.jar"), Some(Format::Zip));
    assert_eq!(Format::detect("x.tar"), Some(Format::Tar));
    assert_eq!(Format::detect("x.tar.gz"), Some(Format::TarGz));
    assert_eq!(Format::detect("X.TGZ"), Some(Format::TarGz));
    assert_eq!(Format::detect("model.bin"), None);
    assert_eq!(Format::detect("x.gz"), None);
}

#[test]
fn enclosed_name_rules() {
    let ok = |n: &str| enclosed_name(n.as_bytes()).unwrap();
    assert_eq!(ok("a/b"), Some(PathBuf::from("a/b")));
    assert_eq!(ok("./a//b/"), Some(PathBuf::from("a/b")));
    assert_eq!(ok("a/../b"), Some(PathBuf::from("b")));
    assert_eq!(ok("a/.."), None);
    assert_eq!(ok("."), None);
    for bad in [
        "../x",
        "a/../../x",
        "/etc/x",
        "C:/x",
        "c:x",
        "\\\\srv\\x",
        "\\x",
        "a\0b",
        "",
    ] {
        assert!(enclosed_name(bad.as_bytes()).is_err(), "{bad:?}");
    }
    // What the file system can hold: 255-byte components, 3072-byte paths here.
    let component = "n".repeat(255);
    assert!(ok(&format!("d/{component}")).is_some());
    let err = enclosed_name(format!("d/{component}n").as_bytes()).unwrap_err();
    assert!(err.contains("longer than 255 bytes"), "{err}");
    let path = format!("{}/{}", [component.as_str(); 11].join("/"), "n".repeat(254));
    assert_eq!(path.len(), 3070);
    assert!(ok(&format!("./{path}/a")).is_some());
    let err = enclosed_name(format!("{path}/ab").as_bytes()).unwrap_err();
    assert!(err.contains("longer than 3072 bytes"), "{err}");
    assert!(enclosed_link_target(Path::new("d/l"), b"..").is_ok());
    assert!(enclosed_link_target(Path::new("d/l"), b"../x/y").is_ok());
    assert!(enclosed_link_target(Path::new("d/l"), b"../..").is_err());
    assert!(enclosed_link_target(Path::new("l"), b"..").is_err());
    assert!(enclosed_link_target(Path::new("l"), b"/").is_err());
    assert!(enclosed_link_target(Path::new("l"), b"d/l1/..").is_err());
}

#[test]
fn tar_from_the_tar_crate() {
    let sb = Sandbox::new();
    let path = sb.archive_path("good.tar");
    good_tar(File::create(&path).unwrap());
    let got = sb.unpack(&path, &Limits::default()).unwrap();
    assert_eq!(sb.tree(), good_expected());
    assert_eq!(got.entries, 13);
    assert_eq!(got.bytes, 6 + 10 + 1 + 4 + 8 + 2 + 3);
    sb.assert_outside_untouched();
}

#[test]
fn tar_gz_from_the_tar_crate() {
    let sb = Sandbox::new();
    let path = sb.archive_path("good.tgz");
    let gz =
        flate2::write::GzEncoder::new(File::create(&path).unwrap(), flate2::Compression::default());
    good_tar(gz).finish().unwrap();
    sb.unpack(&path, &Limits::default()).unwrap();
    assert_eq!(sb.tree(), good_expected());
    sb.assert_outside_untouched();
}

#[test]
fn corrupt_or_truncated_gzip_is_refused_even_past_the_tar_end() {
    // One file of incompressible bytes, so a flipped byte changes its contents
    // (the tar walk itself would not notice): only the gzip CRC can tell.
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = Header::new_gnu();
    let data: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, "payload.bin", &data[..])
        .unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar.into_inner().unwrap()).unwrap();
    let good = gz.finish().unwrap();

    let sb = Sandbox::new();
    let ok = sb.archive_path("ok.tgz");
    fs::write(&ok, &good).unwrap();
    sb.unpack(&ok, &Limits::default()).unwrap();
    let limits = Limits::default();
    for (name, bytes) in [
        ("flipped.tgz", {
            let mut b = good.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x01;
            b
        }),
        ("crc.tgz", {
            let mut b = good.clone();
            let at = b.len() - 6;
            b[at] ^= 0xff;
            b
        }),
        ("truncated.tgz", good[..good.len() - 8].to_vec()),
    ] {
        let sb = Sandbox::new();
        let path = sb.archive_path(name);
        fs::write(&path, &bytes).unwrap();
        let err = sb.unpack(&path, &limits).unwrap_err();
        assert!(matches!(err, ArchiveError::Corrupt { .. }), "{name}: {err}");
        assert!(err.is_refusal());
        let err = validate::validate_tar_gz(&path, &limits).unwrap_err();
        assert!(
            matches!(err, ArchiveError::Corrupt { .. }),
            "{name} (validate): {err}"
        );
    }
}

#[test]
fn archives_from_the_system_tar() {
    let src = TempDir::new().unwrap();
    let s = src.path();
    fs::create_dir_all(s.join("a/b/c")).unwrap();
    fs::create_dir_all(s.join("empty")).unwrap();
    fs::write(s.join("a/b/c/deep.txt"), b"deep").unwrap();
    fs::write(s.join("run.sh"), b"#!/bin/sh\n").unwrap();
    fs::set_permissions(s.join("run.sh"), Permissions::from_mode(0o755)).unwrap();
    fs::write(s.join("a/ünï 文件.txt"), b"u").unwrap();
    fs::write(s.join("a").join("l".repeat(150)), b"long").unwrap();
    std::os::unix::fs::symlink("b/c/deep.txt", s.join("a/link")).unwrap();
    for (name, args) in [
        ("sys.tgz", &["czf"][..]),
        ("sys.tar", &["--format=pax", "-cf"][..]),
        ("sys.tar.gz", &["--format=gnu", "-czf"][..]),
    ] {
        let sb = Sandbox::new();
        let out = sb.archive_path(name);
        let status = std::process::Command::new("tar")
            .args(args)
            .arg(&out)
            .arg("-C")
            .arg(s)
            .arg(".")
            .status()
            .unwrap();
        assert!(status.success());
        sb.unpack(&out, &Limits::default()).unwrap();
        assert_eq!(sb.tree(), tree(s), "{name}");
        sb.assert_outside_untouched();
    }
}

#[test]
fn zip_from_the_zip_crate_and_jar() {
    use zip::write::SimpleFileOptions;
    let sb = Sandbox::new();
    let path = sb.archive_path("udfs.jar");
    assert_eq!(Format::detect("udfs.jar"), Some(Format::Zip));
    let mut z = zip::ZipWriter::new(File::create(&path).unwrap());
    let o = SimpleFileOptions::default();
    z.add_directory("META-INF/", o.unix_permissions(0o755))
        .unwrap();
    z.start_file("META-INF/MANIFEST.MF", o.unix_permissions(0o644))
        .unwrap();
    z.write_all(b"Manifest-Version: 1.0\n").unwrap();
    z.add_directory("empty/", o).unwrap();
    z.start_file("bin/python", o.unix_permissions(0o755))
        .unwrap();
    z.write_all(b"py").unwrap();
    z.start_file("a/b/ünï/文件.txt", o).unwrap();
    z.write_all("çà".as_bytes()).unwrap();
    z.start_file(
        long_name(),
        o.compression_method(zip::CompressionMethod::Stored),
    )
    .unwrap();
    z.write_all(b"long").unwrap();
    z.add_symlink("bin/python3", "python", o).unwrap();
    z.finish().unwrap();
    let got = sb.unpack(&path, &Limits::default()).unwrap();
    let mut want = expect(&[
        ("META-INF", "d 755"),
        ("META-INF/MANIFEST.MF", "f 644 Manifest-Version: 1.0\n"),
        ("empty", "d 755"),
        ("bin", "d 755"),
        ("bin/python", "f 755 py"),
        ("bin/python3", "l -> python"),
        ("a", "d 755"),
        ("a/b", "d 755"),
        ("a/b/ünï", "d 755"),
        ("a/b/ünï/文件.txt", "f 644 çà"),
        ("long", "d 755"),
    ]);
    want.insert(long_name(), "f 644 long".into());
    assert_eq!(sb.tree(), want);
    assert_eq!(got.entries, 7);
    sb.assert_outside_untouched();
}

fn python_zip(path: &Path, script: &str) {
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import zipfile, sys, warnings\nwarnings.simplefilter('ignore')\nz = zipfile.ZipFile(sys.argv[1], 'w')\n{script}\nz.close()"
        ))
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn zip_from_python_zipfile() {
    let sb = Sandbox::new();
    let path = sb.archive_path("py.zip");
    python_zip(
        &path,
        "i = zipfile.ZipInfo('run.sh'); i.external_attr = (0o104755 << 16); z.writestr(i, 'x')\n\
         z.writestr('d/e/f.txt', 'f')\n\
         z.writestr('empty/', '')",
    );
    sb.unpack(&path, &Limits::default()).unwrap();
    let t = sb.tree();
    assert_eq!(t["run.sh"], "f 755 x"); // setuid stripped, exec kept
    assert!(t["d/e/f.txt"].ends_with(" f"), "{t:?}");
    assert!(t["empty"].starts_with("d "), "{t:?}");
    sb.assert_outside_untouched();
}

/// Unpacks and expects a refusal whose message names `needle`.
fn refuses(sb: &Sandbox, path: &Path, needle: &str) -> ArchiveError {
    let err = sb.unpack(path, &Limits::default()).unwrap_err();
    assert!(err.is_refusal(), "{err:?}");
    assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
    sb.assert_outside_untouched();
    err
}

#[test]
fn malicious_tar_names_are_refused() {
    for (label, entries, needle) in [
        (
            "dotdot",
            vec![T::File("../../x", 0o644, b"evil")],
            "'../../x' climbs out",
        ),
        (
            "dotdot-deep",
            vec![T::File("a/../../x", 0o644, b"evil")],
            "climbs out",
        ),
        ("dotdot-dir", vec![T::Dir("../../d/", 0o755)], "climbs out"),
        (
            "absolute",
            vec![T::File("/etc/x", 0o644, b"evil")],
            "'/etc/x' has an absolute path",
        ),
        (
            "drive",
            vec![T::File("C:/x", 0o644, b"evil")],
            "Windows drive",
        ),
    ] {
        for ext in ["tar", "tgz"] {
            let sb = Sandbox::new();
            let path = tar_file(&sb, &format!("{label}.{ext}"), &entries);
            refuses(&sb, &path, needle);
            assert!(sb.tree().is_empty());
        }
    }
}

#[test]
fn malicious_tar_links_are_refused() {
    let cases: Vec<(&str, Vec<T<'_>>, &str)> = vec![
        (
            "sym-root",
            vec![T::Sym("l", "/")],
            "symlink to an absolute path",
        ),
        (
            "sym-tmp",
            vec![T::Sym("l", "/tmp")],
            "symlink to an absolute path",
        ),
        ("sym-up", vec![T::Sym("l", "..")], "pointing outside"),
        (
            "sym-sibling",
            vec![T::Sym("l", "../sentinel")],
            "pointing outside",
        ),
        (
            "sym-deep",
            vec![T::Dir("d/", 0o755), T::Sym("d/l", "../..")],
            "pointing outside",
        ),
        (
            "sym-chain",
            vec![
                T::Dir("d/", 0o755),
                T::Sym("d/l1", ".."),
                T::Sym("l2", "d/l1/../.."),
            ],
            "after a name",
        ),
        (
            "through-link",
            vec![T::Sym("l", "."), T::File("l/x", 0o644, b"evil")],
            "'l/x' would be written through a symlink",
        ),
        (
            "through-link-dir",
            vec![
                T::Dir("d/", 0o755),
                T::Sym("d/l", ".."),
                T::Dir("d/l/y/", 0o755),
            ],
            "through a symlink",
        ),
        (
            "hard-etc",
            vec![T::Hard("h", "/etc/passwd")],
            "'h' is a hard link",
        ),
        (
            "hard-up",
            vec![T::Hard("h", "../sentinel/keep.txt")],
            "hard link",
        ),
        (
            "hard-to-link",
            vec![T::Sym("s", "x"), T::Hard("h", "s")],
            "hard link",
        ),
        (
            "hard-to-dir",
            vec![T::Dir("d/", 0o755), T::Hard("h", "d")],
            "hard link",
        ),
        (
            "dup-file",
            vec![T::File("f", 0o644, b"1"), T::File("f", 0o644, b"2")],
            "'f' duplicates",
        ),
        (
            "dup-sym-file",
            vec![T::Sym("f", "g"), T::File("f", 0o644, b"2")],
            "'f' duplicates",
        ),
        (
            "file-then-dir",
            vec![T::File("f", 0o644, b"1"), T::Dir("f/", 0o755)],
            "duplicates",
        ),
        (
            "file-as-parent",
            vec![T::File("f", 0o644, b"1"), T::File("f/g", 0o644, b"2")],
            "not a directory",
        ),
        (
            "fifo",
            vec![T::Other("p", EntryType::Fifo)],
            "'p' is a fifo",
        ),
        (
            "char",
            vec![T::Other("c", EntryType::Char)],
            "character device",
        ),
        (
            "block",
            vec![T::Other("b", EntryType::Block)],
            "block device",
        ),
    ];
    for (label, entries, needle) in cases {
        let sb = Sandbox::new();
        let path = tar_file(&sb, &format!("{label}.tar"), &entries);
        let err = refuses(&sb, &path, needle);
        assert!(
            matches!(err, ArchiveError::Refused { .. }),
            "{label}: {err:?}"
        );
        // A refused file entry never changed what an earlier entry wrote.
        if label == "dup-file" {
            assert_eq!(fs::read(sb.into.join("f")).unwrap(), b"1");
        }
    }
}

#[test]
fn safe_symlinks_and_dir_reentry_are_kept() {
    let sb = Sandbox::new();
    let path = tar_file(
        &sb,
        "ok.tar",
        &[
            T::Dir("d/", 0o755),
            T::File("d/f", 0o644, b"f"),
            T::Sym("d/up", ".."),
            T::Sym("d/sib", "../e/g"),
            T::Sym("dangling", "nowhere/x"),
            T::Dir("d/", 0o700),
            T::Dir("./", 0o755),
            T::File("x/../inside.txt", 0o644, b"in"),
        ],
    );
    sb.unpack(&path, &Limits::default()).unwrap();
    assert_eq!(
        sb.tree(),
        expect(&[
            ("d", "d 755"),
            ("d/f", "f 644 f"),
            ("d/up", "l -> .."),
            ("d/sib", "l -> ../e/g"),
            ("dangling", "l -> nowhere/x"),
            ("inside.txt", "f 644 in"),
        ])
    );
    sb.assert_outside_untouched();
}

#[test]
fn malicious_zips_are_refused() {
    use zip::write::SimpleFileOptions;
    let o = SimpleFileOptions::default();
    type Build = Box<dyn Fn(&mut zip::ZipWriter<File>)>;
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "dotdot",
            Box::new(move |z| {
                z.start_file("../../x", o).unwrap();
                z.write_all(b"evil").unwrap();
            }),
            "'../../x' climbs out",
        ),
        (
            "absolute",
            Box::new(move |z| {
                z.start_file("/etc/x", o).unwrap();
                z.write_all(b"evil").unwrap();
            }),
            "absolute path",
        ),
        (
            "sym-root",
            Box::new(move |z| z.add_symlink("l", "/", o).unwrap()),
            "symlink to an absolute path",
        ),
        (
            "sym-up",
            Box::new(move |z| z.add_symlink("l", "..", o).unwrap()),
            "pointing outside",
        ),
        (
            "through-link",
            Box::new(move |z| {
                z.add_symlink("l", ".", o).unwrap();
                z.start_file("l/x", o).unwrap();
                z.write_all(b"evil").unwrap();
            }),
            "through a symlink",
        ),
    ];
    for (label, build, needle) in cases {
        let sb = Sandbox::new();
        let path = sb.archive_path(&format!("{label}.zip"));
        let mut z = zip::ZipWriter::new(File::create(&path).unwrap());
        build(&mut z);
        z.finish().unwrap();
        refuses(&sb, &path, needle);
    }
    // Duplicates and a fifo, via Python (the zip crate refuses to write them).
    for (label, script) in [
        ("dup", "z.writestr('f', '1')\nz.writestr('f', '2')"),
        (
            "fifo",
            "i = zipfile.ZipInfo('p'); i.create_system = 3; i.external_attr = (0o010644 << 16); z.writestr(i, '')",
        ),
    ] {
        let sb = Sandbox::new();
        let path = sb.archive_path(&format!("{label}.zip"));
        python_zip(&path, script);
        let err = sb.unpack(&path, &Limits::default()).unwrap_err();
        assert!(matches!(err, ArchiveError::Refused { .. }), "{label}: {err:?}");
        let needle = if label == "dup" { "duplicate" } else { "fifo" };
        assert!(err.to_string().contains(needle), "{label}: {err}");
        sb.assert_outside_untouched();
    }
}

#[test]
fn zip_bomb_is_refused_before_writing() {
    use zip::write::SimpleFileOptions;
    let sb = Sandbox::new();
    let path = sb.archive_path("bomb.zip");
    let mut z = zip::ZipWriter::new(File::create(&path).unwrap());
    z.start_file("zeros", SimpleFileOptions::default()).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..50 {
        z.write_all(&chunk).unwrap();
    }
    z.finish().unwrap();
    let limits = Limits {
        max_ratio: 200,
        ..Limits::default()
    };
    let err = sb.unpack(&path, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Limit {
                flag: "--archive-max-ratio",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("--archive-max-ratio"));
    assert!(sb.tree().is_empty(), "nothing written: {:?}", sb.tree());
    sb.assert_outside_untouched();
}

#[test]
fn tgz_bomb_is_refused_from_its_header() {
    let sb = Sandbox::new();
    let path = sb.archive_path("bomb.tgz");
    let gz =
        flate2::write::GzEncoder::new(File::create(&path).unwrap(), flate2::Compression::best());
    let mut b = tar::Builder::new(gz);
    let mut h = Header::new_gnu();
    h.set_size(50 << 20);
    h.set_mode(0o644);
    b.append_data(&mut h, "zeros", io::repeat(0).take(50 << 20))
        .unwrap();
    b.into_inner().unwrap().finish().unwrap();
    let archive_len = fs::metadata(&path).unwrap().len();
    let err = sb.unpack(&path, &Limits::default()).unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Limit {
                flag: "--archive-max-ratio",
                ..
            }
        ),
        "{err:?}"
    );
    // Refused from its header, before a byte of it was written.
    assert!(
        err.to_string().contains("'zeros' declares 52428800 bytes"),
        "{err}"
    );
    assert!(archive_len < (50 << 20) / 200);
    assert!(!sb.into.join("zeros").exists());
    sb.assert_outside_untouched();
}

#[test]
fn byte_and_entry_limits() {
    let sb = Sandbox::new();
    let data = vec![7u8; 3000];
    let path = tar_file(
        &sb,
        "big.tar",
        &[T::File("a", 0o644, &data), T::File("b", 0o644, &data)],
    );
    let limits = Limits {
        max_bytes: 5000,
        ..Limits::default()
    };
    let err = sb.unpack(&path, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Limit {
                flag: "--archive-max-bytes",
                limit: 5000,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("--archive-max-bytes"));
    assert!(err.to_string().contains("'b' declares 3000 bytes"), "{err}");
    // Refused from its header: nothing of it written.
    assert!(!sb.into.join("b").exists());
    sb.assert_outside_untouched();

    let sb = Sandbox::new();
    let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let entries: Vec<T<'_>> = names.iter().map(|n| T::File(n, 0o644, b"")).collect();
    let path = tar_file(&sb, "many.tar", &entries);
    let limits = Limits {
        max_entries: 10,
        ..Limits::default()
    };
    let err = sb.unpack(&path, &limits).unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Limit {
                flag: "--archive-max-entries",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("--archive-max-entries"));
    assert_eq!(sb.tree().len(), 10);
    sb.assert_outside_untouched();
}

#[test]
fn hundred_thousand_tiny_entries() {
    let sb = Sandbox::new();
    let path = sb.archive_path("many.tar");
    let mut b = tar::Builder::new(io::BufWriter::new(File::create(&path).unwrap()));
    for d in 0..100 {
        for f in 0..1000 {
            let mut h = Header::new_gnu();
            h.set_size(0);
            h.set_mode(0o644);
            b.append_data(&mut h, format!("d{d}/f{f}"), io::empty())
                .unwrap();
        }
    }
    b.into_inner().unwrap().flush().unwrap();
    let start = std::time::Instant::now();
    let got = sb.unpack(&path, &Limits::default()).unwrap();
    let took = start.elapsed();
    eprintln!("100k entries unpacked in {took:?}");
    assert_eq!(
        got,
        Unpacked {
            entries: 100_000,
            bytes: 0
        }
    );
    assert_eq!(fs::read_dir(sb.into.join("d99")).unwrap().count(), 1000);
    assert!(took < std::time::Duration::from_secs(180), "{took:?}");
    sb.assert_outside_untouched();
}

#[test]
fn corrupt_and_missing_archives() {
    let sb = Sandbox::new();
    let path = sb.archive_path("trunc.tgz");
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let bytes = write_tar(gz, &[T::File("f", 0o644, &[1u8; 10_000])])
        .finish()
        .unwrap();
    fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = sb.unpack(&path, &Limits::default()).unwrap_err();
    assert!(matches!(err, ArchiveError::Corrupt { .. }), "{err:?}");
    assert!(err.is_refusal());

    let path = sb.archive_path("junk.zip");
    fs::write(&path, b"not a zip at all").unwrap();
    let err = sb.unpack(&path, &Limits::default()).unwrap_err();
    assert!(matches!(err, ArchiveError::Corrupt { .. }), "{err:?}");

    let err = unpack(
        &sb.archive_path("missing.tar"),
        Format::Tar,
        &sb.into,
        &Limits::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ArchiveError::Io { .. }), "{err:?}");
    assert!(!err.is_refusal());
    sb.assert_outside_untouched();
}
