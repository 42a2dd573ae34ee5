//! One round of the independent reviewer (`REVIEW_AGENT`, issue 39) as a step, once the run's
//! state machine let it through the same gates as a worker's call (`MAX_COST_USD`,
//! `REVIEW_MAX_SHARE`, the rolling-hour caps, the usage windows, the fleet's ledger: the look
//! before it is the worker's `Step::Observe`, `Run::review_gates` decides): the reviewer's input (the items done in the run, the diff since the
//! run's start or the last round, the check, earlier findings: [`review::prompt`]), the call
//! through the same effects as the worker's (read-only argv: [`argv::prepare_review`]; a
//! read-only sandbox; a fresh session), its accounting (the call cap's ledger, tokens, cost,
//! windows), its verdict ([`review::of_answer`], fail closed) told as a `review` event, and
//! [`Fact::Reviewed`] for the state machine, which decides the round's end.

use super::Engine;
use crate::agent::answer::Pricing;
use crate::agent::argv;
use crate::analysis::review::{Finding, Review};
use crate::effects::{AgentCall, News};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::review::{self, PromptInput, RoundSeen};
use crate::policy::run::{Fact, Reviewed};
use crate::policy::windows;
use crate::store::schema::ReviewRound;

/// The reviewer of a run and what its rounds saw.
#[derive(Debug, Default)]
pub(super) struct Reviewer {
    pub(super) agent: Option<std::sync::Arc<crate::agent::profile::Agent>>,
    /// The work tree when the run started, then at each round (the next round's diff base).
    pub(super) base_tree: Option<String>,
    /// The fix_plan items done when the run started.
    pub(super) items_at_start: Vec<String>,
    /// Every round of this run.
    pub(super) rounds: Vec<RoundSeen>,
    /// The last round as status.json shows it.
    pub(super) last: Option<ReviewRound>,
    /// The tree of the last round (its diff is "since the last round" after it).
    pub(super) reviewed_once: bool,
}

impl Engine {
    /// At the run's start: the work tree and the done items the first round's diff and list
    /// start from.
    pub(super) fn review_baseline(&mut self) {
        if self.reviewer.agent.is_none() {
            return;
        }
        self.reviewer.base_tree = self.fx.snapshot_tree(&self.s.project_dir);
        self.reviewer.items_at_start = done_items(&self.plan);
    }

    /// One review round of the completion `reason`, reported as [`Fact::Reviewed`].
    pub(super) async fn review_step(&mut self, _reason: ExitReason) -> Result<()> {
        let now = self.fx.now();
        let Some(agent) = self.reviewer.agent.clone() else {
            // No reviewer resolved (cannot happen with REVIEW_AGENT set): fail closed.
            let unreadable = Review::unreadable("no reviewer could be started");
            self.run
                .on(Fact::Reviewed(Reviewed::Verdict(unreadable)), now);
            return Ok(());
        };
        let round = self.run.review_rounds() + 1;
        let cfg = self.s.review_config().unwrap_or_default();
        let prompt = self.review_prompt(round, cfg.max_rounds);
        // On the call cap's ledger and saved before the spawn, as the worker's call.
        let number = self.state.start_call(now);
        self.fx.persist(&self.state, false)?;
        let prompt_file = self.fx.prompt_file(number);
        let prepared = argv::prepare_review(&agent, &self.s, prompt.as_bytes(), &prompt_file);
        if let Some(bytes) = &prepared.prompt_file {
            self.fx.write_file(&prompt_file, bytes)?;
        }
        self.tell(News::ReviewStarted {
            round,
            agent: agent.name(),
        })?;
        let call = AgentCall {
            number,
            agent: &agent,
            settings: &self.s,
            args: &prepared.args,
            stdin: prepared.stdin,
            resume: false,
            sizes: (0, prompt.len()),
            read_only: true,
        };
        let mut got = self.fx.call_agent(call).await?;
        if got.interrupted {
            self.poll_control();
        }
        let (a, took) = (&mut got.analysis, got.duration);
        let warned = (self.fx.now(), &mut self.credential_warned);
        let pricing = Pricing::of(&self.s);
        let call = (&*agent, number, took);
        let warnings = crate::agent::answer::complete(a, call, &mut self.state, pricing, warned);
        for w in warnings {
            self.warn(&w);
        }
        self.review_answered(&agent, (round, cfg.max_rounds, number), &got)
    }

