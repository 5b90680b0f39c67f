"""``ale-robotics view`` in a real headless browser: what a person sees, and that it
stays on this machine.

The command runs as a real subprocess on a free port over a root of real runs;
Debian's Chromium, driven by Playwright (never a browser Playwright downloads),
opens the leaderboard and the run pages. Every request the pages make is
intercepted: one that would leave the server fails the test. Screenshots go to
the test's tmp dir and to /tmp/ale-report-screenshots/ for a person to look at.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Error, Page, Route, sync_playwright
from report_helpers import CLI, ROOT, Runs

from ale_robotics.harness.report import RunReport, load_run_report

SCREENSHOTS = Path("/tmp/ale-report-screenshots")
LAPTOP = {"width": 1366, "height": 800}


def _chromium() -> str | None:
    """Debian's chromium (make browser-deps installs it)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = _chromium()
    if executable is None:
        pytest.skip("chromium is not installed: 'make browser-deps' (apt-get install chromium)")
    with sync_playwright() as pw:
        try:
            launched = pw.chromium.launch(executable_path=executable, headless=True)
        except Error as exc:
            pytest.skip(f"{executable} cannot start here: {str(exc).splitlines()[0]}")
        yield launched
        launched.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Viewer:
    """The running ``ale-robotics view`` and what the browser asked of the network."""

    proc: subprocess.Popen[str]
    url: str
    outside: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _view(root: Path) -> Iterator[Viewer]:
    """``ale-robotics view ROOT --port N`` as a subprocess, once it printed its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [*CLI, "view", str(root), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "view printed no URL in 120 s"
        url = proc.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}/", (url, proc.poll())
        yield Viewer(proc, url)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def viewer(real_runs: Runs) -> Iterator[Viewer]:
    with _view(real_runs.root) as running:
        yield running


@pytest.fixture
def page(browser: Browser, viewer: Viewer) -> Iterator[Page]:
    with _open(browser, viewer, LAPTOP) as opened:
        yield opened


@contextlib.contextmanager
def _open(browser: Browser, viewer: Viewer, viewport: dict[str, int]) -> Iterator[Page]:
    """A page at ``viewport`` that may load from ``viewer`` only, failing on a request
    that left the server or failed."""
    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]

    def only_the_server(route: Route) -> None:
        if route.request.url.startswith(viewer.url):
            route.continue_()
        else:
            viewer.outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_server)
    opened = context.new_page()
    # A request the browser itself cancels (net::ERR_ABORTED: a favicon still loading when
    # the test navigates on) is no failure of the site; anything else is.
    opened.on(
        "requestfailed",
        lambda r: None if "ERR_ABORTED" in (r.failure or "") else viewer.failed.append(r.url),
    )
    opened.on(
        "response",
        lambda r: viewer.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    yield opened
    context.close()
    assert viewer.outside == [], "requests left the machine"
    assert viewer.failed == [], "requests failed"


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, SCREENSHOTS / path.name)


def _loaded_images(page: Page) -> dict[str, int]:
    """src (as written) -> natural width, for every <img> (0: it did not load)."""
    found = page.eval_on_selector_all(
        "img", "els => els.map(e => [e.getAttribute('src'), e.complete ? e.naturalWidth : 0])"
    )
    return {src: width for src, width in found}


def _report(run_dir: Path) -> RunReport:
    report = load_run_report(run_dir / "result.json")
    assert isinstance(report, RunReport)
    return report


def test_leaderboard_and_runs_list(
    page: Page, viewer: Viewer, real_runs: Runs, tmp_path: Path
) -> None:
    page.goto(viewer.url)
    assert page.title() == "Results · ALE Robotics"
    board = page.locator('table.leaderboard[data-task="td3-inverted-pendulum-v1"] tr.leader')
    assert board.locator("td.label").all_inner_texts() == ["alpha", "beta", "hostile"]
    assert board.locator("td.rank").all_inner_texts() == ["1", "2", "3"]
    alpha = _report(real_runs.dirs["alpha"])
    assert alpha.score.score is not None
    assert board.first.locator("td.score").inner_text() == f"{alpha.score.score:.3f}"
    walker = page.locator('table.leaderboard[data-task="td3-walker2d-repro-v1"] tr.leader')
    assert walker.locator("td.label").all_inner_texts() == ["td3_train"]
    runs = page.locator("table.runs tr.run")
    assert runs.count() == len(real_runs.dirs)
    smoke = page.locator('table.runs tr.run[data-kind="smoke 2/10"]')
    assert smoke.count() == 1 and "smoke 2/10" in smoke.inner_text()
    assert page.locator('table.runs tr.run[data-kind="interrupted"]').count() == 1
    _shot(page, tmp_path, "index")


def test_run_page(page: Page, viewer: Viewer, real_runs: Runs, tmp_path: Path) -> None:
    alpha = _report(real_runs.dirs["alpha"])
    page.goto(viewer.url)
    page.locator("table.leaderboard tr.leader").first.locator("a").click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/runs/{alpha.run_id}.html")
    assert alpha.score.score is not None
    assert page.locator("#score-value").inner_text() == f"{alpha.score.score:.3f}"
    assert page.locator("#score-line").inner_text() == alpha.score.score_line()
    images = _loaded_images(page)
    assert list(images) == [f"{alpha.run_id}/episodes.png"], images
    assert all(width > 0 for width in images.values()), images
    rows = page.locator("table.timeline tr.event")
    assert rows.count() == alpha.trajectory_events
    assert (
        page.locator("#verdict")
        .inner_text()
        .startswith(f"OK: {alpha.trajectory_events} events, chain and signatures verify")
    )
    for i in range(rows.count()):
        row = rows.nth(i)
        source = row.locator("td").nth(3).inner_text()
        signature = row.locator("td.sig").inner_text()
        assert signature == ("✓ valid" if source == "trusted_evaluator" else "unsigned"), i
    kinds = [rows.nth(i).locator("td").nth(4).inner_text() for i in range(rows.count())]
    assert kinds[0] == "run_started" and "result" in kinds and kinds[-1] == "score"
    # a payload opens in place, no script needed
    first = rows.first.locator("details")
    first.locator("summary").click()
    assert '"agent_cmd"' in first.locator("pre").inner_text()
    _shot(page, tmp_path, "run-alpha")


def test_learning_curve_and_gate(
    page: Page, viewer: Viewer, real_runs: Runs, tmp_path: Path
) -> None:
    walker = _report(real_runs.dirs["walker"])
    page.goto(f"{viewer.url}runs/{walker.run_id}.html")
    images = _loaded_images(page)
    assert sorted(images) == [
        f"{walker.run_id}/episodes.png",
        f"{walker.run_id}/learning_curve.png",
    ]
    assert all(width > 0 for width in images.values()), images
    assert walker.score.gate is not None
    checks = page.locator("#checks").inner_text()
    for check in walker.score.gate.checks:
        assert check.name in checks
    assert walker.eval_result is not None
    curve_rows = page.locator("#episodes table").nth(1).locator("tbody tr")
    assert curve_rows.count() == len(walker.eval_result.learning_curve)
    _shot(page, tmp_path, "run-walker")


def test_agent_text_cannot_act(page: Page, viewer: Viewer, real_runs: Runs, tmp_path: Path) -> None:
    hostile = _report(real_runs.dirs["hostile"])
    page.goto(f"{viewer.url}runs/{hostile.run_id}.html")
    log = page.locator("pre.log")
    assert "<script>window.pwned=1</script> <img src=https://evil.example/x.png> red done" in (
        log.inner_text()
    )
    assert log.locator("script, img").count() == 0
    assert page.evaluate("typeof window.pwned") == "undefined"
    _shot(page, tmp_path, "run-hostile")


def test_stopped_run_page(page: Page, viewer: Viewer, real_runs: Runs, tmp_path: Path) -> None:
    report = load_run_report(real_runs.dirs["stopped"] / "result.json")
    assert report.state == "interrupted"
    page.goto(f"{viewer.url}runs/{report.run_id}.html")
    assert "No verdict: the run was interrupted" in page.locator("#score").inner_text()
    assert "SIGINT" in page.locator("#score").inner_text()
    assert page.locator("table.timeline tr.event").last.locator("td").nth(4).inner_text() == (
        "run_interrupted"
    )
    assert "training..." in page.locator("pre.log").inner_text()
    _shot(page, tmp_path, "run-stopped")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_view_with_exit_0(real_runs: Runs, sig: signal.Signals) -> None:
    """Its own server (the shared one is still in use): Ctrl-C (or SIGTERM, what a
    service manager sends) is a clean stop."""
    with _view(real_runs.root) as viewer:
        os.killpg(viewer.proc.pid, sig)
        assert viewer.proc.wait(timeout=20) == 0
        assert viewer.proc.stderr is not None
        err = viewer.proc.stderr.read()
        assert "Traceback" not in err and "stopped" in err


@pytest.fixture(scope="module")
def set_viewer(set_runs: Runs) -> Iterator[Viewer]:
    with _view(set_runs.root) as running:
        yield running


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_eval_set_page_reads_at_desktop_and_phone_width(
    browser: Browser, set_viewer: Viewer, set_runs: Runs, tmp_path: Path, width: int
) -> None:
    """Issue 34: each eval set has a page, linked from the index; at 1280 and 390 px it
    has no horizontal overflow and its statistics, plots and runs are on screen."""
    with _open(browser, set_viewer, {"width": width, "height": 900}) as page:
        page.goto(set_viewer.url)
        page.locator('#sets a[href="sets/study.html"]').click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/sets/study.html")
        assert page.title() == "Eval set study · ALE Robotics"
        overflow = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert overflow[0] <= overflow[1] == width, overflow
        for label in ("td3", "zero"):  # every agent's IQM, with its interval, on screen
            for cell in (
                page.locator(f'#across tr.agent[data-label="{label}"] td.iqm'),
                page.locator(f'#per-task tr.cell[data-label="{label}"] td.iqm'),
            ):
                assert cell.is_visible()
                box = cell.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
                assert re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", cell.inner_text())
        assert page.locator("#unverified-count").inner_text() == "1"
        images = _loaded_images(page)
        assert len(images) == 3 and all(w > 0 for w in images.values()), images
        # issue 45: no run of this set had a model gateway: no cost plot, and the page says why
        assert "score_vs_tokens.png" not in " ".join(images)
        why = page.locator("#no-cost-plot")
        assert why.is_visible() and "none ran with a model gateway" in why.inner_text()
        assert page.locator("table.cost").count() == 0
        for img in page.locator("#plots img").all():
            box = img.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
        _shot(page, tmp_path, f"set-{width}")
        # a run of the set: its page says which set and repetition it is
        page.locator('#per-task tr.cell[data-label="td3"] td.reps a').nth(1).click()
        page.wait_for_load_state("load")
        assert page.locator("#set-place").inner_text() == "eval set study, repetition 1"
        overflow = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert overflow[0] <= overflow[1], overflow
        _shot(page, tmp_path, f"set-run-{width}")


# ------------------------------------------------- issue 48: layout at 1280 and 390 px --

WIDTHS = [1280, 390]


def _fits(page: Page, table: str) -> None:
    """Every ``table`` on the page is no wider than the box that holds it (nothing cut
    behind a scrollbar) and the page itself does not scroll sideways."""
    doc = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert doc[0] <= doc[1], ("the page scrolls sideways", doc)
    widths = page.eval_on_selector_all(
        table, "els => els.map(e => [e.scrollWidth, e.parentElement.clientWidth])"
    )
    assert widths, table
    for inner, outer in widths:
        assert inner <= outer, (table, inner, outer)


def _on_screen(page: Page, selector: str, width: int) -> list[str]:
    """The texts of ``selector``'s elements, each checked to lie inside the viewport's
    width and inside the box of the table's scroll container (not cut off by it)."""
    texts = []
    for cell in page.locator(selector).all():
        box = cell.bounding_box()
        assert box is not None and box["width"] > 0, selector
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)
        holder = cell.evaluate(
            "e => { const r = e.closest('.scroll').getBoundingClientRect();"
            " return [r.left, r.right]; }"
        )
        assert holder[0] <= box["x"] + 0.5 and box["x"] + box["width"] <= holder[1] + 0.5, (
            selector, box, holder
        )  # fmt: skip
        texts.append(cell.inner_text())
    return texts


