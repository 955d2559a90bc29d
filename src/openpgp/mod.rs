//! OpenPGP detached-signature verification for Maven artifacts (`.asc` files),
//! built on rpgp (`pgp` crate, 0.21), for `--verify-signatures` (the Maven resolver's `signatures`).
//!
//! Policy (see also docs/packages.md):
//! * A key is accepted only if it carries at least one cryptographically valid
//!   self-signature (user-id certification or direct-key signature). Invalid or
//!   third-party signatures are ignored (as gpg does); user ids without a valid
//!   self-certification (or with a newer valid self-revocation) are dropped.
//! * Expiry is evaluated at the *signature creation time*: a signature made while
//!   the key (and signing subkey) was valid stays `Good` even if the key has
//!   expired since (that is what gpg also does: it prints "Good signature" plus
//!   "Note: This key has expired!", exit 0). A signature created at/after the
//!   expiry is `Expired`. The key expiration is taken from the newest valid
//!   self-signature (the key's current state, like gpg). A signature that itself
//!   carries a signature-expiration subpacket and is past it now is `Expired` too.
//! * Revocation: a valid self-revocation present in the trusted key material
//!   makes the result `Revoked` (gpg would print "Good signature" + a revocation
//!   WARNING with exit 0 — we deliberately fail). "Soft" revocations (reason
//!   "superseded" or "retired") only apply to signatures created at or after the
//!   revocation time (RFC 9580 §5.2.3.31); all other reasons (or none) are "hard"
//!   and invalidate every signature.
//! * Signing subkeys count only with a valid, newest, non-revoked, non-expired
//!   binding signature that has the "sign" key flag and a valid embedded
//!   primary-key-binding (back) signature. Usage flags of the primary key are not
//!   enforced (a certify-only primary that signs data directly is accepted).

use std::io::{Cursor, Read};

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{PublicKey, RevocationCode, Signature, SignatureType};
use pgp::types::{KeyDetails, Tag};

/// Upper bound on the number of parse results (keys or errors) we look at per
/// input, so hostile input cannot make us spin.
const MAX_ITEMS: usize = 10_000;
/// Upper bound on signatures in one `.asc`.
const MAX_SIGS: usize = 64;

const KEY_BEGIN: &[u8] = b"-----BEGIN PGP PUBLIC KEY BLOCK-----";
const KEY_END: &[u8] = b"-----END PGP PUBLIC KEY BLOCK-----";
const SIG_BEGIN: &[u8] = b"-----BEGIN PGP SIGNATURE-----";
const SIG_END: &[u8] = b"-----END PGP SIGNATURE-----";

/// A validated public key (primary + usable subkeys).
#[derive(Clone, Debug)]
pub(crate) struct TrustedKey {
    /// Primary key fingerprint, upper-case hex (v4: 40 chars, v6: 64 chars).
    pub fingerprint: String,
    /// User ids with a valid (non-revoked) self-certification.
    pub user_ids: Vec<String>,
    key: SignedPublicKey,
    primary: ComponentState,
    /// Index into `key.public_subkeys` and its state, for subkeys with a valid binding.
    subkeys: Vec<(usize, ComponentState)>,
    primary_user_id: Option<String>,
}

#[derive(Clone, Debug)]
struct ComponentState {
    fingerprint: String,
    key_id: String,
    fp_bytes: Vec<u8>,
    key_id_bytes: [u8; 8],
    created: u32,
    /// Absolute expiry (unix seconds), if any.
    expires_at: Option<u64>,
    /// (hard?, revocation creation time)
    revoked: Option<(bool, u32)>,
    can_sign: bool,
}

