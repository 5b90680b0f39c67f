"""The report of a runs root holding an eval set, and of a run whose result.json lies.

Issue 34: the report did not show eval sets at all (only loose runs). Issue 26: a run
whose ``result.json`` was rewritten to claim a better score ranked first on the
report's leaderboard, and its page said only "OK: chain and signatures verify". Real
runs: ``conftest.set_runs`` (a real ``ale-robotics eval-set`` whose zero/rep1 is forged
to claim 1.5) and ``conftest.real_runs`` (beta forged in a copy).
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_helpers import PENDULUM, SET_NAME, Runs
from runs_helpers import forge

from ale_robotics.harness.report import load_run_report
from ale_robotics.report import build_site
from ale_robotics.report.site import SiteBuild


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in {"href", "src"} and value:
                self.refs.append((tag, value))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Links:
    page = _Links()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _text(path: Path) -> str:
    return " ".join("".join(_parse(path).text).split())


def _no_scratch(directory: str, names: list[str]) -> set[str]:
    return {"scratch"} & set(names)


@pytest.fixture(scope="module")
def set_site(set_runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> SiteBuild:
    return build_site(set_runs.root, tmp_path_factory.mktemp("set-site") / "site")


def test_the_index_links_each_eval_set_and_each_run_says_its_set_and_repetition(
    set_site: SiteBuild, set_runs: Runs
) -> None:
    assert list(set_site.sets) == [SET_NAME]
    page = set_site.sets[SET_NAME]
    assert page == set_site.out / "sets" / f"{SET_NAME}.html"
    index = _parse(set_site.index)
    assert ("a", f"sets/{SET_NAME}.html") in index.refs
    html = set_site.index.read_text(encoding="utf-8")
    assert f'<tr class="set" data-set="{SET_NAME}">' in html
    for key, run_dir in set_runs.dirs.items():
        if key == "forged":
            continue
        report = load_run_report(run_dir / "result.json")
        run_page = set_site.pages[report.run_id]
        rep = int(key.split("rep")[1])
        assert f"eval set {SET_NAME}, repetition {rep}" in _text(run_page)
        assert ("a", f"../sets/{SET_NAME}.html") in _parse(run_page).refs


def test_a_set_page_has_per_task_and_across_task_iqm_with_intervals_plots_and_runs(
    set_site: SiteBuild, set_runs: Runs
) -> None:
    page = set_site.sets[SET_NAME]
    html = page.read_text(encoding="utf-8")
    text = _text(page)
    agg = json.loads((set_runs.root / SET_NAME / "aggregate" / "aggregate.json").read_text())
    # what eval-set wrote counted the forged run (it was forged afterwards); the page
    # recomputes from the runs as they are now and leaves it out, saying so
    assert agg["runs_scored"] == 4
    assert 'id="runs-scored">3 / 4<' in html
    assert 'id="unverified-count">1<' in html
    assert f"{PENDULUM}/zero/rep1" in text and "UNVERIFIED" in text
    # per task: mean and IQM with intervals, for every agent
    per_task = html.split('id="per-task"')[1].split("</section>")[0]
    assert f'data-task="{PENDULUM}"' in per_task
    td3 = per_task.split('data-label="td3"')[1].split("</tr>")[0]
    assert ">2/2<" in td3 and td3.count("1.018 [1.018, 1.018]") == 2
    zero = per_task.split('data-label="zero"')[1].split("</tr>")[0]
    assert ">1/2<" in zero and "UNVERIFIED" in zero
    # across tasks: IQM, optimality gap, mean, median with intervals
    across = html.split('id="across"')[1].split("</section>")[0]
    assert across.count('<tr class="agent"') == 2
    assert "1.018 [1.018, 1.018]" in across.split('data-label="td3"')[1].split("</tr>")[0]
    # the plots, drawn into the site, and links to every run
    refs = _parse(page).refs
    images = [v for tag, v in refs if tag == "img"]
    assert sorted(Path(v).name for v in images) == [
        "interval_estimates.png",
        "per_task_iqm.png",
        "performance_profile.png",
    ]
    for value in images:
        assert (page.parent / value).read_bytes().startswith(b"\x89PNG")
    run_links = {v for tag, v in refs if tag == "a" and v.startswith("../runs/")}
    assert len(run_links) == 4
    for value in run_links:
        assert (page.parent / value).is_file()


def test_a_forged_run_is_unverified_on_the_report_and_never_on_the_leaderboard(
    real_runs: Runs, tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    for name in ("alpha", "beta"):
        shutil.copytree(real_runs.dirs[name], root / name, ignore=_no_scratch)
    before = (root / "beta" / "trajectory.jsonl").read_bytes()
    forge(root / "beta", real_runs.dirs["alpha"], 1.5 * 982.02)
    assert (root / "beta" / "trajectory.jsonl").read_bytes() == before
    built = build_site(root, tmp_path / "site")
    html = built.index.read_text(encoding="utf-8")
    board = html.split('id="leaderboard"')[1].split('id="unverified"')[0]
    labels = [
        cell.split(">", 1)[1].split("</td>")[0] for cell in board.split('<td class="label"')[1:]
    ]
    assert labels == ["alpha"]
    apart = html.split('id="unverified"')[1].split("</section>")[0]
    beta = load_run_report(root / "beta" / "result.json")
    assert beta.run_id in apart and "1.500" in apart
    assert 'data-kind="unverified"' in html
    page = built.pages[beta.run_id].read_text(encoding="utf-8")
    verdict = page.split('id="claims-verdict">')[1].split("</div>")[0]
    assert verdict.startswith("UNVERIFIED: result.json disagrees with the evaluator")
    assert "differs from the signed `result` event" in page
    assert "score claimed by result.json (unverified)" in page
    # the chain verifies (the forger left it alone), and the page says it is not enough
    assert "chain and signatures verify" in page and 'id="verdict-claims"' in page
    alpha = load_run_report(root / "alpha" / "result.json")
    ok = built.pages[alpha.run_id].read_text(encoding="utf-8")
    assert 'class="verdict ok" id="claims-verdict">Verified: ' in ok
