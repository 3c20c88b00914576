//! What a BERT-style encoder saves outside its layers: its embeddings (ids,
//! token types, positions computed from the ids, the embedding LayerNorm
//! and dropout) and the head and loss of its task.
//!
//! transformers' encoder heads (`BertOnlyMLMHead`, `BertPooler` with
//! `BertForSequenceClassification`'s `classifier`,
//! `RobertaClassificationHead`, `BertForTokenClassification`'s
//! `classifier`) end in `CrossEntropyLoss` over the logits in the model
//! dtype: `log_softmax` saves its result in that dtype (no fp32 copy as in
//! the causal LMs' `ForCausalLMLoss`), `nll_loss` the labels (int64) and a
//! scalar `total_weight`. Every formula was read off the saved tensors of
//! `tools/measure_activations.py` (the `bert__*` and `roberta__*` fixtures).

use super::kernels::Kernels;
use super::loss::LossPhase;
use super::mlp;
use super::norms::{self, FP32, NormSite};
use super::parallel::Rank;
use super::tally::Tally;
use crate::architecture::{Dimensions, EncoderHead, EncoderParts, NormKind};
use crate::error::Result;
use crate::units::Bytes;

/// Bytes of an int64 index.
const INT64: u64 = 8;

/// Tensors of the logits' size a cross-entropy backward allocates while the
/// saved log-probabilities are alive: the gradient of the log-probabilities
/// (`nll_loss_backward`) and of the logits (`_log_softmax_backward_data`).
const LOSS_BACKWARD_COPIES: u64 = 2;

/// The embeddings: the input ids `INT64·T`; the token-type ids, `INT64·S`
/// gathered from BERT's buffer or `INT64·T` in RoBERTa; RoBERTa's position
/// ids `INT64·T`; the LayerNorm over the sum (`P·T·h` and its statistics);
/// the dropout mask.
pub fn embeddings(
    rank: &Rank,
    dims: &Dimensions,
    encoder: &EncoderParts,
    kernels: &Kernels,
) -> Result<Bytes> {
    let (t, p, h) = (rank.sequence_tokens, rank.element, rank.hidden);
    let mut saved = Tally::new();
    if encoder.pixels > 0 {
        // ViT: the patch convolution saves its input, the pixels in the
        // model dtype (`ViTPatchEmbeddings` casts them to the weights');
        // the CLS token's `cat` and the position embeddings' add save
        // nothing.
        saved.tensor(&[p, rank.batch, encoder.pixels])?;
        // CLIP's `pre_layrnorm` over the embeddings.
        if encoder.pixels_norm {
            saved.add(layer_norm(rank, t, kernels)?)?;
        }
        return Ok(saved.bytes());
    }
    saved.tensor(&[INT64, rank.tokens])?;
    saved.tensor(&[
        INT64,
        if encoder.token_types_per_token {
            rank.tokens
        } else {
            rank.seq
        },
    ])?;
    saved.tensor_if(encoder.positions_from_ids, &[INT64, rank.tokens])?;
    saved.add(layer_norm(rank, t, kernels)?)?;
    saved.tensor_if(
        dims.dropout.embedding,
        &[kernels.dropout_mask.bytes(p), t, h],
    )?;
    Ok(saved.bytes())
}

/// A LayerNorm over `rows` hidden vectors: its input and statistics.
fn layer_norm(rank: &Rank, rows: u64, kernels: &Kernels) -> Result<Bytes> {
    norms::saved(
        NormSite {
            kind: NormKind::LayerNorm,
            width: rank.hidden,
            rows,
            element: rank.element,
            frozen: false,
        },
        kernels.layer_norm_stats,
    )
}

