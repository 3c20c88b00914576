//! Accelerators: a name and a byte count, with where the figure comes from.

mod catalogue;

pub use catalogue::DEVICES;

use serde::Serialize;

use crate::catalogue::Named;
use crate::error::Result;
use crate::units::Bytes;

/// One accelerator of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeviceSpec {
    /// The name used with `--device`: `h100-80gb`.
    pub name: &'static str,
    /// Other accepted names: `h100`.
    pub aliases: &'static [&'static str],
    /// Who makes it.
    pub vendor: &'static str,
    /// The vendor's product name.
    pub product: &'static str,
    /// HBM3, GDDR6X, ...
    pub memory_type: &'static str,
    /// Total memory as the driver reports it, in bytes.
    pub bytes: u64,
    /// Where the figure comes from.
    pub source: &'static str,
}

impl DeviceSpec {
    /// Looks a device up by name or alias.
    pub fn find(name: &str) -> Result<&'static DeviceSpec> {
        crate::catalogue::find("device", name, DEVICES)
    }

    /// Its memory.
    pub fn memory(&self) -> Bytes {
        Bytes(self.bytes)
    }
}

impl Named for DeviceSpec {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
}
