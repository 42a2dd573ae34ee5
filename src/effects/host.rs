//! The run's effects as a delivery round inside `hank run` uses them
//! ([`crate::deliver::in_run::RunIo`]): the effects' clock and sleeps (a signal cuts a sleep
//! short; the test effects' clock moves), the delivery's records and the terminal.

use jiff::Timestamp;

use super::{Effects, Say, Slept};
use crate::deliver::WaitFut;
use crate::deliver::in_run::{RunIo, RunRecords};
use crate::error::Result;
use crate::store::schema::Delivery;

impl RunIo for Box<dyn Effects> {
    fn now(&self) -> Timestamp {
        self.as_ref().now()
    }

    fn sleep(&mut self, d: std::time::Duration) -> WaitFut<'_> {
        Box::pin(
            async move { self.interrupted() || self.as_mut().sleep(d).await == Slept::Interrupted },
        )
    }

    fn records(&self) -> Option<RunRecords> {
        self.delivery_env()
    }

    fn write_file(&mut self, path: &std::path::Path, bytes: &[u8]) -> Result<()> {
        self.as_mut().write_file(path, bytes)
    }

    fn save_record(&mut self, project: &std::path::Path, rec: &Delivery) -> Result<()> {
        self.save_delivery_record(project, rec)
    }

    fn say(&mut self, line: &str) {
        self.as_mut().say(Say::Info(line));
    }

    fn counting_down(&mut self, until: Timestamp, now: Timestamp) {
        let reason = "checks";
        self.as_mut().say(Say::WaitTick { reason, until, now });
    }
}
