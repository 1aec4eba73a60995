//! The agent serving new work, swappable while the server runs (`POST /api/admin/reload`).
//! Each request and each run takes its `Arc<Agent>` once, at its start, and keeps it to its
//! end: a swap changes what the next one gets, never what one in flight uses.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::Agent;

pub struct CurrentAgent(ArcSwap<Agent>);

impl CurrentAgent {
    pub fn new(agent: Arc<Agent>) -> Arc<CurrentAgent> {
        Arc::new(CurrentAgent(ArcSwap::new(agent)))
    }

    /// The agent serving now.
    pub fn current(&self) -> Arc<Agent> {
        self.0.load_full()
    }

    /// Serves `agent` from the next `current()` on; the one it replaces lives as long as the
    /// work that took it.
    pub fn replace(&self, agent: Arc<Agent>) {
        self.0.store(agent);
    }
}
