//! Raw command-line strings resolved, once, into validated domain values.

use super::args::{CapacityArgs, ReportArgs, TrainingArgs};
use crate::device::DeviceSpec;
use crate::error::{Error, Result};
use crate::estimate::{Capacity, Setup};
use crate::optimizer::{OPTIMIZERS, Optimizer};
use crate::precision::Precision;
use crate::render::Format;
use crate::units::{Bytes, Count, UnitSystem};

/// The optimizer and precision of `--optimizer` and `--precision`.
pub fn setup(training: &TrainingArgs, capacity: Option<Capacity>) -> Result<Setup> {
    let optimizer = Optimizer::find(&training.optimizer)?;
    let precision = *Precision::find(&training.precision)?;
    Ok(Setup::new(optimizer, precision).with_capacity(capacity))
}

/// The capacity of `--capacity SIZE` or `--device NAME`, if either is given.
pub fn capacity(args: &CapacityArgs) -> Result<Option<Capacity>> {
    capacity_of(args.capacity.as_deref(), args.device.as_deref())
}

/// The capacity of a size or a device name.
pub fn capacity_of(size: Option<&str>, device: Option<&str>) -> Result<Option<Capacity>> {
    match (size, device) {
        (Some(size), _) => {
            let bytes: Bytes = size.parse()?;
            Ok(Some(Capacity {
                bytes,
                label: spaced(size),
            }))
        }
        (None, Some(name)) => {
            let device = DeviceSpec::find(name)?;
            Ok(Some(Capacity {
                bytes: device.memory(),
                label: format!("{} ({})", device.name, device.memory()),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// The output format and units; units default to binary when the capacity
/// was written in binary units (`80GiB`).
pub fn report(args: &ReportArgs, capacity_text: Option<&str>) -> Result<(Format, UnitSystem)> {
    let format = Format::parse(&args.output.format)?;
    let units = match args
        .units
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("gb" | "decimal") => UnitSystem::Decimal,
        Some("gib" | "binary") => UnitSystem::Binary,
        Some(_) => {
            return Err(Error::UnknownName {
                kind: "units",
                name: args.units.clone().unwrap_or_default(),
                suggestion: None,
                accepted: "gb (10^9 bytes), gib (2^30 bytes)".to_string(),
            });
        }
        None if capacity_text.is_some_and(|c| c.to_ascii_lowercase().contains("ib")) => {
            UnitSystem::Binary
        }
        None => UnitSystem::Decimal,
    };
    Ok((format, units))
}

/// A comma-separated list of parameter counts.
pub fn counts(list: &str) -> Result<Vec<Count>> {
    split(list, "parameter count list")?
        .into_iter()
        .map(str::parse)
        .collect()
}

/// A comma-separated list of optimizers, or `all`.
pub fn optimizers(list: &str) -> Result<Vec<&'static Optimizer>> {
    if list.trim().eq_ignore_ascii_case("all") {
        return Ok(OPTIMIZERS.iter().collect());
    }
    split(list, "optimizer list")?
        .into_iter()
        .map(Optimizer::find)
        .collect()
}

/// `FROM,TO` of `--swap`.
pub fn swap(pair: &str) -> Result<(&'static Optimizer, &'static Optimizer)> {
    match optimizers(pair)?.as_slice() {
        [from, to] => Ok((from, to)),
        _ => Err(Error::InvalidValue {
            what: "swap",
            value: pair.to_string(),
            reason: "give two optimizers as FROM,TO, such as `adam,sgd-momentum`".to_string(),
        }),
    }
}

fn split<'a>(list: &'a str, what: &'static str) -> Result<Vec<&'a str>> {
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if items.iter().any(|item| item.is_empty()) {
        return Err(Error::InvalidValue {
            what,
            value: list.to_string(),
            reason: "an item is empty; separate items with single commas".to_string(),
        });
    }
    Ok(items)
}

/// `80GB` written as `80 GB`, the way the reports print sizes.
fn spaced(size: &str) -> String {
    let size = size.trim();
    match size.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
        Some(at) => format!("{} {}", size[..at].trim(), size[at..].trim()),
        None => size.to_string(),
    }
}
