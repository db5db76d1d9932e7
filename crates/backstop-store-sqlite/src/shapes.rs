//! Batches cut into a few fixed sizes, so that multi-row statements come in a handful of
//! shapes, each prepared once per batch, whatever the batch size.

/// Splits `items` into chunks whose lengths are all in `shapes` (largest first, ending in 1),
/// each with the index of its shape.
pub(crate) fn chunks<'a, T>(
    items: &'a [T],
    shapes: &'static [usize],
) -> impl Iterator<Item = (usize, &'a [T])> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let shape = shapes
            .iter()
            .position(|s| *s <= rest.len())
            .expect("the last shape is 1");
        let (head, tail) = rest.split_at(shapes[shape]);
        rest = tail;
        Some((shape, head))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_everything_in_fixed_sizes() {
        const SHAPES: &[usize] = &[64, 16, 4, 1];
        for n in [0usize, 1, 5, 63, 64, 65, 300, 1000, 4097] {
            let v: Vec<usize> = (0..n).collect();
            let parts: Vec<(usize, &[usize])> = chunks(&v, SHAPES).collect();
            assert!(parts.iter().all(|(s, p)| SHAPES[*s] == p.len()));
            assert_eq!(
                parts
                    .iter()
                    .flat_map(|(_, p)| p.iter().copied())
                    .collect::<Vec<_>>(),
                v
            );
        }
    }
}
