//! What the run shows beyond state.json ([`Shown`]), kept by the driver between pieces of
//! news: the parts of status.json and of the exit summary no store holds.

use jiff::Timestamp;

use super::News;
use crate::exit::ExitReason;
use crate::policy::budget::WaitReason;
use crate::policy::fixplan::Plan;
use crate::policy::receipts::LoopCost;
use crate::policy::verification::Verification;
use crate::settings::Settings;
use crate::store::schema::{AgentFinished, Delivery, ReviewRound, StatusParts};
use crate::store::{LastLoop, PlanCounts, State, Status};

/// The run's shown parts: status.json's last loop, wait, questions and delivery step; the
/// exit summary's limit note and receipts.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    /// The last loop as status.json shows it.
    pub last_loop: Option<LastLoop>,
    /// The wait under way: its reason and its end (a pause: since when).
    pub wait: Option<(WaitReason, Timestamp)>,
    /// The last loop's questions (status.json shows them while the loop waits for an answer).
    pub questions: Vec<String>,
    /// The delivery step last recorded while the delivery is under way (its CI countdown
    /// is put in status.json, [`crate::deliver::CiCountdown`]).
    pub delivering: Option<Delivery>,
    /// The usage limit or window the run waits for or stopped at, named for the user.
    pub limit_note: Option<String>,
    /// This run's loops and review rounds, for the receipts in the exit summary.
    pub receipts: Vec<LoopCost>,
}

/// The driver's side of status.json: its records, as the run looks now.
pub(crate) struct RunParts<'a> {
    pub state: &'a State,
    /// The budget and window limits.
    pub s: &'a Settings,
    pub plan: &'a Plan,
    pub verify: &'a Verification,
    /// The reviewer's last round (`REVIEW_AGENT`).
    pub review: Option<&'a ReviewRound>,
    /// The last step of a delivery out of the driver's hands (a finished round's).
    pub delivered: Option<Delivery>,
    pub now: Timestamp,
}

impl Shown {
    /// status.json as `news` leaves it ([`News::run_state`]; `None`: as it is) over the
    /// driver's records `run`: the news' delivery step, else the last one shown; the exit
    /// message of the run's end.
    pub(crate) fn status(&self, news: &News<'_>, run: RunParts<'_>) -> Option<Status> {
        let run_state = news.run_state()?;
        let delivery = match news {
            News::Delivery(d) => Some(*d),
            _ => run.delivered.as_ref().or(self.delivering.as_ref()),
        };
        let mut status = Status::of(&StatusParts {
            state: run.state,
            run_state,
            plan: PlanCounts {
                done: run.plan.done(),
                total: run.plan.total(),
            },
            last_loop: self.last_loop.as_ref(),
            wait: self.wait,
            limits: &run.s.budget_limits(),
            window_limits: &run.s.max_window_percent.value,
            exit: news.exit(),
            now: run.now,
            pid: std::process::id(),
            verification: run.verify.status(),
            delivery,
            questions: &self.questions,
            review: run.review,
        });
        if let News::Exit { message, .. } = news {
            status.exit_message = Some((*message).to_owned());
        }
        Some(status)
    }

    /// The run's exit message for `reason` ([`crate::report::exit_summary`]) over the driver's
    /// records `run`: the limit named, the check's verdict, the breaker's cooldown, the
    /// delivery's error, the reviewer's last round.
    pub(crate) fn exit_message(&self, reason: ExitReason, run: &RunParts<'_>) -> String {
        let notes = crate::report::ExitNotes {
            limit: self.limit_note.as_deref(),
            verified: &run.verify.summary(reason),
            cooldown_ends: run.state.breaker.cooldown_ends_at(&run.s.breaker_config()),
            now: run.now,
            delivery_error: run.delivered.as_ref().and_then(|d| d.error.as_deref()),
            review: run.review,
        };
        crate::report::exit_summary(reason, run.state, run.plan, &notes)
    }

    /// A usage limit or window (`found`: its note and the wait's end) named in the exit
    /// message; the line the terminal says when the wait has an end.
    pub(crate) fn limit(&mut self, found: Option<(String, Option<Timestamp>)>) -> Option<String> {
        let (note, until) = found?;
        let line =
            until.map(|u| format!("{note}; no call before {}", crate::report::local_time(u)));
        self.limit_note = Some(note);
        line
    }

    /// Loop `finished` (asking `questions`) as status.json and the receipts show it.
    pub(crate) fn finished(
        &mut self,
        finished: &AgentFinished,
        questions: &[String],
        now: Timestamp,
    ) {
        self.questions = questions.to_vec();
        self.last_loop = Some(LastLoop::of(finished));
        self.receipts.push(finished.receipt(now));
    }
}
