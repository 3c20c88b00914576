"""trainmem.estimate and friends: the engine in-process, the same report
and the same errors as the command line."""

import json
import subprocess
import time

import pytest

import trainmem


def cli(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


CASES = [
    dict(model="gpt2"),
    dict(
        model="llama-3.1-8b",
        optimizer="adamw",
        precision="mixed-bf16",
        micro_batch=1,
        seq_len=4096,
        gpus=8,
        zero=3,
    ),
    dict(params="7B", optimizer="adamw-8bit", precision="bf16"),
    dict(model="gpt2", micro_batch=2, seq_len=512, recompute="full", recompute_reentrant=True),
    dict(model="llama-3.2-1b", lora_rank=16, lora_targets="q_proj,v_proj", micro_batch=1, seq_len=1024),
]


def flags(options):
    argv = []
    for name, value in options.items():
        argv.append("--" + name.replace("_", "-"))
        if value is not True:
            argv.append(str(value))
    return argv


@pytest.mark.parametrize("options", CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_estimate_is_the_command_line_json(binary, options):
    done = cli(binary, "estimate", *flags(options), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert trainmem.estimate(**options) == json.loads(done.stdout)


@pytest.mark.parametrize("command", ["timeline", "fit"])
def test_other_commands_are_the_command_line_json(binary, command):
    options = dict(model="gpt2", micro_batch=4, seq_len=1024, device="h100-80gb")
    if command == "fit":
        del options["micro_batch"]
    done = cli(binary, command, *flags(options), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert getattr(trainmem, command)(**options) == json.loads(done.stdout)


def test_plan_is_the_command_line_json(binary):
    options = dict(model="gpt2", device="h100-80gb", gpus=2, seq_len=1024, allow="zero,recompute")
    done = cli(binary, "plan", *flags(options), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert trainmem.plan(**options) == json.loads(done.stdout)


@pytest.mark.parametrize(
    "command, positional, options",
    [
        ("params", ["gpt2"], dict(tensors=True)),
        ("compare", [], dict(params="1B,7B", optimizers="adam,adamw-8bit", device="h100-80gb", micro_batch=1, seq_len=512)),
    ],
    ids=["params", "compare"],
)
def test_params_and_compare_are_the_command_line_json(binary, command, positional, options):
    done = cli(binary, command, *positional, *flags(options), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert getattr(trainmem, command)(*positional, **options) == json.loads(done.stdout)


def test_check_reads_a_launch_config(binary, fixtures):
    config = str(fixtures / "launch" / "ds-zero1.json")
    done = cli(binary, "check", config, "--model", "gpt2", "--device", "h100-80gb", "--seq-len", "512", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert trainmem.check(config, model="gpt2", device="h100-80gb", seq_len=512) == json.loads(done.stdout)


def test_the_gpt2_total_of_the_readme():
    total = trainmem.estimate(model="gpt2")["memory"]["total"]
    assert isinstance(total, int) and total > 124_000_000 * 16


@pytest.mark.parametrize(
    "options",
    [
        dict(model="gpt2", optimizer="adamm"),
        dict(model="gpt2", gpus=-1),
        dict(model="no-such-model"),
        dict(params="7B", micro_batch=1),
    ],
)
def test_errors_are_the_command_lines_one_line(binary, options):
    done = cli(binary, "estimate", *flags(options))
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line
    with pytest.raises(trainmem.Error) as raised:
        trainmem.estimate(**options)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == line[len("error: ") :]


def test_an_unknown_keyword_names_it_and_what_is_accepted():
    """The dict door names the keyword the shell would call an argument, its
    nearest flag and the flags the command takes, on one line."""
    with pytest.raises(trainmem.Error) as raised:
        trainmem.estimate(model="gpt2", micro_bach=1)
    message = str(raised.value)
    assert "`micro-bach`" in message and "did you mean `micro-batch`" in message, message
    assert "accepted: the flags of `trainmem estimate`: " in message and "\n" not in message, message


def test_every_command_is_the_dict_door(binary):
    """plot, completions and the comparison, which the package once asked
    of clap with an argv, are answered from keywords as the others are;
    ``--help`` and ``--version`` are the text the binary prints."""
    from trainmem import _engine

    assert not hasattr(_engine, "run")
    for name in ("plot", "completions", "serve", "compare", "schema"):
        assert name in _engine.COMMANDS
    chart = trainmem.run("plot", output="-", kind="scaling", params="1B,7B")
    assert chart == cli(binary, "plot", "--output", "-", "--kind", "scaling", "--params", "1B,7B").stdout
    assert chart.startswith("<svg")
    assert trainmem.run("completions", "bash") == cli(binary, "completions", "bash").stdout
    assert trainmem.run("compare") == cli(binary).stdout
    for command in ("estimate", "check", "plot"):
        for flag in ("--help", "-h"):
            assert trainmem.run(command, flag) == cli(binary, command, flag).stdout
    assert trainmem.run("--help") == cli(binary, "--help").stdout
    assert trainmem.run("-h") == cli(binary, "-h").stdout
    assert trainmem.run("--version") == cli(binary, "--version").stdout
    with pytest.raises(trainmem.Error, match="unexpected argument 'extra'"):
        trainmem.run("estimate", "extra", params="7B")


def test_keywords_become_a_dict_not_a_command_line():
    """The engine takes the request commands' keywords as a dict (flag
    names to values), as the web API takes its JSON: no argv is built."""
    from trainmem import _engine
    from trainmem._command import keywords

    assert keywords(
        dict(micro_batch=2, seq_len=None, gradient_checkpointing=True, cpu_offload=False, freeze=["embed", "norm"])
    ) == {"micro-batch": "2", "gradient-checkpointing": True, "freeze": ["embed", "norm"]}
    with pytest.raises(trainmem.Error, match="not a flag"):
        keywords({"model; rm": 1})
    with pytest.raises(trainmem.Error, match="has a dict"):
        keywords({"model": {}})
    for name in ("estimate", "timeline", "techniques", "fit", "check", "plan", "models"):
        assert name in _engine.COMMANDS
    report, lines, exit = _engine.call("estimate", [], {"params": "7B", "format": "json"})
    assert json.loads(report) == trainmem.estimate(params="7B") and exit == 0 and lines == []


def test_any_subcommand_by_name():
    models = trainmem.command("models")()
    assert any(m["name"] == "gpt2" and m["parameters"] == 124_439_808 for m in models)
    with pytest.raises(trainmem.Error, match="unknown command `no-such-command`.*accepted: .*estimate"):
        trainmem.command("no-such-command")()
    assert "--micro-batch" in trainmem.run("estimate", "--help")


def test_a_call_costs_under_a_millisecond():
    """The best of five batches, so that a busy machine's pauses do not count."""
    trainmem.estimate(params="7B")
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(100):
            trainmem.estimate(params="7B")
        batches.append((time.perf_counter() - start) / 100)
    assert min(batches) < 1e-3, f"{min(batches) * 1e3:.3f} ms per call"
