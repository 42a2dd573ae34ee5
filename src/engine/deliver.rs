//! The delivery step (`DELIVER=branch|pr`): [`crate::deliver::in_run`] does the work with what
//! the effects lend it ([`crate::effects::DeliveryEnv`]); this hands it the run's records and
//! reports each step (the terminal, status.json, the `delivery` event) and how it ended
//! ([`Fact::Delivered`]).

use super::Engine;
use crate::deliver::in_run::Host;
use crate::effects::{News, Say};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::run::{Delivered, Fact, Step};
use crate::store::schema::Delivery;

impl Engine {
    /// Delivers the verified completion `reason`, then reports [`Fact::Delivered`].
    pub(super) async fn deliver_step(&mut self, reason: ExitReason) -> Result<()> {
        let (Some(mut d), Some(env)) = (self.delivery.take(), self.fx.delivery_env()) else {
            self.run
                .on(Fact::Delivered(Delivered::Final(reason)), self.fx.now());
            return Ok(());
        };
        let line = format!("delivering the verified work on {}", d.branch());
        self.fx.say(Say::Info(&line));
        let dir = self.s.project_dir.clone();
        let outcome = d
            .deliver(&dir, &env.store, reason, &env.secrets, env.cancel, self)
            .await;
        let warnings = d.take_warnings();
        self.delivery = Some(d);
        for w in warnings {
            self.warn(&w);
        }
        self.run.on(Fact::Delivered(outcome?), self.fx.now());
        Ok(())
    }
}

impl Host for Engine {
    fn record(&mut self, d: &Delivery) -> Result<()> {
        self.tell(News::Delivery(d))
    }

    /// `hank ctl stop` (the control source is polled as in every wait).
    fn stop_requested(&mut self) -> bool {
        self.poll_control();
        self.run.next(self.fx.now()) == Step::Stop(ExitReason::Interrupted)
    }
}