def _significant(text: str) -> int:
    digits = text.replace("-", "").replace(".", "").lstrip("0")
    return len(digits)


@pytest.fixture(scope="module")
def no_result_viewer(no_result_runs: Runs) -> Iterator[Viewer]:
    with _view(no_result_runs.root) as running:
        yield running


@pytest.mark.parametrize("width", WIDTHS, ids=["desktop", "phone"])
def test_index_fits_and_ranks_only_measured_runs(
    browser: Browser,
    no_result_viewer: Viewer,
    no_result_runs: Runs,
    tmp_path: Path,
    width: int,
) -> None:
    """Issue 48.10/48.11/48.3: 'All runs' and the leaderboard fit at 1280 and 390 px, the
    primary metric and the score of every run on screen, one number format (five
    significant digits) in the primary metric column; the two runs with no result are
    listed as such, never ranked, and the rule is stated at the top."""
    real_runs, viewer = no_result_runs, no_result_viewer
    with _open(browser, viewer, {"width": width, "height": 900}) as page:
        page.goto(viewer.url)
        _fits(page, "table.runs")
        _fits(page, "table.leaderboard")
        assert len(_on_screen(page, "table.runs td.score", width)) == len(real_runs.dirs)
        primary = _on_screen(page, "table.runs td.primary .value", width)
        values = [t.split()[0] for t in primary if t.strip() != "—"]
        assert len(values) >= 3, primary  # alpha, beta and walker; the others have none
        assert all(_significant(v) == 5 for v in values), values
        for name in ("rejected", "silent"):
            run_id = _report(real_runs.dirs[name]).run_id
            row = page.locator("table.runs tr.run", has=page.locator(f"a:text-is('{run_id}')"))
            assert row.get_attribute("data-kind") == "no result", name
            assert "no result" in row.inner_text()
        labels = page.locator("table.leaderboard td.label").all_inner_texts()
        assert "rejected_renamed_key" not in labels
        assert "interactive_agent_without_an_eval_session" not in labels
        rule = page.locator("#ranking-rule")
        assert rule.is_visible() and "ranks only when the evaluator measured" in (rule.inner_text())
        _shot(page, tmp_path, f"index-{width}")


