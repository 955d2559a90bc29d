//! The OpenPGP parsers of `--verify-signatures` ([`crate::openpgp`]): a key file (armored
//! blocks among free text, as a `KEYS` file, or binary packets) and a detached signature
//! (armored or binary), as a repository or a user hands them over.

use crate::openpgp::{parse_keys, verify, Verdict};

/// A key made by gpg for the seeds (`fuzz/corpus/openpgp/`), and the bytes its seed
/// signatures sign.
const SEED_KEY: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEawtrvxYJKwYBBAHaRw8BAQdAY+4zDTSC3cjzE+2KsH2BZIsI8Rfr3fQHhdcP
m3oKLfO0HEZ1enogU2VlZCA8c2VlZEBleGFtcGxlLm9yZz6IkAQTFggAOBYhBCVv
stIHl4lIzMCZ+uhIQsE8r1JMBQJrC2u/AhsDBQsJCAcCBhUKCQgLAgQWAgMBAh4B
AheAAAoJEOhIQsE8r1JMQ7IBAM09PFQw2TwTQj7S0ievKllKTo5p1V76KUbBGVeZ
NU3wAQDypL/yqku3ApSYRHTLSKTa7TkdPGoakb+uZO/2r+WMBw==
=Dvmo
-----END PGP PUBLIC KEY BLOCK-----
";
const SEED_FINGERPRINT: &str = "256FB2D207978948CCC099FAE84842C13CAF524C";
const SIGNED: &[u8] = b"fuzz seed data\n";

/// Fuzz entry point: the bytes as a key file, and as a signature of the seed key over the
/// seed data. A parsed key is named by a fingerprint (40 or 64 upper-case hex digits); a
/// refusal says why in a bounded message; a signature is good only when the seed key
/// made it over these bytes, and never over other bytes as well.
pub fn openpgp(data: &[u8]) {
    match parse_keys(data) {
        Ok(keys) => {
            for key in &keys {
                let f = &key.fingerprint;
                assert!(
                    (f.len() == 40 || f.len() == 64)
                        && f.bytes()
                            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)),
                    "{f:?}"
                );
            }
            // The parsed keys against the bytes as a signature: no panic, whatever they are.
            let _ = verify(&keys, SIGNED, data);
        }
        Err(why) => assert!(!why.is_empty() && why.len() < 64 << 10, "{why:?}"),
    }
    let seed = parse_keys(SEED_KEY.as_bytes()).expect("the seed key parses");
    let over_seed = verify(&seed, SIGNED, data);
    if let Ok(Verdict::Good { fingerprint, .. }) = &over_seed {
        assert_eq!(fingerprint, SEED_FINGERPRINT);
        assert!(
            verify(&seed, b"other bytes", data).is_err(),
            "a signature good over two texts"
        );
    }
}