/// Parses a file's bytes: one or more ASCII-armored public key blocks (free
/// text around and between the blocks is ignored, as in Apache `KEYS` files),
/// or binary transferable public keys. Error if no valid key is found.
pub(crate) fn parse_keys(bytes: &[u8]) -> Result<Vec<TrustedKey>, String> {
    let mut keys = Vec::new();
    let mut problems = Problems::default();
    let trimmed = trim_start(bytes);
    if trimmed.is_empty() {
        return Err("no OpenPGP public key found: input is empty".into());
    }
    if trimmed[0] & 0x80 != 0 {
        collect_keys(
            SignedPublicKey::from_bytes_many(Cursor::new(trimmed)),
            &mut keys,
            &mut problems,
            "",
        );
    } else {
        let blocks = armored_blocks(bytes, KEY_BEGIN, KEY_END);
        if blocks.is_empty() {
            return Err(format!(
                "no OpenPGP public key found: no '{}' block and not binary OpenPGP data",
                String::from_utf8_lossy(KEY_BEGIN)
            ));
        }
        for (i, block) in blocks.iter().enumerate() {
            let ctx = format!("armored block #{}: ", i + 1);
            match SignedPublicKey::from_armor_many(Cursor::new(*block)) {
                Ok((iter, _headers)) => collect_keys(Ok(iter), &mut keys, &mut problems, &ctx),
                Err(e) => problems.push(format!("{ctx}{e}")),
            }
        }
    }
    if keys.is_empty() {
        return Err(format!(
            "no valid OpenPGP public key found: {}",
            problems.summary()
        ));
    }
    Ok(keys)
}

fn collect_keys(
    iter: pgp::errors::Result<Box<dyn Iterator<Item = pgp::errors::Result<SignedPublicKey>> + '_>>,
    keys: &mut Vec<TrustedKey>,
    problems: &mut Problems,
    ctx: &str,
) {
    let iter = match iter {
        Ok(it) => it,
        Err(e) => {
            problems.push(format!("{ctx}{e}"));
            return;
        }
    };
    for item in iter.take(MAX_ITEMS) {
        match item {
            Ok(k) => match TrustedKey::validate(k) {
                Ok(t) => keys.push(t),
                Err(e) => problems.push(format!("{ctx}{e}")),
            },
            Err(e) => problems.push(format!("{ctx}{e}")),
        }
    }
}

/// Parse problems: the first few messages plus a count (bounded memory).
#[derive(Default)]
struct Problems {
    first: Vec<String>,
    total: usize,
}

impl Problems {
    fn push(&mut self, m: String) {
        self.total += 1;
        if self.first.len() < 5 {
            self.first.push(m);
        }
    }
    fn summary(&self) -> String {
        let mut s = if self.first.is_empty() {
            "no public key packets".to_string()
        } else {
            self.first.join("; ")
        };
        if self.total > self.first.len() {
            s.push_str(&format!(
                " (and {} more problems)",
                self.total - self.first.len()
            ));
        }
        s
    }
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from >= hay.len() || needle.is_empty() {
        return None;
    }
    let first = needle[0];
    let mut i = from;
    while i + needle.len() <= hay.len() {
        match hay[i..].iter().position(|&c| c == first) {
            None => return None,
            Some(off) => {
                let s = i + off;
                if hay.len() - s < needle.len() {
                    return None;
                }
                if &hay[s..s + needle.len()] == needle {
                    return Some(s);
                }
                i = s + 1;
            }
        }
    }
    None
}

/// All `BEGIN ... END` spans (END line included), scanning linearly.
fn armored_blocks<'a>(bytes: &'a [u8], begin: &[u8], end: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(b) = find(bytes, begin, pos) {
        let Some(e) = find(bytes, end, b + begin.len()) else {
            // unterminated: hand the tail to the dearmorer, it reports the error
            out.push(&bytes[b..]);
            break;
        };
        let mut stop = e + end.len();
        while stop < bytes.len() && bytes[stop] != b'\n' {
            stop += 1;
        }
        if stop < bytes.len() {
            stop += 1;
        }
        out.push(&bytes[b..stop]);
        pos = stop;
    }
    out
}

fn hex_upper(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(H[(x >> 4) as usize] as char);
        s.push(H[(x & 15) as usize] as char);
    }
    s
}

fn key_id_of(k: &impl KeyDetails) -> [u8; 8] {
    let id = k.legacy_key_id();
    let mut out = [0u8; 8];
    let r: &[u8] = id.as_ref();
    if r.len() == 8 {
        out.copy_from_slice(r);
    }
    out
}

fn sig_created(sig: &Signature) -> Option<u32> {
    sig.created().map(|t| t.as_secs())
}

