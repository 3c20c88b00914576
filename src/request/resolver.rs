//! One request resolved under many sets of changes, each distinct model
//! built once: what the advisor's search prices.
//!
//! [`EstimateRequest::resolve`] builds the model from its source, applies
//! its LoRA and quantization, and reads its names again in `estimate`, for
//! every set of changes; yet a change only reaches the model through the
//! fine-tuning flags (LoRA, QLoRA) and, for a ViT, the micro-batch's note.
//! A [`Resolver`] builds the source's model once, then one
//! [`PreparedModel`] (the model with its names and layout read) per
//! distinct [`ModelSteps`], shared by every set that makes the same model.
//! The setup is resolved for each set as `resolve` resolves it, in the same
//! order, so each estimate and each refusal is the one `resolve` then
//! `estimate` give (a test below checks both).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::run::ModelSteps;
use super::{EstimateRequest, RunFlags, finish_setup, model_of, resolve_flags};
use crate::error::Result;
use crate::estimate::{PreparedModel, Setup};
use crate::model::Model;

/// A model being built, or built, for one [`ModelSteps`].
type Slot = Arc<OnceLock<Result<Arc<PreparedModel>>>>;

/// The most distinct models kept: a search makes one per fine-tuning
/// (none, LoRA, QLoRA), times a ViT's micro-batches.
const MOST_MODELS: usize = 64;

/// Resolves flags of one request's model source, each model built once.
pub struct Resolver<'r> {
    request: &'r EstimateRequest,
    /// The model of the request's source (before its steps), or why none.
    source: Result<Model>,
    models: Mutex<Vec<(ModelSteps, Slot)>>,
    built: AtomicU64,
}

impl<'r> Resolver<'r> {
    /// A resolver of `request`'s flags and their changes; its model source
    /// is read now.
    pub fn new(request: &'r EstimateRequest) -> Resolver<'r> {
        Resolver {
            request,
            source: model_of(
                request.params.as_deref(),
                request.model.as_ref(),
                &request.flags.workload,
            ),
            models: Mutex::new(Vec::new()),
            built: AtomicU64::new(0),
        }
    }

    /// The prepared model and the setup of the request with `flags`
    /// instead of its own: `EstimateRequest { flags, ..request }.resolve()`,
    /// the model shared with every earlier call that made the same one.
    pub fn resolve(&self, flags: &RunFlags) -> Result<(Arc<PreparedModel>, Setup)> {
        let own = &self.request.flags.workload;
        // The source's model is built for the request's task, image size
        // and implementation (litgpt's separate head); no change sets
        // them, but flags that do get their own.
        let fresh;
        let source = if flags.workload.task == own.task
            && flags.workload.image_size == own.image_size
            && flags.workload.implementation == own.implementation
        {
            self.source.as_ref().map_err(Clone::clone)?
        } else {
            fresh = model_of(
                self.request.params.as_deref(),
                self.request.model.as_ref(),
                &flags.workload,
            )?;
            &fresh
        };
        let (mut setup, steps, _, _) = resolve_flags(flags, source)?;
        let prepared = self.prepared(source, steps)?;
        finish_setup(flags, &mut setup)?;
        Ok((prepared, setup))
    }

    /// The request whose flags are changed.
    pub fn request(&self) -> &'r EstimateRequest {
        self.request
    }

    /// The models built so far: one per distinct [`ModelSteps`] asked for.
    pub fn models_built(&self) -> u64 {
        self.built.load(Ordering::Relaxed)
    }

    /// The model `steps` make of `source`, built on first asking (a
    /// second thread asking for it meanwhile waits for it).
    fn prepared(&self, source: &Model, steps: ModelSteps) -> Result<Arc<PreparedModel>> {
        let slot: Slot = {
            let Ok(mut models) = self.models.lock() else {
                return self.build(source, &steps);
            };
            match models.iter().find(|(kept, _)| *kept == steps) {
                Some((_, slot)) => Arc::clone(slot),
                None => {
                    if models.len() >= MOST_MODELS {
                        models.remove(0);
                    }
                    let slot = Slot::default();
                    models.push((steps.clone(), Arc::clone(&slot)));
                    slot
                }
            }
        };
        slot.get_or_init(|| self.build(source, &steps)).clone()
    }

