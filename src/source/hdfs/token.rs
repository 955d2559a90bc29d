//! Hadoop delegation-token files (`HADOOP_TOKEN_FILE_LOCATION`), checked before
//! hdfs-native reads them: it ignores a file it cannot parse (and panics on some
//! truncated ones), so a broken Secret would surface much later as a puzzling
//! authentication failure. The format is Hadoop's `Credentials` storage:
//! `HDTS`, a version byte, then Writable (0) or a length-delimited protobuf (1).

use std::path::Path;

use super::reader::Reader;

/// One token's kind and service (what `check` may print; never the secret parts),
/// and, for an HDFS delegation token, whom it is for and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenInfo {
    pub kind: String,
    pub service: String,
    /// The user the NameNode sees (the real user when the owner is a proxy).
    pub owner: Option<String>,
    /// The last moment the token can be renewed to (ms since the epoch).
    pub max_date_ms: Option<i64>,
}

const MAGIC: &[u8] = b"HDTS";
const HDFS_DELEGATION_TOKEN: &str = "HDFS_DELEGATION_TOKEN";

/// Reads and checks every token in `path`.
pub(crate) fn load(path: &Path) -> Result<Vec<TokenInfo>, String> {
    // A regular file of Secret size: not a device, a FIFO or something huge.
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{} bytes, more than a token file ({MAX_FILE} bytes at most)",
            meta.len()
        ));
    }
    let data = crate::util::fs::read_regular(path, MAX_FILE)
        .map_err(|e| format!("cannot read it: {e}"))?;
    parse(&data)
}

/// A Kubernetes Secret holds at most 1 MiB.
const MAX_FILE: u64 = crate::util::fs::SECRET_LIMIT;

impl TokenInfo {
    fn new(kind: String, service: String) -> Self {
        TokenInfo {
            kind,
            service,
            owner: None,
            max_date_ms: None,
        }
    }

    /// Whether it is an HDFS delegation token.
    pub(crate) fn is_hdfs(&self) -> bool {
        self.kind == HDFS_DELEGATION_TOKEN
    }

    /// Whether this is an HDFS delegation token for the cluster `host[:port]` of a
    /// URI: `ha-hdfs:<nameservice>` for a nameservice, `<host>:<port>` (or any
    /// address with that port) for a single NameNode.
    pub(crate) fn serves(&self, host: &str, port: Option<u16>, nameservice: bool) -> bool {
        if self.kind != HDFS_DELEGATION_TOKEN {
            return false;
        }
        if nameservice {
            return self.service == format!("ha-hdfs:{host}");
        }
        let port = port.unwrap_or(8020);
        self.service == format!("{host}:{port}") || self.service.ends_with(&format!(":{port}"))
    }
}

pub(crate) fn parse(data: &[u8]) -> Result<Vec<TokenInfo>, String> {
    let mut r = Reader::new(data);
    if r.take(4)? != MAGIC {
        return Err("not a Hadoop token file (no HDTS header)".into());
    }
    let tokens = match r.byte()? {
        0 => writable(&mut r)?,
        1 => protobuf(&mut r)?,
        v => return Err(format!("unknown token file format {v}")),
    };
    let mut out = Vec::with_capacity(tokens.len());
    for (mut info, id) in tokens {
        if info.kind == HDFS_DELEGATION_TOKEN {
            let (owner, max_date_ms) = identifier(&id).map_err(|e| {
                format!(
                    "the {} for {} has a malformed identifier: {e}",
                    info.kind, info.service
                )
            })?;
            info.owner = Some(owner);
            info.max_date_ms = Some(max_date_ms);
        }
        out.push(info);
    }
    Ok(out)
}

type Parsed = (TokenInfo, Vec<u8>);

fn writable(r: &mut Reader<'_>) -> Result<Vec<Parsed>, String> {
    let count = r.length()?;
    let mut out = Vec::new();
    for _ in 0..count {
        let _alias = r.text()?;
        let identifier = r.bytes()?.to_vec();
        let _password = r.bytes()?;
        let kind = r.text()?;
        let service = r.text()?;
        out.push((TokenInfo::new(kind, service), identifier));
    }
    // Then the secret keys: count, (alias, bytes) each.
    // Then the secret keys (Hadoop always writes their count): (alias, bytes) each.
    for _ in 0..r.length()? {
        r.text()?;
        r.bytes()?;
    }
    Ok(out)
}

/// Walks one protobuf message, calling `field` for each length-delimited field.
fn walk<'a>(
    msg: &'a [u8],
    mut field: impl FnMut(u64, &'a [u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut r = Reader::new(msg);
    while !r.done() {
        let key = r.varint()?;
        match key & 7 {
            0 => {
                r.varint()?;
            }
            1 => {
                r.take(8)?;
            }
            2 => {
                let n = usize::try_from(r.varint()?).map_err(|_| "length too large")?;
                field(key >> 3, r.take(n)?)?;
            }
            5 => {
                r.take(4)?;
            }
            t => return Err(format!("bad protobuf wire type {t}")),
        }
    }
    Ok(())
}