/// Could `sig` have been issued by the key with this fingerprint / key id?
/// (No issuer information at all counts as a possible match.)
fn issued_by(sig: &Signature, fp: &[u8], kid: &[u8; 8]) -> bool {
    let ids = sig.issuer_key_id();
    let fps = sig.issuer_fingerprint();
    if ids.is_empty() && fps.is_empty() {
        return true;
    }
    ids.iter().any(|i| {
        let r: &[u8] = i.as_ref();
        r == kid
    }) || fps.iter().any(|f| f.as_bytes() == fp)
}

fn is_hard_revocation(sig: &Signature) -> bool {
    !matches!(
        sig.revocation_reason_code(),
        Some(RevocationCode::KeySuperseded) | Some(RevocationCode::KeyRetired)
    )
}

fn expiry(created: u32, sig: &Signature) -> Option<u64> {
    match sig.key_expiration_time() {
        Some(d) if d.as_secs() > 0 => Some(created as u64 + d.as_secs() as u64),
        _ => None,
    }
}

fn merge_revocation(cur: Option<(bool, u32)>, new: (bool, u32)) -> Option<(bool, u32)> {
    Some(match cur {
        None => new,
        Some((h, t)) => (h || new.0, t.min(new.1)),
    })
}

impl TrustedKey {
    fn validate(key: SignedPublicKey) -> Result<TrustedKey, String> {
        let pk: &PublicKey = &key.primary_key;
        let fp_bytes = pk.fingerprint().as_bytes().to_vec();
        let kid = key_id_of(pk);
        let fingerprint = hex_upper(&fp_bytes);
        let created = pk.created_at().as_secs();

        // Newest valid self-signature (creation time, signature) → current key state.
        let mut newest_self: Option<(u32, &Signature)> = None;

        let mut user_ids = Vec::new();
        let mut primary_user_id = None;
        let mut self_sigs: Vec<(u32, &Signature)> = Vec::new();
        for user in &key.details.users {
            let mut newest_cert: Option<(u32, &Signature)> = None;
            let mut newest_rev: Option<u32> = None;
            for sig in &user.signatures {
                if !issued_by(sig, &fp_bytes, &kid) {
                    continue; // third-party certification: ignored
                }
                let Some(t) = sig_created(sig) else { continue };
                let ok = sig.verify_certification(pk, Tag::UserId, &user.id).is_ok();
                if !ok {
                    continue;
                }
                match sig.typ() {
                    Some(SignatureType::CertRevocation) => {
                        newest_rev = Some(newest_rev.map_or(t, |r| r.max(t)));
                    }
                    Some(_) if sig.is_certification() => {
                        self_sigs.push((t, sig));
                        if newest_cert.is_none_or(|(nt, _)| t >= nt) {
                            newest_cert = Some((t, sig));
                        }
                    }
                    _ => {}
                }
            }
            if let Some((t, sig)) = newest_cert {
                if newest_rev.is_some_and(|r| r >= t) {
                    continue; // user id revoked
                }
                let uid = String::from_utf8_lossy(user.id.id()).into_owned();
                if sig.is_primary() && primary_user_id.is_none() {
                    primary_user_id = Some(uid.clone());
                }
                user_ids.push(uid);
            }
        }
        for sig in &key.details.direct_signatures {
            if sig.typ() != Some(SignatureType::Key) {
                continue;
            }
            let Some(t) = sig_created(sig) else { continue };
            if sig.verify_key(pk).is_ok() {
                self_sigs.push((t, sig));
            }
        }
        for (t, s) in &self_sigs {
            if newest_self.is_none_or(|(nt, _)| *t >= nt) {
                newest_self = Some((*t, *s));
            }
        }
        let Some((_, current)) = newest_self else {
            return Err(format!(
                "key {fingerprint} rejected: no valid self-signature (user id binding or direct-key signature)"
            ));
        };
        if primary_user_id.is_none() {
            primary_user_id = user_ids.first().cloned();
        }

        let mut revoked = None;
        for sig in &key.details.revocation_signatures {
            if !issued_by(sig, &fp_bytes, &kid) {
                continue; // designated-revoker revocations are not evaluated
            }
            let Some(t) = sig_created(sig) else { continue };
            if sig.verify_key(pk).is_ok() {
                revoked = merge_revocation(revoked, (is_hard_revocation(sig), t));
            }
        }

        let primary = ComponentState {
            fingerprint: fingerprint.clone(),
            key_id: hex_upper(&kid),
            fp_bytes: fp_bytes.clone(),
            key_id_bytes: kid,
            created,
            expires_at: expiry(created, current),
            revoked,
            can_sign: true,
        };

        let mut subkeys = Vec::new();
        for (idx, sk) in key.public_subkeys.iter().enumerate() {
            if let Some(state) = subkey_state(pk, sk) {
                subkeys.push((idx, state));
            }
        }

        Ok(TrustedKey {
            fingerprint,
            user_ids,
            primary,
            subkeys,
            primary_user_id,
            key,
        })
    }

