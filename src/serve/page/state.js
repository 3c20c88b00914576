"use strict";
// The page's controls (each one a flag of `trainmem estimate`), the pieces
// of memory it draws, and the state it keeps between answers.

// Every control is a flag of `trainmem estimate`: its id is the flag's long
// name, which is also the JSON key the API takes and the key in the link.
const GROUPS = [
  ["Training", [
    { key: "micro-batch", label: "Micro-batch per GPU (sequences)", kind: "number", value: "1" },
    { key: "seq-len", label: "Sequence length (tokens)", kind: "number", value: "2048" },
    { key: "grad-accumulation", label: "Gradient accumulation steps", kind: "number", value: "1" },
    { key: "implementation", label: "Model code", kind: "select", options: [["transformers", "transformers"], ["litgpt", "litgpt"], ["torchtune", "torchtune"], ["torchtitan", "torchtitan"]], value: "transformers" },
    { key: "keep-outputs", label: "Loop keeps the outputs through backward", kind: "check", value: false },
    { key: "carry-outputs", label: "…and into the next forward (outputs bound in the loop body: litgpt, accelerate's examples)", kind: "check", value: false, quiet: true },
  ]],
  ["Precision and optimizer", [
    { key: "precision", label: "Precision recipe", kind: "select", options: [], value: "mixed-bf16" },
    { key: "autocast", label: "Forward under torch.autocast (HF Trainer bf16=True on half weights)", kind: "check", value: false },
    { key: "optimizer", label: "Optimizer", kind: "select", options: [], value: "adamw" },
  ]],
  ["Hardware and parallelism", [
    { key: "device", label: "GPU (memory of one)", kind: "select", options: [], value: "h100-80gb", wide: true },
    { key: "capacity", label: "Memory of one GPU", kind: "text", value: "80GB", hint: "80GB = 80 × 10⁹ bytes; 80GiB = 80 × 2³⁰ bytes." },
    { key: "gpus", label: "GPUs in all", kind: "number", value: "1" },
    { key: "zero", label: "ZeRO stage", kind: "select", options: [["", "none"], ["0", "0: plain data parallel"], ["1", "1: optimizer states"], ["2", "2: + gradients"], ["3", "3: + weights"]], value: "" },
    { key: "fsdp", label: "FSDP instead of ZeRO", kind: "select", options: [["", "no"], ["no-shard", "no-shard"], ["shard-grad-op", "shard-grad-op"], ["full-shard", "full-shard"], ["hybrid-shard", "hybrid-shard"]], value: "" },
    { key: "offload", label: "Offload to host", kind: "select", options: [["none", "none"], ["optimizer", "optimizer states"], ["optimizer+params", "states and weights (ZeRO-3)"]], value: "none" },
    { key: "tp", label: "Tensor parallel", kind: "number", value: "1" },
    { key: "pp", label: "Pipeline stages", kind: "number", value: "1" },
    // `quiet`: left out of the request (and the link) at its default, as
    // the command line leaves it out.
    { key: "cp", label: "Context parallel (ring attention)", kind: "number", value: "1", quiet: true },
    { key: "ep", label: "Expert parallel (MoE models)", kind: "number", value: "1", quiet: true },
    { key: "sequence-parallel", label: "Sequence parallelism (with tensor parallel)", kind: "check", value: false },
    { key: "framework", label: "Framework (its memory layout)", kind: "select", options: [["", "default: DeepSpeed, FSDP2 with FSDP"], ["deepspeed", "DeepSpeed"], ["megatron", "Megatron-core"], ["fsdp2", "FSDP2"], ["fsdp1", "FSDP1"]], value: "" },
  ]],
  ["Fine-tuning", [
    { key: "lora-rank", label: "LoRA rank (empty: full fine-tuning)", kind: "number", value: "" },
    { key: "lora-targets", label: "LoRA targets", kind: "text", value: "all-linear", needs: "lora-rank" },
    { key: "quantize", label: "Quantized base (QLoRA)", kind: "select", options: [["", "none"], ["nf4", "nf4"], ["nf4-torchao", "nf4 (torchao, torchtune)"], ["nf4-torchao-0.1", "nf4 (torchao 0.1, torchtune 2024)"], ["fp4", "fp4"], ["int8", "int8"]], value: "", needs: "lora-rank" },
  ]],
  ["Memory techniques", [
    { key: "recompute", label: "Activation recomputation", kind: "select", options: [["none", "none"], ["selective", "selective (attention core)"], ["op", "op (torchtitan per-op)"], ["full", "full (gradient checkpointing)"]], value: "none" },
    { key: "recompute-every", label: "Recompute every N-th layer (with full)", kind: "number", value: "1", quiet: true },
    { key: "attention", label: "Attention kernel", kind: "select", options: [["sdpa", "sdpa"], ["flash", "flash"], ["eager", "eager"]], value: "sdpa" },
    { key: "loss", label: "Loss", kind: "select", options: [["standard", "standard"], ["shift-copy", "shift-copy"], ["chunked:8", "chunked (8 chunks)"], ["fused", "fused linear cross-entropy"]], value: "standard" },
    { key: "offload-activations", label: "Offload activations to host", kind: "check", value: false },
    { key: "optimizer-in-backward", label: "Optimizer step in backward", kind: "check", value: false },
  ]],
  ["Report", [
    { key: "units", label: "Units", kind: "select", options: [["gb", "GB (10⁹ bytes)"], ["gib", "GiB (2³⁰ bytes)"]], value: "gb" },
  ]],
];

