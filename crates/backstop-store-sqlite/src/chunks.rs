//! Batches cut into a few fixed sizes, so that multi-row statements have a handful of
//! shapes that SQLite prepares once and sqlx caches, whatever the batch size.

/// Statement sizes, largest first.
const SIZES: [usize; 5] = [256, 64, 16, 4, 1];

/// Splits `items` into chunks whose lengths are all in [`SIZES`].
pub(crate) fn fixed<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let size = SIZES
            .iter()
            .copied()
            .find(|s| *s <= rest.len())
            .expect("1 always fits");
        let (head, tail) = rest.split_at(size);
        rest = tail;
        Some(head)
    })
}

/// `(?, ?, …)` repeated `rows` times with `cols` placeholders each, comma-separated.
pub(crate) fn placeholders(rows: usize, cols: usize) -> String {
    let row = format!("({})", vec!["?"; cols].join(", "));
    vec![row; rows].join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_everything_in_fixed_sizes() {
        for n in [0usize, 1, 5, 63, 64, 65, 300, 1000, 4097] {
            let v: Vec<usize> = (0..n).collect();
            let parts: Vec<&[usize]> = fixed(&v).collect();
            assert!(parts.iter().all(|p| SIZES.contains(&p.len())));
            assert_eq!(parts.concat(), v);
        }
    }
}
