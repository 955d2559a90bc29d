//! A `.tar.gz` read as gzip(1) reads it: every member in turn, each checked
//! against its CRC and length, then nothing but zero bytes (padding to a block,
//! as gzip and tar accept it). flate2's `MultiGzDecoder` reads the members too,
//! but refuses that padding as a bad header, and a bad header is all it says
//! about bytes that are not gzip; here they are refused with what they are.

use std::io::{self, BufRead, Read};

use flate2::bufread::GzDecoder;

/// The decompressed bytes of every gzip member of `R`; an error when what
/// follows the last member is neither a member nor zero padding.
pub(super) struct Members<R: BufRead> {
    /// The member being read; `None` once the stream has ended.
    member: Option<GzDecoder<R>>,
}

impl<R: BufRead> Members<R> {
    pub(super) fn new(reader: R) -> Self {
        Members {
            member: Some(GzDecoder::new(reader)),
        }
    }
}

impl<R: BufRead> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            let n = member.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // This member ended (its CRC and length checked): the bytes after
            // its trailer start another member, or padding, or nothing.
            let mut rest = self.member.take().expect("a member").into_inner();
            match rest.fill_buf()?.first() {
                None => return Ok(0),
                Some(0x1f) => self.member = Some(GzDecoder::new(rest)),
                Some(_) => {
                    zero_padding(&mut rest)?;
                    return Ok(0);
                }
            }
        }
    }
}

/// Reads `rest` to its end: only zero bytes may be there.
fn zero_padding(rest: &mut impl BufRead) -> io::Result<()> {
    let mut zeros = 0u64;
    loop {
        let chunk = rest.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(at) = chunk.iter().position(|&b| b != 0) {
            let zeros = zeros + at as u64;
            let after = if zeros > 0 {
                format!(" (after {zeros} zero bytes)")
            } else {
                String::new()
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "data after the end of the gzip stream{after}, neither another gzip member \
                     nor zero padding: the file is damaged or something was appended to it"
                ),
            ));
        }
        let n = chunk.len();
        zeros += n as u64;
        rest.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    fn read_all(bytes: &[u8]) -> io::Result<Vec<u8>> {
        // A small buffer, so that members and padding straddle its refills.
        let mut out = Vec::new();
        Members::new(io::BufReader::with_capacity(7, bytes)).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn reads_every_member_then_only_zero_padding() {
        let two = [gzip(b"hello, "), gzip(b""), gzip(b"world")].concat();
        assert_eq!(read_all(&two).unwrap(), b"hello, world");
        let padded = [two.clone(), vec![0; 10240]].concat();
        assert_eq!(read_all(&padded).unwrap(), b"hello, world");

        let garbage = [two.clone(), vec![0; 100], b"junk".to_vec()].concat();
        let err = read_all(&garbage).unwrap_err();
        assert!(err.to_string().contains("after 100 zero bytes"), "{err}");
        let not_gzip = [two.clone(), vec![0x1f, 0x00, 0x00]].concat();
        assert!(read_all(&not_gzip).is_err());
        let cut = &two[..two.len() - 3];
        assert!(read_all(cut).is_err(), "a truncated last member");
        let mut bad_crc = two;
        let at = bad_crc.len() - 8;
        bad_crc[at] ^= 1;
        assert!(read_all(&bad_crc).is_err(), "the last member's CRC");
        assert!(read_all(b"").is_err(), "an empty file is no gzip");
    }
}
