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

/// A token file as stored: every token and secret key with all its fields (what
/// [`write`] writes back), in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// 0: Writable, 1: protobuf.
    pub format: u8,
    pub tokens: Vec<StoredToken>,
    /// The secret keys: (alias, bytes).
    pub secrets: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One token of a token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredToken {
    /// Not read by anyone (Hadoop's own readers decode it leniently): kept as bytes.
    pub alias: Vec<u8>,
    pub identifier: Vec<u8>,
    pub password: Vec<u8>,
    pub kind: String,
    pub service: String,
}

/// Reads a token file and checks the identifier of every HDFS delegation token.
pub(crate) fn parse(data: &[u8]) -> Result<Vec<TokenInfo>, String> {
    let credentials = read(data)?;
    let mut out = Vec::with_capacity(credentials.tokens.len());
    for token in credentials.tokens {
        let mut info = TokenInfo::new(token.kind, token.service);
        if info.kind == HDFS_DELEGATION_TOKEN {
            let (owner, max_date_ms) = identifier(&token.identifier).map_err(|e| {
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

/// Reads a token file whole: `HDTS`, the format byte, then the tokens and the
/// secret keys. What follows them is ignored, as Hadoop's readers ignore it.
pub(crate) fn read(data: &[u8]) -> Result<Credentials, String> {
    let mut r = Reader::new(data);
    if r.take(4)? != MAGIC {
        return Err("not a Hadoop token file (no HDTS header)".into());
    }
    let format = r.byte()?;
    let (tokens, secrets) = match format {
        0 => writable(&mut r)?,
        1 => protobuf(&mut r)?,
        v => return Err(format!("unknown token file format {v}")),
    };
    Ok(Credentials {
        format,
        tokens,
        secrets,
    })
}

type Secrets = Vec<(Vec<u8>, Vec<u8>)>;

/// `Credentials.writeLegacyOutputStream`'s layout: the token count, then alias
/// (Text), identifier and password (VInt-counted bytes), kind and service (Text)
/// each; the secret key count, then alias (Text) and key (VInt-counted) each.
fn writable(r: &mut Reader<'_>) -> Result<(Vec<StoredToken>, Secrets), String> {
    let count = r.length()?;
    let mut tokens = Vec::new();
    for _ in 0..count {
        tokens.push(StoredToken {
            alias: r.bytes()?.to_vec(),
            identifier: r.bytes()?.to_vec(),
            password: r.bytes()?.to_vec(),
            kind: r.text()?,
            service: r.text()?,
        });
    }
    // Hadoop always writes the secret keys' count.
    let mut secrets = Vec::new();
    for _ in 0..r.length()? {
        secrets.push((r.bytes()?.to_vec(), r.bytes()?.to_vec()));
    }
    Ok((tokens, secrets))
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

/// `CredentialsProto { repeated CredentialsKVProto tokens = 1; repeated
/// CredentialsKVProto secrets = 2 }`, length-delimited, where `CredentialsKVProto
/// { alias = 1; TokenProto token = 2; bytes secret = 3 }` and `TokenProto {
/// identifier = 1; password = 2; kind = 3; service = 4 }`. Unknown fields are
/// skipped; an entry of `tokens` without a token is no token.
fn protobuf(r: &mut Reader<'_>) -> Result<(Vec<StoredToken>, Secrets), String> {
    let n = usize::try_from(r.varint()?).map_err(|_| "length too large")?;
    let msg = r.take(n)?;
    let (mut tokens, mut secrets) = (Vec::new(), Vec::new());
    walk(msg, |tag, kv| {
        if tag != 1 && tag != 2 {
            return Ok(());
        }
        let (mut alias, mut token, mut secret) = (Vec::new(), None, Vec::new());
        walk(kv, |tag, v| {
            match tag {
                1 => alias = v.to_vec(),
                2 => token = Some(v),
                3 => secret = v.to_vec(),
                _ => {}
            }
            Ok(())
        })?;
        match tag {
            1 => {
                if let Some(token) = token {
                    tokens.push(token_proto(alias, token)?);
                }
            }
            2 => secrets.push((alias, secret)),
            _ => {}
        }
        Ok(())
    })?;
    Ok((tokens, secrets))
}

fn token_proto(alias: Vec<u8>, token: &[u8]) -> Result<StoredToken, String> {
    let (mut identifier, mut password, mut kind, mut service) =
        (Vec::new(), Vec::new(), None, None);
    walk(token, |tag, v| {
        let text =
            || String::from_utf8(v.to_vec()).map_err(|_| "text that is not UTF-8".to_owned());
        match tag {
            1 => identifier = v.to_vec(),
            2 => password = v.to_vec(),
            3 => kind = Some(text()?),
            4 => service = Some(text()?),
            _ => {}
        }
        Ok(())
    })?;
    match (kind, service) {
        (Some(kind), Some(service)) => Ok(StoredToken {
            alias,
            identifier,
            password,
            kind,
            service,
        }),
        _ => Err("a token without kind or service".into()),
    }
}

/// Writes `c` as Hadoop does: `HDTS`, the format byte, then the Writable layout
/// with the shortest VLongs, or the protobuf message (fields in number order).
/// [`read`] of the result gives `c` back.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn write(c: &Credentials) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(c.format);
    if c.format == 0 {
        let counted = |out: &mut Vec<u8>, b: &[u8]| {
            write_vlong(out, b.len() as i64);
            out.extend_from_slice(b);
        };
        write_vlong(&mut out, c.tokens.len() as i64);
        for t in &c.tokens {
            counted(&mut out, &t.alias);
            counted(&mut out, &t.identifier);
            counted(&mut out, &t.password);
            counted(&mut out, t.kind.as_bytes());
            counted(&mut out, t.service.as_bytes());
        }
        write_vlong(&mut out, c.secrets.len() as i64);
        for (alias, key) in &c.secrets {
            counted(&mut out, alias);
            counted(&mut out, key);
        }
    } else {
        let mut msg = Vec::new();
        for t in &c.tokens {
            let mut token = Vec::new();
            proto_field(&mut token, 1, &t.identifier);
            proto_field(&mut token, 2, &t.password);
            proto_field(&mut token, 3, t.kind.as_bytes());
            proto_field(&mut token, 4, t.service.as_bytes());
            let mut kv = Vec::new();
            proto_field(&mut kv, 1, &t.alias);
            proto_field(&mut kv, 2, &token);
            proto_field(&mut msg, 1, &kv);
        }
        for (alias, secret) in &c.secrets {
            let mut kv = Vec::new();
            proto_field(&mut kv, 1, alias);
            proto_field(&mut kv, 3, secret);
            proto_field(&mut msg, 2, &kv);
        }
        write_varint(&mut out, msg.len() as u64);
        out.extend(msg);
    }
    out
}

/// `WritableUtils.writeVLong`: the shortest form.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn write_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as u8);
        return;
    }
    let (negative, x) = if v < 0 { (true, !v) } else { (false, v) };
    let bytes = x.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    let len = (8 - skip) as i8;
    out.push(if negative { -120 - len } else { -112 - len } as u8);
    out.extend_from_slice(&bytes[skip..]);
}

#[cfg(any(test, feature = "fuzzing"))]
fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field.
#[cfg(any(test, feature = "fuzzing"))]
fn proto_field(out: &mut Vec<u8>, number: u64, value: &[u8]) {
    write_varint(out, number << 3 | 2);
    write_varint(out, value.len() as u64);
    out.extend_from_slice(value);
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

    fn text(out: &mut Vec<u8>, s: &str) {
        write_vlong(out, s.len() as i64);
        out.extend_from_slice(s.as_bytes());
    }

    /// The identifier of an HDFS delegation token for `spark` (renewer `yarn`).
    fn spark_identifier() -> Vec<u8> {
        let mut id = vec![0u8];
        for s in ["spark", "yarn", ""] {
            text(&mut id, s);
        }
        for v in [1_700_000_000_000i64, 4_100_000_000_000, 7, 3] {
            write_vlong(&mut id, v);
        }
        id
    }

    /// A token file in `format` with one HDFS delegation token for `service` and
    /// one secret key.
    pub(crate) fn credentials(format: u8, service: &str) -> Credentials {
        Credentials {
            format,
            tokens: vec![StoredToken {
                alias: service.as_bytes().to_vec(),
                identifier: spark_identifier(),
                password: b"PASS".to_vec(),
                kind: HDFS_DELEGATION_TOKEN.into(),
                service: service.into(),
            }],
            secrets: vec![(b"key".to_vec(), b"SECRET".to_vec())],
        }
    }

    /// A Writable token file with one HDFS delegation token for `service`, as
    /// Hadoop's `Credentials.writeLegacyTokenStorageFile` lays it out, written here
    /// field by field (not by [`write`]).
    pub(crate) fn token_file(service: &str) -> Vec<u8> {
        let id = spark_identifier();
        let mut out = b"HDTS\0".to_vec();
        write_vlong(&mut out, 1);
        text(&mut out, service);
        write_vlong(&mut out, id.len() as i64);
        out.extend(&id);
        write_vlong(&mut out, 4);
        out.extend(b"PASS");
        text(&mut out, HDFS_DELEGATION_TOKEN);
        text(&mut out, service);
        write_vlong(&mut out, 1);
        text(&mut out, "key");
        write_vlong(&mut out, 6);
        out.extend(b"SECRET");
        out
    }

    /// Both formats re-serialize to the bytes read, and read back the same.
    #[test]
    fn token_files_round_trip_byte_exact() {
        let legacy = token_file("ha-hdfs:ns1");
        let read_back = read(&legacy).unwrap();
        assert_eq!(read_back, credentials(0, "ha-hdfs:ns1"));
        assert_eq!(write(&read_back), legacy);
        let proto = write(&credentials(1, "127.0.0.1:8020"));
        assert_eq!(&proto[..5], b"HDTS\x01");
        assert_eq!(read(&proto).unwrap(), credentials(1, "127.0.0.1:8020"));
        assert_eq!(parse(&proto).unwrap()[0].owner.as_deref(), Some("spark"));
        // Every truncation of the protobuf form is refused too.
        for n in 0..proto.len() {
            assert!(read(&proto[..n]).is_err(), "prefix {n}");
        }
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
            write_vlong(&mut buf, v);
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
