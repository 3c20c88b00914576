//! LoRA adapters exactly as peft creates them (`peft/tuners/lora/layer.py`):
//! for each targeted linear (in → out), `lora_A` of shape [r, in] and
//! `lora_B` of shape [out, r], plus a `lora_magnitude_vector` of [out] with
//! DoRA; the base is frozen. peft keeps adapters in fp32 under a half-precision
//! base (`autocast_adapter_dtype=True`).

use std::collections::BTreeSet;

use super::Quantization;
use super::experts::parameter_targets;
use super::linear::{linears, matches, module_of};
use crate::activation::LoraDropout;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::model::{Model, Role, Shape, Tensor};

/// A LoRA configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lora {
    /// The rank r.
    pub rank: u64,
    /// Which linear modules get adapters.
    pub targets: Targets,
    /// Which biases train.
    pub bias: Bias,
    /// Modules trained in full beside the adapters (peft's `modules_to_save`:
    /// a trainable copy next to the frozen original).
    pub modules_to_save: Vec<String>,
    /// Weight-decomposed LoRA (DoRA): one magnitude per output feature.
    pub dora: bool,
    /// peft's `lora_dropout` before each adapter (`--lora-dropout`).
    pub dropout: LoraDropout,
    /// The dtype the adapters are kept and trained in (`--lora-dtype`): fp32
    /// as peft keeps them (`autocast_adapter_dtype=True`), or bf16/fp16 as
    /// torchtune and litgpt do.
    pub dtype: DType,
    /// Whether `--quantize` stores the output head quantized too. peft's
    /// QLoRA (transformers' `BitsAndBytesConfig`) skips `lm_head`
    /// (`llm_int8_skip_modules` defaults to the output embedding); litgpt's
    /// (Lightning Fabric's `BitsandbytesPrecision(quantize[4:], dtype)`,
    /// `litgpt/finetune/lora.py` line 149, no `ignore_modules`) replaces
    /// every `nn.Linear`, the head included
    /// (`lightning/fabric/plugins/precision/bitsandbytes.py`
    /// `_convert_layers`, lines 425-448).
    pub quantize_head: bool,
    /// Whether `--quantize` makes the token embedding train. litgpt's
    /// `finetune/lora.py` (0.5.0 and later; 0.5.13 lines 218-229), after
    /// `mark_only_lora_as_trainable`, replaces `transformer.wte` with
    /// bitsandbytes' `StableEmbedding` when the precision is
    /// `BitsandbytesPrecision`, copying the weights into a new parameter
    /// that requires grad. It builds the optimizer over
    /// `model.parameters()` first (line 219), so the optimizer holds the
    /// old, frozen embedding and not the new one: the step keeps the old
    /// weight (V·h in the compute dtype, `Model::optimizer_only`), and the
    /// new one trains with no optimizer states and a gradient that is never
    /// zeroed (`Tensor::optimized` false: it stays on the device across
    /// steps). The CPU steps (`tools/measure_implementations.py`, fixtures
    /// `*litgpt-qlora*`) run in litgpt's order with torch's AdamW, whose
    /// states for the embedding would have been the same bytes, so they do
    /// not tell the two apart; under `PagedAdamW` (litgpt's optimizer with
    /// `--quantize`, states paged to the host) the device holds V·h·P more,
    /// which is read from the source. (Its `LayerNorm` over the
    /// embeddings, 2·h parameters and one norm's saved tensors, is not
    /// counted.)
    pub stable_embedding: bool,
}

/// The dtypes `--lora-dtype` accepts.
pub const ADAPTER_DTYPES: [DType; 3] = [DType::Fp32, DType::Bf16, DType::Fp16];

/// Reads `--lora-dtype`: fp32, bf16 or fp16.
pub fn adapter_dtype(text: &str) -> Result<DType> {
    DType::from_name(text)
        .ok()
        .filter(|dtype| ADAPTER_DTYPES.contains(dtype))
        .ok_or_else(|| Error::UnknownName {
            kind: "LoRA dtype",
            name: text.to_string(),
            suggestion: None,
            accepted: "fp32 (peft), bf16 (torchtune, litgpt), fp16".to_string(),
        })
}

