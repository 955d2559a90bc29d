//! What this process has learned of each origin's connections, and the gate
//! that keeps a burst of requests from overrunning a small server.
//!
//! A server that closes every connection (HTTP/1.0, `Connection: close`:
//! `python3 -m http.server`, small proxies) pays a new TCP connection per
//! request, and one with a short listen backlog drops a burst of them: the
//! kernel tries again only a second later. So until an origin has shown that
//! it keeps connections alive, at most [`TURNS`] requests wait for their
//! answer's head at once (six, as browsers open); once it has, no limit but
//! the caller's own. The Maven resolver records what it learns here
//! too, so the transfers after a resolution start with the knowledge.
//!
//! A turn is held until the answer's head arrives (the connection is then
//! accepted), not for the body.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use url::Url;

/// Requests waiting for a head at once to an origin not known to keep
/// connections alive.
pub(crate) const TURNS: usize = 6;

/// How an origin treats connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Unknown,
    /// HTTP/1.1 without `Connection: close`, or HTTP/2.
    KeptAlive,
    /// HTTP/1.0, or `Connection: close`.
    Closing,
}

struct Origin {
    kind: Kind,
    turns: Arc<Semaphore>,
}

fn all() -> &'static Mutex<HashMap<String, Origin>> {
    static ALL: OnceLock<Mutex<HashMap<String, Origin>>> = OnceLock::new();
    ALL.get_or_init(Default::default)
}

/// `url`'s origin, not heard from yet when it is new.
fn entry<'a>(all: &'a mut HashMap<String, Origin>, url: &Url) -> &'a mut Origin {
    all.entry(url.origin().ascii_serialization())
        .or_insert_with(|| Origin {
            kind: Kind::Unknown,
            turns: Arc::new(Semaphore::new(TURNS)),
        })
}

/// A turn to send a request to `url`'s origin (none needed once it is known
/// to keep connections alive); hold it until the answer's head arrives.
pub(crate) async fn turn(url: &Url) -> Option<OwnedSemaphorePermit> {
    let turns = {
        let mut all = all().lock().expect("lock");
        let origin = entry(&mut all, url);
        if origin.kind == Kind::KeptAlive {
            return None;
        }
        origin.turns.clone()
    };
    // Closed (the origin turned out to keep connections alive): no limit.
    turns.acquire_owned().await.ok()
}

/// `url`'s origin answered `response`: what it does with connections.
pub(crate) fn answered(url: &Url, response: &reqwest::Response) -> Kind {
    let close = response
        .headers()
        .get(reqwest::header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
    let kept = match response.version() {
        reqwest::Version::HTTP_2 | reqwest::Version::HTTP_3 => true,
        reqwest::Version::HTTP_11 => !close,
        _ => false,
    };
    let kind = if kept { Kind::KeptAlive } else { Kind::Closing };
    learned(url, kind);
    kind
}

/// Records what `url`'s origin does with connections: kept alive frees every
/// request waiting for a turn.
pub(crate) fn learned(url: &Url, kind: Kind) {
    let mut all = all().lock().expect("lock");
    let origin = entry(&mut all, url);
    match (origin.kind, kind) {
        (Kind::KeptAlive, _) | (_, Kind::Unknown) => {}
        (_, Kind::KeptAlive) => {
            origin.kind = Kind::KeptAlive;
            origin.turns.close();
        }
        (_, Kind::Closing) => origin.kind = Kind::Closing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_origin_keeping_connections_alive_frees_the_waiting_requests() {
        let url = Url::parse("http://kept.test:1/a").unwrap();
        let mut held = Vec::new();
        for _ in 0..TURNS {
            held.push(turn(&url).await.expect("a turn"));
        }
        let waiting = tokio::spawn({
            let url = url.clone();
            async move { turn(&url).await.is_none() }
        });
        learned(&url, Kind::KeptAlive);
        assert!(waiting.await.unwrap(), "no turn needed once kept alive");
        assert!(turn(&url).await.is_none());
    }

    #[tokio::test]
    async fn an_origin_closing_connections_keeps_its_turns() {
        let url = Url::parse("http://closing.test:1/a").unwrap();
        learned(&url, Kind::Closing);
        let mut held = Vec::new();
        for _ in 0..TURNS {
            held.push(turn(&url).await.expect("a turn"));
        }
        let more = tokio::time::timeout(std::time::Duration::ZERO, turn(&url)).await;
        assert!(more.is_err(), "the seventh waits");
        drop(held.pop());
        assert!(turn(&url).await.is_some());
    }
}
