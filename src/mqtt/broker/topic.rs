//! Topic names and filters by MQTT 3.1.1 §4.7, and matching a name against a filter.
//!
//! Everything here works on whole levels (`split('/')`) and never slices a `str` by byte
//! position, so no input can make it panic (rumqttc's `matches` slices `topic[..1]` and panics
//! on a name that starts with a multi-byte character).

/// The longest topic an MQTT string can carry.
pub const MAX_TOPIC: usize = 65_535;

/// Why a topic name or filter is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    Empty,
    TooLong,
    Nul,
    /// A name with `+` or `#` in it.
    WildcardInName,
    /// `#` that is not a whole last level, or `+` that is not a whole level.
    MisplacedWildcard,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invalid::Empty => "empty topic",
            Invalid::TooLong => "topic longer than 65535 bytes",
            Invalid::Nul => "topic contains U+0000",
            Invalid::WildcardInName => "topic name contains a wildcard (+ or #)",
            Invalid::MisplacedWildcard => "wildcard not a whole level (# must be the last level)",
        })
    }
}

fn common(t: &str) -> Result<(), Invalid> {
    if t.is_empty() {
        Err(Invalid::Empty)
    } else if t.len() > MAX_TOPIC {
        Err(Invalid::TooLong)
    } else if t.contains('\0') {
        Err(Invalid::Nul)
    } else {
        Ok(())
    }
}

/// A topic name a PUBLISH (or a will) may use.
pub fn valid_name(name: &str) -> Result<(), Invalid> {
    common(name)?;
    if name.contains(['+', '#']) { Err(Invalid::WildcardInName) } else { Ok(()) }
}

/// A topic filter a SUBSCRIBE may use.
pub fn valid_filter(filter: &str) -> Result<(), Invalid> {
    common(filter)?;
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        let last = levels.peek().is_none();
        let ok = match level {
            "#" => last,
            "+" => true,
            other => !other.contains(['+', '#']),
        };
        if !ok {
            return Err(Invalid::MisplacedWildcard);
        }
    }
    Ok(())
}

/// Whether `name` matches `filter` (both assumed valid; on invalid input the answer is some
/// bool, never a panic). A filter that starts with a wildcard does not match a `$` name.
pub fn matches(name: &str, filter: &str) -> bool {
    if name.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let (mut n, mut f) = (name.split('/'), filter.split('/'));
    loop {
        match (f.next(), n.next()) {
            // `#` also matches the parent level: `a/#` matches `a`.
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(fl), Some(nl)) if fl == nl => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_and_filters_follow_section_4_7() {
        for ok in ["a", "a/b", "/", "a//b", "é/x", "$SYS/x", " "] {
            assert_eq!(valid_name(ok), Ok(()), "{ok:?}");
            assert_eq!(valid_filter(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(valid_name(""), Err(Invalid::Empty));
        assert_eq!(valid_name("a\0b"), Err(Invalid::Nul));
        assert_eq!(valid_name(&"x".repeat(MAX_TOPIC + 1)), Err(Invalid::TooLong));
        assert_eq!(valid_name(&"é".repeat(MAX_TOPIC / 2)), Ok(()));
        for bad in ["+/x", "a/#/b", "#", "a+", "a/#"] {
            assert_eq!(valid_name(bad), Err(Invalid::WildcardInName), "{bad:?}");
        }
        for ok in ["#", "+", "a/#", "+/+/#", "/+", "+/", "$share/g/a/+"] {
            assert_eq!(valid_filter(ok), Ok(()), "{ok:?}");
        }
        for bad in ["a/#/b", "a#", "#/", "a+/b", "a/b+", "++", "##"] {
            assert_eq!(valid_filter(bad), Err(Invalid::MisplacedWildcard), "{bad:?}");
        }
        assert_eq!(valid_filter(""), Err(Invalid::Empty));
        assert_eq!(valid_filter("\0"), Err(Invalid::Nul));
    }

    #[test]
    fn matching() {
        let yes = [("a/b", "a/b"), ("a/b", "a/+"), ("a/b", "#"), ("a", "a/#"), ("a/b/c", "a/#"), ("/x", "+/x"), ("é/x", "+/x"), ("é/x", "é/#"), ("$SYS/x", "$SYS/#")];
        let no = [("a/b", "a"), ("a", "a/+"), ("a/b/c", "a/+"), ("b", "a/#"), ("$SYS/x", "#"), ("$SYS/x", "+/x"), ("é/x", "e/x"), ("a/b", "a/b/c")];
        for (n, f) in yes {
            assert!(matches(n, f), "{n:?} {f:?}");
        }
        for (n, f) in no {
            assert!(!matches(n, f), "{n:?} {f:?}");
        }
    }

    /// A level-by-level reference, written differently: recursion over vectors of levels.
    fn reference(name: &str, filter: &str) -> bool {
        fn go(n: &[&str], f: &[&str]) -> bool {
            match (f.first(), n.first()) {
                (Some(&"#"), _) => true,
                (None, None) => true,
                (Some(&"+"), Some(_)) => go(&n[1..], &f[1..]),
                (Some(a), Some(b)) => a == b && go(&n[1..], &f[1..]),
                _ => false,
            }
        }
        if name.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
            return false;
        }
        go(&name.split('/').collect::<Vec<_>>(), &filter.split('/').collect::<Vec<_>>())
    }

    proptest! {
        #[test]
        fn never_panics_on_any_strings(a in any::<String>(), b in any::<String>()) {
            let _ = (valid_name(&a), valid_filter(&a), matches(&a, &b), matches(&b, &a));
        }

        #[test]
        fn agrees_with_the_reference(name in "[ab$]{0,2}(/[ab$]{0,2}){0,3}", filter in "([ab$+]{0,2}|\\+)(/([ab]{0,2}|\\+)){0,3}(/#)?|#") {
            prop_assume!(valid_name(&name).is_ok() && valid_filter(&filter).is_ok());
            prop_assert_eq!(matches(&name, &filter), reference(&name, &filter), "{} {}", name, filter);
        }
    }
}
