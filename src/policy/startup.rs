//! Startup hangs: calls that printed nothing within FIRST_OUTPUT_TIMEOUT.  **\[pure\]**
//!
//! A client that hangs before its first byte (a version lock held by an interactive session,
//! a dead socket, a user-level Stop hook or plugin) usually answers on the next try. So a
//! startup hang is retried at once, without counting toward the circuit breaker or the
//! backoff, up to [`FREE_RETRIES`] times in a row; the next one in a row (the third) counts
//! as a timeout, and so does every further one until a call prints something.

use serde::{Deserialize, Serialize};

/// Startup hangs in a row that are retried at once without being counted.
pub const FREE_RETRIES: u32 = 2;

/// What to do with a call, given whether it was a startup hang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HangVerdict {
    /// The call printed something (or hank did not watch for a first byte): nothing special.
    NotAHang,
    /// A startup hang within the free retries: retried at once; the breaker, the failure
    /// count and the backoff do not see it. `nth` is its place in the streak (1-based).
    RetryNow { nth: u32 },
    /// A startup hang past the free retries: counted as a timeout. `nth` as above.
    CountAsTimeout { nth: u32 },
}

/// The verdict on one call and the streak after it. `streak` is the number of startup hangs
/// in a row before this call; `hang` says whether this call was one.
#[must_use]
pub fn after_call(streak: u32, hang: bool) -> (HangVerdict, u32) {
    if !hang {
        return (HangVerdict::NotAHang, 0);
    }
    let nth = streak.saturating_add(1);
    let verdict = if nth <= FREE_RETRIES {
        HangVerdict::RetryNow { nth }
    } else {
        HangVerdict::CountAsTimeout { nth }
    };
    (verdict, nth)
}

/// What a startup hang of loop `number` means for the run, said once (`None` for other
/// calls); `limit` is FIRST_OUTPUT_TIMEOUT as the user wrote it.
#[must_use]
pub fn hang_warning(number: u64, hang: HangVerdict, limit: &str) -> Option<String> {
    match hang {
        HangVerdict::NotAHang => None,
        HangVerdict::RetryNow { nth } => Some(format!(
            "loop {number}: no output within FIRST_OUTPUT_TIMEOUT ({limit}): a startup hang; retrying at once (hang {nth} of {FREE_RETRIES} in a row not counted)"
        )),
        HangVerdict::CountAsTimeout { nth } => Some(format!(
            "loop {number}: no output within FIRST_OUTPUT_TIMEOUT ({limit}): startup hang {nth} in a row, counted as a timeout"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_free_retries_then_the_third_counts() {
        use HangVerdict::*;
        // (streak before, this call hung) → (verdict, streak after)
        let table: &[(u32, bool, HangVerdict, u32)] = &[
            (0, false, NotAHang, 0),
            (0, true, RetryNow { nth: 1 }, 1),
            (1, true, RetryNow { nth: 2 }, 2),
            (2, true, CountAsTimeout { nth: 3 }, 3),
            (3, true, CountAsTimeout { nth: 4 }, 4),
            // Any call that printed something ends the streak.
            (1, false, NotAHang, 0),
            (2, false, NotAHang, 0),
            (7, false, NotAHang, 0),
            (u32::MAX, true, CountAsTimeout { nth: u32::MAX }, u32::MAX),
        ];
        for &(before, hang, want, after) in table {
            assert_eq!(
                after_call(before, hang),
                (want, after),
                "streak {before}, hang {hang}"
            );
        }
    }

    #[test]
    fn a_run_of_calls_follows_the_rule() {
        // hang, hang, hang, ok, hang: free, free, counted, -, free again.
        let mut streak = 0;
        let mut verdicts = Vec::new();
        for hang in [true, true, true, false, true] {
            let (v, s) = after_call(streak, hang);
            streak = s;
            verdicts.push(v);
        }
        assert_eq!(
            verdicts,
            vec![
                HangVerdict::RetryNow { nth: 1 },
                HangVerdict::RetryNow { nth: 2 },
                HangVerdict::CountAsTimeout { nth: 3 },
                HangVerdict::NotAHang,
                HangVerdict::RetryNow { nth: 1 },
            ]
        );
    }

    #[test]
    fn what_a_hang_says() {
        let table = [
            (HangVerdict::NotAHang, None),
            (
                HangVerdict::RetryNow { nth: 1 },
                Some("retrying at once (hang 1 of 2 in a row not counted)"),
            ),
            (
                HangVerdict::CountAsTimeout { nth: 3 },
                Some("startup hang 3 in a row, counted as a timeout"),
            ),
        ];
        for (hang, said) in table {
            let w = hang_warning(7, hang, "2m");
            assert_eq!(w.is_some(), said.is_some(), "{hang:?}");
            if let (Some(w), Some(said)) = (w, said) {
                assert!(
                    w.starts_with("loop 7: no output within FIRST_OUTPUT_TIMEOUT (2m)"),
                    "{w}"
                );
                assert!(w.ends_with(said), "{w}");
            }
        }
    }
}