@pytest.mark.parametrize("width", WIDTHS, ids=["desktop", "phone"])
def test_run_pages_fit_and_their_timeline_never_goes_back(
    browser: Browser, viewer: Viewer, real_runs: Runs, tmp_path: Path, width: int
) -> None:
    """Issue 48.10: a run's episodes, learning curve and trajectory fit at 1280 and 390 px,
    and the timeline is in time order: the evaluator's signed events, appended to the
    chain when the harness reads them, come where they happened, so 'since start' never
    decreases down the table (seq keeps the chain's order, and the page says why the
    two differ)."""
    with _open(browser, viewer, {"width": width, "height": 900}) as page:
        for name in ("alpha", "walker"):
            report = _report(real_runs.dirs[name])
            page.goto(f"{viewer.url}runs/{report.run_id}.html")
            _fits(page, "#episodes table")
            _fits(page, "table.timeline")
            _on_screen(page, "#episodes td.num", width)
            deltas = _on_screen(page, "table.timeline td.t-delta", width)
            seconds = [float(d.strip("+ s")) for d in deltas]
            assert seconds == sorted(seconds), (name, deltas)
            seqs = [int(s) for s in page.locator("table.timeline td.t-seq").all_inner_texts()]
            assert sorted(seqs) == list(range(report.trajectory_events)), (name, seqs)
            note = page.locator("#timeline-order").inner_text()
            assert "since start counts from the earliest" in note
            if seqs != sorted(seqs):  # the chain's order went back in time: said so
                assert "place in the signed chain" in note, note
            _shot(page, tmp_path, f"run-{name}-{width}")


