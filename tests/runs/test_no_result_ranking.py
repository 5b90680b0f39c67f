"""Issue 48.3: one rule for which runs rank, the same in every listing.

A run ranks only when the evaluator measured what the agent gave it under the task's
full protocol. Two real runs the evaluator measured nothing for, both scored 0 with
status ``no_result``: a batch submission the evaluator rejects (a renamed key), and an
interactive agent that exits without opening its eval session. Neither ranks, and both
are shown alike ('no result') by ``leaderboard --json``, ``runs list`` (table and
``--json``), ``runs show`` and the HTML report, beside a measured run that ranks. Before
the rule, the rejected run ranked #2 as ``official (ranked)`` while the session-less one
was 'unofficial'.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from runs_helpers import AGENT, ROOT, cli

from ale_robotics.report import build_site

PENDULUM = "td3-inverted-pendulum-v1"
HOPPER = "td3-hopper-v1"
REJECTED_AGENT = """\
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
client = AleClient.from_env()
weights = {"fc1.weight": np.zeros((4, 4), np.float32)}  # the contract wants l1.weight, ...
save_file(weights, str(client.submission_dir / "policy.safetensors"))
print(client.wait(client.submit()))
"""


def _run(base: Path, name: str, task: str, agent: str) -> str:
    """One real ``ale-robotics run`` (no sandbox: the agents live in ``base``); its id."""
    run_dir = base / "runs" / name
    proc = cli(
        "run", task, "--agent", agent, "--sandbox", "none", "--workers", "1",
        "--run-dir", str(run_dir), "--state-dir", str(base / "state"), "--label", name,
        "--no-videos", cwd=ROOT, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("score:"), proc.stdout
    return str(json.loads((run_dir / "result.json").read_text())["run_id"])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """good (measured, ranks), rejected (batch, rejected) and silent (interactive, no eval
    session): name -> run id."""
    base = tmp_path_factory.mktemp("noresult")
    (base / "rejected.py").write_text(REJECTED_AGENT)
    ids = {
        "good": _run(base, "good", PENDULUM, f"{sys.executable} {AGENT}"),
        "rejected": _run(base, "rejected", PENDULUM, f"{sys.executable} {base / 'rejected.py'}"),
        "silent": _run(base, "silent", HOPPER, f"{sys.executable} -c pass"),
    }
    yield base / "runs", ids


def test_the_result_json_of_both_says_no_result(root: tuple[Path, dict[str, str]]) -> None:
    """The premise: both are completed, official-looking runs scored 0 by the score's rules."""
    runs, _ = root
    for name, cause in (("rejected", "submission rejected"), ("silent", "no eval session")):
        doc = json.loads((runs / name / "result.json").read_text())
        assert doc["score"]["status"] == "no_result" and doc["score"]["score"] == 0.0, name
        assert doc["score"]["problems"][0].startswith(cause), doc["score"]["problems"]
    assert json.loads((runs / "rejected" / "result.json").read_text())["official"] is True


def test_leaderboard_json_ranks_neither_and_says_why(root: tuple[Path, dict[str, str]]) -> None:
    runs, ids = root
    r = cli("leaderboard", str(runs), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(row["task_id"], row["label"], row["rank"]) for row in doc["rows"]] == [
        (PENDULUM, "good", 1)
    ]
    why = {n["run_id"]: n["reason"] for n in doc["not_ranked"]}
    assert set(why) == {ids["rejected"], ids["silent"]}
    assert why[ids["rejected"]].startswith("no result: submission rejected: "), why
    assert why[ids["silent"]].startswith("no result: no eval session: "), why
    assert doc["unverified"] == []


def test_runs_list_shows_both_as_no_result(root: tuple[Path, dict[str, str]]) -> None:
    runs, ids = root
    r = cli("runs", "list", str(runs), "--json")
    assert r.returncode == 0, r.stderr
    by_id = {s["run_id"]: s for s in json.loads(r.stdout)["runs"]}
    assert by_id[ids["good"]]["ranked"] is True
    for name in ("rejected", "silent"):
        s = by_id[ids[name]]
        assert (s["state"], s["status"], s["score"], s["verified"]) == (
            "completed", "no_result", 0.0, True
        ), s  # fmt: skip
        assert s["ranked"] is False and s["not_ranked_because"].startswith("no result: "), s
        assert s["reason"] and s["reason"] in s["not_ranked_because"], s
    table = cli("runs", "list", str(runs))
    assert table.returncode == 0, table.stderr
    kinds = {
        name: "no result" if line.rstrip().endswith("no result") else line.split()[-1]
        for line in table.stdout.splitlines()
        for name, run_id in ids.items()
        if line.startswith(run_id)
    }
    assert kinds == {"good": "official", "rejected": "no result", "silent": "no result"}, (
        table.stdout
    )
    shown = cli("runs", "show", ids["rejected"], "--root", str(runs))
    assert "no result (not ranked: the evaluator measured nothing)" in shown.stdout, shown.stdout


class _Rows(HTMLParser):
    """The index's leaderboard labels, its runs' kinds by run id, and the ranking rule."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[dict[str, str | None]] = []
        self.labels: list[str] = []
        self.kinds: dict[str, str] = {}
        self.rule = ""
        self._in: str | None = None
        self._kind: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "leader":
            self._in = "leader"
        elif tag == "tr" and a.get("class") == "run":
            self._in, self._kind = "run", a.get("data-kind")
        elif tag == "p" and a.get("id") == "ranking-rule":
            self._in = "rule"
        elif tag == "td" and self._in == "leader" and a.get("class") == "label":
            self._in = "leader-label"

    def handle_endtag(self, tag: str) -> None:
        if tag in {"tr", "p"}:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "leader-label":
            self.labels.append(data)
            self._in = "leader"
        elif self._in == "run" and data.startswith("run-") and self._kind is not None:
            self.kinds[data] = self._kind
        elif self._in == "rule":
            self.rule += data


def test_the_report_ranks_neither_and_states_the_rule(
    root: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    runs, ids = root
    site = build_site(runs, tmp_path / "site")
    page = _Rows()
    page.feed(site.index.read_text(encoding="utf-8"))
    assert page.labels == ["good"]
    assert page.kinds == {
        ids["good"]: "official", ids["rejected"]: "no result", ids["silent"]: "no result"
    }  # fmt: skip
    assert "ranks only when the evaluator measured" in page.rule, page.rule
    assert "no result" in page.rule and "rejected" in page.rule, page.rule
