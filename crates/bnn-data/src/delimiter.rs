//! Field separators of delimited text files and the splitting of one line into fields.

use std::borrow::Cow;

/// How the fields of a line are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delimiter {
    /// Decided from the header: comma if it has one, else `;` if it has one, else whitespace.
    #[default]
    Auto,
    Comma,
    /// Runs of spaces or tabs, as in the raw UCI `.data` files.
    Whitespace,
    /// Any other single ASCII byte, e.g. `b'\t'` or `b'|'` (not `"`).
    Char(u8),
}

/// A delimiter with `Auto` already decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Separator {
    Char(char),
    Whitespace,
}

impl Delimiter {
    pub(crate) fn resolve(self, header: &str) -> Separator {
        match self {
            Delimiter::Auto if header.contains(',') => Separator::Char(','),
            Delimiter::Auto if header.contains(';') => Separator::Char(';'),
            Delimiter::Auto | Delimiter::Whitespace => Separator::Whitespace,
            Delimiter::Comma => Separator::Char(','),
            Delimiter::Char(b) => Separator::Char(char::from(b)),
        }
    }
}

/// The line contains a `"` that is never closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UnterminatedQuote;

/// Splits `line` into trimmed fields. Double quotes group text (so a quoted header name may
/// contain the separator) and are removed; `""` inside quotes is a literal quote.
pub(crate) fn split_fields(
    line: &str,
    sep: Separator,
) -> Result<Vec<Cow<'_, str>>, UnterminatedQuote> {
    if !line.contains('"') {
        // Fast path for the numeric rows, which never carry quotes.
        return Ok(match sep {
            Separator::Char(c) => line.split(c).map(|f| Cow::Borrowed(f.trim())).collect(),
            Separator::Whitespace => line.split_whitespace().map(Cow::Borrowed).collect(),
        });
    }
    split_quoted(line, sep).map(|fields| fields.into_iter().map(Cow::Owned).collect())
}

fn split_quoted(line: &str, sep: Separator) -> Result<Vec<String>, UnterminatedQuote> {
    let mut fields = Vec::new();
    let mut current = String::new();
    // A quoted empty string `""` is still a field in whitespace mode.
    let mut saw_quote = false;
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_quotes {
            if c != '"' {
                current.push(c);
            } else if chars.peek() == Some(&'"') {
                current.push('"');
                chars.next();
            } else {
                in_quotes = false;
            }
            continue;
        }
        let is_separator = match sep {
            Separator::Char(s) => c == s,
            Separator::Whitespace => c.is_whitespace(),
        };
        if c == '"' {
            in_quotes = true;
            saw_quote = true;
        } else if !is_separator {
            current.push(c);
        } else if sep != Separator::Whitespace || saw_quote || !current.is_empty() {
            fields.push(current.trim().to_string());
            current.clear();
            saw_quote = false;
        }
    }
    if in_quotes {
        return Err(UnterminatedQuote);
    }
    if sep != Separator::Whitespace || saw_quote || !current.is_empty() {
        fields.push(current.trim().to_string());
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str, sep: Separator) -> Vec<String> {
        split_fields(line, sep)
            .unwrap()
            .into_iter()
            .map(|c| c.into_owned())
            .collect()
    }

    #[test]
    fn auto_prefers_comma_then_semicolon_then_whitespace() {
        assert_eq!(Delimiter::Auto.resolve("a;b,c"), Separator::Char(','));
        assert_eq!(Delimiter::Auto.resolve("a;b"), Separator::Char(';'));
        assert_eq!(Delimiter::Auto.resolve("a b\tc"), Separator::Whitespace);
        assert_eq!(Delimiter::Char(b'|').resolve("a,b"), Separator::Char('|'));
    }

    #[test]
    fn comma_fields_are_trimmed_and_empty_fields_kept() {
        assert_eq!(
            split(" 1, 2 ,,3", Separator::Char(',')),
            ["1", "2", "", "3"]
        );
    }

    #[test]
    fn whitespace_runs_and_trailing_space_form_one_separator() {
        assert_eq!(
            split("  -2.3 0.568\t\t4.78 ", Separator::Whitespace),
            ["-2.3", "0.568", "4.78"]
        );
    }

    #[test]
    fn quotes_are_removed_and_may_hide_the_separator() {
        assert_eq!(
            split(
                r#""fixed acidity";"a;b";"say ""hi""""#,
                Separator::Char(';')
            ),
            ["fixed acidity", "a;b", r#"say "hi""#]
        );
        assert_eq!(
            split(r#""a b" c """#, Separator::Whitespace),
            ["a b", "c", ""]
        );
    }

    #[test]
    fn unterminated_quote_is_reported() {
        assert_eq!(
            split_fields(r#""RMSD,F1"#, Separator::Char(',')),
            Err(UnterminatedQuote)
        );
    }
}
