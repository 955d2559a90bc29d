//! Entry points for fuzzing the parsers of untrusted input (`fuzz/`, cargo-fuzz):
//! each takes arbitrary bytes and asserts the parser's own invariants, not only
//! that it does not panic. Built with the `fuzzing` feature (the fuzz targets) and
//! in tests, where the committed seed corpora replay through them.

mod properties;

pub use properties::properties;