    fn build(&self, source: &Model, steps: &ModelSteps) -> Result<Arc<PreparedModel>> {
        self.built.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(PreparedModel::new(steps.build(source)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::{Capacity, estimate};
    use crate::request::Change;
    use crate::request::change::apply_all;
    use crate::units::Bytes;

    fn request(value: serde_json::Value) -> EstimateRequest {
        EstimateRequest::from_json(value.as_object().unwrap()).unwrap()
    }

    /// Each set of changes resolved and priced by the resolver gives what
    /// `resolve` then `estimate` give, refusals included; the sets that
    /// keep the fine-tuning share one model, and the setups that differ
    /// in their workload alone share one per-stage pass.
    #[test]
    fn a_resolver_resolves_as_resolve_does() {
        let base = request(
            serde_json::json!({"model": "llama-3.2-1b", "micro-batch": 4,
            "seq-len": 1024, "optimizer": "adamw", "precision": "mixed-bf16",
            "device": "t4-16gb"}),
        );
        let resolver = Resolver::new(&base);
        let sets = [
            vec![],
            vec![Change::Recompute],
            vec![Change::FusedLoss, Change::SelectiveRecompute],
            vec![Change::Lora],
            vec![Change::Lora, Change::Recompute],
            vec![Change::Qlora { with_lora: false }],
            vec![Change::Gpus { gpus: 4 }, Change::Recompute],
            vec![Change::Gpus { gpus: 4 }],
            vec![Change::OptimizerInBackward, Change::PureBf16],
            vec![Change::MicroBatch {
                micro_batch: 1,
                accumulation: 4,
            }],
            // Priced or refused, as `resolve` and `estimate` say.
            vec![Change::PagedOptimizer8bit, Change::OffloadParameters],
            vec![Change::Lora, Change::FusedLoss],
        ];
        for set in &sets {
            let mut changed = base.clone();
            apply_all(set, &mut changed.flags);
            let expected = changed
                .resolve()
                .and_then(|(model, setup, _, _)| estimate(&model, &setup));
            let got = resolver
                .resolve(&changed.flags)
                .and_then(|(prepared, setup)| prepared.estimate(&setup));
            assert_eq!(got, expected, "{set:?}");
        }
        // No LoRA, LoRA, QLoRA.
        assert_eq!(resolver.models_built(), 3);
        // The run's own model, priced under eight sets, where `estimate`
        // runs eleven per-stage passes (two under a parallel layout: the
        // single-device method and the layout): one for the recipe as
        // given (shared by four sets), the four-GPU layout and its
        // method (shared by two), the bf16 in-backward recipe, the paged
        // offload and its method; at most six.
        let (own, _) = resolver.resolve(&base.flags).unwrap();
        assert!(own.stage_passes() <= 6, "{}", own.stage_passes());
    }

    /// `may_fit` says no only when the estimate does not fit: at
    /// capacities around the peak and the reserved memory of each set.
    #[test]
    fn may_fit_refuses_only_what_does_not_fit() {
        let base = request(
            serde_json::json!({"model": "qwen2.5-0.5b", "micro-batch": 2,
            "seq-len": 2048, "optimizer": "adamw", "precision": "mixed-bf16",
            "capacity": "8GB"}),
        );
        let resolver = Resolver::new(&base);
        let sets = [
            vec![],
            vec![Change::Recompute],
            vec![Change::OffloadActivations],
            vec![Change::Lora, Change::ChunkedLoss],
            vec![Change::Gpus { gpus: 2 }],
            vec![Change::Gpus { gpus: 2 }, Change::OffloadOptimizer],
            vec![Change::OptimizerInBackward, Change::Optimizer8bit],
        ];
        for set in &sets {
            let mut changed = base.clone();
            apply_all(set, &mut changed.flags);
            let (model, setup) = resolver.resolve(&changed.flags).unwrap();
            let e = model.estimate(&setup).unwrap();
            assert!(e.memory.reserved >= e.memory.peak, "{set:?}");
            let (peak, reserved) = (e.memory.peak.0, e.memory.reserved.0);
            for bytes in [peak - 1, peak, reserved, reserved + 1] {
                let at = Setup {
                    capacity: Some(Capacity {
                        bytes: Bytes(bytes),
                        label: "test".to_string(),
                    }),
                    ..setup.clone()
                };
                let fits = model.estimate(&at).unwrap().fits == Some(true);
                let may = model.may_fit(&at);
                assert!(may || !fits, "{set:?} at {bytes}");
                assert_eq!(
                    may,
                    peak + crate::estimate::RESERVED_MARGIN.0 <= bytes,
                    "{set:?} at {bytes}"
                );
            }
        }
    }

    /// A model source that cannot be read is refused for every set, as
    /// `resolve` refuses it.
    #[test]
    fn a_bad_source_is_refused_each_time() {
        let bad = EstimateRequest::with_model(
            Some(crate::request::ModelSource::Preset(
                "no-such-preset".to_string(),
            )),
            None,
        )
        .unwrap();
        let resolver = Resolver::new(&bad);
        let expected = bad.resolve().map(|_| ()).unwrap_err();
        for _ in 0..2 {
            let got = resolver.resolve(&bad.flags).map(|_| ()).unwrap_err();
            assert_eq!(got, expected);
        }
        assert_eq!(resolver.models_built(), 0);
    }
}
