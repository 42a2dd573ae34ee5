//! `hank state save` / `restore` / `claim`: the run state carried from machine to machine
//! ([`crate::store::portable`]). A job that loses a compare-and-swap race (another job saved
//! or claimed the task first) or finds the task claimed by another job stops with exit 2.

use std::path::Path;

use jiff::{SignedDuration, Timestamp};

use crate::cli::{StateAction, StateCommon, StateRestoreArgs, StateSaveArgs};
use crate::clock::SystemClock;
use crate::error::Result;
use crate::exit;
use crate::policy::time::Clock;
use crate::stateref::{self, Pushed};
use crate::store::portable as p;
use crate::store::schema::{Lease, StateBundle};

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
        StateAction::Save(a) => save(&dir, a, now),
        StateAction::Restore(a) => restore(&dir, a, now),
        StateAction::Claim(a) => claim(&dir, &a.common, a.ttl, now, None),
        StateAction::Summary => {
            super::out(&summary(&dir, now)?)?;
            Ok(exit::OK)
        }
    }
}

fn name_and_owner(c: &StateCommon) -> Result<(String, String)> {
    let name = c.task.clone().unwrap_or_else(|| p::RUN_NAME.to_string());
    p::check_name(&name)?;
    Ok((name, c.owner.clone().unwrap_or_else(p::owner_id)))
}

fn held(name: &str, lease: Option<&Lease>) -> u8 {
    if let Some(l) = lease {
        errln!(
            "hank: task {name} is claimed by {} until {}: another job runs it; this one stops (exit 2)",
            l.owner,
            l.expires_at
        );
    }
    exit::HALTED
}

fn lost(name: &str, what: &str, said: &str) -> u8 {
    errln!(
        "hank: another job {what} refs/hank/state/{name} first (the push's compare-and-swap failed); nothing was changed; this job stops (exit 2)\n  git said: {said}"
    );
    exit::HALTED
}

pub(crate) fn save(dir: &Path, a: &StateSaveArgs, now: Timestamp) -> Result<u8> {
    let (name, owner) = name_and_owner(&a.common)?;
    let store = p::store_of(dir)?;
    if let Some(to) = &a.to_dir {
        let previous = p::read_from_dir(to, &name)?;
        let mut bundle = p::collect(&store, &name, &owner, now, previous.as_ref())?;
        if a.release {
            bundle.lease = None;
        }
        let path = p::write_to_dir(to, &bundle)?;
        errln!(
            "hank: saved the state of {name} ({} calls, {} receipts) to {}",
            bundle.calls.len(),
            bundle.receipts.len(),
            path.display()
        );
        return Ok(exit::OK);
    }
    let remote = &a.common.remote;
    let previous = stateref::fetch(dir, remote, &name)?;
    let prev_bundle = previous.as_ref().map(|(_, b)| b);
    if p::held_by_other(prev_bundle.and_then(|b| b.lease.as_ref()), &owner, now) {
        return Ok(held(&name, prev_bundle.and_then(|b| b.lease.as_ref())));
    }
    let mut bundle = p::collect(&store, &name, &owner, now, prev_bundle)?;
    if a.release {
        bundle.lease = None;
    }
    match stateref::push(
        dir,
        remote,
        &bundle,
        previous.as_ref().map(|(o, _)| o.as_str()),
    )? {
        Pushed::Done(oid) => {
            errln!(
                "hank: saved the state of {name} ({} calls, {} receipts) to {remote} {} ({})",
                bundle.calls.len(),
                bundle.receipts.len(),
                p::ref_name(&name),
                oid.get(..12).unwrap_or(&oid)
            );
            Ok(exit::OK)
        }
        Pushed::Lost(said) => Ok(lost(&name, "saved", &said)),
    }
}

pub(crate) fn restore(dir: &Path, a: &StateRestoreArgs, now: Timestamp) -> Result<u8> {
    let (name, owner) = name_and_owner(&a.common)?;
    let found = match &a.from_dir {
        Some(from) => p::read_from_dir(from, &name)?.map(|b| (None, b)),
        None => stateref::fetch(dir, &a.common.remote, &name)?.map(|(o, b)| (Some(o), b)),
    };
    if a.claim
        && let Some((_, b)) = &found
        && p::held_by_other(b.lease.as_ref(), &owner, now)
    {
        return Ok(held(&name, b.lease.as_ref()));
    }
    match &found {
        Some((_, bundle)) => {
            let (calls, receipts) = p::apply(dir, bundle, now)?;
            errln!(
                "hank: restored the state of {name} saved by {} at {} ({calls} call(s) and {receipts} receipt(s) added)",
                bundle.saved_by,
                bundle.saved_at
            );
        }
        None => errln!("hank: no saved state of {name} yet; starting from the local state"),
    }
    if a.claim && a.from_dir.is_some() {
        errln!(
            "hank: --claim is not taken with --from-dir (a folder has no compare-and-swap); the concurrency group of the job keeps two jobs of {name} apart"
        );
    }
    if a.claim && a.from_dir.is_none() {
        return claim(dir, &a.common, a.ttl, now, Some(found));
    }
    Ok(exit::OK)
}

/// Claims the task: a lease for `ttl` minutes in the state ref, pushed with a compare-and-swap.
/// `known`: what a restore just fetched (`None`: fetch now).
fn claim(
    dir: &Path,
    c: &StateCommon,
    ttl: u32,
    now: Timestamp,
    known: Option<Option<(Option<String>, StateBundle)>>,
) -> Result<u8> {
    let (name, owner) = name_and_owner(c)?;
    let current = match known {
        Some(k) => k.and_then(|(o, b)| o.map(|o| (o, b))),
        None => stateref::fetch(dir, &c.remote, &name)?,
    };
    if let Some((_, b)) = &current
        && p::held_by_other(b.lease.as_ref(), &owner, now)
    {
        return Ok(held(&name, b.lease.as_ref()));
    }
    let expires_at = now
        .checked_add(SignedDuration::from_mins(i64::from(ttl)))
        .unwrap_or(now);
    let mut bundle = match &current {
        Some((_, b)) => b.clone(),
        None => p::collect(&p::store_of(dir)?, &name, &owner, now, None)?,
    };
    bundle.lease = Some(Lease {
        owner: owner.clone(),
        expires_at,
    });
    match stateref::push(
        dir,
        &c.remote,
        &bundle,
        current.as_ref().map(|(o, _)| o.as_str()),
    )? {
        Pushed::Done(_) => {
            errln!("hank: {owner} claimed {name} until {expires_at}");
            Ok(exit::OK)
        }
        Pushed::Lost(said) => Ok(lost(&name, "claimed or saved", &said)),
    }
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
