//! `hank state save` / `restore` / `claim` / `summary`: the run state carried from machine to
//! machine ([`crate::handoff`], [`crate::store::portable`]) and the Actions job summary.

use std::path::Path;

use jiff::Timestamp;

use crate::cli::{StateAction, StateCommon};
use crate::clock::SystemClock;
use crate::error::Result;
use crate::exit;
use crate::handoff::Handoff;
use crate::policy::time::Clock;
use crate::store::portable as p;

use super::{project_dir, require_hank_dir};

/// # Errors
/// A bad `--task`, no hank project, git or the state files failing.
pub(crate) fn run(action: &StateAction) -> Result<u8> {
    let dir = project_dir()?;
    require_hank_dir(&dir)?;
    if !matches!(action, StateAction::Summary) {
        // It runs git on the project (refs, pushes): with an approved configuration only,
        // and recorded as a run.
        crate::approval::require(&dir, false, "hank state")?;
    }
    let _recorded = match action {
        StateAction::Summary => None,
        _ => Some(crate::approval::record(&dir, "hank state")?),
    };
    let now = SystemClock::from_env()?.now();
    match action {
        StateAction::Save(a) => handoff(&dir, &a.common)?.save(a.to_dir.as_deref(), a.release, now),
        StateAction::Restore(a) => {
            handoff(&dir, &a.common)?.restore(a.from_dir.as_deref(), a.claim.then_some(a.ttl), now)
        }
        StateAction::Claim(a) => handoff(&dir, &a.common)?.claim(a.ttl, now),
        StateAction::Summary => {
            super::out(&summary(&dir, now)?)?;
            Ok(exit::OK)
        }
    }
}

/// The state ref of `c` in the project at `dir`.
fn handoff(dir: &Path, c: &StateCommon) -> Result<Handoff> {
    Handoff::new(dir, c.task.as_deref(), &c.remote, c.owner.as_deref())
}

/// The job summary (Markdown): how the run ended, the wait a later job continues after, the
/// receipts table (as `hank report` renders it) and the pull request of `.hank/delivery.json`.
fn summary(dir: &Path, now: Timestamp) -> Result<String> {
    use crate::store::schema::Delivery;
    let store = p::store_of(dir)?;
    let mut s = String::from("## hank\n\n");
    if let Some(status) = store.read_status() {
        let reason = status.exit_reason.map_or("—", |r| r.as_str());
        let state = serde_json::to_value(status.state)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        s.push_str(&format!("- state: `{state}`, exit reason: `{reason}`\n"));
    }
    let state = store.load_state(now)?.state;
    if let Some(w) = state.wait.as_ref().filter(|w| w.until > now) {
        s.push_str(&format!(
            "- {}\n",
            crate::policy::ci::continues_line(w.until)
        ));
    }
    let delivery = crate::fsread::read_if_exists(
        &store.dir().join(crate::deliver::DELIVERY_FILE),
        crate::fsread::STATE_LIMIT,
        crate::fsread::Follow::No,
    )
    .ok()
    .flatten()
    .and_then(|b| serde_json::from_slice::<Delivery>(&b).ok());
    match delivery.as_ref().and_then(|d| d.pr_url.as_deref()) {
        Some(url) => s.push_str(&format!("- pull request: {}\n", crate::sanitize::line(url))),
        None => s.push_str("- pull request: none\n"),
    }
    let path = store.path(crate::store::HankFile::Events);
    let (loops, runs) = match crate::fsread::open_regular(&path, crate::fsread::Follow::No) {
        Ok(f) => super::view::read_loops(std::io::BufReader::new(f)),
        Err(_) => (Vec::new(), 0),
    };
    let chosen: Vec<_> = loops.into_iter().map(|(_, l)| l).collect();
    let r = crate::policy::receipts::attribute(&chosen);
    let first = chosen.iter().filter_map(|l| l.at).min();
    let last = chosen.iter().filter_map(|l| l.at).max();
    let table = super::view::render(&r, runs, super::view::Since::All, first, last);
    s.push_str("\n### Receipts\n\n```text\n");
    s.push_str(&table.replace("```", "` ` `"));
    if !table.ends_with('\n') {
        s.push('\n');
    }
    s.push_str("```\n");
    Ok(s)
}
