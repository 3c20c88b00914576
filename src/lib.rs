//! trainmem: how much memory training a model takes, piece by piece.
//!
//! Training memory is a sum: weights + master weights + gradients + optimizer
//! states + activations. The gradient-and-optimizer slice alone is
//! M = P x V x B (parameters x values per parameter x bytes per value).
//!
//! ```
//! use trainmem::{Model, Optimizer, Precision, Setup, estimate};
//!
//! let model = Model::flat("7B".parse()?);
//! let setup = Setup::new(Optimizer::find("adam")?, *Precision::find("fp32")?);
//! let e = estimate(&model, &setup)?;
//! assert_eq!(e.memory.total.0, 112_000_000_000); // 4 copies x 4 bytes x 7B
//! assert_eq!(e.gradient_optimizer_slice.bytes.0, 84_000_000_000); // 7B x 3 x 4 B
//! # Ok::<(), trainmem::Error>(())
//! ```

pub mod activation;
pub mod advisor;
pub mod architecture;
pub mod catalogue;
pub mod checkpoint;
#[cfg(feature = "cli")]
pub mod cli;
pub mod device;
pub mod dtype;
pub mod error;
pub mod estimate;
pub mod finetune;
pub mod format;
pub mod input;
pub mod launch;
pub mod model;
pub mod optimizer;
pub mod parallel;
pub mod plan;
pub mod precision;
pub mod render;
pub mod request;
#[cfg(feature = "serve")]
pub mod serve;
pub mod step_time;
pub mod timeline;
pub mod units;

pub use device::DeviceSpec;
pub use dtype::DType;
pub use error::{Error, Result};
pub use estimate::{Capacity, Comparison, Estimate, Memory, Setup, estimate, max_parameters};
pub use model::{Model, Role, Shape, Tensor};
pub use optimizer::Optimizer;
pub use precision::Precision;
pub use units::{Bytes, Count};