/// peft's `target_modules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// `all-linear`: every linear module except the output head.
    AllLinear,
    /// Module names, matched as peft does: equal, or ending in `.name`.
    Names(Vec<String>),
}

/// peft's `bias`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bias {
    /// No bias trains.
    None,
    /// Every bias of the model trains.
    All,
    /// The biases of targeted modules train.
    LoraOnly,
}

impl Targets {
    /// Reads `all-linear` or a comma-separated list of module names.
    pub fn parse(text: &str) -> Result<Targets> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all-linear") || text.eq_ignore_ascii_case("all_linear") {
            return Ok(Targets::AllLinear);
        }
        let mut names: Vec<String> = Vec::new();
        for name in text.split(',').map(str::trim) {
            // A set of modules: a name given twice adapts its modules once.
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        // peft reads `all-linear` only as the whole value: in a list it is a
        // module name that matches nothing, and the list loses every linear.
        if names
            .iter()
            .any(|n| n.eq_ignore_ascii_case("all-linear") || n.eq_ignore_ascii_case("all_linear"))
        {
            return Err(Error::InvalidValue {
                what: "--lora-targets",
                value: text.to_string(),
                reason: "`all-linear` stands alone (peft's value for every linear but the output head); to add the head, name the linears, such as `q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head`"
                    .to_string(),
            });
        }
        if names.iter().any(String::is_empty) {
            return Err(Error::InvalidValue {
                what: "--lora-targets",
                value: text.to_string(),
                reason: "give `all-linear` or module names separated by single commas, such as `q_proj,v_proj`"
                    .to_string(),
            });
        }
        Ok(Targets::Names(names))
    }
}

impl Bias {
    /// Reads `none`, `all` or `lora-only`.
    pub fn parse(text: &str) -> Result<Bias> {
        match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "none" => Ok(Bias::None),
            "all" => Ok(Bias::All),
            "lora-only" => Ok(Bias::LoraOnly),
            _ => Err(Error::UnknownName {
                kind: "LoRA bias",
                name: text.to_string(),
                suggestion: None,
                accepted: "none, all, lora-only".to_string(),
            }),
        }
    }
}

