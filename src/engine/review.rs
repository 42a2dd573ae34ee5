//! The host of `Step::Review`: one round of the independent reviewer (`REVIEW_AGENT`, issue
//! 39), once the run's state machine let it through the worker's gates (`Step::Observe`,
//! `Run::review_gates`). The rounds' bookkeeping and the reviewer's input are pure
//! ([`Rounds`]: the items done in the run, the diff since its start or the last round, the
//! check, earlier findings); here are its effects: the work tree and the diff, the call
//! through the worker's door with a read-only argv ([`argv::prepare_review`], a read-only
//! sandbox, a fresh session), its accounting ([`answer::account_review`]), its verdict
//! ([`review::of_answer`], fail closed) told as a `review` event, and [`Fact::Reviewed`] for
//! the state machine, which decides the round's end.

use super::Engine;
use crate::agent::answer;
use crate::agent::argv;
use crate::agent::profile::Agent;
use crate::analysis::review::Review;
use crate::effects::{AgentAnswer, News};
use crate::error::Result;
use crate::policy::review::{self, RoundInput};
use crate::policy::run::{Fact, Reviewed};
use crate::store::schema::ReviewRound;

impl Engine {
    /// At the run's start: the work tree and the done items the first round starts from.
    pub(super) fn review_baseline(&mut self) {
        if self.reviewer.agent.is_some() {
            let tree = self.fx.snapshot_tree(&self.s.project_dir);
            self.reviewer.rounds.start(tree, &self.fix_plan.plan);
        }
    }

    /// One review round, reported as [`Fact::Reviewed`].
    pub(super) async fn review_step(&mut self) -> Result<()> {
        let Some(agent) = self.reviewer.agent.clone() else {
            // No reviewer resolved (cannot happen with REVIEW_AGENT set): fail closed.
            let unreadable = Review::unreadable("no reviewer could be started");
            self.run.on(
                Fact::Reviewed(Reviewed::of(unreadable, false)),
                self.fx.now(),
            );
            return Ok(());
        };
        let (round, max_rounds) = self.run.review_round();
        let prompt = self.review_prompt(round, max_rounds);
        // On the call cap's ledger and saved before the spawn, as the worker's call.
        let number = self.state.start_call(self.fx.now());
        self.fx.persist(&self.state, false)?;
        let prompt_file = self.fx.prompt_file(number);
        let prepared = argv::prepare_review(&agent, &self.s, prompt.as_bytes(), &prompt_file);
        let news = News::ReviewStarted {
            round,
            agent: agent.name(),
        };
        let sizes = (0, prompt.len());
        let mut got = self
            .spawn(&agent, number, prepared, (sizes, false, true), news)
            .await?;
        self.take_answer(&agent, (number, got.duration, false), &mut got.analysis)?;
        self.review_answered(&agent, (round, max_rounds, number), &got)
    }

    /// The review call's answer `got` (round, of max rounds, the call's number): its
    /// accounting, the reviewer's own usage limit (a wait, no round spent), the verdict told
    /// as a `review` event, then [`Fact::Reviewed`].
    fn review_answered(
        &mut self,
        agent: &Agent,
        (round, max_rounds, number): (u32, u32, u64),
        got: &AgentAnswer,
    ) -> Result<()> {
        let (a, at) = (&got.analysis, self.fx.now());
        self.run.on(Fact::Spent(a.cost_usd), at);
        self.fx.settle_call(at, a.tokens.sum(), a.cost_usd)?;
        if answer::account_review(&mut self.state, a, at) {
            self.fx.publish_windows(&self.state.windows, at);
        }
        // The reviewer's own usage limit: no round spent; wait for its reset.
        let policy = self.s.on_usage_limit.value;
        if let Some(limit) = Reviewed::at_usage_limit(a.error.as_ref(), policy, at) {
            self.warn(&crate::report::reviewer_at_limit(agent.name()));
            self.fx.persist(&self.state, false)?;
            self.run.on(Fact::Reviewed(limit), self.fx.now());
            return Ok(());
        }
        let verdict = review::verdict_of(got.interrupted, a);
        let which = (round, max_rounds, agent.name(), number);
        let seen = ReviewRound::of(which, &verdict, a, got.duration);
        self.reviewer.rounds.record(verdict.clone(), seen.clone());
        self.shown.receipts.push(seen.receipt(self.fx.now()));
        self.fx.persist(&self.state, false)?;
        self.tell(News::Review(&seen))?;
        let fact = Reviewed::of(verdict, got.interrupted || self.fx.interrupted());
        self.run.on(Fact::Reviewed(fact), self.fx.now());
        Ok(())
    }

    /// The reviewer's input for `round` of `max_rounds` ([`Rounds::prompt`]) over the work
    /// tree now and its diff from the last base.
    fn review_prompt(&mut self, round: u32, max_rounds: u32) -> String {
        let dir = self.s.project_dir.clone();
        let (tree, diff) = self.fx.tree_since(&dir, self.reviewer.rounds.base_tree());
        let last = self.verify.last.as_ref();
        let result = last.map(crate::policy::verification::Verification::result_line);
        self.reviewer.rounds.prompt(&RoundInput {
            round,
            max_rounds,
            plan: &self.fix_plan.plan,
            tree: tree.as_deref(),
            diff: diff
                .as_ref()
                .map(|(stat, patch)| (stat.as_str(), patch.as_str())),
            check: self.verify.command.as_deref(),
            check_result: result,
        })
    }
}
