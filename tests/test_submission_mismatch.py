"""What a rejection says when names differ from the contract (issue 48.9), unit level.

The CLI test (tests/cli/test_check_cmd.py) runs the evaluator's checks on real files;
here: the pairing of renames, the bound on what is listed, the empty directory.
"""

from __future__ import annotations

import pytest

from ale_robotics.submission.mismatch import MAX_LISTED, check_key_set, files_found
from ale_robotics.submission.rejected import SubmissionRejected

KEYS = ["l1.weight", "l1.bias", "l2.weight", "l2.bias"]


def _detail(keys: list[str]) -> tuple[str, str]:
    with pytest.raises(SubmissionRejected) as caught:
        check_key_set(keys, KEYS, "policy.pt")
    return caught.value.rule, caught.value.detail


def test_the_exact_key_set_passes() -> None:
    check_key_set(list(reversed(KEYS)), KEYS, "policy.pt")


def test_two_renamed_keys_are_paired_with_the_names_they_stand_for() -> None:
    rule, detail = _detail(["fc1.weight", "fc1.bias", "l2.weight", "l2.bias"])
    assert rule == "required keys"
    assert detail == (
        "missing key(s) ['l1.weight', 'l1.bias'] and unexpected key(s) ['fc1.bias', "
        "'fc1.weight'] (renamed? 'fc1.weight' for 'l1.weight', 'fc1.bias' for 'l1.bias'); "
        f"the contract's keys: {KEYS}"
    )


def test_a_missing_key_with_nothing_like_it_is_offered_no_rename() -> None:
    rule, detail = _detail(["l1.weight", "l1.bias", "l2.weight"])
    assert (rule, detail) == (
        "required keys",
        f"missing key(s) ['l2.bias']; the contract's keys: {KEYS}",
    )


def test_unexpected_keys_are_listed_up_to_a_bound_and_quoted() -> None:
    extra = [f"junk{i:02d}" for i in range(MAX_LISTED + 5)] + ["x" * 200]
    rule, detail = _detail([*KEYS, *extra])
    assert rule == "no extra keys"
    assert f"and {len(extra) - MAX_LISTED} more" in detail
    assert "x" * 100 not in detail  # an agent's long name is cut (quote_key)


def test_what_the_directory_holds_instead_of_a_required_file() -> None:
    names = ["policy.safetensors", "policy.pt"]
    assert files_found(names, []) == "the submission directory is empty"
    assert files_found(names, ["README.md"]) == "it holds ['README.md']"
    assert files_found(names, ["policy.ptt", "curve.csv"]) == (
        "it holds ['curve.csv', 'policy.ptt']; misnamed? 'policy.ptt' for 'policy.pt'"
    )
