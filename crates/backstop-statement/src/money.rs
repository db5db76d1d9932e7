//! Exact money: an integer amount in minor units (cents, fen, pence) and a currency code.
//! Nothing here ever touches a float.

use serde::Serialize;
use std::fmt;

/// An amount of money: `minor` units of `currency` (1050 USD is $10.50).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Money {
    /// The amount in minor units; negative for refunds and reversals where a provider writes
    /// them so.
    pub minor: i64,
    /// The currency code, upper-case (`USD`, `CNY`).
    pub currency: String,
}

impl Money {
    /// Money in minor units, the currency code upper-cased.
    pub fn new(minor: i64, currency: &str) -> Money {
        Money {
            minor,
            currency: currency.to_ascii_uppercase(),
        }
    }

    /// Whether two amounts are the same money: same currency and same minor units. Different
    /// currencies never match, whatever the numbers.
    pub fn same_as(&self, other: &Money) -> bool {
        self.currency == other.currency && self.minor == other.minor
    }

    /// The absolute amount, which cannot overflow (`i64::MIN` included).
    pub fn abs(&self) -> i128 {
        i128::from(self.minor).abs()
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.minor, self.currency)
    }
}

/// Reads an amount in minor units: an optional `-` and ASCII digits, surrounding spaces
/// ignored. Everything else is refused with a reason: decimals (`10.5`, `10.00`), exponents
/// (`1e3`), thousands separators, a `+`, an empty field, and values outside `i64`.
pub fn parse_minor(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("amount is empty".into());
    }
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        let why = if t.contains(['.', ',']) {
            "has a decimal point or separator; amounts are integers in minor units"
        } else if t.contains(['e', 'E']) {
            "has an exponent; amounts are integers in minor units"
        } else {
            "is not an integer in minor units"
        };
        return Err(format!("amount {} {why}", excerpt(t)));
    }
    t.parse::<i64>()
        .map_err(|_| format!("amount {} is out of range (64-bit minor units)", excerpt(t)))
}

/// Reads a currency code: 1 to 12 ASCII letters or digits (ISO 4217 codes are three letters;
/// some providers use longer ones), returned upper-case.
pub fn parse_currency(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("currency is empty".into());
    }
    if t.len() > 12 || !t.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!("currency {} is not a currency code", excerpt(t)));
    }
    Ok(t.to_ascii_uppercase())
}

/// A field quoted for an error message, cut to 40 characters.
pub(crate) fn excerpt(text: &str) -> String {
    let cut: String = text.chars().take(40).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_only() {
        assert_eq!(parse_minor("1050"), Ok(1050));
        assert_eq!(parse_minor(" -30 "), Ok(-30));
        assert_eq!(parse_minor("0"), Ok(0));
        assert_eq!(parse_minor("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_minor("-9223372036854775808"), Ok(i64::MIN));
        for bad in [
            "", " ", "-", "10.5", "10.00", "1e3", "1E3", "+5", "1,000", "ten", "0x10",
        ] {
            assert!(parse_minor(bad).is_err(), "{bad:?}");
        }
        assert!(parse_minor("10.5").unwrap_err().contains("decimal"));
        assert!(parse_minor("1e3").unwrap_err().contains("exponent"));
        assert!(parse_minor("").unwrap_err().contains("empty"));
        assert!(
            parse_minor("9223372036854775808")
                .unwrap_err()
                .contains("out of range")
        );
    }

    #[test]
    fn currencies() {
        assert_eq!(parse_currency(" usd "), Ok("USD".into()));
        assert!(parse_currency("").is_err());
        assert!(parse_currency("US D").is_err());
        assert!(parse_currency("$").is_err());
    }

    #[test]
    fn mixed_currencies_never_match() {
        assert!(!Money::new(10, "USD").same_as(&Money::new(10, "EUR")));
        assert!(Money::new(10, "usd").same_as(&Money::new(10, "USD")));
        assert_eq!(Money::new(i64::MIN, "X").abs(), 9223372036854775808);
    }
}