/// `CredentialsProto { repeated CredentialsKVProto tokens = 1; … }`, length-delimited.
fn protobuf(r: &mut Reader<'_>) -> Result<Vec<Parsed>, String> {
    let n = usize::try_from(r.varint()?).map_err(|_| "length too large")?;
    let msg = r.take(n)?;
    let mut out = Vec::new();
    walk(msg, |tag, kv| {
        if tag != 1 {
            return Ok(());
        }
        // CredentialsKVProto { alias = 1; TokenProto token = 2; secret = 3 }
        walk(kv, |tag, token| {
            if tag != 2 {
                return Ok(());
            }
            // TokenProto { identifier = 1; password = 2; kind = 3; service = 4 }
            let (mut identifier, mut kind, mut service) = (Vec::new(), None, None);
            walk(token, |tag, v| {
                let text = || {
                    String::from_utf8(v.to_vec()).map_err(|_| "text that is not UTF-8".to_owned())
                };
                match tag {
                    1 => identifier = v.to_vec(),
                    3 => kind = Some(text()?),
                    4 => service = Some(text()?),
                    _ => {}
                }
                Ok(())
            })?;
            match (kind, service) {
                (Some(kind), Some(service)) => {
                    out.push((TokenInfo::new(kind, service), identifier));
                    Ok(())
                }
                _ => Err("a token without kind or service".into()),
            }
        })
    })?;
    Ok(out)
}

/// An HDFS delegation token identifier: version 0, owner, renewer, real user,
/// issue date, max date, sequence number, master key id (what hdfs-native reads).
/// Returns the user the NameNode sees (the real user of a proxy token, else the
/// owner) and the max date.
fn identifier(id: &[u8]) -> Result<(String, i64), String> {
    let mut r = Reader::new(id);
    match r.byte()? {
        0 => {}
        v => return Err(format!("version {v}, expected 0")),
    }
    let owner = r.text()?;
    let _renewer = r.text()?;
    let real_user = r.text()?;
    let mut dates = [0i64; 4];
    for d in &mut dates {
        *d = r.vlong()?;
    }
    let user = if real_user.is_empty() {
        owner
    } else {
        format!("{owner} (through {real_user})")
    };
    Ok((user, dates[1]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `WritableUtils.writeVLong`.
    pub(crate) fn vlong(out: &mut Vec<u8>, v: i64) {
        if (-112..=127).contains(&v) {
            out.push(v as u8);
            return;
        }
        let (neg, mut x) = if v < 0 { (true, !v) } else { (false, v) };
        let mut len = 0;
        let mut t = x;
        while t != 0 {
            t >>= 8;
            len += 1;
        }
        out.push(if neg {
            (-120 - len) as u8
        } else {
            (-112 - len) as u8
        });
        let mut bytes = Vec::new();
        for _ in 0..len {
            bytes.push((x & 0xff) as u8);
            x >>= 8;
        }
        out.extend(bytes.iter().rev());
    }

    fn text(out: &mut Vec<u8>, s: &str) {
        vlong(out, s.len() as i64);
        out.extend_from_slice(s.as_bytes());
    }

    /// A Writable token file with one HDFS delegation token for `service`.
    pub(crate) fn token_file(service: &str) -> Vec<u8> {
        let mut id = vec![0u8];
        for s in ["spark", "yarn", ""] {
            text(&mut id, s);
        }
        for v in [1_700_000_000_000i64, 4_100_000_000_000, 7, 3] {
            vlong(&mut id, v);
        }
        let mut out = b"HDTS\0".to_vec();
        vlong(&mut out, 1);
        text(&mut out, service);
        vlong(&mut out, id.len() as i64);
        out.extend(&id);
        vlong(&mut out, 4);
        out.extend(b"PASS");
        text(&mut out, HDFS_DELEGATION_TOKEN);
        text(&mut out, service);
        vlong(&mut out, 0);
        out
    }

    #[test]
    fn vlongs_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            127,
            -112,
            -113,
            128,
            255,
            256,
            65_536,
            -65_536,
            i64::MAX,
            i64::MIN,
        ] {
            let mut buf = Vec::new();
            vlong(&mut buf, v);
            let mut r = Reader::new(&buf);
            assert_eq!(r.vlong().unwrap(), v, "{v}");
            assert!(r.done());
        }
    }

    #[test]
    fn good_and_broken_files() {
        let good = token_file("ha-hdfs:ns1");
        assert_eq!(
            parse(&good).unwrap(),
            vec![TokenInfo {
                kind: HDFS_DELEGATION_TOKEN.into(),
                service: "ha-hdfs:ns1".into(),
                owner: Some("spark".into()),
                max_date_ms: Some(4_100_000_000_000),
            }]
        );
        // Every truncation is refused, none panics.
        for n in 0..good.len() - 1 {
            assert!(parse(&good[..n]).is_err(), "prefix {n}");
        }
        assert!(parse(b"NOPE\0\0").unwrap_err().contains("HDTS"));
        assert!(parse(b"HDTS\x07").unwrap_err().contains("format 7"));
        // A negative length.
        assert!(parse(b"HDTS\0\x01\xff").unwrap_err().contains("negative"));
        // A delegation token whose identifier is not version 0.
        let mut bad = good.clone();
        let at = bad.windows(3).position(|w| w == [0, 5, b's']).unwrap();
        bad[at] = 9;
        assert!(parse(&bad).unwrap_err().contains("malformed identifier"));
    }
}