impl Lora {
    /// The model with adapters added and its base frozen; with `quantize`,
    /// the base's linear weights (the output head only with
    /// `quantize_head`) stored quantized.
    pub fn apply(&self, mut model: Model, quantize: Option<Quantization>) -> Result<Model> {
        if self.rank == 0 {
            return Err(Error::InvalidValue {
                what: "--lora-rank",
                value: "0".to_string(),
                reason: "the rank must be at least 1".to_string(),
            });
        }
        let layers = linears(&model);
        // A module frozen by --freeze gets no adapter, as LLaMA-Factory's
        // `freeze_vision_tower` keeps LoRA out of the vision tower (peft's
        // `exclude_modules`).
        let frozen = |linear: &&super::Linear| {
            model
                .tensors
                .get(linear.weight)
                .is_some_and(|weight| !weight.trainable)
        };
        let targeted: Vec<_> = layers
            .iter()
            .filter(|l| match &self.targets {
                Targets::AllLinear => !l.output_head,
                Targets::Names(names) => names.iter().any(|n| matches(&l.module, n)),
            })
            .filter(|l| !frozen(l))
            .collect();
        let wrapped = parameter_targets(&model, &self.targets, self.rank, self.dora)?;
        if let (true, true, Targets::Names(names)) =
            (targeted.is_empty(), wrapped.is_empty(), &self.targets)
        {
            let available: BTreeSet<&str> = layers
                .iter()
                .filter_map(|l| l.module.rsplit('.').next())
                .collect();
            return Err(Error::InvalidValue {
                what: "--lora-targets",
                value: names.join(","),
                reason: format!(
                    "matches no linear module of {}; its linear modules are {}",
                    model.name,
                    available.into_iter().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        let targeted_modules: BTreeSet<&str> = targeted.iter().map(|l| l.module.as_str()).collect();

        for tensor in &mut model.tensors {
            // peft moves a targeted linear's own parameters under `base_layer`.
            let module = module_of(&tensor.name);
            if targeted_modules.contains(module) {
                let parameter = &tensor.name[module.len()..];
                tensor.name = format!("{module}.base_layer{parameter}");
            }
            let module = module_of(&tensor.name).trim_end_matches(".base_layer");
            tensor.trainable = match self.bias {
                Bias::All => tensor.name.ends_with(".bias"),
                Bias::LoraOnly => {
                    tensor.name.ends_with(".bias") && targeted_modules.contains(module)
                }
                Bias::None => false,
            };
        }
        if quantize.is_some() && self.stable_embedding {
            let vocab = model.dimensions.as_ref().map(|d| d.vocab);
            if let Some(embedding) = model
                .tensors
                .iter_mut()
                .find(|t| t.role == Role::Embedding && t.shape.dims().first().copied() == vocab)
            {
                // finetune/lora.py builds the optimizer before the swap: it
                // holds the replaced embedding, frozen, and not the new one,
                // whose gradient is never zeroed.
                embedding.trainable = true;
                embedding.optimized = false;
                let replaced = Tensor {
                    name: replaced_embedding_name(&embedding.name),
                    trainable: false,
                    optimized: true,
                    ..embedding.clone()
                };
                model.optimizer_only.push(replaced);
            }
        }
        if let Some(quantization) = quantize {
            for linear in layers
                .iter()
                .filter(|l| !l.output_head || self.quantize_head)
            {
                if let Some(weight) = model.tensors.get_mut(linear.weight) {
                    weight.quantization = Some(quantization);
                    // bitsandbytes stores every quantized linear [out, in],
                    // GPT-2's Conv1D ([in, out]) included.
                    weight.shape = Shape::new(vec![linear.out_features, linear.in_features])?;
                }
            }
        }

        let mut adapters = Vec::new();
        for linear in &targeted {
            let role = model
                .tensors
                .get(linear.weight)
                .map_or(Role::Other, |t| t.role);
            let adapter = |suffix: &str, dims: Vec<u64>| -> Result<Tensor> {
                let mut tensor = Tensor::new(
                    format!("{}.{suffix}", linear.module),
                    Shape::new(dims)?,
                    role,
                );
                tensor.training_dtype = Some(self.dtype);
                Ok(tensor)
            };
            adapters.push(adapter(
                "lora_A.default.weight",
                vec![self.rank, linear.in_features],
            )?);
            adapters.push(adapter(
                "lora_B.default.weight",
                vec![linear.out_features, self.rank],
            )?);
            if self.dora {
                adapters.push(adapter(
                    "lora_magnitude_vector.default.weight",
                    vec![linear.out_features],
                )?);
            }
        }
        for target in &wrapped {
            for (matrix, dims) in [("lora_A", &target.a), ("lora_B", &target.b)] {
                let mut tensor = Tensor::new(
                    format!("{}.{matrix}.default.weight", target.prefix),
                    Shape::new(dims.clone())?,
                    Role::Experts,
                );
                tensor.training_dtype = Some(self.dtype);
                adapters.push(tensor);
            }
        }
        let mut saved: BTreeSet<&str> = BTreeSet::new();
        // A set of modules: `lm_head,lm_head` saves the head once.
        for name in self
            .modules_to_save
            .iter()
            .filter(|n| saved.insert(n.as_str()))
        {
            let copies: Vec<Tensor> = model
                .tensors
                .iter()
                .filter(|t| matches(module_of(&t.name), name))
                .map(|t| {
                    let (module, parameter) = t.name.rsplit_once('.').unwrap_or((&t.name, ""));
                    Tensor {
                        name: format!("{module}.modules_to_save.default.{parameter}"),
                        trainable: true,
                        quantization: None,
                        ..t.clone()
                    }
                })
                .collect();
            let copies = if copies.is_empty() && name == "lm_head" {
                tied_head_copy(&model)
            } else {
                copies
            };
            if copies.is_empty() {
                return Err(Error::InvalidValue {
                    what: "--lora-modules-to-save",
                    value: name.clone(),
                    reason: format!("matches no module of {}", model.name),
                });
            }
            // Two names for one module (`lm_head`, `model.lm_head`) copy it once.
            let new: Vec<Tensor> = copies
                .into_iter()
                .filter(|c| !adapters.iter().any(|a| a.name == c.name))
                .collect();
            adapters.extend(new);
        }
        model.tensors.extend(adapters);
        model.notes.push(format!(
            "LoRA rank {} on {} linear modules{}{}: adapters in {}{}; the base is frozen (weights only)",
            self.rank,
            targeted.len(),
            if wrapped.is_empty() {
                String::new()
            } else {
                format!(" and {} fused MoE parameters", wrapped.len())
            },
            if self.dora { " with DoRA magnitudes" } else { "" },
            self.dtype.name(),
            if self.dtype == DType::Fp32 {
                " as peft keeps them"
            } else {
                " as torchtune and litgpt keep them (no fp32 master copy)"
            },
        ));
        if let Some(note) = rank_note(self.rank, &targeted) {
            model.notes.push(note);
        }
        if self.dropout.is_active() {
            model.notes.push(format!(
                "lora_dropout {}: nn.Dropout before each adapter's lora_A, which then saves its own dropped input and the dropout mask",
                self.dropout.probability()
            ));
        }
        if let Some(quantization) = quantize {
            let library = match quantization {
                Quantization::Nf4Torchao | Quantization::Nf4Torchao01 => "torchao",
                _ => "bitsandbytes",
            };
            let kept = if self.quantize_head {
                "the output head quantized too (Lightning's BitsandbytesPrecision converts every nn.Linear); embeddings and norms stay in the compute dtype"
            } else {
                "the output head, embeddings and norms stay in the compute dtype"
            };
            model.notes.push(format!(
                "base linear weights stored as {library} stores {}; {kept}",
                quantization.describe()
            ));
            if self.stable_embedding {
                model.notes.push("litgpt's QLoRA (0.5.0 and later; --litgpt VERSION) swaps the token embedding for bitsandbytes' StableEmbedding after building the optimizer (finetune/lora.py): the optimizer keeps the replaced embedding (frozen, still on the device) and not the new one, which trains with no optimizer states and a gradient that is never zeroed, so it stays across steps; its LayerNorm (2 x h) is not counted".to_string());
            }
        }
        Ok(model)
    }
}

/// The name of the token embedding litgpt's `StableEmbedding` replaced,
/// which its optimizer still holds: `model.embed_tokens.weight` ->
/// `model.embed_tokens_replaced.weight`.
fn replaced_embedding_name(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((module, parameter)) => format!("{module}_replaced.{parameter}"),
        None => format!("{name}_replaced"),
    }
}

/// A note when the rank exceeds the smaller dimension of adapted linears:
/// their adapter, r x (in + out), is then larger than the layer, in x out,
/// and no longer low-rank (peft accepts any rank, so this is a note, not a
/// refusal).
fn rank_note(rank: u64, targeted: &[&super::Linear]) -> Option<String> {
    let over: Vec<&&super::Linear> = targeted
        .iter()
        .filter(|l| rank > l.in_features.min(l.out_features))
        .collect();
    let first = over.first()?;
    Some(format!(
        "LoRA rank {rank} exceeds the smaller dimension of {} of the {} adapted linear modules (such as `{}`, {} in x {} out): each such adapter, r x (in + out), is larger than the layer it adapts",
        over.len(),
        targeted.len(),
        first.module,
        first.in_features,
        first.out_features,
    ))
}

/// A tied output head has no tensor of its own: peft's copy of `lm_head`
/// copies the token embedding it shares.
fn tied_head_copy(model: &Model) -> Vec<Tensor> {
    let has_head = model
        .tensors
        .iter()
        .any(|t| t.role == Role::OutputHead && t.name.ends_with(".weight"));
    if has_head {
        return Vec::new();
    }
    model
        .tensors
        .iter()
        .find(|t| crate::parallel::is_token_embedding(t))
        .map(|embedding| Tensor {
            name: "lm_head.modules_to_save.default.weight".to_string(),
            role: Role::OutputHead,
            trainable: true,
            ..embedding.clone()
        })
        .into_iter()
        .collect()
}
