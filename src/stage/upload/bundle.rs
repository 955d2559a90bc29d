//! The bundle: one flat tar.gz of the members, written by a blocking thread into a
//! bounded channel that is the request body, hashed and counted as it goes. Never
//! held whole; a file that changes or shrinks while it is read is refused.

use std::io::{self, Read, Write};
use std::path::Path;
use std::time::SystemTime;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::plan::Member;

/// Bytes per body chunk handed to the HTTP client.
const CHUNK: usize = 64 * 1024;
/// Chunks buffered between the bundling thread and the HTTP client.
pub(super) const CHANNEL_CHUNKS: usize = 8;

/// What the bundling thread produced.
pub(super) struct Bundled {
    pub(super) sha256: String,
    pub(super) bytes: u64,
}

/// Writes the tar.gz of `members` into `tx` in chunks; returns its sha256 and size.
/// A failure is also sent down the channel so the request is aborted, not finished.
pub(super) fn write_bundle(
    members: &[Member],
    tx: mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<Bundled> {
    let mut sink = ChannelWriter {
        tx,
        buf: Vec::with_capacity(CHUNK),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let result = tar_gz(members, &mut sink);
    match result {
        Ok(()) => {
            sink.send_buf()?;
            Ok(Bundled {
                sha256: hex::encode(sink.hasher.finalize()),
                bytes: sink.bytes,
            })
        }
        Err(e) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                let _ = sink.tx.blocking_send(Err(io::Error::other(e.to_string())));
            }
            Err(e)
        }
    }
}

fn tar_gz(members: &[Member], sink: &mut ChannelWriter) -> io::Result<()> {
    let gz = flate2::write::GzEncoder::new(sink, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for member in members {
        append(&mut tar, member)?;
    }
    tar.into_inner()?.finish()?;
    Ok(())
}

/// Appends one regular file under its name; refuses a file that changes meanwhile.
fn append<W: Write>(tar: &mut tar::Builder<W>, member: &Member) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let context = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{}: {what}: {e}", member.path.display()))
    };
    let file =
        crate::util::fs::open_regular(&member.path).map_err(|e| context("cannot open", e))?;
    let meta = file.metadata().map_err(|e| context("cannot stat", e))?;
    let len = meta.len();
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(len);
    let exec = meta.permissions().mode() & 0o111 != 0;
    header.set_mode(if exec { 0o755 } else { 0o644 });
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    let mut reader = Exact {
        inner: (&file).take(len),
        left: len,
        path: &member.path,
    };
    tar.append_data(&mut header, &member.name, &mut reader)
        .map_err(|e| context("cannot bundle", e))?;
    let after = file.metadata().map_err(|e| context("cannot stat", e))?;
    if after.len() != len || after.modified().ok() != meta.modified().ok() {
        return Err(io::Error::other(format!(
            "{}: changed while it was being uploaded; upload it again",
            member.path.display()
        )));
    }
    Ok(())
}

/// Reads exactly `left` bytes; a file that ends early is an error, not a short entry.
struct Exact<'a, R> {
    inner: R,
    left: u64,
    path: &'a Path,
}

impl<R: Read> Read for Exact<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: shrank while it was being uploaded; upload it again",
                    self.path.display()
                ),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Hands the bundle to the HTTP body in chunks, hashing and counting it.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
    hasher: Sha256,
    bytes: u64,
}

impl ChannelWriter {
    fn send_buf(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.hasher.update(&chunk);
        self.bytes += chunk.len() as u64;
        self.tx.blocking_send(Ok(Bytes::from(chunk))).map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the upload request ended before the bundle was sent",
            )
        })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.send_buf()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_streams_flat_entries() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jar");
        std::fs::write(&a, vec![7u8; 200_000]).unwrap();
        let b = dir.path().join("ü.txt");
        std::fs::write(&b, b"hi").unwrap();
        let members = vec![
            Member {
                path: a,
                name: "a.jar".into(),
            },
            Member {
                path: b,
                name: "ü.txt".into(),
            },
        ];
        let (tx, mut rx) = mpsc::channel(CHANNEL_CHUNKS);
        let writer = std::thread::spawn(move || write_bundle(&members, tx));
        let mut all = Vec::new();
        while let Some(chunk) = rx.blocking_recv() {
            all.extend_from_slice(&chunk.unwrap());
        }
        let bundled = writer.join().unwrap().unwrap();
        assert_eq!(bundled.bytes, all.len() as u64);
        assert_eq!(bundled.sha256, hex::encode(Sha256::digest(&all)));
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&all[..]));
        let got: Vec<(String, usize)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().to_string_lossy().into_owned();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (name, data.len())
            })
            .collect();
        assert_eq!(
            got,
            vec![("a.jar".to_owned(), 200_000), ("ü.txt".to_owned(), 2)]
        );
    }
}