    /// The review call's answer `got` (round, of max rounds, the call's number): its
    /// accounting, the reviewer's own usage limit (a wait, no round spent), the verdict told
    /// as a `review` event, then [`Fact::Reviewed`].
    fn review_answered(
        &mut self,
        agent: &crate::agent::profile::Agent,
        (round, max_rounds, number): (u32, u32, u64),
        got: &crate::effects::AgentAnswer,
    ) -> Result<()> {
        self.account_review(&got.analysis)?;
        let (a, at) = (&got.analysis, self.fx.now());
        // The reviewer's own usage limit: no round spent; wait for its reset.
        let policy = self.s.on_usage_limit.value;
        if let Some(limit) = Reviewed::at_usage_limit(a.error.as_ref(), policy, at) {
            self.warn(&format!(
                "the reviewer ({}) hit its usage limit: the review round runs after its reset",
                agent.name()
            ));
            self.fx.persist(&self.state, false)?;
            self.run.on(Fact::Reviewed(limit), self.fx.now());
            return Ok(());
        }
        let failed = review::call_failure(got.interrupted, a);
        let verdict = review::of_answer(a.review.as_ref(), failed.as_deref());
        let seen = ReviewRound::of(
            (round, max_rounds, agent.name(), number),
            &verdict,
            a,
            got.duration,
        );
        self.reviewer.rounds.push(RoundSeen {
            round,
            review: verdict.clone(),
            cost_usd: seen.cost_usd,
        });
        self.reviewer.last = Some(seen.clone());
        self.run_loops.push(seen.receipt(self.fx.now()));
        self.fx.persist(&self.state, false)?;
        self.tell(News::Review(&seen))?;
        let fact = if got.interrupted || self.fx.interrupted() {
            Reviewed::Stop(ExitReason::Interrupted)
        } else {
            Reviewed::Verdict(verdict)
        };
        self.run.on(Fact::Reviewed(fact), self.fx.now());
        Ok(())
    }

    /// The reviewer's input for `round` of `max_rounds`: the items done in the run, the diff
    /// (since its start, or since the last round), the check, earlier findings.
    fn review_prompt(&mut self, round: u32, max_rounds: u32) -> String {
        let (diff, since_last) = self.review_diff();
        let items: Vec<String> = done_items(&self.plan)
            .into_iter()
            .filter(|i| !self.reviewer.items_at_start.contains(i))
            .collect();
        let check_result = self.verify.last.as_ref().map_or_else(
            || "no check ran in this run".to_owned(),
            crate::policy::verification::Verification::result_line,
        );
        let earlier: Vec<(u32, Vec<Finding>)> = (self.reviewer.rounds.iter())
            .map(|r| (r.round, r.review.findings.clone()))
            .collect();
        review::prompt(&PromptInput {
            round,
            max_rounds,
            items: &items,
            diff: &diff,
            since_last_round: since_last,
            check: self.verify.command.as_deref(),
            check_result: &check_result,
            earlier: &earlier,
        })
    }

    /// Every cap counts the review's call `a`: the run's cost, the tokens in the rolling
    /// hour, the totals, the usage windows it reported, the fleet's ledger.
    fn account_review(&mut self, a: &crate::analysis::Analysis) -> Result<()> {
        let at = self.fx.now();
        self.run.on(Fact::Spent(a.cost_usd), at);
        self.fx.settle_call(at, a.tokens.sum(), a.cost_usd)?;
        self.state.ledger.add_tokens_to_last(a.tokens.sum());
        self.state.totals.cost_usd += a.cost_usd;
        if a.cost_estimated {
            self.state.totals.estimated_cost_usd += a.cost_usd;
        }
        self.state.totals.tokens.add(&a.tokens);
        if !a.usage_windows.is_empty() {
            windows::observe(&mut self.state.windows, &a.usage_windows, at);
            self.fx.publish_windows(&self.state.windows, at);
        }
        Ok(())
    }

    /// The diff the reviewer reads: since the run's start in the first round, since the last
    /// round after it (`true`); the base moves to the tree now.
    fn review_diff(&mut self) -> (String, bool) {
        let dir = self.s.project_dir.clone();
        let now_tree = self.fx.snapshot_tree(&dir);
        let since_last = self.reviewer.reviewed_once;
        let diff = match (&self.reviewer.base_tree, &now_tree) {
            (Some(from), Some(to)) => self
                .fx
                .diff_trees(&dir, from, to)
                .map(|(stat, patch)| review::cap_diff(&stat, &patch)),
            _ => None,
        };
        if now_tree.is_some() {
            self.reviewer.base_tree = now_tree;
        }
        self.reviewer.reviewed_once = true;
        let diff = diff.unwrap_or_else(|| {
            "(no diff: the project is not a git repository, or git could not say; read the files the items name)".to_owned()
        });
        (diff, since_last)
    }
}

/// The fix_plan items checked in `plan`.
fn done_items(plan: &crate::policy::fixplan::Plan) -> Vec<String> {
    plan.items
        .iter()
        .filter(|i| i.done)
        .map(|i| i.text.clone())
        .collect()
}