def test_the_runs_episodes_png_draws_its_floor(real_runs: Runs) -> None:
    """Issue 48.10: what episodes.png draws for a real run includes the floor."""
    from ale_robotics.harness.plots.episodes import episode_plot

    report = _report(real_runs.dirs["alpha"])
    assert report.eval_result is not None and report.eval_result.floor is not None
    plot = episode_plot(report.eval_result, report.score.target_value)
    assert plot.floor == report.eval_result.floor.metrics["mean_return"]
    assert plot.floor == report.score.floor


@pytest.mark.parametrize("width", WIDTHS, ids=["desktop", "phone"])
def test_eval_set_plots_read_at_their_width(
    browser: Browser, set_viewer: Viewer, width: int
) -> None:
    """Issue 48.10: interval_estimates.png was 1,445 px wide, shown at about 560: its text
    at 40%. Every plot of the set page is shown at two thirds of its size or more on a
    desktop, and within the screen on a phone."""
    with _open(browser, set_viewer, {"width": width, "height": 900}) as page:
        page.goto(f"{set_viewer.url}sets/study.html")
        sizes = page.eval_on_selector_all(
            "#plots img",
            "els => els.map(e => [e.getAttribute('src'), e.naturalWidth,"
            " e.getBoundingClientRect().width, e.getBoundingClientRect().right])",
        )
        assert len(sizes) == 3, sizes
        for src, natural, shown, right in sizes:
            assert natural > 0 and right <= width, (src, natural, shown, right)
            if width >= 1280:
                assert shown / natural >= 2 / 3, (src, natural, shown)


# ----------------------------------------------- issue 45: the model's cost beside the score --


@pytest.fixture(scope="module")
def cost_viewer(model_cost_runs: Path) -> Iterator[Viewer]:
    with _view(model_cost_runs) as running:
        yield running


