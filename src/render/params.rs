//! `trainmem params` and `trainmem models`: parameter inventories.

use serde::Serialize;

use crate::architecture::Task;

use super::{Format, Table, escape, json};
use crate::error::Result;
use crate::model::{CheckpointSummary, Model, RoleCount, Tensor};
use crate::units::{ByteUnit, Bytes, Count, UnitSystem, format_percent};

#[derive(Serialize)]
struct ParamsJson<'a> {
    model: &'a str,
    source: &'a str,
    model_type: Option<&'a str>,
    task: Option<Task>,
    shapes_known: bool,
    parameters: Parameters,
    roles: Vec<RoleCount>,
    checkpoint: Option<&'a CheckpointSummary>,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    tensors: Option<Vec<TensorJson<'a>>>,
}

#[derive(Serialize)]
struct Parameters {
    total: Count,
    trainable: Count,
}

#[derive(Serialize)]
struct TensorJson<'a> {
    #[serde(flatten)]
    tensor: &'a Tensor,
    parameters: Count,
}

/// The inventory of one model, grouped by role; with `tensors`, every tensor.
pub fn params(model: &Model, format: Format, tensors: bool) -> Result<String> {
    let total = model.total_parameters()?;
    let roles = model.by_role()?;
    let mut table = Table::new(&["role", ">tensors", ">parameters", ">share"]);
    for count in &roles {
        table.row([
            count.role.name().replace('_', " "),
            count.tensors.to_string(),
            count.parameters.grouped(),
            format_percent(count.parameters.0, total.0),
        ]);
    }
    table.row([
        "total".to_string(),
        model.tensors.len().to_string(),
        total.grouped(),
        "100%".to_string(),
    ]);
    let mut listing = Table::new(&["tensor", "shape", "role", "dtype", ">parameters"]);
    for tensor in &model.tensors {
        listing.row([
            tensor.name.clone(),
            format!("{:?}", tensor.shape.dims()),
            tensor.role.name().to_string(),
            tensor
                .stored_dtype
                .map_or("-".to_string(), |d| d.to_string()),
            tensor.shape.elements().grouped(),
        ]);
    }
    Ok(match format {
        Format::Json => json(&ParamsJson {
            model: &model.name,
            source: &model.source,
            model_type: model.model_type.as_deref(),
            task: model.task,
            shapes_known: model.shapes_known,
            parameters: Parameters {
                total,
                trainable: model.trainable_parameters()?,
            },
            roles,
            checkpoint: model.checkpoint.as_ref(),
            notes: &model.notes,
            tensors: tensors.then(|| {
                model
                    .tensors
                    .iter()
                    .map(|tensor| TensorJson {
                        tensor,
                        parameters: tensor.shape.elements(),
                    })
                    .collect()
            }),
        }),
        Format::Csv => {
            if tensors {
                listing.csv()
            } else {
                table.csv()
            }
        }
        Format::Markdown => {
            let mut out = format!("## {}\n\n{}", heading(model), table.markdown());
            if tensors {
                out += "\n";
                out += &listing.markdown();
            }
            out
        }
        Format::Table => {
            let mut out = format!("{}\n\n{}", heading(model), table.text());
            if let Some(checkpoint) = &model.checkpoint {
                out += &format!("\n  {}\n", checkpoint_line(checkpoint));
            }
            for note in &model.notes {
                out += &format!("  note: {}\n", escape(note));
            }
            if tensors {
                out += "\n";
                out += &listing.text();
            }
            super::wrap::free_text(&out)
        }
    })
}

fn heading(model: &Model) -> String {
    let model_type = model
        .model_type
        .as_deref()
        .map_or(String::new(), |t| format!(", model_type {}", escape(t)));
    format!(
        "trainmem params: {} ({}{model_type}{})",
        escape(&model.name),
        escape(&model.source),
        super::estimate::task_note(model.task)
    )
}

fn checkpoint_line(checkpoint: &CheckpointSummary) -> String {
    let unit = ByteUnit::for_size(checkpoint.data_bytes, UnitSystem::Decimal);
    let dtypes: Vec<String> = checkpoint
        .dtypes
        .iter()
        .map(|(dtype, bytes)| format!("{dtype} {}", bytes.display_in(unit)))
        .collect();
    format!(
        "checkpoint: {} in {} file{} ({} tensors, {} elements; {}): what loading it costs, not what training holds",
        checkpoint.data_bytes.display_in(unit),
        checkpoint.files,
        if checkpoint.files == 1 { "" } else { "s" },
        checkpoint.tensors,
        checkpoint.parameters.grouped(),
        dtypes.join(", ")
    )
}

/// One line of `trainmem models`.
#[derive(Debug, Clone, Serialize)]
pub struct ModelListing {
    /// The preset name.
    pub name: &'static str,
    /// The hub repository its config.json was published in.
    pub hub_id: &'static str,
    /// Its `model_type`.
    pub model_type: Option<String>,
    /// Its exact parameter count.
    pub parameters: Count,
    /// Its parameter tensors.
    pub tensors: usize,
    /// The weights alone in bf16, what inference needs at least.
    pub bf16_weights: Bytes,
}

/// `trainmem models`. The hub ids (up to 51 characters) make the table
/// wider than a 100-column terminal, so the plain table has them only when
/// `verbose`; JSON, Markdown and CSV always do.
pub fn models(listings: &[ModelListing], format: Format, verbose: bool) -> String {
    let with_hub_id = verbose || format != Format::Table;
    let mut headers = vec!["name"];
    if with_hub_id {
        headers.push("hub id");
    }
    headers.extend(["model_type", ">parameters", ">tensors", ">bf16 weights"]);
    let mut table = Table::new(&headers);
    for listing in listings {
        let mut row = vec![listing.name.to_string()];
        if with_hub_id {
            row.push(listing.hub_id.to_string());
        }
        row.extend([
            listing.model_type.clone().unwrap_or_default(),
            listing.parameters.grouped(),
            listing.tensors.to_string(),
            listing.bf16_weights.display(UnitSystem::Decimal),
        ]);
        table.row(row);
    }
    match format {
        Format::Json => json(listings),
        Format::Csv => table.csv(),
        Format::Markdown => table.markdown(),
        Format::Table if verbose => table.text(),
        Format::Table => format!(
            "{}\n  hub ids: `trainmem models --verbose`, or --format json|markdown|csv\n",
            table.text()
        ),
    }
}