const SPECS = GROUPS.flatMap(([, specs]) => specs);

const PIECES = [
  ["overhead", "CUDA context and allocator"], ["weights", "weights"], ["master_weights", "master weights"],
  ["gradients", "gradients"], ["optimizer_states", "optimizer states"], ["activations", "activations"],
  ["temporaries", "temporaries"],
];

const LABELS = { model: "Model", config: "config.json", params: "Parameter count" };

for (const s of SPECS) LABELS[s.key] = s.label;

let source = "preset";

let devices = [];

let last = null;

let generation = 0;

let timer = null;

// Pinned setups to compare: `{ r, e }` (the request, its answer), oldest first.
let pins = [];

let optimizers = [];

// The precision recipes (`GET /api/options`): name and summary.
let precisions = [];

// Typing waits this long for the next keystroke before asking.
const DEBOUNCE_MS = 250;

let fitGeneration = 0;

// Non-zero while the charts of the answer shown wait for their frame: the
// number of the latest such wait.
let chartsWaiting = 0;

// The longest wait for a frame: a tab in the background makes none (its
// animation frames are paused), and the page must still settle.
const FRAME_WAIT_MS = 100;

// Settles once the browser has made the frame it is about to make (a task
// queued from that frame's animation callback runs after the frame is
// painted), or after FRAME_WAIT_MS.
function afterFrame() {
  return new Promise((resolve) => {
    requestAnimationFrame(() => setTimeout(resolve, 0));
    setTimeout(resolve, FRAME_WAIT_MS);
  });
}

// Settled once the menus' catalogues have come (or failed to): the
// suggestions wait for it, so that the first answer's heavy follow-up does
// not take the server's workers from the page's own start.
let cataloguesSettled;
const catalogued = new Promise((resolve) => { cataloguesSettled = resolve; });

const $ = (id) => document.getElementById(id);

// 1234567 as "1,234,567", as `toLocaleString("en")` writes a whole number,
// without loading the browser's locale data (tens of milliseconds on a
// page's first call, before its first answer could be drawn).
function grouped(n) {
  const [whole, fraction] = String(n).split(".");
  return whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (fraction ? "." + fraction : "");
}

function element(name, attributes, text) {
  const e = document.createElement(name);
  for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
