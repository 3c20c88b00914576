//! How the hub is reached, from the environment huggingface_hub reads:
//! the endpoint, the token, whether the network may be used, the timeout.
//!
//! Source: `huggingface_hub/constants.py` (huggingface/huggingface_hub,
//! commit 03333b689b5a2dee604676791c0792ede6246a31): `HF_ENDPOINT`
//! (default `https://huggingface.co`), `HF_HUB_OFFLINE` (true when `1`,
//! `ON`, `YES` or `TRUE`, any case), `HF_TOKEN`, `HF_TOKEN_PATH` (default
//! `$HF_HOME/token`), `HF_HUB_DOWNLOAD_TIMEOUT` (default 10 seconds).

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::cache_dir::{hf_home_from, path_variable};
use crate::checkpoint::open_regular_file;

/// The hub's own endpoint, huggingface_hub's default.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// huggingface_hub's `DEFAULT_DOWNLOAD_TIMEOUT`, in seconds.
const DEFAULT_TIMEOUT_SECONDS: f64 = 10.0;

/// The values huggingface_hub's `_is_true` reads as true.
const TRUE_VALUES: [&str; 4] = ["1", "ON", "YES", "TRUE"];

/// The longest token file read: a token is about 40 characters.
const MAX_TOKEN_BYTES: u64 = 4096;

/// Set by the command line's `--offline`: as `HF_HUB_OFFLINE=1` for this
/// process, which the environment variable is too.
static OFFLINE_FLAG: AtomicBool = AtomicBool::new(false);

/// Makes every later hub lookup of this process answer from the local cache
/// (and presets) only, as `HF_HUB_OFFLINE=1` does: the CLI's `--offline`.
pub fn set_offline() {
    OFFLINE_FLAG.store(true, Ordering::Relaxed);
}

/// How the hub is reached.
#[derive(Clone, PartialEq)]
pub struct HubSettings {
    /// The endpoint, without a trailing `/`: `https://huggingface.co`.
    pub endpoint: String,
    /// The access token sent as `Authorization: Bearer`, when one is set.
    pub token: Option<String>,
    /// Whether the network must not be used.
    pub offline: bool,
    /// The longest wait for a connection or for the next bytes of an answer.
    pub timeout: Duration,
}

impl std::fmt::Debug for HubSettings {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSettings")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("offline", &self.offline)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl HubSettings {
    /// The settings of this process: its environment and `--offline`.
    pub fn from_env() -> HubSettings {
        let mut settings = HubSettings::from_vars(|name| std::env::var_os(name));
        settings.offline |= OFFLINE_FLAG.load(Ordering::Relaxed);
        settings
    }

    /// The settings that the variables `var` give.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> HubSettings {
        let text = |name: &str| {
            var(name)
                .and_then(|value| value.into_string().ok())
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        let is_true = |name: &str| {
            text(name).is_some_and(|value| {
                TRUE_VALUES
                    .iter()
                    .any(|truth| value.eq_ignore_ascii_case(truth))
            })
        };
        let endpoint = text("HF_ENDPOINT")
            .map(|endpoint| endpoint.trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = text("HF_TOKEN").or_else(|| {
            path_variable(&var, "HF_TOKEN_PATH")
                .or_else(|| hf_home_from(&var).map(|home| home.join("token")))
                .and_then(read_token)
        });
        let seconds = text("HF_HUB_DOWNLOAD_TIMEOUT")
            .and_then(|value| value.parse::<f64>().ok())
            .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        HubSettings {
            endpoint,
            token,
            offline: is_true("HF_HUB_OFFLINE") || is_true("TRANSFORMERS_OFFLINE"),
            timeout: Duration::try_from_secs_f64(seconds)
                .unwrap_or(Duration::from_secs(DEFAULT_TIMEOUT_SECONDS as u64)),
        }
    }
}

/// The token a token file holds (huggingface_hub's `hf auth login` writes
/// it), trimmed; `None` when there is no such regular file or it holds none.
fn read_token(path: PathBuf) -> Option<String> {
    let (file, length) = open_regular_file(&path).ok()?;
    if length > MAX_TOKEN_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_BYTES).read_to_string(&mut text).ok()?;
    let token = text.trim();
    (!token.is_empty() && !token.contains(char::is_whitespace)).then(|| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> HubSettings {
        HubSettings::from_vars(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        })
    }

    #[test]
    fn defaults_are_huggingface_hubs() {
        let plain = settings(&[]);
        assert_eq!(plain.endpoint, "https://huggingface.co");
        assert_eq!(plain.token, None);
        assert!(!plain.offline);
        assert_eq!(plain.timeout, Duration::from_secs(10));
    }

    #[test]
    fn variables_are_read_as_huggingface_hub_reads_them() {
        let set = settings(&[
            ("HF_ENDPOINT", "http://127.0.0.1:9/"),
            ("HF_TOKEN", " hf_abc \n"),
            ("HF_HUB_OFFLINE", "yes"),
            ("HF_HUB_DOWNLOAD_TIMEOUT", "0.5"),
        ]);
        assert_eq!(set.endpoint, "http://127.0.0.1:9");
        assert_eq!(set.token.as_deref(), Some("hf_abc"));
        assert!(set.offline);
        assert_eq!(set.timeout, Duration::from_millis(500));
        assert!(!settings(&[("HF_HUB_OFFLINE", "0")]).offline);
        assert!(settings(&[("TRANSFORMERS_OFFLINE", "1")]).offline);
        assert_eq!(
            settings(&[("HF_HUB_DOWNLOAD_TIMEOUT", "-1")]).timeout,
            Duration::from_secs(10)
        );
        assert!(!format!("{set:?}").contains("hf_abc"));
    }

    #[test]
    fn the_token_file_is_found_as_huggingface_hub_finds_it() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("token"), "hf_fromfile\n").unwrap();
        let home_text = home.path().to_str().unwrap();
        assert_eq!(
            settings(&[("HF_HOME", home_text)]).token.as_deref(),
            Some("hf_fromfile")
        );
        let other = home.path().join("elsewhere");
        std::fs::write(&other, "hf_path").unwrap();
        assert_eq!(
            settings(&[
                ("HF_HOME", home_text),
                ("HF_TOKEN_PATH", other.to_str().unwrap())
            ])
            .token
            .as_deref(),
            Some("hf_path")
        );
        assert_eq!(
            settings(&[("HF_HOME", home_text), ("HF_TOKEN", "hf_env")])
                .token
                .as_deref(),
            Some("hf_env")
        );
    }
}
