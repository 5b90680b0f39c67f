"""What a run option is declared with: its :class:`Flag`, and the base of an option group.

Apart from :mod:`.options` (which re-exports both) so that a group can be declared in a
module of its own (:mod:`.video`) and joined to the run's options there, without
either module importing the other's half.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

__all__ = ["Flag", "OptionGroup"]


@dataclass(frozen=True)
class Flag:
    """How a run option is given to ``ale-robotics run`` (and in an eval set's ``run_args``).

    In a field's ``Annotated`` metadata: ``name`` is the flag (``--budget``), or the
    argument's name with ``argument``; ``scale`` is the field's units per flag unit (the
    field holds bytes, the flag takes MiB); ``choices`` lists the values allowed, read
    when asked (the sandboxes installed); ``metavar`` is how ``--help`` shows the value.
    """

    name: str
    metavar: str | None = None
    scale: int = 1
    choices: Callable[[], Sequence[str]] | None = None
    argument: bool = False
    repeat: bool = False


class OptionGroup(BaseModel):
    """One group of run options (a help panel of ``run``): frozen, no unknown field."""

    model_config = ConfigDict(extra="forbid", frozen=True)
