//! "Did you mean": [`suggest`] ranks close names.



/// "Did you mean": up to 3 candidates close to `name`, best first.
///
/// Compared ignoring case, by Damerau-Levenshtein distance: at most a quarter of the longer
/// name (at least 1 edit on names of 2+ characters), or up to 2 edits when the Jaro-Winkler
/// similarity is at least 0.85; fewer edits rank first, Jaro-Winkler breaks ties. Dotted names
/// (MCP tool names such as `self.audio_speaker.set_volume`) also match on their last part
/// (`set_volume`), and on `name` appearing as a whole word inside them (`volume`).
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let needle = name.to_lowercase();
    if needle.is_empty() {
        return Vec::new();
    }
    let needle_last = needle.rsplit('.').next().unwrap_or(&needle).to_string();
    let mut scored: Vec<(f64, f64, &'a str)> = Vec::new();
    for cand in candidates {
        if scored.iter().any(|(_, _, c)| *c == cand) {
            continue;
        }
        let lc = cand.to_lowercase();
        let last = lc.rsplit('.').next().unwrap_or(&lc);
        let mut best = similarity(&needle, &lc);
        if last != lc {
            best = max_score(best, similarity(&needle, last).map(|s| s - 0.01));
        }
        if needle_last != needle && last != lc {
            best = max_score(best, similarity(&needle_last, last).map(|s| s - 0.02));
        }
        for n in [needle.as_str(), needle_last.as_str()] {
            if n.chars().count() >= 3 && contains_word(&lc, n) {
                best = max_score(best, Some(0.9));
            }
            // An abbreviation: `vol` for `volume`.
            if n.chars().count() >= 2 && last.starts_with(n) {
                best = max_score(best, Some(0.88));
            }
        }
        if let Some(score) = best {
            scored.push((score, strsim::jaro_winkler(&needle, &lc), cand));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(b.2)));
    scored.into_iter().take(3).map(|(_, _, c)| c).collect()
}

pub(super) fn max_score(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// 1.0 for equal, less for close, `None` for not close.
pub(super) fn similarity(a: &str, b: &str) -> Option<f64> {
    if a == b {
        return Some(1.0);
    }
    let d = strsim::damerau_levenshtein(a, b);
    let longer = a.chars().count().max(b.chars().count());
    let allowed = (longer / 4).max(usize::from(longer >= 2));
    // Jaro-Winkler admits 2-edit near misses that share most letters in order (`stpes` → `step`).
    let close = d <= allowed || (d <= 2 && strsim::jaro_winkler(a, b) >= 0.85);
    (close && d < longer).then(|| 0.95 - d as f64 / longer as f64 * 0.5)
}

/// Whether `needle` occurs in `hay` delimited by the start/end or `.`, `_`, `-`, ` `.
pub(super) fn contains_word(hay: &str, needle: &str) -> bool {
    let is_sep = |c: Option<char>| c.is_none_or(|c| matches!(c, '.' | '_' | '-' | ' '));
    hay.match_indices(needle)
        .any(|(i, m)| is_sep(hay[..i].chars().next_back()) && is_sep(hay[i + m.len()..].chars().next()))
}
