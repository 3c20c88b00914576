"""trainmem.trace_activations: what autograd saves, traced on the meta
device, against the same count measured for real on CPU, the measured
fixtures, and the Rust rule (`--platform cpu`)."""

import json
import os
import pathlib

import pytest
import torch

import trainmem
from models import CONFIGS, TinyResNet, TinyUNetBlock, transformers_model

# (architecture, dtype, attention, batch, sequence): each has a fixture
# measured by tools/measure_activations.py with the same config.
FIXTURED = [
    ("gpt2", "fp32", "eager", 2, 64),
    ("gpt2", "fp32", "sdpa", 2, 64),
    ("gpt2", "bf16", "eager", 2, 64),
    ("llama", "fp32", "eager", 2, 64),
    ("llama", "fp32", "sdpa", 1, 16),
    ("llama", "bf16", "sdpa", 2, 64),
]


def language_inputs(batch, seq):
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (batch, seq))
    # use_cache=False as transformers.Trainer runs (and the fixtures measure).
    return {"input_ids": ids, "labels": ids, "use_cache": False}


@pytest.mark.parametrize("name,dtype,attn,batch,seq", FIXTURED)
def test_the_meta_trace_is_the_cpu_measurement_and_the_rule(fixtures, name, dtype, attn, batch, seq):
    model = transformers_model(name, attn=attn).to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    inputs = language_inputs(batch, seq)
    meta = trainmem.trace_activations(model, inputs)
    real = trainmem.trace_activations(model, inputs, device=None)
    fixture = json.loads((fixtures / "activations" / f"{name}__base__{dtype}__{attn}__b{batch}s{seq}.json").read_text())
    assert fixture["config"] == CONFIGS[name]
    assert (real.total_bytes, real.saved_bytes) == (fixture["total_bytes"], fixture["saved_bytes"])

    def rule(platform):
        return trainmem.estimate(
            module=model, micro_batch=batch, seq_len=seq, platform=platform, attention=attn, precision=dtype
        )["memory"]["activations"]

    assert rule("cpu") == real.total_bytes == meta.total_bytes
    assert meta.to_dict() == real.to_dict()


def sweep_fixtures(experts=("grouped_mm", None)):
    """Every language-model fixture the meta device can run: causal or
    masked LM, eager or sdpa (the CPU's own kernel choice), experts (if any)
    by grouped_mm, no checkpointing, no cache, no frozen part, no dropout
    (random masks)."""
    root = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "activations"
    chosen = []
    for path in sorted(root.glob("*.json")):
        fixture = json.loads(path.read_text())
        parts = fixture["id"].split("__")
        if (
            fixture.get("task", "causal-lm") in ("causal-lm", "masked-lm")
            and parts[3] in ("eager", "sdpa")
            and fixture["experts_implementation"] in experts
            and not fixture["gradient_checkpointing"]
            and not fixture["use_cache"]
            and not fixture.get("frozen")
            and not fixture["variant"].startswith("dropout")
        ):
            chosen.append(path)
    return chosen


