"""``ale-robotics report``: the site built from real runs, read as HTML (no browser).

What a person relies on when opening the site: a page per run with its real
score and trajectory, plots copied in, nothing referenced outside the site,
agent-written text shown as text, a tampered trajectory flagged on its page, and
an ``--out`` that never overwrites something that is not a report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import markupsafe
import pytest
from report_helpers import CLI, ROOT, Runs

from ale_robotics.errors import AleError
from ale_robotics.harness.report import RunReport, load_run_report
from ale_robotics.report import MARKER, build_site, page_name
from ale_robotics.report.pages import log_tail, visible
from ale_robotics.report.site import SiteBuild
from ale_robotics.trajectory import verify_file


class _Page(HTMLParser):
    """The attributes that make a browser load or follow something, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in {"src", "href", "srcset", "action", "poster", "data"} and value:
                self.refs.append((tag, name, value))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="module")
def site(real_runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> SiteBuild:
    return build_site(real_runs.root, tmp_path_factory.mktemp("site") / "site")


def _page_of(site: SiteBuild, run_dir: Path) -> Path:
    return site.pages[load_run_report(run_dir / "result.json").run_id]


def test_every_run_has_a_page_and_every_reference_stays_in_the_site(
    site: SiteBuild, real_runs: Runs
) -> None:
    assert (site.out / MARKER).is_file()
    assert len(site.pages) == len(real_runs.dirs)
    html_files = [site.index, *site.pages.values()]
    for path in html_files:
        page = _parse(path)
        assert "script" not in page.tags, path
        for tag, attr, value in page.refs:
            assert "://" not in value and not value.startswith(("/", "data:")), (path, value)
            target = (path.parent / value.split("#")[0]).resolve()
            assert target.is_file(), (path, tag, attr, value)
            assert site.out in target.parents, (path, value)
    # no URL at all outside what an agent wrote (its command line and log are shown)
    hostile = _page_of(site, real_runs.dirs["hostile"])
    for path in html_files:
        if path != hostile:
            text = path.read_text(encoding="utf-8")
            assert "http://" not in text and "https://" not in text, path


def test_plots_are_copied_into_the_site(site: SiteBuild, real_runs: Runs) -> None:
    walker = _page_of(site, real_runs.dirs["walker"])
    images = [v for tag, attr, v in _parse(walker).refs if tag == "img"]
    assert sorted(Path(v).name for v in images) == ["episodes.png", "learning_curve.png"]
    for value in images:
        copied = walker.parent / value
        original = real_runs.dirs["walker"] / Path(value).name
        assert copied.read_bytes() == original.read_bytes()
    stopped = _page_of(site, real_runs.dirs["stopped"])
    assert not [v for tag, attr, v in _parse(stopped).refs if tag == "img"]


def test_run_page_shows_the_real_score_target_and_trajectory(
    site: SiteBuild, real_runs: Runs
) -> None:
    report = load_run_report(real_runs.dirs["alpha"] / "result.json")
    assert isinstance(report, RunReport) and report.score.score is not None
    html = site.pages[report.run_id].read_text(encoding="utf-8")
    assert f'id="score-value">{report.score.score:.3f}<' in html
    assert report.score.score_line() in _text(site.pages[report.run_id])
    assert report.score.comparability is not None
    for note in report.score.comparability.notes:
        assert _escaped(note) in html
    verdict = verify_file(
        real_runs.dirs["alpha"] / "trajectory.jsonl",
        expected_head=report.trajectory_head,
        expected_events=report.trajectory_events,
    )
    assert verdict.ok
    assert html.count('<tr class="event"') == report.trajectory_events
    assert html.count('data-signature="valid"') == verdict.counts["trusted_evaluator"] > 0
    assert html.count('data-signature="unsigned"') == verdict.counts["harness"]
    assert f"OK: {report.trajectory_events} events" in html
    # the per-episode table: one row per evaluated episode
    assert report.eval_result is not None and report.eval_result.outcomes is not None
    assert (
        f'Episodes <span class="muted small">({len(report.eval_result.outcomes.entries())})' in html
    )


def test_index_lists_the_leaderboard_and_marks_smoke_and_stopped_runs(
    site: SiteBuild, real_runs: Runs
) -> None:
    html = site.index.read_text(encoding="utf-8")
    board = html.split('id="leaderboard"')[1].split('id="runs"')[0]
    pendulum = board.split('data-task="td3-inverted-pendulum-v1"')[1].split("</table>")[0]
    labels = [
        cell.split(">", 1)[1].split("</td>")[0] for cell in pendulum.split('<td class="label"')[1:]
    ]
    assert labels == ["alpha", "beta", "hostile"]  # equal scores: the earlier start first
    assert 'data-task="td3-walker2d-repro-v1"' in board
    assert "sleeper" not in board  # an interrupted run never ranks
    runs = html.split('id="runs"')[1]
    assert runs.count('<tr class="run"') == len(real_runs.dirs)
    assert 'data-kind="smoke 2/10"' in runs and ">smoke 2/10<" in runs
    assert 'data-kind="interrupted"' in runs


def test_agent_written_text_is_shown_as_text(site: SiteBuild, real_runs: Runs) -> None:
    page = _page_of(site, real_runs.dirs["hostile"])
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html and "<img src=https" not in html
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    log = html.split('<pre class="log">')[1].split("</pre>")[0]
    assert "\x1b" not in log and "[31m" not in log  # the colour sequence is dropped
    assert "red done" in log


def test_labels_and_file_names_from_a_result_are_escaped(real_runs: Runs, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = shutil.copytree(real_runs.dirs["alpha"], root / "odd", ignore=_no_scratch)
    data = json.loads((run / "result.json").read_text())
    data["label"] = '<b onmouseover="x()">lab</b>'
    data["run_id"] = "../../<evil>"
    data["eval_result"]["submission_files"]['<img src=x onerror="y()">.pt'] = "0" * 64
    (run / "result.json").write_text(json.dumps(data))
    built = build_site(root, tmp_path / "site")
    (page,) = built.pages.values()
    assert page.parent == tmp_path / "site" / "runs" and page.name.startswith("run-")
    for path in (built.index, page):
        html = path.read_text(encoding="utf-8")
        assert "<b onmouseover" not in html and "<img src=x" not in html and "<evil>" not in html
        assert "&lt;b onmouseover=&#34;x()&#34;&gt;lab&lt;/b&gt;" in html
    assert "&lt;img src=x onerror=&#34;y()&#34;&gt;.pt" in page.read_text(encoding="utf-8")


def test_a_tampered_trajectory_is_flagged_on_its_page(real_runs: Runs, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = shutil.copytree(real_runs.dirs["alpha"], root / "tampered", ignore=_no_scratch)
    lines = (run / "trajectory.jsonl").read_bytes().splitlines(keepends=True)
    seq = next(i for i, line in enumerate(lines) if b'"kind":"result"' in line)
    lines[seq] = lines[seq].replace(b"1000.0", b"1000.5", 1)
    (run / "trajectory.jsonl").write_bytes(b"".join(lines))
    built = build_site(root, tmp_path / "site")
    html = next(iter(built.pages.values())).read_text(encoding="utf-8")
    assert 'class="verdict bad"' in html and f"FAIL at event {seq}" in html
    assert html.count("bad-row") == 1
    bad_row = html.split("bad-row")[1].split("</tr>")[0]
    assert f'<td class="num t-seq">{seq}</td>' in bad_row


def test_a_symlinked_or_fake_plot_is_not_copied(real_runs: Runs, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = shutil.copytree(real_runs.dirs["walker"], root / "w", ignore=_no_scratch)
    (run / "episodes.png").unlink()
    (run / "episodes.png").symlink_to("/etc/passwd")
    (run / "learning_curve.png").write_text("<html>not a png</html>")
    built = build_site(root, tmp_path / "site")
    assert not list((tmp_path / "site" / "runs").glob("*/*.png"))
    assert "<img" not in next(iter(built.pages.values())).read_text(encoding="utf-8")


def test_out_is_replaced_only_when_it_is_a_report(real_runs: Runs, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(real_runs.dirs["beta"], root / "beta", ignore=_no_scratch)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(AleError, match="not empty and not a site"):
        build_site(root, mine)
    assert (mine / "notes.txt").read_text() == "keep me"
    with pytest.raises(AleError, match="holds the runs"):
        build_site(root, root)
    with pytest.raises(AleError, match="holds the runs"):
        build_site(root, tmp_path)
    first = build_site(root, tmp_path / "site")
    (first.out / "stale.html").write_text("old")
    again = build_site(root, tmp_path / "site")
    assert again.index.is_file() and not (again.out / "stale.html").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site.building-")]


def test_report_command(real_runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "site"
    proc = subprocess.run(
        [*CLI, "report", str(real_runs.root), "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "index.html")
    assert f"report: {len(real_runs.dirs)} runs" in proc.stderr
    missing = subprocess.run(
        [*CLI, "report", str(tmp_path / "nope"), "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "no runs directory" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_page_names_are_safe_and_unique() -> None:
    taken: set[str] = set()
    assert page_name("run-20261201T232336Z-5e9acc", taken) == "run-20261201T232336Z-5e9acc"
    assert page_name("run-20261201T232336Z-5e9acc", taken) == "run-20261201T232336Z-5e9acc-2"
    for odd in ("../x", "a/b", "..", ".hidden", "x" * 300, "é", "<b>"):
        name = page_name(odd, taken)
        assert name.startswith("run-") and "/" not in name and len(name) <= 120


def test_log_tail_shows_what_a_terminal_shows(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    body = "".join(f"line {i}\n" for i in range(100_000))
    log.write_bytes(
        body.encode()
        + b"progress 10%\rprogress 50%\rprogress 100%\n"
        + b"\x1b[1;32mgreen\x1b[0m bell\x07 nul\x00 \xff\xfe end\n"
    )
    tail = log_tail(log, max_lines=5)
    assert tail.cut and tail.lines == 5 and tail.size == log.stat().st_size
    assert tail.text.splitlines() == [
        "line 99997",
        "line 99998",
        "line 99999",
        "progress 100%",
        "green bell\\x07 nul\\x00 \ufffd\ufffd end",
    ]
    assert log_tail(tmp_path / "missing.log").size is None
    assert visible("a\u2028b\x9bc\td") == "a\\u2028b\\x9bc\td"


def _no_scratch(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n in {"scratch", "submission", "index.sqlite3"}]


def _text(path: Path) -> str:
    return "".join(_parse(path).text)


def _escaped(text: str) -> str:
    return str(markupsafe.escape(text))


def test_the_timeline_is_in_time_order_and_says_where_the_chain_differs(
    real_runs: Runs,
) -> None:
    """Issue 48.10: in the chain (seq) order a real run's time went back (the harness's
    agent_exited, appended as it happened, before the evaluator's signed events of the
    seconds before, appended when the harness read them). The timeline shows the events in
    time order: 'since start' never decreases, every event once, seq kept."""
    from ale_robotics.report.timeline import timeline

    for name in ("alpha", "walker"):
        report = load_run_report(real_runs.dirs[name] / "result.json")
        chain = verify_file(real_runs.dirs[name] / "trajectory.jsonl")
        assert chain.ok, chain
        shown = timeline(real_runs.dirs[name] / "trajectory.jsonl", report)
        seconds = [float(row.delta.strip("+ s")) for row in shown.rows]
        assert seconds == sorted(seconds), (name, seconds)
        seqs = [int(row.seq) for row in shown.rows]
        assert sorted(seqs) == list(range(len(seqs))), (name, seqs)
        assert shown.reordered == (seqs != sorted(seqs))
        assert shown.reordered, f"{name}: the chain's order went back in time before"
        kinds = [row.kind for row in shown.rows]
        assert kinds[0] == "run_started" and kinds[-1] == "score", kinds
