//! Finding an entry of a catalogue (optimizers, precisions, devices) by name,
//! with a did-you-mean suggestion when the name is unknown.

use crate::error::Error;

/// Something a catalogue holds: a canonical name and its aliases.
pub trait Named {
    /// The canonical name: `sgd-momentum`.
    fn name(&self) -> &'static str;
    /// Other accepted names: `momentum`.
    fn aliases(&self) -> &'static [&'static str];
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
    let suggestion = entries
        .iter()
        .flat_map(names_of)
        .map(|candidate| (edit_distance(&wanted, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate.to_string());
    Err(Error::UnknownName {
        kind,
        name: name.to_string(),
        suggestion,
        accepted: entries
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
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
