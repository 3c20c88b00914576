//! Where the Hugging Face hub cache is: the folder `huggingface_hub` writes
//! `models--{owner}--{name}/` into, found from the environment the same way.
//!
//! Source: `huggingface_hub/constants.py` (huggingface/huggingface_hub,
//! commit 03333b689b5a2dee604676791c0792ede6246a31):
//!
//! ```python
//! default_home = os.path.join(os.path.expanduser("~"), ".cache")
//! HF_HOME = os.path.expandvars(os.path.expanduser(os.getenv(
//!     "HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", default_home), "huggingface"))))
//! default_cache_path = os.path.join(HF_HOME, "hub")
//! HUGGINGFACE_HUB_CACHE = os.getenv("HUGGINGFACE_HUB_CACHE", default_cache_path)
//! HF_HUB_CACHE = os.path.expandvars(os.path.expanduser(os.getenv(
//!     "HF_HUB_CACHE", HUGGINGFACE_HUB_CACHE)))
//! ```
//!
//! So, first set wins: `HF_HUB_CACHE`; the legacy `HUGGINGFACE_HUB_CACHE`;
//! `$HF_HOME/hub`; `$XDG_CACHE_HOME/huggingface/hub`;
//! `~/.cache/huggingface/hub`. A leading `~` and `$VAR` / `${VAR}` are
//! expanded as Python's `posixpath` does. One difference: a variable set to
//! the empty string counts as unset here, where Python would take `""` (the
//! working directory) as the cache.

use std::ffi::OsString;
use std::path::PathBuf;

/// The hub cache folder the process environment names, `None` when neither
/// a variable nor a home folder says where it is.
pub fn hub_cache_dir() -> Option<PathBuf> {
    hub_cache_dir_from(|name| std::env::var_os(name))
}

/// The hub cache folder that the variables `var` gives name, in
/// `huggingface_hub`'s order (see the module documentation).
pub fn hub_cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    let expand = |value: OsString| expand(value, &set);
    if let Some(cache) = set("HF_HUB_CACHE").or_else(|| set("HUGGINGFACE_HUB_CACHE")) {
        return Some(expand(cache));
    }
    Some(hf_home_from(&var)?.join("hub"))
}

/// `HF_HOME` as huggingface_hub finds it (see the module documentation):
/// the folder that holds `hub/` and the `token` file.
pub fn hf_home_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    let hf_home = match set("HF_HOME") {
        Some(home) => home,
        None => {
            let cache = match set("XDG_CACHE_HOME") {
                Some(cache) => PathBuf::from(cache),
                None => PathBuf::from(home(&set)?).join(".cache"),
            };
            cache.join("huggingface").into_os_string()
        }
    };
    Some(expand(hf_home, &set))
}

/// A path from the variable `name` as huggingface_hub expands it, `None`
/// when unset or empty.
pub fn path_variable(var: impl Fn(&str) -> Option<OsString>, name: &str) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    set(name).map(|value| expand(value, &set))
}

/// The home folder, as `os.path.expanduser("~")` finds it: `HOME`, or on
/// Windows `USERPROFILE`. (Python falls back to the password database when
/// `HOME` is unset; trainmem then knows no default cache.)
fn home(set: &impl Fn(&str) -> Option<OsString>) -> Option<OsString> {
    set("HOME").or_else(|| {
        if cfg!(windows) {
            set("USERPROFILE")
        } else {
            None
        }
    })
}

/// `os.path.expandvars(os.path.expanduser(value))`. A value that is not
/// UTF-8 is taken as it is.
fn expand(value: OsString, set: &impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let Some(text) = value.to_str() else {
        return PathBuf::from(value);
    };
    let user_expanded = match text.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with(['/', '\\']) => match home(set) {
            Some(home) => {
                let mut joined = home;
                joined.push(rest);
                joined
            }
            None => OsString::from(text),
        },
        _ => OsString::from(text),
    };
    match user_expanded.to_str() {
        Some(text) => PathBuf::from(expand_vars(text, set)),
        None => PathBuf::from(user_expanded),
    }
}

/// `posixpath.expandvars`: `$NAME` and `${NAME}`, a name of ASCII letters,
/// digits and `_`, replaced by the variable's value; an unset variable (or
/// one that is not UTF-8) is left as written.
fn expand_vars(text: &str, set: &impl Fn(&str) -> Option<OsString>) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, written_len) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) if end > 0 && braced[..end].chars().all(is_name) => {
                    (&braced[..end], end + 2)
                }
                _ => ("", 0),
            },
            None => {
                let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        let written = &rest[dollar..dollar + 1 + written_len];
        match set(name).filter(|_| !name.is_empty()) {
            Some(value) => match value.to_str() {
                Some(value) => out.push_str(value),
                None => out.push_str(written),
            },
            None => out.push_str(written),
        }
        rest = &rest[dollar + 1 + written_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(vars: &[(&str, &str)]) -> Option<PathBuf> {
        hub_cache_dir_from(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        })
    }

    #[test]
    fn first_set_variable_wins_in_huggingface_hub_order() {
        let all = [
            ("HF_HUB_CACHE", "/a"),
            ("HUGGINGFACE_HUB_CACHE", "/b"),
            ("HF_HOME", "/c"),
            ("XDG_CACHE_HOME", "/d"),
            ("HOME", "/e"),
        ];
        let expected = [
            "/a",
            "/b",
            "/c/hub",
            "/d/huggingface/hub",
            "/e/.cache/huggingface/hub",
        ];
        for (skip, want) in expected.iter().enumerate() {
            assert_eq!(
                dir(&all[skip..]),
                Some(PathBuf::from(want)),
                "{:?}",
                &all[skip..]
            );
        }
        assert_eq!(dir(&[]), None);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        assert_eq!(
            dir(&[("HF_HUB_CACHE", ""), ("HF_HOME", ""), ("HOME", "/h")]),
            Some(PathBuf::from("/h/.cache/huggingface/hub"))
        );
    }

    #[test]
    fn tilde_and_variables_expand_as_python_does() {
        assert_eq!(
            dir(&[("HF_HUB_CACHE", "~/hub"), ("HOME", "/home/u")]),
            Some(PathBuf::from("/home/u/hub"))
        );
        assert_eq!(
            dir(&[("HF_HOME", "$SCRATCH/hf"), ("SCRATCH", "/scratch")]),
            Some(PathBuf::from("/scratch/hf/hub"))
        );
        assert_eq!(
            dir(&[("HF_HUB_CACHE", "${SCRATCH}x/$NOPE/${}"), ("SCRATCH", "/s")]),
            Some(PathBuf::from("/sx/$NOPE/${}"))
        );
        // `~user` is not expanded, nor is a `~` that is not first.
        assert_eq!(
            dir(&[("HF_HUB_CACHE", "~bob/a~"), ("HOME", "/h")]),
            Some(PathBuf::from("~bob/a~"))
        );
        // XDG_CACHE_HOME goes into HF_HOME's default, which is expanded.
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "~/c"), ("HOME", "/h")]),
            Some(PathBuf::from("/h/c/huggingface/hub"))
        );
        assert_eq!(
            dir(&[("HF_HUB_CACHE", "a$"), ("HOME", "/h")]),
            Some(PathBuf::from("a$"))
        );
    }
}