    /// Fingerprints of subkeys that are currently bound and allowed to sign.
    #[cfg(test)]
    pub(crate) fn signing_subkeys(&self) -> Vec<String> {
        self.subkeys
            .iter()
            .filter(|(_, s)| s.can_sign)
            .map(|(_, s)| s.fingerprint.clone())
            .collect()
    }
}

fn subkey_state(pk: &PublicKey, sk: &SignedPublicSubKey) -> Option<ComponentState> {
    let fp_bytes = sk.key.fingerprint().as_bytes().to_vec();
    let kid = key_id_of(&sk.key);
    let created = sk.key.created_at().as_secs();
    let mut newest: Option<(u32, &Signature)> = None;
    let mut revoked = None;
    for sig in &sk.signatures {
        let Some(t) = sig_created(sig) else { continue };
        if sig.verify_subkey_binding(pk, &sk.key).is_err() {
            continue;
        }
        match sig.typ() {
            Some(SignatureType::SubkeyBinding) if newest.is_none_or(|(nt, _)| t >= nt) => {
                newest = Some((t, sig));
            }
            Some(SignatureType::SubkeyRevocation) => {
                revoked = merge_revocation(revoked, (is_hard_revocation(sig), t));
            }
            _ => {}
        }
    }
    let (_, binding) = newest?;
    let can_sign = binding.key_flags().sign()
        && binding
            .embedded_signature()
            .is_some_and(|back| back.verify_primary_key_binding(&sk.key, pk).is_ok());
    Some(ComponentState {
        fingerprint: hex_upper(&fp_bytes),
        key_id: hex_upper(&kid),
        fp_bytes,
        key_id_bytes: kid,
        created,
        expires_at: expiry(created, binding),
        revoked,
        can_sign,
    })
}

/// Successful verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Good {
        /// Primary key fingerprint.
        fingerprint: String,
        /// Fingerprint of the key or subkey that made the signature.
        signing_key: String,
        /// Primary (or first valid) user id of the key.
        user_id: Option<String>,
    },
}

/// Why verification failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Not an armored/binary OpenPGP signature (e.g. HTML), or unparseable, or
    /// the data could not be read.
    Malformed(String),
    /// Issuer not among the trusted keys (16 hex chars key id, or the issuer
    /// fingerprint if the signature only names a fingerprint).
    UnknownKey { key_id: String },
    /// Made by (or claiming) a trusted key but does not verify over the data.
    BadSignature { key_id: String },
    /// Key or signing subkey had expired when the signature was made, or the
    /// signature itself has expired. `when` is the expiry instant (UTC, ISO 8601).
    Expired { key_id: String, when: String },
    /// Key or signing subkey revoked in the trusted key material.
    Revoked { key_id: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Malformed(m) => write!(f, "malformed signature: {m}"),
            Failure::UnknownKey { key_id } => write!(f, "signed by unknown key {key_id}"),
            Failure::BadSignature { key_id } => write!(f, "BAD signature by key {key_id}"),
            Failure::Expired { key_id, when } => write!(f, "key/signature {key_id} expired {when}"),
            Failure::Revoked { key_id } => write!(f, "key {key_id} is revoked"),
        }
    }
}

