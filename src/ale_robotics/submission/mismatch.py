"""What a rejection says when a submission names things differently from its contract.

A renamed tensor (``fc1.weight`` for the contract's ``l1.weight``) was reported as
"missing key(s) ['l1.weight']" alone, and a misnamed file (``policy.safetensor``) as
"policy.safetensors or policy.pt: missing": the author saw what was expected, never
what they wrote. Each message here names both sides, and pairs every expected name
with the submitted one closest to it (a rename, a typo), so the fix is in the message.

Submitted names are the agent's: quoted with :func:`~.rejected.quote_key` (bounded),
at most :data:`MAX_LISTED` of them.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from ale_robotics.submission.rejected import SubmissionRejected, quote_key

__all__ = ["MAX_LISTED", "check_key_set", "files_found"]

MAX_LISTED = 10
"""Most submitted names a message lists (then "and N more")."""

_CLOSE = 0.6
"""How alike two names must be to be offered as a rename (difflib's ratio)."""


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(quote_key(n) for n in names[:MAX_LISTED])
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return f"[{shown}]{more}"


def _renames(wanted: Sequence[str], given: Collection[str]) -> list[str]:
    """``'fc1.weight' for 'l1.weight'``: wanted names paired with the given ones most
    like them, the closest pairs first, each name in at most one pair."""
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, w, g).ratio(), i, w, g)
            for i, w in enumerate(wanted)
            for g in given
        ),
        key=lambda t: (-t[0], t[1]),
    )
    pairs: dict[str, str] = {}
    used: set[str] = set()
    for ratio, _, want, got in scored:
        if ratio < _CLOSE:
            break
        if want not in pairs and got not in used:
            pairs[want] = got
            used.add(got)
    return [f"{quote_key(pairs[w])} for {w!r}" for w in wanted if w in pairs]


def check_key_set(keys: Collection[str], expected: Sequence[str], shown: str) -> None:
    """Refuse ``keys`` unless they are exactly ``expected``, naming what is missing and
    what is unexpected together (rule ``required keys`` when any is missing, else
    ``no extra keys``), with the likely renames."""
    missing = [k for k in expected if k not in keys]
    extra = sorted(k for k in keys if k not in set(expected))
    if not missing and not extra:
        return
    parts = []
    if missing:
        parts.append(f"missing key(s) {missing}")
    if extra:
        parts.append(f"unexpected key(s) {_listed(extra)}")
    renames = _renames(missing, extra)
    hint = f" (renamed? {', '.join(renames)})" if renames else ""
    raise SubmissionRejected(
        shown,
        "required keys" if missing else "no extra keys",
        f"{' and '.join(parts)}{hint}; the contract's keys: {list(expected)}",
    )


def files_found(expected: Sequence[str], present: Sequence[str]) -> str:
    """What the submission directory holds instead of any of ``expected``, to follow
    "missing; the contract requires one of ...": the files there, the likely misnamed
    one first named as such, or that the directory is empty."""
    if not present:
        return "the submission directory is empty"
    renames = _renames(list(expected), present)
    found = f"it holds {_listed(sorted(present))}"
    if renames:
        return f"{found}; misnamed? {', '.join(renames)}"
    return found
