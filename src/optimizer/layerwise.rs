//! Layer-wise trust ratios: LAMB's norms.

use super::{GlobalContext, StateTensor};
use crate::error::Result;
use crate::model::Shape;

/// LAMB's norms as pytorch-optimizer's foreach path keeps them: `weight_norm`,
/// `adam_norm` and `trust_ratio` of every tensor are 0-d views into three
/// stacked tensors of [tensors] values in the state dtype, shared by the
/// whole param group (trainmem has one), so they are priced once, here.
///
/// Values: 3 x tensors. The per-tensor path (`foreach=False`) keeps 2 x
/// tensors 0-d tensors and a python float instead.
/// Source: pytorch-optimizer 4.1 `pytorch_optimizer/optimizer/lamb.py`,
/// `Lamb._step_foreach` (`torch.stack(torch._foreach_norm(...))`).
pub fn lamb_norms(context: &GlobalContext) -> Result<Vec<StateTensor>> {
    if context.tensors == 0 {
        return Ok(Vec::new());
    }
    let stacked = Shape::vector(context.tensors as u64);
    Ok(["weight_norm", "adam_norm", "trust_ratio"]
        .into_iter()
        .map(|name| StateTensor::device(name, stacked.clone(), context.dtype))
        .collect())
}
