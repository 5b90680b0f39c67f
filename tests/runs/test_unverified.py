"""Listings check each run's result.json against its signed events (issue 26, item 6).

A run whose ``result.json`` and submission were rewritten to claim a better score, its
signed trajectory untouched, was ranked first by ``leaderboard`` and called official by
``runs list``; only ``audit`` caught it. Every listing now shows such a run as
UNVERIFIED (naming the signed event it contradicts) and never ranks it. Real runs
(``runs_helpers``): beta-1 (the zeroed policy, score 0.022) is forged into a run that
claims the cap, 1.5, with the shipped checkpoint swapped into its submission.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from runs_helpers import RunsRoot, cli, copy_root, forge

from ale_robotics.runs import RunIndex

CAP_RETURN = 1.5 * 982.02
"""A mean return that scores the task's cap against the paper's 982.02."""


@pytest.fixture(scope="module")
def forged(made_runs: RunsRoot, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shared root whose beta-1 claims 1.5 (its trajectory untouched)."""
    root = copy_root(made_runs.root, tmp_path_factory.mktemp("forged") / "runs")
    before = (root / "beta-1" / "trajectory.jsonl").read_bytes()
    doc = forge(root / "beta-1", made_runs.root / "alpha-1", CAP_RETURN)
    assert doc["score"]["score"] == pytest.approx(1.5)  # type: ignore[index]
    assert (root / "beta-1" / "trajectory.jsonl").read_bytes() == before
    return root


def _ids(root: Path) -> dict[str, str]:
    return {
        d.name: json.loads((d / "result.json").read_text())["run_id"]
        for d in root.iterdir()
        if (d / "result.json").is_file()
    }


def _runs_json(*args: str) -> list[dict[str, object]]:
    r = cli("runs", "list", *args, "--json")
    assert r.returncode == 0, r.stderr
    runs: list[dict[str, object]] = json.loads(r.stdout)["runs"]
    return runs


def test_runs_list_calls_the_forged_run_unverified_never_official(forged: Path) -> None:
    runs = {Path(str(s["run_dir"])).name: s for s in _runs_json(str(forged))}
    beta = runs["beta-1"]
    assert beta["verified"] is False and beta["ranked"] is False
    assert str(beta["not_ranked_because"]).startswith("unverified: ")
    problems = beta["verification"]["problems"]  # type: ignore[index]
    assert any("differs from the signed `result` event" in p for p in problems), problems
    assert any(p.startswith("signed submission: ") for p in problems), problems
    for name in ("alpha-1", "alpha-2", "smoke-1"):
        assert runs[name]["verified"] is True, runs[name]["verification"]
    assert runs["alpha-1"]["verification"]["key_pinned"] is False  # type: ignore[index]

    table = cli("runs", "list", str(forged), columns=80)
    assert table.returncode == 0, table.stderr
    (line,) = [x for x in table.stdout.splitlines() if _ids(forged)["beta-1"] in x]
    assert line.split()[-1] == "UNVERIFIED" and "official" not in line
    assert "1.500" in line  # the claim is shown, as a claim
    assert "1 run is UNVERIFIED" in table.stderr


def test_leaderboard_lists_the_forged_run_apart_and_never_ranks_it(forged: Path) -> None:
    ids = _ids(forged)
    r = cli("leaderboard", str(forged), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(row["rank"], row["label"]) for row in doc["rows"]] == [(1, "alpha")]
    (apart,) = doc["unverified"]
    assert apart["run_id"] == ids["beta-1"] and apart["claimed_score"] == pytest.approx(1.5)
    assert apart["problems"]
    table = cli("leaderboard", str(forged), columns=80)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80
    ranked = lines[: lines.index(next(x for x in lines if x.startswith("UNVERIFIED")))]
    assert ids["beta-1"] not in "\n".join(ranked)
    assert any(ids["beta-1"] in x and "1.500" in x for x in lines)