/// Formats unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Parses the `.asc` bytes into data signatures.
fn parse_signatures(signature: &[u8]) -> Result<Vec<Signature>, Failure> {
    let trimmed = trim_start(signature);
    if trimmed.is_empty() {
        return Err(Failure::Malformed("empty signature file".into()));
    }
    let iter = if trimmed[0] & 0x80 != 0 {
        DetachedSignature::from_bytes_many(Cursor::new(trimmed))
            .map_err(|e| Failure::Malformed(e.to_string()))?
    } else {
        let blocks = armored_blocks(trimmed, SIG_BEGIN, SIG_END);
        let Some(block) = blocks.first() else {
            let head: String = String::from_utf8_lossy(&trimmed[..trimmed.len().min(40)])
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            return Err(Failure::Malformed(format!(
                "not an OpenPGP signature (no armor header, not binary); starts with {head:?}"
            )));
        };
        DetachedSignature::from_armor_many(Cursor::new(*block))
            .map_err(|e| Failure::Malformed(e.to_string()))?
            .0
    };
    let mut sigs = Vec::new();
    for item in iter.take(MAX_SIGS) {
        match item {
            Ok(ds) => sigs.push(ds.signature),
            Err(e) => return Err(Failure::Malformed(e.to_string())),
        }
    }
    if sigs.is_empty() {
        return Err(Failure::Malformed("no signature packet found".into()));
    }
    for s in &sigs {
        match s.typ() {
            Some(SignatureType::Binary) | Some(SignatureType::Text) => {}
            other => {
                return Err(Failure::Malformed(format!(
                    "not a data signature (signature type {other:?})"
                )));
            }
        }
        if s.created().is_none() {
            return Err(Failure::Malformed("signature without creation time".into()));
        }
    }
    Ok(sigs)
}

fn issuer_label(sig: &Signature) -> String {
    if let Some(id) = sig.issuer_key_id().first() {
        let r: &[u8] = id.as_ref();
        return hex_upper(r);
    }
    if let Some(fp) = sig.issuer_fingerprint().first() {
        let b = fp.as_bytes();
        // v4: key id = low 64 bits; v6: high 64 bits
        return if b.len() == 20 {
            hex_upper(&b[12..])
        } else if b.len() >= 8 {
            hex_upper(&b[..8])
        } else {
            hex_upper(b)
        };
    }
    "(no issuer)".into()
}

/// A (key, component) pair that may have issued a signature.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    key: &'a TrustedKey,
    /// None = primary key, Some(i) = index into `key.subkeys`.
    sub: Option<usize>,
}

impl<'a> Candidate<'a> {
    fn state(&self) -> &'a ComponentState {
        match self.sub {
            None => &self.key.primary,
            Some(i) => &self.key.subkeys[i].1,
        }
    }
}

fn candidates<'a>(keys: &'a [TrustedKey], sig: &Signature) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    for key in keys {
        if issued_by(sig, &key.primary.fp_bytes, &key.primary.key_id_bytes) {
            out.push(Candidate { key, sub: None });
        }
        for (i, (_, st)) in key.subkeys.iter().enumerate() {
            if issued_by(sig, &st.fp_bytes, &st.key_id_bytes) {
                out.push(Candidate { key, sub: Some(i) });
            }
        }
    }
    out
}

/// Reader wrapper remembering I/O errors, so they are not reported as bad signatures.
struct TrackingReader<R> {
    inner: R,
    error: Option<String>,
}

impl<R: Read> Read for TrackingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.error = Some(e.to_string());
                }
                Err(e)
            }
        }
    }
}

/// Cryptographic check of `sig` over the data from `reader` with candidate `c`.
fn crypto_check<R: Read>(sig: &Signature, c: Candidate<'_>, reader: R) -> Result<bool, Failure> {
    let mut tr = TrackingReader {
        inner: reader,
        error: None,
    };
    let res = match c.sub {
        None => sig.verify(&c.key.key.primary_key, &mut tr),
        Some(i) => {
            let idx = c.key.subkeys[i].0;
            match c.key.key.public_subkeys.get(idx) {
                Some(sk) => sig.verify(&sk.key, &mut tr),
                None => return Ok(false),
            }
        }
    };
    if let Some(e) = tr.error {
        return Err(Failure::Malformed(format!("reading signed data: {e}")));
    }
    Ok(res.is_ok())
}