def _summaries(root: Path) -> dict[str, list[dict[str, object]]]:
    """The runs under ``root`` by label, as ``runs list --json`` gives them."""
    from runs_helpers import cli

    r = cli("runs", "list", str(root), "--json")
    assert r.returncode == 0, r.stderr
    found: dict[str, list[dict[str, object]]] = {}
    for s in json.loads(r.stdout)["runs"]:
        found.setdefault(str(s["label"]), []).append(s)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS, ids=["desktop", "phone"])
def test_the_index_shows_tokens_and_calls_beside_each_score(
    browser: Browser, cost_viewer: Viewer, model_cost_runs: Path, tmp_path: Path, width: int
) -> None:
    """The leaderboard has the best run's model tokens and calls beside its score, All
    runs each run's, '—' (never 0) for the run without a gateway; the eval set's row has
    each agent's tokens per run; every table fits at 1280 and 390 px."""
    from cost_helpers import CALLS, TOKENS

    by_label = _summaries(model_cost_runs)
    with _open(browser, cost_viewer, {"width": width, "height": 900}) as page:
        page.goto(cost_viewer.url)
        for table in ("table.leaderboard", "table.runs", "table.sets"):
            _fits(page, table)
        board = page.locator("table.leaderboard tr.leader")
        labels = board.locator("td.label").all_inner_texts()
        assert sorted(labels) == ["chatty", "plain", "terse"]
        tokens = _on_screen(page, "table.leaderboard td.tokens", width)
        calls = _on_screen(page, "table.leaderboard td.calls", width)
        for label, t, c in zip(labels, tokens, calls, strict=True):
            if label == "plain":
                assert (t, c) == ("—", "—")
            else:
                assert (t, c) == (str(TOKENS[label]), str(CALLS[label])), label
        assert "not 0" in page.locator("#cost-note").inner_text()
        for label, runs in by_label.items():
            expected = "—" if label == "plain" else f"{TOKENS[label]} tokens {CALLS[label]} calls"
            for s in runs:
                link = page.locator(f"a:text-is('{s['run_id']}')")
                row = page.locator("table.runs tr.run", has=link)
                use = " ".join(row.locator("td.model-use").inner_text().split())
                assert use == expected, (label, use)
        _on_screen(page, "table.runs td.model-use", width)
        per_run = page.locator("table.sets .tokens-per-run").all_inner_texts()
        assert per_run == ["480 model tokens per run", "2880 model tokens per run"], per_run
        _shot(page, tmp_path, f"index-cost-{width}")


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS, ids=["desktop", "phone"])
def test_the_eval_set_page_draws_score_against_tokens_with_its_frontier(
    browser: Browser, cost_viewer: Viewer, tmp_path: Path, width: int
) -> None:
    """The set's page: each agent's mean score, tokens and calls per run with their
    intervals, which agent is on the Pareto frontier (terse: the same score for fewer
    tokens) and which is dominated, and the score-vs-tokens plot, within the screen."""
    from cost_helpers import COST_SET

    with _open(browser, cost_viewer, {"width": width, "height": 900}) as page:
        page.goto(f"{cost_viewer.url}sets/{COST_SET}.html")
        for table in ("table.cost", "table.per-task", "table.runs", "table.across"):
            _fits(page, table)
        rows = {
            label: page.locator(f'table.cost tr.agent-cost[data-label="{label}"]')
            for label in ("terse", "chatty")
        }
        assert _on_screen(page, 'tr.agent-cost[data-label="terse"] td.tokens', width) == [
            "480 [480, 480]"
        ]
        assert _on_screen(page, 'tr.agent-cost[data-label="chatty"] td.tokens', width) == [
            "2880 [2880, 2880]"
        ]
        assert rows["terse"].locator("td.calls").inner_text() == "4.0"
        assert rows["chatty"].locator("td.calls").inner_text() == "6.0"
        assert rows["terse"].locator("td.pareto").inner_text() == "on it"
        assert rows["chatty"].locator("td.pareto").inner_text() == "dominated"
        assert page.locator("#frontier .frontier-label").all_inner_texts() == ["terse"]
        assert page.locator("#no-cost-plot").count() == 0
        assert page.locator("table.per-task td.tokens").all_inner_texts() == ["480", "2880"]
        assert sorted(page.locator("table.runs td.tokens").all_inner_texts()) == [
            "2880", "2880", "480", "480"
        ]  # fmt: skip
        plot = page.locator('#plots img[data-plot="score_vs_tokens.png"]')
        assert plot.count() == 1
        natural, right = plot.evaluate("e => [e.naturalWidth, e.getBoundingClientRect().right]")
        assert natural > 0 and right <= width
        _shot(page, tmp_path, f"set-cost-{width}")
