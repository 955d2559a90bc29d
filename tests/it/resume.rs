//! A resume never splices two versions of an object: when the object changes
//! between a reset and the resume, whatever the server answers, the published
//! file is one whole version (the new one), never old prefix + new suffix.

use crate::support::{data, sha256_hex, Fault, FaultServer, Request, Sandbox};

const OLD_LEN: usize = 1 << 20;
/// Bytes of the old object the first GET delivers before the reset.
const CUT: usize = 300_000;

/// `/a.jar` is `old` with ETag "e1"; its first GET sends 200 (Accept-Ranges) and
/// `CUT` bytes, then resets; right after that GET the object becomes `new` with
/// `new_etag`. `second` is how the server treats the resume (the second GET).
fn changed_under_transfer(
    new: &[u8],
    new_etag: &str,
    second: Option<Fault>,
) -> (FaultServer, Sandbox) {
    let old = data(1, OLD_LEN);
    let server = FaultServer::start();
    server.put_tagged("/a.jar", old.clone(), "\"e1\"");
    server.on("/a.jar", 1, Fault::ResetAfter(CUT));
    server.replace_after("/a.jar", 1, new.to_vec(), new_etag);
    if let Some(fault) = second {
        server.on("/a.jar", 2, fault);
    }
    let sb = Sandbox::new();
    let out = sb.fetch().args(["--jars", &server.url("/a.jar")]).run();
    out.expect_code(0);

    let got = std::fs::read(sb.jar("a.jar")).unwrap();
    let digest = sha256_hex(&got);
    assert!(
        digest == sha256_hex(new) || digest == sha256_hex(&old),
        "published a.jar ({} bytes) is neither version: a splice\n{out}",
        got.len()
    );
    assert!(
        got == new,
        "published the old version, which the server no longer serves\n{out}"
    );
    let a = sb.artifact("a.jar");
    assert_eq!(a["sha256"], sha256_hex(new), "{a:#}");
    assert_eq!(a["bytes"], new.len(), "{a:#}");
    assert!(
        sb.leftovers().is_empty(),
        "temp files left: {:?}",
        sb.leftovers()
    );

    // The resume really was attempted, conditionally on the first version.
    let gets = server.gets("/a.jar");
    assert!(gets.len() >= 2, "{gets:#?}");
    assert_resumed_from_e1(&gets[1]);
    (server, sb)
}

#[track_caller]
fn assert_resumed_from_e1(r: &Request) {
    let from: usize = r
        .header("range")
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("second GET is not a resume: {r:#?}"));
    assert!(from > 0 && from <= CUT, "resumed from {from}: {r:#?}");
    assert_eq!(r.header("if-range"), Some("\"e1\""), "{r:#?}");
}

#[test]
fn if_range_honoured_new_object_arrives_whole() {
    // Same length as the old object: only the validator tells them apart.
    let new = data(2, OLD_LEN);
    let (server, sb) = changed_under_transfer(&new, "\"e2\"", None);
    let gets = server.gets("/a.jar");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert_eq!(sb.artifact("a.jar")["attempts"], 2);
}

#[test]
fn if_range_ignored_206_of_another_etag_restarts_from_zero() {
    // The server answers the resume with 206 + ETag "e2" + the new object's range.
    let new = data(3, OLD_LEN);
    let (server, sb) = changed_under_transfer(&new, "\"e2\"", Some(Fault::IgnoreIfRange));
    let gets = server.gets("/a.jar");
    let last = gets.last().unwrap();
    assert_eq!(
        last.header("range"),
        None,
        "after a 206 of another version the engine must start over from 0: {gets:#?}"
    );
    let a = sb.artifact("a.jar");
    assert!(a["attempts"].as_u64().is_some_and(|n| n >= 3), "{a:#}");
}

#[test]
fn same_etag_but_another_total_length_restarts() {
    // A broken origin: new bytes and a new length under the same ETag "e1". The
    // 206 it answers the resume with has a different total in Content-Range.
    let new = data(4, OLD_LEN + 123_457);
    let (server, sb) = changed_under_transfer(&new, "\"e1\"", None);
    let gets = server.gets("/a.jar");
    assert_eq!(
        gets.last().unwrap().header("range"),
        None,
        "after a 206 with another total the engine must start over from 0: {gets:#?}"
    );
    let a = sb.artifact("a.jar");
    assert!(a["attempts"].as_u64().is_some_and(|n| n >= 3), "{a:#}");

    // And shorter than what was already received.
    let new = data(5, CUT / 2 + 1000);
    let (_server, sb) = changed_under_transfer(&new, "\"e1\"", None);
    assert!(sb.artifact("a.jar")["attempts"].as_u64().unwrap() >= 2);
}
