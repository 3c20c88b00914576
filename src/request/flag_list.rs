//! `estimate` settings as an ordered list keyed by flag: what `check`
//! assembles from launch configs and `plan` from its layouts (the web
//! API's plan from its JSON keys as well). They become the typed request as
//! the web API's JSON does ([`EstimateRequest::from_door`], no command line
//! built or parsed again), so that the command line printed for them is
//! exactly what was priced.

use std::ffi::OsString;

use serde_json::{Map, Value};

use super::{Door, EstimateRequest, ModelSource};
use crate::error::Result;

/// Flags that may be given more than once; each other flag has one value,
/// the last one set.
const REPEATABLE: &[&str] = &["--freeze", "--optimizer-option"];

/// Pairs of flags of which only one may be given: the later one wins.
const EXCLUSIVE: &[(&str, &str)] = &[
    ("--zero", "--fsdp"),
    ("--capacity", "--device"),
    ("--model", "--params"),
];

/// An ordered set of `estimate` flags, each with its value (none for a switch).
#[derive(Debug, Clone, Default)]
pub struct Flags(pub Vec<(String, Option<OsString>)>);

impl Flags {
    pub fn set(&mut self, flag: &str, value: Option<OsString>) {
        for (a, b) in EXCLUSIVE {
            let other = if flag == *a {
                b
            } else if flag == *b {
                a
            } else {
                continue;
            };
            self.0.retain(|(f, _)| f != other);
        }
        if !REPEATABLE.contains(&flag)
            && let Some(slot) = self.0.iter_mut().find(|(f, _)| f == flag)
        {
            slot.1 = value;
            return;
        }
        self.0.push((flag.to_string(), value));
    }

    pub fn get(&self, flag: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(f, _)| f == flag)
            .and_then(|(_, v)| v.as_ref())
            .map(|v| v.to_string_lossy().into_owned())
    }

    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|(f, _)| f == flag)
    }

    pub fn with(&self, changes: &[(&str, &str)]) -> Flags {
        let mut next = self.clone();
        for (flag, value) in changes {
            next.set(flag, (!value.is_empty()).then(|| OsString::from(value)));
        }
        next
    }

    /// The words of the equivalent command line, to print it
    /// ([`Flags::command`], `plan`'s rows); nothing parses them.
    pub fn words(&self) -> Vec<OsString> {
        let mut out = Vec::new();
        for (flag, value) in &self.0 {
            out.push(OsString::from(flag));
            if let Some(value) = value {
                out.push(value.clone());
            }
        }
        out
    }

    /// `trainmem estimate --a 1 --b`, for the report.
    pub fn command(&self) -> String {
        let mut words = vec!["trainmem estimate".to_string()];
        for argument in self.words() {
            let text = argument.to_string_lossy().into_owned();
            if text.is_empty()
                || text.contains(|c: char| c.is_whitespace() || "'\"$`\\|&;<>()*?".contains(c))
            {
                words.push(format!("'{}'", text.replace('\'', r"'\''")));
            } else {
                words.push(text);
            }
        }
        words.join(" ")
    }

    /// The typed request these settings make: their JSON form (each flag's
    /// long name a key, a switch `true`, a repeated flag a list) read by
    /// [`EstimateRequest::from_door`] as the command line spells its
    /// fields. `--model` stays the path or name it was given, bytes and all.
    pub fn request(&self) -> Result<EstimateRequest> {
        let mut object = Map::new();
        let mut model = None;
        for (flag, value) in &self.0 {
            if flag == "--model" {
                model = value.clone();
                continue;
            }
            let key = flag.trim_start_matches("--").to_string();
            let value = value.as_ref().map_or(Value::Bool(true), |v| {
                Value::String(v.to_string_lossy().into_owned())
            });
            if REPEATABLE.contains(&flag.as_str()) {
                match object
                    .entry(key)
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(items) => items.push(value),
                    other => *other = Value::Array(vec![value]),
                }
            } else {
                object.insert(key, value);
            }
        }
        let mut request = EstimateRequest::from_door(&object, Door::CommandLine)?;
        if let Some(model) = model {
            request.model = Some(ModelSource::Path(model));
        }
        Ok(request)
    }
}
