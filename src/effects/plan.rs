//! fix_plan.md as a run reads it ([`PlanFile`]): parsed at each look and after each call, and
//! read once when nothing changed it in between.

use crate::error::Result;
use crate::fsread::Stamp;
use crate::policy::fixplan::{self, Plan};
use crate::settings::Settings;

/// The plan as the run last read it: parsed ([`PlanFile::plan`]), the text the last look read
/// (the progress baseline of the next call), and the text the last measure read with its
/// stamp — the next look takes it when the file still has that stamp, instead of reading it
/// again.
#[derive(Debug, Default)]
pub(crate) struct PlanFile {
    pub plan: Plan,
    looked: String,
    measured: Option<(String, Stamp)>,
}

impl PlanFile {
    /// Reads the plan again (unless the measure's reading still holds) and parses it; `false`
    /// when it cannot be read.
    pub(crate) fn look(&mut self, s: &Settings) -> bool {
        if let Some((text, stamp)) = self.measured.take()
            && s.fix_plan_holds(&stamp)
        {
            // `self.plan` was parsed from this very text at the measure.
            self.looked = text;
            return true;
        }
        let Some(text) = s.read_fix_plan() else {
            return false;
        };
        self.plan = fixplan::parse(&text, &s.optional_sections.value);
        self.looked = text;
        true
    }

    /// A look before a call: the required files (one turned into a FIFO or a device is an
    /// error naming it, not a hang and not "disappeared"), then the plan read
    /// ([`PlanFile::look`]). Whether a file is missing or the plan cannot be read, and the
    /// warning naming the files that disappeared.
    pub(crate) fn look_all(&mut self, s: &Settings) -> Result<(bool, Option<String>)> {
        let missing = s.required_files_now()?;
        if missing.is_empty() {
            return Ok((!self.look(s), None));
        }
        let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
        let warning = format!("required file(s) disappeared: {}", list.join(", "));
        Ok((true, Some(warning)))
    }

    /// The text the last look read (taken: the baseline of the call that follows).
    pub(crate) fn take_looked(&mut self) -> String {
        std::mem::take(&mut self.looked)
    }

    /// After a call: the plan read and parsed again (empty when it cannot be read); its text.
    pub(crate) fn measure(&mut self, s: &Settings) -> String {
        let (text, stamp) = s.read_fix_plan_stamped().unwrap_or_default();
        self.plan = fixplan::parse(&text, &s.optional_sections.value);
        self.measured = stamp.map(|stamp| (text.clone(), stamp));
        text
    }

    /// A setting changed how the plan reads: the next look reads it again.
    pub(crate) fn forget_measure(&mut self) {
        self.measured = None;
    }
}
