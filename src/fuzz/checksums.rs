//! The `sha256sum` pins reader: whatever it accepts writes back (as `sha256sum` or
//! `sha256sum --tag` would) to text that reads as the same pins in the same order.

use crate::config::checksums::Checksums;

/// Fuzz entry point: any bytes, read as a pins file is (UTF-8, lossily).
pub fn checksums(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(pins) = Checksums::parse(&text, "fuzz") else {
        return;
    };
    let written = write(&pins);
    let again = Checksums::parse(&written, "rewritten")
        .unwrap_or_else(|e| panic!("{written:?} (from {text:?}) does not read back: {e}"));
    let keys: Vec<&str> = pins.keys().collect();
    assert_eq!(
        again.keys().collect::<Vec<_>>(),
        keys,
        "{text:?} → {written:?}"
    );
    for key in keys {
        assert_eq!(again.pinned(key), pins.pinned(key), "{key:?}");
    }
}

/// One line per pin: GNU's form with the binary marker (`<hex> *<key>`), escaped
/// (a leading `\`) when the key holds a line break or a backslash; the BSD form
/// (`SHA256 (<key>) = <hex>`, no escapes) when it ends in whitespace other than a
/// line break, which a GNU line loses (the reader trims lines). Such a key never
/// holds a newline, but may hold a CR (the fuzzer found one).
fn write(pins: &Checksums) -> String {
    let mut out = String::new();
    for key in pins.keys() {
        let hex = hex::encode(pins.pinned(key).expect("a listed key"));
        if key.ends_with(|c: char| c.is_whitespace() && c != '\n' && c != '\r') {
            assert!(
                !key.contains('\n'),
                "{key:?}: a newline and trailing whitespace"
            );
            out.push_str(&format!("SHA256 ({key}) = {hex}\n"));
        } else if key.contains(['\n', '\r', '\\']) {
            let escaped = key
                .replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r");
            out.push_str(&format!("\\{hex} *{escaped}\n"));
        } else {
            out.push_str(&format!("{hex} *{key}\n"));
        }
    }
    out
}