/// Policy checks after a successful cryptographic verification.
fn policy(sig: &Signature, c: Candidate<'_>) -> Result<Verdict, Failure> {
    let t = sig_created(sig).unwrap_or(0);
    let st = c.state();
    let prim = &c.key.primary;
    let mut comps = vec![prim];
    if c.sub.is_some() {
        comps.push(st);
    }
    for comp in &comps {
        if comp.revoked.is_some_and(|(hard, rt)| hard || rt <= t) {
            return Err(Failure::Revoked {
                key_id: comp.key_id.clone(),
            });
        }
    }
    if !st.can_sign {
        return Err(Failure::BadSignature {
            key_id: st.key_id.clone(),
        });
    }
    for comp in &comps {
        if t < comp.created {
            // signature predates the key: gpg reports this as an error too
            return Err(Failure::BadSignature {
                key_id: comp.key_id.clone(),
            });
        }
        if let Some(e) = comp.expires_at.filter(|&e| t as u64 >= e) {
            return Err(Failure::Expired {
                key_id: comp.key_id.clone(),
                when: iso8601(e),
            });
        }
    }
    if let Some(d) = sig.signature_expiration_time() {
        let e = t as u64 + d.as_secs() as u64;
        if d.as_secs() > 0 && crate::util::time::now_ms() / 1000 >= e {
            return Err(Failure::Expired {
                key_id: st.key_id.clone(),
                when: iso8601(e),
            });
        }
    }
    Ok(Verdict::Good {
        fingerprint: c.key.fingerprint.clone(),
        signing_key: st.fingerprint.clone(),
        user_id: c.key.primary_user_id.clone(),
    })
}

fn rank(r: &Result<Verdict, Failure>) -> u8 {
    match r {
        Err(Failure::Revoked { .. }) => 5,
        Ok(_) => 4,
        Err(Failure::Expired { .. }) => 3,
        Err(Failure::BadSignature { .. }) => 2,
        Err(Failure::Malformed(_)) => 1,
        Err(Failure::UnknownKey { .. }) => 0,
    }
}

/// Verifies a detached signature (`.asc` bytes, armored or binary) over `data`.
///
/// If the `.asc` holds several signatures, all are checked; precedence of the
/// result: `Revoked` > `Good` > `Expired` > `BadSignature` > `UnknownKey`.
pub(crate) fn verify(
    keys: &[TrustedKey],
    data: &[u8],
    signature: &[u8],
) -> Result<Verdict, Failure> {
    let sigs = parse_signatures(signature)?;
    let mut best: Option<Result<Verdict, Failure>> = None;
    for sig in &sigs {
        let cands = candidates(keys, sig);
        let mut results = Vec::new();
        if cands.is_empty() {
            results.push(Err(Failure::UnknownKey {
                key_id: issuer_label(sig),
            }));
        }
        for c in cands {
            let r = if crypto_check(sig, c, data)? {
                policy(sig, c)
            } else {
                Err(Failure::BadSignature {
                    key_id: c.state().key_id.clone(),
                })
            };
            results.push(r);
        }
        for r in results {
            if best.as_ref().is_none_or(|b| rank(&r) > rank(b)) {
                best = Some(r);
            }
        }
    }
    best.unwrap_or_else(|| Err(Failure::Malformed("no signature".into())))
}

/// Streaming variant of [`verify`]: the data is read once from `data`.
///
/// Limitation: only the first signature in the `.asc` that names a trusted key is
/// checked, against the first matching key component (other candidates sharing
/// the same fingerprint reuse that result). Reading errors give `Malformed`.
pub(crate) fn verify_reader<R: Read>(
    keys: &[TrustedKey],
    data: R,
    signature: &[u8],
) -> Result<Verdict, Failure> {
    let sigs = parse_signatures(signature)?;
    let Some((sig, cands)) = sigs
        .iter()
        .map(|s| (s, candidates(keys, s)))
        .find(|(_, c)| !c.is_empty())
    else {
        return Err(Failure::UnknownKey {
            key_id: issuer_label(&sigs[0]),
        });
    };
    let first = cands[0];
    let ok = crypto_check(sig, first, std::io::BufReader::new(data))?;
    let mut best: Option<Result<Verdict, Failure>> = None;
    for c in cands
        .iter()
        .filter(|c| c.state().fp_bytes == first.state().fp_bytes)
    {
        let r = if ok {
            policy(sig, *c)
        } else {
            Err(Failure::BadSignature {
                key_id: c.state().key_id.clone(),
            })
        };
        if best.as_ref().is_none_or(|b| rank(&r) > rank(b)) {
            best = Some(r);
        }
    }
    best.unwrap_or_else(|| {
        Err(Failure::BadSignature {
            key_id: first.state().key_id.clone(),
        })
    })
}

#[cfg(test)]
mod tests;
