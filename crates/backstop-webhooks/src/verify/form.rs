//! `application/x-www-form-urlencoded` bodies, decoded to bytes (not text) so a signature over
//! a non-UTF-8 charset can still be checked.

/// The body's `name=value` pairs in order, `+` decoded to a space and `%XX` to its byte (a
/// malformed escape is kept as written, as browsers and `form_urlencoded` do). Empty pieces
/// (`a=1&&b=2`) are skipped; a piece without `=` has an empty value.
pub(super) fn parse(body: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    body.split(|&b| b == b'&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| match piece.iter().position(|&b| b == b'=') {
            Some(eq) => (decode(&piece[..eq]), decode(&piece[eq + 1..])),
            None => (decode(piece), Vec::new()),
        })
        .collect()
}

fn decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let escaped = input
                    .get(i + 1..i + 3)
                    .and_then(|hex| Some(hex_value(hex[0])? << 4 | hex_value(hex[1])?));
                if let Some(byte) = escaped {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            other => out.push(other),
        }
        i += 1;
    }
    out
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(body: &str) -> Vec<(String, String)> {
        parse(body.as_bytes())
            .into_iter()
            .map(|(k, v)| (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn decodes_like_a_browser_form() {
        assert_eq!(
            pairs("a=1&b=x+y&c=%E4%BD%A0%3D&&d&e=%zz%4"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), "你=".into()),
                ("d".into(), "".into()),
                ("e".into(), "%zz%4".into()),
            ]
        );
        assert_eq!(pairs("k=a=b"), vec![("k".into(), "a=b".into())]);
        assert_eq!(parse(b"x=%C4%E3"), vec![(b"x".to_vec(), vec![0xc4, 0xe3])]);
        assert!(parse(b"").is_empty());
    }
}