def test_runs_show_and_compare_say_what_the_signed_events_contradict(forged: Path) -> None:
    ids = _ids(forged)
    show = cli("runs", "show", "beta-1", "--root", str(forged), columns=100)
    assert show.returncode == 0, show.stderr
    text = " ".join(show.stdout.split())
    assert "verified NO: result.json disagrees with the signed events" in text
    assert "mean_return 1473.03 differs from the signed `result` event" in text
    doc = json.loads(cli("runs", "show", str(forged / "beta-1"), "--json").stdout)
    assert doc["run"]["verified"] is False
    ok = cli("runs", "show", "alpha-1", "--root", str(forged), columns=100)
    assert "verified yes: " in " ".join(ok.stdout.split())

    c = cli("runs", "compare", "alpha-1", "beta-1", "--root", str(forged), columns=80)
    assert c.returncode == 0, c.stderr
    assert f"note: {ids['beta-1']} is UNVERIFIED" in c.stderr
    kinds = next(x for x in c.stdout.splitlines() if x.startswith("kind"))
    assert kinds.split()[1:] == ["official", "UNVERIFIED"]


def test_the_verdict_is_kept_in_the_index_and_an_edit_verifies_again(
    made_runs: RunsRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ale_robotics.runs.summary as summary

    checked: list[str] = []
    real = summary.verify_run

    def counting(run_dir: Path, report: object) -> object:
        checked.append(run_dir.name)
        return real(run_dir, report)  # type: ignore[arg-type]

    monkeypatch.setattr(summary, "verify_run", counting)
    root = copy_root(made_runs.root, tmp_path / "runs")
    with RunIndex(root) as index:
        assert all(s.verified for s in index.runs())
        assert sorted(checked) == ["alpha-1", "alpha-2", "beta-1", "smoke-1"]
    checked.clear()
    with RunIndex(root) as index:  # a new process would read the kept verdicts
        assert all(s.verified for s in index.runs())
        assert checked == []
        # a forged result.json whose size and mtime are put back is still seen
        result = root / "beta-1" / "result.json"
        st = result.stat()
        doc = json.loads(result.read_text())
        doc["score"]["score"] = 1.0
        text = json.dumps(doc, indent=2) + "\n"
        result.write_text(text.ljust(st.st_size) if len(text) < st.st_size else text)
        os.utime(result, ns=(st.st_atime_ns, st.st_mtime_ns))
        beta = index.find("beta-1")
        assert checked == ["beta-1"]
        assert not beta.verified and beta.kind == "unverified"
        assert "score 1.0 vs 0.0" in beta.not_ranked_because  # type: ignore[operator]
        # a trajectory cut short: the other file of the stamp
        traj = root / "alpha-2" / "trajectory.jsonl"
        traj.write_bytes(b"".join(traj.read_bytes().splitlines(keepends=True)[:-1]))
        alpha2 = index.find("alpha-2")
        assert not alpha2.verified
        assert alpha2.verification is not None
        assert alpha2.verification.problems[0].startswith("trajectory: FAIL")
        assert [r.label for r in index.leaderboard()] == ["alpha"]


def test_a_pinned_evaluator_key_is_the_only_one_trusted(
    made_runs: RunsRoot, tmp_path: Path
) -> None:
    root = copy_root(made_runs.root, tmp_path / "runs")
    key_file = made_runs.base / "state" / "signing_key.pem"
    assert key_file.is_file()
    pinned = _runs_json(str(root), "--public-key", str(key_file))
    assert all(s["verified"] for s in pinned)
    assert all(s["verification"]["key_pinned"] for s in pinned)  # type: ignore[index]
    other = _runs_json(str(root), "--public-key", "ab" * 32)
    assert not any(s["verified"] for s in other)
    problem = other[0]["verification"]["problems"][0]  # type: ignore[index]
    assert "not a key given with --public-key" in problem
    board = json.loads(cli("leaderboard", str(root), "--public-key", "ab" * 32, "--json").stdout)
    assert board["rows"] == []
    bad = cli("runs", "list", str(root), "--public-key", str(tmp_path / "nope.pem"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: --public-key")
    shutil.rmtree(root)
