//! The set of keys a statement holds, in 16 bytes a key whatever the key's length: a 128-bit
//! fingerprint made of two SipHash values with keys drawn at random for each run.
//!
//! Two different keys share a fingerprint with probability about n²/2¹²⁹ (for a billion
//! keys, under 10⁻²⁰), and a statement cannot be crafted to collide because the hash keys
//! are secret and new every run. That is the price of holding a million keys in ~34 MB
//! instead of ~100 MB.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// Keys seen so far.
pub(crate) struct KeySet {
    a: RandomState,
    b: RandomState,
    set: HashSet<u128, BuildHasherDefault<Spread>>,
}

impl KeySet {
    pub(crate) fn new() -> Self {
        KeySet {
            a: RandomState::new(),
            b: RandomState::new(),
            set: HashSet::default(),
        }
    }

    fn fingerprint(&self, key: &str) -> u128 {
        (u128::from(self.a.hash_one(key)) << 64) | u128::from(self.b.hash_one(key))
    }

    /// Adds `key`; false when it was already there.
    pub(crate) fn insert(&mut self, key: &str) -> bool {
        let f = self.fingerprint(key);
        self.set.insert(f)
    }

    /// Whether `key` was added.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.set.contains(&self.fingerprint(key))
    }

    /// How many keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }
}

/// Hashes an already uniformly random fingerprint by folding it: no second SipHash.
#[derive(Default)]
pub(crate) struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u128(&mut self, v: u128) {
        self.0 ^= (v as u64) ^ ((v >> 64) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_keys() {
        let mut s = KeySet::new();
        assert!(s.insert("a"));
        assert!(!s.insert("a"));
        assert!(s.insert("b"));
        assert!(s.contains("a"));
        assert!(!s.contains("c"));
        for i in 0..10_000 {
            s.insert(&format!("k{i}"));
        }
        assert_eq!(s.len(), 10_002);
    }
}
