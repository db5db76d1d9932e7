//! Whether a store's next enqueue batch is expected to be all new keys: a server store then
//! writes it without first looking for taken `(kind, key)` pairs (cheaper), and again the
//! careful way when a pair was taken after all.

use std::sync::atomic::{AtomicU32, Ordering};

/// After a batch met a taken pair, this many batches go the careful way: repeats come in runs
/// (a bridge's redeliveries, a client's retries), and each failed hopeful write is wasted work.
pub const CAUTIOUS_BATCHES: u32 = 64;

/// Shared by a store's writers, so that a run of repeats makes every writer careful for a
/// while.
#[derive(Debug, Default)]
pub struct Optimism(AtomicU32);

impl Optimism {
    /// Whether the next batch should be written as if all its keys were new.
    pub fn hopeful(&self) -> bool {
        self.0.load(Ordering::Relaxed) == 0
    }

    /// A hopeful write met a taken pair: the next [`CAUTIOUS_BATCHES`] batches are careful.
    pub fn disappointed(&self) {
        self.0.store(CAUTIOUS_BATCHES, Ordering::Relaxed);
    }

    /// A careful batch found every key new: one step closer to hoping again.
    pub fn one_more_batch(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_key_makes_the_next_batches_careful() {
        let o = Optimism::default();
        assert!(o.hopeful());
        o.disappointed();
        for _ in 0..CAUTIOUS_BATCHES {
            assert!(!o.hopeful());
            o.one_more_batch();
        }
        assert!(o.hopeful());
        o.one_more_batch();
        assert!(o.hopeful(), "the count stops at zero");
    }
}
