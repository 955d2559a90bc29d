//! A bounds-checked reader of the binary files the HDFS source reads before any
//! traffic: Hadoop's token storage (Writable VLongs and texts, protobuf varints)
//! and MIT Kerberos's keytabs and ticket caches (big-endian counted fields). Every
//! read checks the end first: malformed input is an error naming the byte, never
//! a panic.

pub(super) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    /// Where the next read starts.
    pub(super) fn at(&self) -> usize {
        self.pos
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(super) fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Hadoop's `WritableUtils.readVLong`.
    pub(super) fn vlong(&mut self) -> Result<i64, String> {
        let first = self.byte()? as i8;
        if first >= -112 {
            return Ok(i64::from(first));
        }
        let negative = first < -120;
        let len = if negative {
            -(first + 120)
        } else {
            -(first + 112)
        };
        let mut v: i64 = 0;
        for _ in 0..len {
            v = (v << 8) | i64::from(self.byte()?);
        }
        Ok(if negative { !v } else { v })
    }

    /// A length as a VLong: never negative, never past the end.
    pub(super) fn length(&mut self) -> Result<usize, String> {
        let n = self.vlong()?;
        usize::try_from(n).map_err(|_| format!("negative length {n} at byte {}", self.pos))
    }

    pub(super) fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.length()?;
        self.take(n)
    }

    pub(super) fn text(&mut self) -> Result<String, String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec())
            .map_err(|_| format!("text that is not UTF-8 before byte {}", self.pos))
    }

    /// A protobuf varint.
    pub(super) fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    /// A big-endian u16.
    pub(super) fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian u32.
    pub(super) fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `len` bytes of UTF-8 text.
    pub(super) fn text_of(&mut self, len: usize) -> Result<String, String> {
        let b = self.take(len)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| format!("text that is not UTF-8 before byte {}", self.pos))
    }
}
