"""Issue 28, finding 9: keywords a hostile or careless caller may give.
Every mistake is a ``trainmem.Error`` (a ``ValueError``) with the command
line's kind of one-line message: the value in backticks and what is
accepted, never a UnicodeEncodeError, a JSONDecodeError or an empty list
of accepted values."""

import os

import pytest

import trainmem


def refused(call, *args, **options):
    """The message of the Error ``call(*args, **options)`` raises."""
    with pytest.raises(trainmem.Error) as raised:
        call(*args, **options)
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert "\n" not in message, message
    assert "accepted: " in message and not message.rstrip().endswith("accepted:"), message
    return message


def test_a_lone_surrogate_is_an_error_naming_the_keyword():
    message = refused(trainmem.estimate, params="7B", optimizer="\ud800")
    assert "`\\ud800`" in message and "`optimizer`" in message, message
    message = refused(trainmem.estimate, params="7B", freeze=["embed", "x\udcff"])
    assert "`freeze`" in message, message
    message = refused(trainmem.params, "\ud800")
    assert "`positional`" in message, message
    message = refused(trainmem.run, "estimate", params="7B\ud800")
    assert "`params`" in message, message
    refused(trainmem.estimate, **{"opt\ud800": "adam"})
    message = refused(trainmem.run, "estimate\ud800")
    assert "`command`" in message, message


def test_an_undecodable_bytes_path_is_an_error():
    class Path(os.PathLike):
        def __fspath__(self):
            return b"/tmp/\xff.json"

    message = refused(trainmem.estimate, model=Path())
    assert "`model`" in message, message


def test_an_int_too_long_to_write_is_an_error():
    message = refused(trainmem.estimate, params=10**5000)
    assert "`params`" in message, message


def test_help_and_version_are_not_reports():
    for keyword in ("help", "version"):
        message = refused(trainmem.estimate, params="7B", **{keyword: True})
        assert f"`{keyword}`" in message and "trainmem.run" in message, message
    # Left out, they are not asked for.
    assert trainmem.estimate(params="7B", help=False)["memory"]["total"] > 0
    # The text is still there for whoever asks run() for it.
    assert "--micro-batch" in trainmem.run("estimate", "--help")


def test_a_format_other_than_json_is_refused():
    for given in ("table", "csv", "", 3):
        message = refused(trainmem.estimate, params="7B", format=given)
        assert "`format`" in message and "json" in message, message
    assert trainmem.estimate(params="7B", format="JSON") == trainmem.estimate(params="7B")


def test_a_flag_that_takes_a_value_given_true_says_what_it_takes():
    message = refused(trainmem.estimate, params="7B", micro_batch=True)
    assert message.startswith("--micro-batch needs a value; accepted: `--micro-batch <"), message
