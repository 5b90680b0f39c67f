"""The exception that ends a job as REJECTED, and how its messages quote agent text."""

from __future__ import annotations

__all__ = ["SubmissionRejected", "first_line", "quote_key"]

_DETAIL_CHARS = 300


class SubmissionRejected(Exception):
    """The submission breaks a rule; ends the job as REJECTED with this message.

    ``line`` and ``column`` (1-based) say where in the file, when the parser knows (a
    YAML file's syntax error, duplicate key or limit): the message then starts with
    them, and a reader that shows files its own way (an eval set's SPEC) has them apart.
    """

    def __init__(
        self,
        file: str,
        rule: str,
        detail: str,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.file = file
        self.rule = rule
        self.detail = detail
        self.line = line
        self.column = column
        where = "" if line is None else f"line {line}, column {column}: "
        super().__init__(f"{file}: {where}{detail} (rule: {rule})")


def quote_key(key: object) -> str:
    """An agent-chosen key as shown in messages: ``repr``, at most 80 characters."""
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:_DETAIL_CHARS]
