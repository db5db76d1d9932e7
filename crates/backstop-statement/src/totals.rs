//! Gross totals per currency, so that offsetting breaks (+10 on one key, -10 on another)
//! cannot net to zero unnoticed: every figure that matters is a sum of absolute values.

use crate::classify::{Break, BreakClass};
use crate::money::Money;
use serde::Serialize;
use std::collections::BTreeMap;

/// The totals of one currency, in minor units. Sums are 128-bit: they cannot overflow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CurrencyTotals {
    /// Well-formed statement records in this currency, whatever their status.
    pub statement_records: u64,
    /// Σ|amount| of the records the provider says succeeded (duplicates included: the
    /// provider claims each of them).
    pub statement_gross: i128,
    /// Σ amount of the same records, signed.
    pub statement_net: i128,
    /// Distinct succeeded ledger tasks seen: matched by a record, or found by the scan.
    pub ledger_tasks: u64,
    /// Σ|amount| of those tasks.
    pub ledger_gross: i128,
    /// Σ amount of those tasks, signed.
    pub ledger_net: i128,
    /// Σ of every break's size: |provider − ledger| for an amount mismatch in one currency
    /// (each side in full when currencies differ), the whole amount for the other classes.
    /// Zero exactly when no break involves money of this currency.
    pub breaks_gross: i128,
    /// The same for `pending_within_grace` items.
    pub pending_gross: i128,
}

/// Totals per currency code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Totals(pub BTreeMap<String, CurrencyTotals>);

impl Totals {
    fn of(&mut self, currency: &str) -> &mut CurrencyTotals {
        if !self.0.contains_key(currency) {
            self.0
                .insert(currency.to_string(), CurrencyTotals::default());
        }
        self.0.get_mut(currency).expect("inserted above")
    }

    /// Counts a well-formed statement record.
    pub fn add_record(&mut self, amount: &Money, succeeded: bool) {
        let t = self.of(&amount.currency);
        t.statement_records += 1;
        if succeeded {
            t.statement_gross += amount.abs();
            t.statement_net += i128::from(amount.minor);
        }
    }

    /// Counts a distinct succeeded ledger task's amount.
    pub fn add_ledger(&mut self, amount: &Money) {
        let t = self.of(&amount.currency);
        t.ledger_tasks += 1;
        t.ledger_gross += amount.abs();
        t.ledger_net += i128::from(amount.minor);
    }

    /// Counts a break's size.
    pub fn add_break(&mut self, b: &Break) {
        let pending = b.class == BreakClass::PendingWithinGrace;
        let mut add = |currency: &str, size: i128| {
            let t = self.of(currency);
            if pending {
                t.pending_gross += size;
            } else {
                t.breaks_gross += size;
            }
        };
        match (&b.statement_amount, &b.ledger_amount) {
            (Some(s), Some(l)) if b.class == BreakClass::AmountMismatch => {
                if s.currency == l.currency {
                    add(
                        &s.currency,
                        (i128::from(s.minor) - i128::from(l.minor)).abs(),
                    );
                } else {
                    add(&s.currency, s.abs());
                    add(&l.currency, l.abs());
                }
            }
            (Some(s), _) => add(&s.currency, s.abs()),
            (None, Some(l)) => add(&l.currency, l.abs()),
            (None, None) => {}
        }
    }
}
