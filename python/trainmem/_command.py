"""Keyword arguments to a ``trainmem`` command, answered in-process by the
Rust engine: ``trainmem._engine.call`` takes them as a dict (flag names to
values) and builds the command's typed arguments from it through serde, as
the web API does from its JSON, for every command (``_engine.COMMANDS``).
``'--help'`` and ``'--version'`` given to :func:`run` are answered by
``_engine.help`` (the text clap renders from its definition) and
``_engine.__version__``. No command line is built or parsed."""

import json
import os
import warnings

from ._engine import Error, __version__ as _version, call as _call, help as _help

__all__ = ["Error", "TrainmemWarning", "run", "command"]


class TrainmemWarning(UserWarning):
    """A ``warning:`` line of the command line (``check`` gives them)."""


# Characters of a value shown in a message, as the command line cuts them.
_SHOWN = 80

# Keywords whose answer is text for a person, not a report: the functions
# that parse the JSON report refuse them (``trainmem.run`` gives the text).
_NOT_REPORTS = ("help", "version")


def _shown(text):
    """``text`` as a message shows it: characters UTF-8 cannot encode (lone
    surrogates) escaped, and cut to :data:`_SHOWN` characters."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _flag(name):
    if not name or name.startswith("_") or not name.replace("_", "").isalnum():
        raise Error(
            f"keyword `{_shown(name)}` is not a flag; accepted: a flag's name with `_` for `-`, such as micro_batch for --micro-batch"
        )
    return "--" + name.replace("_", "-")


def _text(name, value):
    """``value`` as the text of a command-line argument, or :class:`Error`."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
        # A bytes path: decoded as the file system does (undecodable bytes
        # become lone surrogates, refused below with the rest).
        text = os.fsdecode(value) if isinstance(value, bytes) else value
    elif isinstance(value, (str, int, float)):
        try:
            text = str(value)
        except ValueError:
            # An int past Python's digit limit for str().
            raise Error(
                f"keyword `{name}` has an int too long to write out; accepted: a number trainmem can read, such as 7000000000 or '7B'"
            ) from None
    else:
        raise Error(
            f"keyword `{name}` has a {type(value).__name__}; accepted: a str, an int, a float, a path, True, or a list of them"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Error(
            f"invalid value `{_shown(text)}` for keyword `{name}`: character {error.start} is a lone surrogate, which is not text; accepted: a str UTF-8 can encode"
        ) from None
    return text


def keywords(options=None):
    """The dict ``_engine.call`` reads for keyword ``options``: each flag's
    long name (``micro-batch``) to its value as text, ``True`` for a switch,
    or a list of texts for a repeated flag; ``None`` and ``False`` leave the
    flag out. A name that cannot be a flag, or a value that is not text, a
    number, a path, ``True`` or a list of them, raises :class:`Error`."""
    out = {}
    for name, value in (options or {}).items():
        key = _flag(name)[len("--") :]
        if value is None or value is False:
            continue
        if value is True:
            out[key] = True
        elif isinstance(value, (list, tuple)):
            out[key] = [_text(name, item) for item in value]
        else:
            out[key] = _text(name, value)
    return out


# Words that ask for text about trainmem rather than a report, as the
# command line takes them.
_HELP_WORDS = ("--help", "-h")
_VERSION_WORDS = ("--version", "-V")


def _asked(value):
    return value not in (None, False)


def _text_asked(command, words, options):
    """The help or version text that ``command`` with positional ``words``
    and keyword ``options`` asks for (``run('estimate', '--help')``,
    ``run('--version')``, ``help=True``), or ``None`` for a report."""
    if command in _HELP_WORDS:
        return _help(None, command == "--help")
    if command in _VERSION_WORDS or _asked(options.get("version")):
        return f"trainmem {_version}\n"
    asked = [word for word in words if word in _HELP_WORDS]
    if asked or _asked(options.get("help")):
        # `-h` alone asks for the short form, as at the shell.
        return _help(command, asked[:1] != ["-h"])
    return None


def _answer(command, positional, options):
    """``(report, warnings, exit)`` of ``command`` (``compare`` when none is
    named, as ``trainmem`` alone is), from the dict of its keywords."""
    command = _text("command", command) if command else None
    words = [_text("positional", p) for p in positional]
    text = _text_asked(command, words, options)
    if text is not None:
        return text, [], 0
    return _call(command or "compare", words, keywords(options))


def run(command, *positional, **options):
    """Runs ``trainmem COMMAND POSITIONAL... --FLAG VALUE...`` and returns the
    report as text (what the binary prints to stdout). ``warning:`` lines are
    issued as :class:`TrainmemWarning`."""
    report, lines, _exit = _answer(command, positional, options)
    for line in lines:
        warnings.warn(line, TrainmemWarning, stacklevel=3)
    return report


class _ModelFile:
    """``module=`` as a ``--model`` path: the module's inventory written to a
    temporary ``*.inventory.json`` file, the model source the engine reads."""

    def __init__(self, command, module, positional, options, trace=None):
        self.path = None
        if trace is not None and command not in ("estimate", "timeline"):
            raise Error(
                f"trace= with {command}; accepted: trace= with estimate or timeline, which price the one workload traced"
            )
        if module is None:
            if trace is not None:
                raise Error(
                    "trace= without module=; accepted: trace= with the module= it traced"
                )
            return
        for other in ("model", "params"):
            if options.get(other) is not None or (command == "params" and positional):
                raise Error(
                    f"give module= or {other}=, not both; accepted: one model source"
                )
        import tempfile

        from .inventory import Inventory, from_module

        inventory = module if isinstance(module, Inventory) else from_module(module)
        if trace is not None:
            # The trace's activations replace a rule's; a trace of an input
            # without a sequence dimension (images) has no --seq-len to give,
            # and 1 stands for it (the engine does not read it then).
            schedule = trace.schedule() if hasattr(trace, "schedule") else dict(trace)
            inventory = Inventory(
                inventory.name,
                inventory.parameters,
                inventory.buffers,
                config=inventory.config,
                notes=inventory.notes,
                source=inventory.source,
                activations_trace=schedule,
            )
            if options.get("micro_batch") is not None and options.get("seq_len") is None:
                options["seq_len"] = schedule.get("seq_len", 1)
        handle, self.path = tempfile.mkstemp(suffix=".inventory.json", prefix="trainmem-")
        with os.fdopen(handle, "w") as file:
            file.write(inventory.to_json())
        if command == "params":
            positional.insert(0, self.path)
        else:
            options["model"] = self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.path is not None:
            os.unlink(self.path)


def _only_reports(name, options):
    """Refuses the keywords that ask for text instead of the JSON report
    (``help``, ``version``, a ``format`` other than json), and sets
    ``format='json'``."""
    function = name.replace("-", "_")
    for keyword in _NOT_REPORTS:
        if options.get(keyword) not in (None, False):
            raise Error(
                f"keyword `{keyword}` asks for text, not a report; accepted: trainmem.run('{name}', '--{keyword}') for the text"
            )
    given = options.setdefault("format", "json")
    if not (isinstance(given, str) and given.strip().lower() == "json"):
        shown = _shown(given) if isinstance(given, str) else type(given).__name__
        raise Error(
            f"invalid value `{shown}` for keyword `format`: trainmem.{function}() answers the JSON report as a dict; accepted: json (the default), or trainmem.run('{name}', format=...) for the text"
        )
    options["format"] = "json"


def command(name):
    """The Python function for the subcommand ``name``: keyword arguments as
    flags, ``module=`` for an ``nn.Module`` or an :class:`Inventory`, and the
    JSON report parsed into a dict. Keywords that ask for text instead
    (``help``, ``version``, ``format`` other than json) raise
    :class:`Error`: :func:`run` gives the text."""

    def call(*positional, module=None, trace=None, **options):
        _only_reports(name, options)
        positional = list(positional)
        with _ModelFile(name, module, positional, options, trace):
            report, lines, _exit = _answer(name, positional, options)
        for line in lines:
            warnings.warn(line, TrainmemWarning, stacklevel=2)
        try:
            return json.loads(report)
        except ValueError:
            # Not a report: a bug of the engine, said as an Error all the same.
            raise Error(
                f"`trainmem {name}` did not answer a JSON report (`{_shown(report)}`); accepted: please report the call"
            ) from None

    call.__name__ = call.__qualname__ = name.replace("-", "_")
    call.__doc__ = (
        f"``trainmem {name} --format json`` with keyword arguments as flags "
        f"(``micro_batch=1`` is ``--micro-batch 1``): the report as a dict. "
        f"``module=`` prices an ``nn.Module`` or an ``Inventory``, ``trace=`` (a "
        f":class:`trainmem.Trace` of it) its activations; errors raise "
        f"``trainmem.Error``. ``trainmem.run('{name}', '--help')`` lists the flags."
    )
    return call


estimate = command("estimate")
timeline = command("timeline")
fit = command("fit")
check = command("check")
plan = command("plan")
params = command("params")
compare = command("compare")