/// What the head saves between the last layer and the logits.
///
/// * masked-LM: the transform's dense input (the last hidden state)
///   `P·T·h`, GELU's input `P·T·h` (four tensors for `NewGELUActivation`),
///   the LayerNorm's input and statistics,
///   the decoder's input `P·T·h`;
/// * BERT's pooled classifier: the pooler's dense reads `hidden[:, 0]`, a
///   view that keeps the whole last hidden state `P·T·h`; tanh's result
///   `P·B·h`; with dropout its mask and the classifier's input `P·B·h`;
/// * RoBERTa's classification head: dropout on the first token (its mask
///   and result `P·B·h`, else the view keeps `P·T·h`), tanh's result
///   `P·B·h`, the second dropout's mask and result;
/// * token classification: with dropout its mask and the classifier's
///   input `P·T·h`, else the last hidden state itself;
/// * ViT's image classifier: the final LayerNorm's input and statistics,
///   and its output `P·T·h`, kept by the classifier's view of the CLS
///   token (the `vit__*` fixtures).
pub fn head(rank: &Rank, encoder: &EncoderParts, kernels: &Kernels, tied: bool) -> Result<Bytes> {
    let (t, b, p, h) = (rank.sequence_tokens, rank.batch, rank.element, rank.hidden);
    let mask = kernels.dropout_mask.bytes(p);
    let mut saved = Tally::new();
    // A dropout over `rows` vectors keeps its mask and hands on a new tensor.
    let dropped = |saved: &mut Tally, dropout: bool, rows: u64| -> Result<()> {
        saved.tensor_if(dropout, &[mask, rows, h])?;
        saved.tensor_if(dropout, &[p, rows, h])
    };
    match encoder.head {
        EncoderHead::MaskedLm => {
            // The dense's and the decoder's inputs, and what the activation saves.
            let activation = mlp::intermediates(encoder.head_activation);
            saved.tensor(&[2 + activation, p, t, h])?;
            saved.add(layer_norm(rank, t, kernels)?)?;
            // The decoder is tied to the word embeddings.
            saved.add(super::loss::tied_weight_cast(rank, tied)?)?;
        }
        EncoderHead::PooledClassifier { dropout, .. } => {
            saved.tensor(&[p, t, h])?;
            saved.tensor(&[p, b, h])?;
            dropped(&mut saved, dropout, b)?;
        }
        EncoderHead::DenseClassifier { dropout, .. } => {
            if dropout {
                dropped(&mut saved, true, b)?;
            } else {
                saved.tensor(&[p, t, h])?;
            }
            saved.tensor(&[p, b, h])?;
            dropped(&mut saved, dropout, b)?;
        }
        EncoderHead::TokenClassifier { dropout, .. } => {
            if dropout {
                dropped(&mut saved, true, t)?;
            } else {
                saved.tensor(&[p, t, h])?;
            }
        }
        EncoderHead::MeanPooledClassifier { .. } => {
            // The classifier's input, the mean of the patch tokens.
            saved.tensor(&[p, b, h])?;
        }
        EncoderHead::ImageClassifier { .. } => {
            // The final LayerNorm, and its output kept whole by the
            // classifier's view of the CLS token.
            saved.add(layer_norm(rank, t, kernels)?)?;
            saved.tensor(&[p, t, h])?;
        }
    }
    Ok(saved.bytes())
}

/// What the batch holds beside the saved tensors: a vision model's pixels
/// arrive in fp32 (the image processor's output) and, in a half compute
/// dtype, stay referenced by the batch through the step beside the cast its
/// patch embedding saves (in fp32 they are that saved input itself). The
/// `vit-tiny__bf16__*` CPU fixtures' `inputs`: their steps were 2.0-2.3%
/// low without it.
pub fn batch_inputs(rank: &Rank, encoder: &EncoderParts) -> Result<Bytes> {
    let mut tally = Tally::new();
    tally.tensor_if(
        encoder.pixels > 0 && rank.element != FP32,
        &[FP32, rank.batch, encoder.pixels],
    )?;
    Ok(tally.bytes())
}

