//! One artifact's retry budget, shared by its whole-file attempts and by every
//! range of a ranged transfer, so an outage costs the attempts `--retries`
//! allows once per artifact, not once per range.
//!
//! Attempts are counted in rounds. A request belongs to the round in which it
//! started; when it fails and no failure of its round was counted yet, it opens
//! the next round (one attempt spent) and becomes the round's probe: it alone
//! waits the backoff and tries again, while every other request that fails, or
//! is about to start, waits for the probe. When the probe receives bytes the
//! round is over and the others go on; when the budget is spent they all stop.
//! Ranges that fail together (a server restart, an origin answering 500 to
//! everything) thus cost one attempt and one request each, not one attempt
//! per range per artifact-level attempt.

use std::time::Duration;

use tokio::sync::watch;

use crate::retry::{RetryPolicy, Retryable};

/// Where the budget stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    /// Failures counted, i.e. the current round (attempts made = this + 1).
    failures: u32,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Requests may start.
    Open,
    /// A probe is retrying after a counted failure; other requests wait.
    Probing,
    /// No attempt is left (or the fault is final): everything stops.
    Spent,
}

/// What a failed request does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// It is the round's probe: wait this long, then try again.
    Probe(Duration),
    /// Its failure belongs to a round already counted: wait for the probe
    /// ([`Budget::admit`]), then try again.
    Wait,
    /// Stop: the attempts are spent or the fault is final; this error says why.
    GiveUp,
    /// Stop: another request spent the budget, and its error says why.
    Stopped,
}

/// The retry budget of one artifact.
#[derive(Debug)]
pub(crate) struct Budget {
    policy: RetryPolicy,
    state: watch::Sender<State>,
}

impl Budget {
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Budget {
            policy,
            state: watch::Sender::new(State {
                failures: 0,
                phase: Phase::Open,
            }),
        }
    }

    /// Attempts made so far (the one under way included).
    pub(crate) fn attempts(&self) -> u32 {
        self.state.borrow().failures + 1
    }

    /// The attempts the policy allows in all.
    pub(super) fn allowed(&self) -> u32 {
        self.policy.attempts()
    }

    /// The round a request starting now belongs to.
    pub(super) fn round(&self) -> u32 {
        self.state.borrow().failures
    }

    /// Waits while a probe is out; then the round a request starting now belongs
    /// to, or `None` when the budget is spent (the probe reports why).
    pub(super) async fn admit(&self) -> Option<u32> {
        let mut rx = self.state.subscribe();
        let state = *rx.wait_for(|s| s.phase != Phase::Probing).await.ok()?;
        (state.phase == Phase::Open).then_some(state.failures)
    }

    /// A request that started in `round` failed with `error`.
    pub(super) fn failed(&self, round: u32, error: &impl Retryable) -> Decision {
        let mut decision = Decision::GiveUp;
        self.state.send_modify(|s| {
            if s.phase == Phase::Spent {
                decision = Decision::Stopped;
                return;
            }
            if !error.is_transient() {
                s.phase = Phase::Spent;
                return;
            }
            if round < s.failures {
                decision = Decision::Wait;
                return;
            }
            match self.policy.next_delay(s.failures + 1, error) {
                Some(delay) => {
                    s.failures += 1;
                    s.phase = Phase::Probing;
                    decision = Decision::Probe(delay);
                }
                None => s.phase = Phase::Spent,
            }
        });
        decision
    }

    /// The probe of `round` received bytes: the others may go on.
    pub(super) fn recovered(&self, round: u32) {
        self.state.send_if_modified(|s| {
            let ends = s.phase == Phase::Probing && s.failures == round;
            if ends {
                s.phase = Phase::Open;
            }
            ends
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Backoff;

    struct Fault(bool);

    impl Retryable for Fault {
        fn is_transient(&self) -> bool {
            self.0
        }
        fn retry_after(&self) -> Option<Duration> {
            None
        }
    }

    fn budget(retries: u32) -> Budget {
        Budget::new(RetryPolicy {
            retries,
            backoff: Backoff::new(Duration::ZERO),
        })
    }

    #[test]
    fn failures_of_one_round_count_once() {
        let b = budget(2);
        // Four ranges started in round 0 and fail together: one probe.
        assert_eq!(b.failed(0, &Fault(true)), Decision::Probe(Duration::ZERO));
        for _ in 0..3 {
            assert_eq!(b.failed(0, &Fault(true)), Decision::Wait);
        }
        assert_eq!(b.attempts(), 2);
        // The probe fails again: a second attempt, then the budget is spent.
        assert_eq!(b.failed(1, &Fault(true)), Decision::Probe(Duration::ZERO));
        assert_eq!(b.failed(2, &Fault(true)), Decision::GiveUp);
        assert_eq!(b.attempts(), 3);
        assert_eq!(b.failed(0, &Fault(true)), Decision::Stopped);
    }

    #[tokio::test]
    async fn waiters_go_on_when_the_probe_recovers_and_stop_when_it_gives_up() {
        let b = std::sync::Arc::new(budget(1));
        assert_eq!(b.admit().await, Some(0));
        assert_eq!(b.failed(0, &Fault(true)), Decision::Probe(Duration::ZERO));
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.admit().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        b.recovered(0); // not the current round: nothing changes
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        b.recovered(1);
        assert_eq!(waiter.await.unwrap(), Some(1));

        // A request of round 1 fails: no retry is left; waiters stop.
        assert_eq!(b.failed(1, &Fault(true)), Decision::GiveUp);
        assert_eq!(b.admit().await, None);
    }

    #[test]
    fn a_final_fault_spends_the_budget_whatever_its_round() {
        let b = budget(5);
        assert_eq!(b.failed(0, &Fault(true)), Decision::Probe(Duration::ZERO));
        assert_eq!(b.failed(0, &Fault(false)), Decision::GiveUp);
        assert_eq!(b.failed(1, &Fault(true)), Decision::Stopped);
        assert_eq!(b.attempts(), 2);
    }
}
