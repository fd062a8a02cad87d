//! SIGINT and SIGTERM for the commands that take a lab's controller away for
//! a while (`grade`, `bench`): caught from the start, so none kills xtask
//! half-way with the lab's controller stopped. The first cancels the work
//! and the lab is put back; a second gives up at once.

use anyhow::Result;
use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Interrupts {
    interrupt: Signal,
    terminate: Signal,
    /// Whether [`Interrupts::first`] has resolved.
    pub seen: bool,
}

impl Interrupts {
    pub fn catch() -> Result<Interrupts> {
        Ok(Interrupts {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            seen: false,
        })
    }

    /// Resolves on the first signal, saying that `what` stops; from then on,
    /// another one exits.
    pub async fn first(&mut self, what: &str) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        self.seen = true;
        eprintln!("interrupted: stopping {what} and putting the lab back (again to give up)");
        let (mut interrupt, mut terminate) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
        tokio::spawn(async move {
            if let (Ok(interrupt), Ok(terminate)) = (&mut interrupt, &mut terminate) {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            eprintln!(
                "given up: the lab's controller may be stopped; `cargo xtask lab reset` starts it anew"
            );
            std::process::exit(130);
        });
    }
}
