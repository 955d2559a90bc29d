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

/// One line per pin: GNU's form with the binary marker (`<hex> *<key>`), escaped (a
/// leading `\`) when the key holds a line break, or a backslash; the BSD form
/// (`SHA256 (<key>) = <hex>`, no escapes) when it ends in whitespace, which a GNU
/// line loses (a key with a line break never does).
fn write(pins: &Checksums) -> String {
    let mut out = String::new();
    for key in pins.keys() {
        let hex = hex::encode(pins.pinned(key).expect("a listed key"));
        let escape = key.contains(['\n', '\r'])
            || (key.contains('\\') && !key.ends_with(char::is_whitespace));
        if escape {
            let escaped = key
                .replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r");
            out.push_str(&format!("\\{hex} *{escaped}\n"));
        } else if key.ends_with(char::is_whitespace) {
            out.push_str(&format!("SHA256 ({key}) = {hex}\n"));
        } else {
            out.push_str(&format!("{hex} *{key}\n"));
        }
    }
    out
}
