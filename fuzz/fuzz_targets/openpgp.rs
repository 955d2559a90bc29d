#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| spark_localizer::fuzz::openpgp(data));
