//! The stall watch of a request with a body: the body notes each time the
//! connection takes a chunk of it, and the answer is waited for until
//! `--stall-timeout` passes with neither a chunk taken nor an answer. An upload
//! to a peer that stops reading it, or that has it all and never answers, then
//! stalls as a download does when no bytes come, instead of running until
//! `--deadline`; a slow upload that keeps moving does not.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

/// When one request last moved: made when it is sent, moved by each chunk of
/// its body the connection takes.
pub(crate) struct Watch {
    last: Arc<Mutex<Instant>>,
}

impl Watch {
    pub(crate) fn new() -> Watch {
        Watch {
            last: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// `inner`, its chunks noted as they are taken (its length kept, so a
    /// known `Content-Length` stays one).
    pub(crate) fn body(&self, inner: reqwest::Body) -> reqwest::Body {
        reqwest::Body::wrap(Watched {
            inner,
            last: Arc::clone(&self.last),
        })
    }

    /// `answer`'s output, or `None` once `stall` passed since the request last
    /// moved.
    pub(crate) async fn answer<F: Future>(&self, stall: Duration, answer: F) -> Option<F::Output> {
        tokio::pin!(answer);
        loop {
            let last = *self.last.lock().expect("watch");
            if last.elapsed() >= stall {
                return None;
            }
            tokio::select! {
                out = &mut answer => return Some(out),
                () = tokio::time::sleep_until(last + stall) => {}
            }
        }
    }
}

struct Watched {
    inner: reqwest::Body,
    last: Arc<Mutex<Instant>>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if polled.is_ready() {
            *self.last.lock().expect("watch") = Instant::now();
        }
        polled
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_while_the_body_moves_and_stalls_when_it_stops() {
        let stall = Duration::from_secs(10);
        let watch = Watch::new();
        let mut body = watch.body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            (0..3).map(|_| Ok::<_, std::io::Error>(Bytes::from_static(b"chunk"))),
        )));
        let answered = watch.answer(stall, async {
            // A chunk taken every 6 s: 18 s in all, never 10 s without one.
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_secs(6)).await;
                std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
            }
            "answered"
        });
        assert_eq!(answered.await, Some("answered"));
        let silent = watch.answer(stall, std::future::pending::<()>());
        let started = tokio::time::Instant::now();
        assert_eq!(silent.await, None);
        assert_eq!(started.elapsed(), stall);
    }

    #[test]
    fn a_known_length_is_kept() {
        let body = Watch::new().body(reqwest::Body::from(vec![0u8; 1234]));
        assert_eq!(body.size_hint().exact(), Some(1234));
    }
}
