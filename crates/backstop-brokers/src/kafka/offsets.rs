//! Which offsets of each partition may be committed: a delivered message is committed only
//! once it and every message delivered before it in its partition are acknowledged, in
//! whatever order the acks came.
//!
//! An offset worked out but not yet committed stays pending (a commit refused while the
//! group rebalances) and goes with the next commit, or with the revocation of its partition.
//!
//! A partition's tracking lives from its first delivery to its revocation. Each life has its
//! own epoch, so that a token from before a revocation names nothing after it, even when the
//! partition comes back to this consumer (and is read again from its committed offset).

use crate::AckToken;
use std::collections::{BTreeMap, HashMap};

/// A delivery, as its token names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Delivery {
    partition: i32,
    offset: i64,
    epoch: u64,
}

/// One partition's delivered, uncommitted offsets.
#[derive(Debug)]
struct Partition {
    epoch: u64,
    /// Delivered offsets not yet committed, and whether each is acknowledged.
    open: BTreeMap<i64, bool>,
    /// The offset to commit, worked out and not yet committed.
    pending: Option<i64>,
}

/// The offsets of one topic's partitions, as handed out and acknowledged.
#[derive(Debug, Default)]
pub(crate) struct Offsets {
    partitions: HashMap<i32, Partition>,
    tokens: HashMap<AckToken, Delivery>,
    next_token: u64,
    next_epoch: u64,
}

impl Offsets {
    /// Records a delivery and names it. Deliveries of a partition come in offset order.
    pub(crate) fn deliver(&mut self, partition: i32, offset: i64) -> AckToken {
        let next_epoch = &mut self.next_epoch;
        let p = self.partitions.entry(partition).or_insert_with(|| {
            *next_epoch += 1;
            Partition {
                epoch: *next_epoch,
                open: BTreeMap::new(),
                pending: None,
            }
        });
        p.open.insert(offset, false);
        let token = AckToken(self.next_token);
        self.next_token += 1;
        let delivery = Delivery {
            partition,
            offset,
            epoch: p.epoch,
        };
        self.tokens.insert(token, delivery);
        token
    }

    /// Whether `token` still names a delivery of a partition this consumer holds.
    pub(crate) fn is_live(&self, token: AckToken) -> bool {
        self.tokens.contains_key(&token)
    }

    /// Marks deliveries acknowledged and returns, per partition, the offset to commit: one
    /// past the highest offset below which every delivery is acknowledged, with those still
    /// pending. Tokens of revoked partitions (or unknown ones) are ignored.
    pub(crate) fn ack(&mut self, tokens: &[AckToken]) -> Vec<(i32, i64)> {
        for t in tokens {
            let Some(d) = self.tokens.remove(t) else {
                continue;
            };
            let Some(p) = self.partitions.get_mut(&d.partition) else {
                continue;
            };
            if p.epoch != d.epoch {
                continue;
            }
            if let Some(acked) = p.open.get_mut(&d.offset) {
                *acked = true;
            }
        }
        for p in self.partitions.values_mut() {
            while let Some(entry) = p.open.first_entry() {
                if !*entry.get() {
                    break;
                }
                p.pending = Some(*entry.key() + 1);
                entry.remove();
            }
        }
        self.pending()
    }

    /// The offsets worked out and not yet committed, by partition.
    pub(crate) fn pending(&self) -> Vec<(i32, i64)> {
        let mut out: Vec<(i32, i64)> = self
            .partitions
            .iter()
            .filter_map(|(&partition, p)| Some((partition, p.pending?)))
            .collect();
        out.sort_unstable();
        out
    }

    /// The broker has these offsets: they are no longer pending (unless a later one is).
    pub(crate) fn committed(&mut self, commits: &[(i32, i64)]) {
        for &(partition, offset) in commits {
            if let Some(p) = self.partitions.get_mut(&partition)
                && p.pending == Some(offset)
            {
                p.pending = None;
            }
        }
    }

    /// Forgets revoked partitions and returns their pending offsets, to commit before the
    /// revocation completes: their unacknowledged deliveries go to their new owner, and
    /// their tokens commit nothing.
    pub(crate) fn revoke(&mut self, partitions: &[i32]) -> Vec<(i32, i64)> {
        let mut pending = Vec::new();
        for partition in partitions {
            if let Some(p) = self.partitions.remove(partition) {
                pending.extend(p.pending.map(|offset| (*partition, offset)));
            }
        }
        self.tokens
            .retain(|_, d| !partitions.contains(&d.partition));
        pending.sort_unstable();
        pending
    }

    /// Deliveries handed out and not yet committed, for logs.
    pub(crate) fn open(&self) -> usize {
        self.partitions.values().map(|p| p.open.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acks and takes the commit as done.
    fn ack(o: &mut Offsets, tokens: &[AckToken]) -> Vec<(i32, i64)> {
        let commits = o.ack(tokens);
        o.committed(&commits);
        commits
    }

    #[test]
    fn commits_stop_at_the_first_unacknowledged_delivery() {
        let mut o = Offsets::default();
        let t: Vec<AckToken> = (0..10).map(|off| o.deliver(0, off)).collect();
        let out_of_order: Vec<AckToken> =
            [9, 7, 8, 6, 4, 3, 2, 1, 0].iter().map(|&i| t[i]).collect();
        assert_eq!(ack(&mut o, &out_of_order), [(0, 5)], "5 is open: 6-9 wait");
        assert_eq!(o.open(), 5);
        assert_eq!(ack(&mut o, &[t[5]]), [(0, 10)]);
        assert_eq!(o.open(), 0);
        assert!(ack(&mut o, &[t[5]]).is_empty(), "a token acks once");
    }

    #[test]
    fn partitions_commit_on_their_own_and_offset_gaps_do_not_block() {
        let mut o = Offsets::default();
        let a0 = o.deliver(0, 3);
        let b0 = o.deliver(1, 100);
        let a1 = o.deliver(0, 7); // 4-6 compacted away, or transaction markers
        let b1 = o.deliver(1, 101);
        assert_eq!(ack(&mut o, &[a1, b0]), [(1, 101)]);
        assert_eq!(ack(&mut o, &[a0]), [(0, 8)]);
        assert_eq!(ack(&mut o, &[b1]), [(1, 102)]);
    }

    #[test]
    fn an_uncommitted_offset_stays_pending_until_committed_or_revoked() {
        let mut o = Offsets::default();
        let a = o.deliver(0, 0);
        let b = o.deliver(1, 0);
        assert_eq!(
            o.ack(&[a]),
            [(0, 1)],
            "the commit failed: not marked committed"
        );
        assert_eq!(
            o.ack(&[b]),
            [(0, 1), (1, 1)],
            "it goes with the next commit"
        );
        o.committed(&[(1, 1)]);
        assert_eq!(
            o.revoke(&[0, 1]),
            [(0, 1)],
            "committed before the revoke completes"
        );
        assert!(o.pending().is_empty());
    }

    #[test]
    fn a_revoked_partitions_tokens_commit_nothing_even_after_it_comes_back() {
        let mut o = Offsets::default();
        let old = o.deliver(0, 0);
        let kept = o.deliver(1, 0);
        assert!(o.revoke(&[0]).is_empty());
        assert!(!o.is_live(old) && o.is_live(kept));
        let again = o.deliver(0, 0);
        assert!(ack(&mut o, &[old]).is_empty());
        assert_eq!(ack(&mut o, &[again, kept]), [(0, 1), (1, 1)]);
    }
}
