//! The resolution sequence of a priced run, written once: what
//! [`EstimateRequest::resolve`](super::EstimateRequest::resolve), `fit` and
//! `compare` each did in their own copy. After the model is built and the
//! setup holds the training and parallel flags, in this order: a vision
//! model's images make its workload (the note said on the model), the
//! images per sample go on the model, the workload's activations and step
//! options on the setup, a bare count's architecture flags on the model,
//! then fine-tuning (LoRA dropout on the setup, adapters and quantization
//! on the model).

use super::flags::{FineTuneArgs, ParallelArgs, WorkloadArgs};
use super::resolve;
use crate::error::Result;
use crate::estimate::Setup;
use crate::model::Model;

/// How a command's sequence differs from a plain estimate's.
pub struct Steps<'a> {
    /// The workload as the setup takes it, from the workload the images
    /// made: what a search varies gets its placeholder here (`fit`'s 1);
    /// a plain run takes it as it is.
    pub searched: &'a dyn Fn(&WorkloadArgs) -> WorkloadArgs,
    /// Which models take the architecture of `--layers --hidden ...`:
    /// every model for one run, those without known shapes for `compare`.
    pub dimensions_for: fn(&Model) -> bool,
}

impl Steps<'_> {
    /// The sequence of `trainmem estimate`.
    pub const ESTIMATE: Steps<'static> = Steps {
        searched: &|workload| workload.clone(),
        dimensions_for: |_| true,
    };
}

/// The models and `setup` resolved by the sequence (see the module's
/// documentation), and the workload the images made (before `searched`).
/// The images change the workload of a lone model only; `finetune` is
/// `None` for a command without fine-tuning flags.
pub fn resolve_run(
    models: Vec<Model>,
    setup: &mut Setup,
    workload: &WorkloadArgs,
    parallel: &ParallelArgs,
    finetune: Option<&FineTuneArgs>,
    steps: &Steps<'_>,
) -> Result<(Vec<Model>, WorkloadArgs)> {
    let mut models = models;
    let imaged = match models.as_mut_slice() {
        [model] => {
            let (imaged, note) = resolve::image_workload(workload, model)?;
            model.notes.extend(note);
            imaged
        }
        _ => workload.clone(),
    };
    let mut models: Vec<Model> = models
        .into_iter()
        .map(|model| resolve::with_images(model, workload))
        .collect();
    resolve::apply_workload(setup, &(steps.searched)(&imaged), parallel)?;
    if let Some(dimensions) = resolve::dimensions(&imaged)? {
        for model in models.iter_mut().filter(|m| (steps.dimensions_for)(m)) {
            model.dimensions = Some(dimensions.clone());
        }
    }
    if let Some(args) = finetune {
        let finetune = resolve::finetune(args, workload)?;
        resolve::apply_lora_dropout(setup, &finetune);
        models = models
            .into_iter()
            .map(|model| finetune.apply(model))
            .collect::<Result<_>>()?;
    }
    Ok((models, imaged))
}

/// What the sequence does to a lone model under [`Steps::ESTIMATE`], with
/// the model itself left out: the image note, the images per sample, the
/// architecture flags and the fine-tuning. Two runs of one model source
/// with equal `ModelSteps` resolve to equal models, so a caller pricing
/// many changes of one request (the advisor) builds each distinct model
/// once ([`ModelSteps::build`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSteps {
    note: Option<String>,
    images: Option<u64>,
    dimensions: Option<crate::model::Dimensions>,
    finetune: Option<crate::finetune::FineTune>,
}

impl ModelSteps {
    /// The lone model `model` after these steps: what [`resolve_run`]
    /// returns for `vec![model.clone()]`.
    pub fn build(&self, model: &Model) -> Result<Model> {
        self.clone().apply(model.clone())
    }

    /// [`ModelSteps::build`] of a model given up.
    pub fn apply(self, mut model: Model) -> Result<Model> {
        model.notes.extend(self.note);
        let mut model = resolve::with_images_per_sample(model, self.images);
        if let Some(dimensions) = self.dimensions {
            model.dimensions = Some(dimensions);
        }
        match &self.finetune {
            Some(finetune) => finetune.apply(model),
            None => Ok(model),
        }
    }
}

/// [`resolve_run`] of the lone `model` under [`Steps::ESTIMATE`], in the
/// same order: `setup` is resolved, and the model's steps are returned for
/// [`ModelSteps::build`] instead of being applied to a copy of the model.
pub fn resolve_lone(
    model: &Model,
    setup: &mut Setup,
    workload: &WorkloadArgs,
    parallel: &ParallelArgs,
    finetune: Option<&FineTuneArgs>,
) -> Result<ModelSteps> {
    let (imaged, note) = resolve::image_workload(workload, model)?;
    resolve::apply_workload(setup, &imaged, parallel)?;
    let dimensions = resolve::dimensions(&imaged)?;
    let finetune = finetune
        .map(|args| resolve::finetune(args, workload))
        .transpose()?;
    if let Some(finetune) = &finetune {
        resolve::apply_lora_dropout(setup, finetune);
    }
    Ok(ModelSteps {
        note,
        images: workload.images,
        dimensions,
        finetune,
    })
}