def fixture_model(fixture):
    import transformers

    settings = {k: v for k, v in fixture["config"].items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(fixture["model_type"], **settings)
    auto = transformers.AutoModelForMaskedLM if fixture.get("task") == "masked-lm" else transformers.AutoModelForCausalLM
    options = {"attn_implementation": fixture["attn_implementation"]}
    if fixture["experts_implementation"]:
        options["experts_implementation"] = fixture["experts_implementation"]
    with torch.device("meta"):
        model = auto.from_config(config, **options)
    return model.to({"fp32": torch.float32, "bf16": torch.bfloat16}[fixture["dtype"]]).train()


def fixture_inputs(fixture):
    ids = torch.zeros(fixture["batch"], fixture["seq_len"], dtype=torch.long)
    inputs = {"input_ids": ids, "labels": ids}
    if fixture.get("task", "causal-lm") == "causal-lm":
        inputs["use_cache"] = False
    return inputs


def one_per_variant(paths):
    """One fixture per architecture and variant (129 of the 335), taking in
    turn fp32 and bf16, eager and sdpa, the smallest batch and sequence:
    what CI runs; TRAINMEM_TRACE_ALL=1 runs them all (2 to 7 minutes on the
    2-core machine)."""
    if os.environ.get("TRAINMEM_TRACE_ALL"):
        return paths
    groups = {}
    for path in paths:
        fixture = json.loads(path.read_text())
        groups.setdefault((fixture["model_type"], fixture["variant"]), []).append((fixture, path))
    turns = [("fp32", "eager"), ("bf16", "sdpa"), ("fp32", "sdpa"), ("bf16", "eager")]
    chosen = []
    for index, key in enumerate(sorted(groups)):
        members = sorted(groups[key], key=lambda m: (m[0]["batch"] * m[0]["seq_len"], m[0]["id"]))
        wanted = turns[index % len(turns)]
        preferred = [m for m in members if (m[0]["dtype"], m[0]["id"].split("__")[3]) == wanted]
        chosen.append((preferred or members)[0][1])
    return chosen


@pytest.mark.parametrize("path", one_per_variant(sweep_fixtures()), ids=lambda p: p.stem)
def test_every_language_model_fixture_traces_to_its_measured_bytes(path):
    fixture = json.loads(path.read_text())
    trace = trainmem.trace_activations(fixture_model(fixture), fixture_inputs(fixture))
    assert (trace.total_bytes, trace.saved_bytes) == (fixture["total_bytes"], fixture["saved_bytes"])


def test_experts_that_route_by_value_are_refused_on_meta():
    """transformers' eager experts loop over the tokens each expert got."""
    paths = sweep_fixtures(experts=("eager",))
    assert paths
    fixture = json.loads(paths[0].read_text())
    with pytest.raises(trainmem.Error, match="cannot run on the meta device"):
        trainmem.trace_activations(fixture_model(fixture), fixture_inputs(fixture))


def test_a_meta_model_traces_without_memory():
    model = transformers_model("llama", device="meta", attn="sdpa")
    trace = trainmem.trace_activations(model, language_inputs(1, 16))
    assert trace.total_bytes > 0
    assert all(p.device.type == "meta" for p in model.parameters())
    assert trace.order[0] == "model" and "lm_head" in trace.order


def cnn_inputs():
    torch.manual_seed(0)
    return torch.randn(2, 3, 32, 32)


def unet_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 4, 16, 16), torch.randn(2, 16))


@pytest.mark.parametrize(
    "build,inputs",
    [(TinyResNet, cnn_inputs), (TinyUNetBlock, unet_inputs)],
    ids=["cnn", "unet"],
)
def test_models_the_rules_do_not_cover(build, inputs):
    model = build().train()
    loss = lambda output: output.float().pow(2).mean()
    meta = trainmem.trace_activations(model, inputs(), loss)
    real = trainmem.trace_activations(model, inputs(), loss, device=None)
    assert meta.to_dict() == real.to_dict()
    assert meta.saved_bytes > 0
    # Every parameter-holding child that runs appears in the breakdown.
    assert set(meta.by_module) <= {name for name, _ in model.named_modules()}


def test_the_cnn_trace_counts_what_autograd_keeps():
    """The first conv keeps its fp32 input image: 2 x 3 x 32 x 32 x 4 bytes."""
    trace = trainmem.trace_activations(TinyResNet().train(), cnn_inputs())
    first = [s for s in trace.saved if s.module == "stem.0"]
    assert [s.bytes for s in first] == [2 * 3 * 32 * 32 * 4]
    assert trace.by_module["stem.0"] == 2 * 3 * 32 * 32 * 4


def test_parameters_are_not_counted_and_the_module_is_unchanged():
    model = torch.nn.Linear(8, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trace = trainmem.trace_activations(model, torch.randn(3, 8, requires_grad=True))
    # addmm saves its input (3 x 8 fp32), not the weight.
    assert trace.saved_bytes == 3 * 8 * 4
    assert trace.output_bytes == 3 * 4 * 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.weight.device.type == "cpu"


def test_data_dependent_forwards_are_refused_on_meta():
    class Picky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x[: int(x.sum().item() > 0) + 1])

    with pytest.raises(trainmem.Error, match="meta device"):
        trainmem.trace_activations(Picky(), torch.randn(2, 4))