/// The logits and the cross-entropy: logits `P·rows·width` (every token
/// over the vocabulary for masked-LM, every sequence or token over the
/// labels for the classifiers), `log_softmax`'s result of the same size,
/// the labels `INT64·rows` and `total_weight` `P`; in backward, beside the
/// saved log-probabilities, `nll_loss`'s gradient of them and
/// `log_softmax`'s gradient of the logits ([`LOSS_BACKWARD_COPIES`]; the
/// measured step's peak for masked-LM), then the logits' gradient alone
/// while the head runs backward.
///
/// Under autocast the cross-entropy runs in fp32 on both devices (CPU's
/// fp32 list has `cross_entropy_loss`, CUDA's `log_softmax` and
/// `nll_loss`): an fp32 copy of the logits while `log_softmax` runs, its
/// fp32 result saved, fp32 gradients (the `__autocast` and
/// `__cuda-autocast` BERT fixtures).
pub fn phase(rank: &Rank, encoder: &EncoderParts, autocast: bool) -> Result<LossPhase> {
    let p = rank.element;
    let q = if autocast { FP32 } else { p };
    let (rows, width) = match encoder.head {
        EncoderHead::MaskedLm => (rank.tokens, rank.vocab),
        EncoderHead::PooledClassifier { labels, .. }
        | EncoderHead::DenseClassifier { labels, .. }
        | EncoderHead::ImageClassifier { labels }
        | EncoderHead::MeanPooledClassifier { labels } => (rank.batch, labels),
        EncoderHead::TokenClassifier { labels, .. } => (rank.tokens, labels),
    };
    let mut logits = Tally::new();
    logits.tensor(&[p, rows, width])?;
    let logits = logits.bytes();
    let mut upcast = Tally::new();
    upcast.tensor_if(q != p, &[q, rows, width])?;
    let mut saved = Tally::new();
    saved.tensor(&[q, rows, width])?;
    saved.tensor(&[INT64, rows])?;
    saved.tensor(&[q])?;
    let mut backward = Tally::new();
    backward.tensor(&[LOSS_BACKWARD_COPIES, q, rows, width])?;
    Ok(LossPhase {
        logits,
        upcast: upcast.bytes(),
        saved: saved.bytes(),
        backward: backward.bytes(),
        logits_gradient: logits,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::activation::{Platform, Workload};
    use crate::architecture::{Task, dimensions_for_task};
    use crate::dtype::DType;

    /// A two-layer BERT of hidden 64 over a vocabulary of 1000, in bf16 on
    /// the CPU kernels, B = 2, S = 64 (T = 128).
    fn bert(model_type: &str, task: Task) -> (Rank, EncoderParts, Kernels) {
        let config = json!({
            "model_type": model_type, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
        });
        let dims = dimensions_for_task(&config, Some(task)).unwrap();
        let workload = Workload {
            dtype: DType::Bf16,
            platform: Platform::Cpu,
            ..Workload::new(2, 64)
        };
        let encoder = dims.encoder.unwrap();
        (
            Rank::new(&dims, &workload).unwrap(),
            encoder,
            Platform::Cpu.kernels(),
        )
    }

    #[test]
    fn bert_and_roberta_embeddings_by_hand() {
        let (rank, encoder, kernels) = bert("bert", Task::MaskedLm);
        let dims = dimensions_for_task(&json!({"model_type": "bert"}), None).unwrap();
        // ids 8·128, token types 8·64, LayerNorm 2·128·64 + 2·2·128, mask 2·128·64.
        assert_eq!(
            embeddings(&rank, &dims, &encoder, &kernels).unwrap().0,
            1024 + 512 + 16384 + 512 + 16384
        );
        let (rank, encoder, kernels) = bert("roberta", Task::MaskedLm);
        // Token types and positions per token.
        assert_eq!(
            embeddings(&rank, &dims, &encoder, &kernels).unwrap().0,
            1024 + 1024 + 1024 + 16384 + 512 + 16384
        );
    }

    #[test]
    fn heads_and_losses_by_hand() {
        let (rank, encoder, kernels) = bert("bert", Task::MaskedLm);
        // dense, GELU and decoder inputs, the LayerNorm's input and statistics.
        assert_eq!(
            head(&rank, &encoder, &kernels, true).unwrap().0,
            3 * 16384 + 16384 + 512
        );
        let phase = phase(&rank, &encoder, false).unwrap();
        assert_eq!(phase.logits.0, 2 * 128 * 1000);
        assert_eq!(phase.saved.0, 2 * 128 * 1000 + 8 * 128 + 2);
        assert_eq!(phase.upcast.0, 0);
        // Under autocast the cross-entropy runs on an fp32 copy of the logits.
        let amp = super::phase(&rank, &encoder, true).unwrap();
        assert_eq!(amp.logits.0, 2 * 128 * 1000);
        assert_eq!(amp.upcast.0, 4 * 128 * 1000);
        assert_eq!(amp.saved.0, 4 * 128 * 1000 + 8 * 128 + 4);
        assert_eq!(amp.backward.0, 2 * 4 * 128 * 1000);
        let (rank, encoder, kernels) = bert("bert", Task::SequenceClassification { labels: 3 });
        // The last hidden state kept by the pooler's view, tanh, mask, dropped.
        assert_eq!(
            head(&rank, &encoder, &kernels, true).unwrap().0,
            16384 + 3 * 256
        );
        assert_eq!(phase_of(&rank, &encoder), (12, 12 + 16 + 2));
        let (rank, encoder, kernels) = bert("roberta", Task::SequenceClassification { labels: 3 });
        assert_eq!(head(&rank, &encoder, &kernels, true).unwrap().0, 5 * 256);
        let (rank, encoder, kernels) = bert("bert", Task::TokenClassification { labels: 5 });
        assert_eq!(head(&rank, &encoder, &kernels, true).unwrap().0, 2 * 16384);
        assert_eq!(phase_of(&rank, &encoder), (1280, 1280 + 1024 + 2));
    }

    /// ViT's image classifier, 32 px RGB images in 8 px patches (T = 2·17),
    /// hidden 64, bf16: the `vit__base__bf16__*` fixtures' groups.
    #[test]
    fn vit_pixels_and_image_classifier_by_hand() {
        let config = json!({
            "model_type": "vit", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 32, "patch_size": 8,
        });
        let dims =
            dimensions_for_task(&config, Some(Task::SequenceClassification { labels: 3 })).unwrap();
        let workload = Workload {
            dtype: DType::Bf16,
            platform: Platform::Cpu,
            ..Workload::new(2, 17)
        };
        let rank = Rank::new(&dims, &workload).unwrap();
        let encoder = dims.encoder.unwrap();
        let kernels = Platform::Cpu.kernels();
        // The pixels the patch convolution saves: 2·2·3·32·32; beside them
        // the batch's fp32 pixels 4·2·3·32·32, not saved (none in fp32).
        assert_eq!(
            embeddings(&rank, &dims, &encoder, &kernels).unwrap().0,
            12288
        );
        assert_eq!(batch_inputs(&rank, &encoder).unwrap().0, 24576);
        let fp32 = Rank { element: 4, ..rank };
        assert_eq!(batch_inputs(&fp32, &encoder).unwrap().0, 0);
        // The final LayerNorm's input 2·34·64 and statistics 2·2·34, its
        // output kept by the classifier's view.
        assert_eq!(
            head(&rank, &encoder, &kernels, true).unwrap().0,
            4352 + 136 + 4352
        );
        // Logits 2·2·3; log-probabilities, labels 8·2 and total_weight.
        assert_eq!(phase_of(&rank, &encoder), (12, 12 + 16 + 2));
    }

    fn phase_of(rank: &Rank, encoder: &EncoderParts) -> (u64, u64) {
        let phase = phase(rank, encoder, false).unwrap();
        (phase.logits.0, phase.saved.0)
    }
}
