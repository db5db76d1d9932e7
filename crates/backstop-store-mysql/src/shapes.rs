//! Lists of parameters cut into a few fixed sizes, so that the multi-row statements come in a
//! handful of shapes, each prepared once per connection (the driver caches prepared
//! statements by their text), whatever the batch size.

/// Most values one `IN (…)` list or `OR` chain takes.
pub(crate) const MAX_LIST: usize = 256;

/// The size an `IN (…)` list of `n` values is padded to: the next power of two (at most
/// [`MAX_LIST`]). Padding repeats the last value, which changes nothing in an `IN` list or an
/// `OR` chain, so a list of 5 and one of 7 share the statement for 8.
pub(crate) fn padded(n: usize) -> usize {
    n.max(1).next_power_of_two().min(MAX_LIST)
}

/// `items` in pieces of at most [`MAX_LIST`], each padded to [`padded`] by repeating its last
/// item.
pub(crate) fn padded_lists<T: Copy>(items: &[T]) -> impl Iterator<Item = Vec<T>> + '_ {
    items.chunks(MAX_LIST).map(|chunk| {
        let mut v = chunk.to_vec();
        let last = *chunk.last().expect("chunks are never empty");
        v.resize(padded(chunk.len()), last);
        v
    })
}

/// `n` copies of `one`, joined by `sep`: the placeholders of a list.
pub(crate) fn repeat(one: &str, sep: &str, n: usize) -> String {
    vec![one; n].join(sep)
}

/// Splits `items` into chunks whose lengths are all in `shapes` (largest first, ending in 1).
pub(crate) fn chunks<'a, T>(items: &'a [T], shapes: &'static [usize]) -> Vec<&'a [T]> {
    let mut rest = items;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let shape = shapes
            .iter()
            .copied()
            .find(|s| *s <= rest.len())
            .expect("the last shape is 1");
        let (head, tail) = rest.split_at(shape);
        out.push(head);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_lists_keep_every_item_in_few_sizes() {
        for n in [1usize, 2, 3, 5, 8, 9, 255, 256, 257, 1000] {
            let v: Vec<usize> = (0..n).collect();
            let lists: Vec<Vec<usize>> = padded_lists(&v).collect();
            let mut seen: Vec<usize> = lists.iter().flatten().copied().collect();
            seen.dedup();
            assert_eq!(seen, v);
            assert!(lists.iter().all(|l| l.len().is_power_of_two()));
            assert!(lists.iter().all(|l| l.len() <= MAX_LIST));
        }
    }

    #[test]
    fn chunks_cover_everything_in_fixed_sizes() {
        const SHAPES: &[usize] = &[64, 16, 4, 1];
        for n in [0usize, 1, 5, 63, 64, 65, 300, 1000] {
            let v: Vec<usize> = (0..n).collect();
            let parts = chunks(&v, SHAPES);
            assert!(parts.iter().all(|p| SHAPES.contains(&p.len())));
            assert_eq!(parts.concat(), v);
        }
    }
}
