"""Issue 45, cost beside score, over real runs (``cost_helpers.cost_runs``): an eval set of
two agents, ``terse`` and ``chatty``, each run reaching its scripted model through the
run's real model gateway in bubblewrap, and ``plain``, a run without a gateway.

``runs list`` (its table at 80 columns and ``--json``), ``leaderboard --json``, ``runs
show`` and the eval set's own ``aggregate.json``/``aggregate.md``/plots, each as a user
runs them, show the model's tokens and calls beside the score: what the gateway counted
(``result.json``'s ``model_usage``), and none, never 0, for the run without one. The
report's pages in Chromium are ``test_browser.py``'s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cost_helpers import CALLS, COST_SET, EVAL_SET_OUTPUT, TOKENS
from runs_helpers import cli

pytestmark = pytest.mark.slow  # a real eval set of four gateway runs and a fifth run


def _runs(root: Path) -> list[dict[str, Any]]:
    r = cli("runs", "list", str(root), "--json")
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout)["runs"])


def test_each_run_has_what_its_gateway_counted_and_a_run_without_one_none(
    model_cost_runs: Path,
) -> None:
    runs = _runs(model_cost_runs)
    assert sorted(s["label"] for s in runs) == ["chatty", "chatty", "plain", "terse", "terse"]
    for s in runs:
        result = json.loads((Path(s["run_dir"]) / "result.json").read_text())
        usage = result["model_usage"]
        assert s["score"] == pytest.approx(1000.0 / 982.02), s  # every run scores 1.018
        if s["label"] == "plain":
            assert usage is None
            assert s["model_tokens"] is None and s["model_calls"] is None  # none, not 0
            assert s["model_tokens_in"] is None and s["model_tokens_out"] is None
            continue
        assert (s["model_calls"], s["model_tokens"]) == (CALLS[s["label"]], TOKENS[s["label"]])
        assert s["model_calls"] == usage["calls"]
        assert (s["model_tokens_in"], s["model_tokens_out"]) == (
            usage["tokens_in"],
            usage["tokens_out"],
        )
        assert s["model_estimated_calls"] == 0  # the upstream reported its usage


def test_runs_list_shows_tokens_and_calls_beside_the_score_at_80_columns(
    model_cost_runs: Path,
) -> None:
    ids = {s["run_id"]: s["label"] for s in _runs(model_cost_runs)}
    r = cli("runs", "list", str(model_cost_runs), columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in r.stdout, r.stdout
    shown = {"terse": r"1\.018\s+480/4\s+official", "chatty": r"1\.018\s+2880/6\s+official"}
    shown["plain"] = r"1\.018\s+-\s+official"
    for run_id, label in ids.items():
        row = next(line for line in lines if run_id in line)
        assert re.search(shown[label], row), (label, row)
    assert "tokens/calls: the model's input + output tokens" in " ".join(r.stderr.split())


def test_leaderboard_gives_the_best_runs_tokens_and_calls(model_cost_runs: Path) -> None:
    r = cli("leaderboard", str(model_cost_runs), "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    # equal scores: each label's earliest run is its best, the earlier label ranks first
    first = {}
    for s in sorted(_runs(model_cost_runs), key=lambda s: (s["started_at"], s["run_id"])):
        first.setdefault(s["label"], s)
    expected = [(label, TOKENS.get(label), CALLS.get(label)) for label in first]
    assert [(row["label"], row["model_tokens"], row["model_calls"]) for row in rows] == expected
    assert [row["run_id"] for row in rows] == [s["run_id"] for s in first.values()]
    assert expected[-1] == ("plain", None, None)  # none, not 0: it ranks by its score alone
    table = cli("leaderboard", str(model_cost_runs), columns=80)
    assert table.returncode == 0, table.stderr
    assert max(len(line) for line in table.stdout.splitlines()) <= 80, table.stdout
    for row in rows:
        line = next(line for line in table.stdout.splitlines() if row["run_id"] in line)
        cost = "-" if row["model_tokens"] is None else f"{row['model_tokens']}/{row['model_calls']}"
        assert re.search(rf"1\.018\s+{re.escape(cost)}\s+\d+\s", line), line


def test_runs_show_says_what_the_model_cost_or_that_nothing_counted_it(
    model_cost_runs: Path,
) -> None:
    runs = {s["label"]: s for s in _runs(model_cost_runs)}
    terse = cli("runs", "show", runs["terse"]["run_id"], "--root", str(model_cost_runs))
    assert terse.returncode == 0, terse.stderr
    model = next(line for line in terse.stdout.splitlines() if line.startswith("model "))
    assert model.split(None, 1)[1].strip() == "4 calls, 480 tokens (400 in, 80 out)"
    plain = cli("runs", "show", str(runs["plain"]["run_dir"]))
    assert plain.returncode == 0, plain.stderr
    model = next(line for line in plain.stdout.splitlines() if line.startswith("model "))
    assert model.split(None, 1)[1].strip() == "none counted: the run had no model gateway"


def test_the_eval_sets_aggregate_has_tokens_per_agent_and_the_frontier(
    model_cost_runs: Path,
) -> None:
    """What ``eval-set`` wrote: per cell the runs' tokens, per agent the mean tokens and
    calls per run beside its mean score, terse alone on the frontier (the same score for
    fewer tokens), and the score-vs-tokens plot."""
    out = model_cost_runs / COST_SET / "aggregate"
    doc = json.loads((out / "aggregate.json").read_text())
    assert doc["schema_version"] == 2 and doc["no_cost_plot"] is None
    cells = {c["label"]: c for c in doc["cells"]}
    for label in ("terse", "chatty"):
        assert cells[label]["tokens"] == [TOKENS[label]] * 2
        assert cells[label]["mean_tokens"] == TOKENS[label]
    cost = {c["label"]: c for c in doc["cost"]}
    for label, pareto in (("terse", True), ("chatty", False)):
        c = cost[label]
        assert c["tokens"] == {"value": TOKENS[label], "low": TOKENS[label], "high": TOKENS[label]}
        assert c["calls"] == CALLS[label] and (c["runs_counted"], c["runs_uncounted"]) == (2, 0)
        assert c["score"]["value"] == pytest.approx(1000.0 / 982.02)
        assert c["pareto"] is pareto
    png = out / "score_vs_tokens.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    md = (out / "aggregate.md").read_text()
    assert "Pareto frontier (a higher mean score, fewer tokens per run): terse." in md
    assert "| chatty | 2/2 | 2880 [2880, 2880] | 6.0 |" in md

    printed = (model_cost_runs.parent / EVAL_SET_OUTPUT).read_text()  # eval-set's tables
    assert max(len(line) for line in printed.splitlines()) <= 80, printed
    cost_table = printed[printed.index("model cost per run") :]
    assert re.search(r"terse\s+1\.018\s+480\s+\[480, 480\]\s+4\.0\s+yes", cost_table)
    assert re.search(r"chatty\s+1\.018\s+2880\s+\[2880, 2880\]\s+6\.0\s+no", cost_table)
