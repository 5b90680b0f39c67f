"""The run options as command-line flags, both ways, from their one declaration.

:mod:`.options` declares each option once, with its :class:`~.options.Flag`. Here:

* :func:`command_fields`: the ``run`` command's parameters, in order, with their help
  panel (:mod:`ale_robotics.cli.run_cmd` makes its Typer options from them);
* :func:`from_command_line`: :class:`~.options.RunOptions` from the values of those
  parameters, as ``ale-robotics run`` makes them (flag units to field units, relative
  paths against the caller's directory, ``./runs``), every rule checked, an error
  naming the flag;
* :func:`parse_flags` and :func:`flag_args`: an option list (an eval set's
  ``run_args``) read into values, and settings written back as flags (the command
  line of each run of an eval set).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import GROUPS, Flag, RunOptions, flag_of

__all__ = [
    "CommandField",
    "command_fields",
    "flag_args",
    "flag_fields",
    "from_command_line",
    "parse_flags",
]

CommandField = tuple[str | None, str, FieldInfo, Flag]
"""(help panel or None, field name, field, flag) of one parameter of ``run``."""

_SUBJECT = ("task_id", "agent_cmd")
"""What every run names, outside the groups: the task (an argument) and ``--agent``."""


def command_fields() -> list[CommandField]:
    """Every parameter of ``ale-robotics run``: the task and the agent command, then each
    group's options under its title (:data:`~.options.GROUPS`' order)."""
    fields = RunOptions.model_fields
    out: list[CommandField] = [(None, name, fields[name], flag_of(name)) for name in _SUBJECT]
    for title, group in GROUPS:
        out += [(title, name, fields[name], flag_of(name)) for name in group.model_fields]
    return out


def flag_fields() -> dict[str, str]:
    """Flag (``--budget``) -> field name (``budget_s``), for every option of ``run``."""
    return {flag.name: name for _, name, _, flag in command_fields() if not flag.argument}


def _is_bool(name: str) -> bool:
    return RunOptions.model_fields[name].annotation is bool


def parse_flags(args: Sequence[str]) -> dict[str, object]:
    """``["--workers", "1", "--budget=60"]`` -> ``{"workers": "1", "budget_s": "60"}``:
    values as given (flag units, strings), keyed by field; ``ValueError`` for anything
    that is not an option of ``run`` or is given twice."""
    flags = flag_fields()
    out: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        name = flags.get(flag)
        if name is None:
            close = difflib.get_close_matches(flag, list(flags), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            what = "an option" if arg.startswith("-") else "an option name"
            raise ValueError(f"{arg!r} is not {what} of 'ale-robotics run'{hint}")
        repeat = flag_of(name).repeat
        if name in out and not repeat:
            raise ValueError(f"{flag} is given twice")
        if _is_bool(name):
            if eq:
                raise ValueError(f"{flag} takes no value")
            out[name], i = True, i + 1
        else:
            if eq:
                given, i = value, i + 1
            elif i + 1 < len(args):
                given, i = args[i + 1], i + 2
            else:
                raise ValueError(f"{flag} needs a value")
            if repeat:  # each time one more value of the field's tuple
                values = out.setdefault(name, [])
                assert isinstance(values, list)
                values.append(given)
            else:
                out[name] = given
    return out


def _flag_value(value: object, flag: Flag) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int) and flag.scale != 1:
        return str(value // flag.scale)
    return str(value)


def flag_args(settings: BaseModel, names: Iterable[str]) -> list[str]:
    """The flags that give ``settings``' fields ``names`` their values, in declaration
    order (a field at None or False is left out: that is what no flag says)."""
    wanted = set(names)
    out: list[str] = []
    for _, group in GROUPS:
        for name in group.model_fields:
            value = getattr(settings, name, None)
            if name not in wanted or value is None or value is False:
                continue
            flag = flag_of(name)
            if flag.repeat:
                for item in value:
                    out += [flag.name, str(item)]
            else:
                out += [flag.name] if value is True else [flag.name, _flag_value(value, flag)]
    return out


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def _to_field(name: str, value: object, cwd: Path) -> object:
    """A value in its flag's unit -> the field's (MiB -> bytes, a path against ``cwd``)."""
    if value is None:
        return None
    flag = flag_of(name)
    if flag.repeat:
        items = value if isinstance(value, list | tuple) else (value,)
        if RunOptions.model_fields[name].annotation == tuple[Path, ...]:
            return tuple(cwd / Path(str(v)) for v in items)
        return tuple(str(v) for v in items)
    if flag.scale != 1:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{flag.name} {_shown(value)}: not a number") from None
        if not (math.isfinite(number) and number == int(number)):
            raise InvalidArgumentError(f"{flag.name} {_shown(value)}: a whole number") from None
        return int(number) * flag.scale
    if RunOptions.model_fields[name].annotation == Path | None:
        return cwd / Path(str(value))
    return value


def from_command_line(values: Mapping[str, Any], cwd: Path) -> RunOptions:
    """:class:`RunOptions` from the values of ``run``'s parameters, as the command makes them.

    ``values`` are keyed by field, each in its flag's unit; a missing one takes its
    default. Relative paths start at ``cwd`` (the harness leaves it later), new runs go
    to ``cwd/runs``, and the workspace is ``cwd`` unless given. Raises
    :class:`InvalidArgumentError` naming the flag, for a value no field takes and for a
    rule between options (:meth:`~.options.RunSettings.check`).
    """
    data = {name: _to_field(name, value, cwd) for name, value in values.items()}
    data.setdefault("workspace", None)
    data["workspace"] = data["workspace"] or cwd
    data["runs_root"] = cwd / "runs"
    try:
        opts = RunOptions.model_validate(data)
    except ValidationError as exc:
        raise InvalidArgumentError(_first_problem(exc, values)) from None
    opts.check()
    return opts


def _first_problem(exc: ValidationError, values: Mapping[str, Any]) -> str:
    error = exc.errors(include_url=False)[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    msg = str(error["msg"]).removeprefix("Value error, ")
    if name not in RunOptions.model_fields:
        return msg
    flag = flag_of(name)
    return f"{flag.name} {_shown(values.get(name))}: {msg}"
