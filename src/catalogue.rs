//! Finding an entry of a catalogue (optimizers, precisions, devices) by name,
//! with a did-you-mean suggestion when the name is unknown.

use crate::error::Error;

/// Something a catalogue holds: a canonical name and its aliases.
pub trait Named {
    /// The canonical name: `sgd-momentum`.
    fn name(&self) -> &'static str;
    /// Other accepted names: `momentum`.
    fn aliases(&self) -> &'static [&'static str];

    /// The name to suggest for `wanted` (trimmed, lowercase), which no entry
    /// has: by default the closest spelling among every name and alias.
    fn suggest(wanted: &str, entries: &[Self]) -> Option<&'static str>
    where
        Self: Sized,
    {
        closest_spelling(
            wanted,
            entries
                .iter()
                .flat_map(|e| std::iter::once(e.name()).chain(e.aliases().iter().copied())),
        )
    }
}

/// The entry called `name` (case-insensitive, canonical name or alias), or an
/// [`Error::UnknownName`] that suggests the closest name and lists them all.
pub fn find<'a, T: Named>(
    kind: &'static str,
    name: &str,
    entries: &'a [T],
) -> Result<&'a T, Error> {
    let wanted = name.trim().to_ascii_lowercase();
    let names_of = |e: &'a T| std::iter::once(e.name()).chain(e.aliases().iter().copied());
    if let Some(entry) = entries.iter().find(|e| names_of(e).any(|n| n == wanted)) {
        return Ok(entry);
    }
    Err(Error::UnknownName {
        kind,
        name: name.to_string(),
        suggestion: T::suggest(&wanted, entries).map(str::to_string),
        accepted: entries
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The candidate spelled most like `wanted`, if any is close enough: at most
/// a third of its letters (and at least two) edited; the first of equals.
pub fn closest_spelling(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'static str>,
) -> Option<&'static str> {
    let length = wanted.chars().count();
    let most = |candidate: &str| (candidate.len() / 3).max(2);
    candidates
        .into_iter()
        // The distance is at least the difference in length: a name far
        // longer than every candidate (a megabyte of text) is not compared.
        .filter(|candidate| length.abs_diff(candidate.chars().count()) <= most(candidate))
        .map(|candidate| (edit_distance(wanted, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= most(candidate))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance between two short names.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Entry(&'static str, &'static [&'static str]);
    impl Named for Entry {
        fn name(&self) -> &'static str {
            self.0
        }
        fn aliases(&self) -> &'static [&'static str] {
            self.1
        }
    }
    const ENTRIES: &[Entry] = &[Entry("adam", &[]), Entry("sgd-momentum", &["momentum"])];

    #[test]
    fn finds_names_and_aliases_case_insensitively() {
        assert_eq!(find("optimizer", "ADAM", ENTRIES).unwrap().0, "adam");
        assert_eq!(
            find("optimizer", "momentum", ENTRIES).unwrap().0,
            "sgd-momentum"
        );
    }

    #[test]
    fn suggests_the_closest_name() {
        let error = find("optimizer", "adamm", ENTRIES).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown optimizer `adamm`; did you mean `adam`? (accepted: adam, sgd-momentum)"
        );
        let error = find("optimizer", "zzzzzzzz", ENTRIES).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown optimizer `zzzzzzzz` (accepted: adam, sgd-momentum)"
        );
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("adamm", "adam"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
