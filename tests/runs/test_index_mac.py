"""The run index's rows are signed: a rewritten cached verdict is never listed (issue 44.9).

Every listing took each run's summary and verdict from ``RUNS_ROOT/index.sqlite3``,
keyed on the stamps of ``result.json`` and ``trajectory.jsonl`` only: an attacker with
write access to the runs root rewrote a row (score 9.999, another label), left the files
untouched, and the forged score was listed official and ranked first. Rows now carry an
HMAC with a per-user key outside the runs root (``ale_robotics.runs.index_key``); a row
that does not check is verified again from the run's files. Real runs (``runs_helpers``):
beta-1 scores 0.022, alpha 1.018; the attack rewrites beta-1's row to claim 9.999 under
the label ``forged-label``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from runs_helpers import RunsRoot, cli, copy_root

from ale_robotics.runs import INDEX_FILE, RunIndex
from ale_robotics.runs.index import _Row
from ale_robotics.runs.index_key import KEY_FILE, IndexKeyError, load_index_key

FORGED_SCORE = 9.999
FORGED_LABEL = "forged-label"


def _stamps(run_dir: Path) -> list[tuple[int, int, int]]:
    files = (run_dir / "result.json", run_dir / "trajectory.jsonl")
    return [(st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in (f.stat() for f in files)]


def _forged_summary(text: str) -> str:
    doc = json.loads(text)
    doc.update(score=FORGED_SCORE, label=FORGED_LABEL, official=True)
    doc["verification"]["verified"] = True
    doc["verification"]["problems"] = []
    return json.dumps(doc)


def _forge_row(root: Path, run: str = "beta-1") -> None:
    """What the issue did: rewrite the run's cached summary with sqlite3, files untouched."""
    con = sqlite3.connect(root / INDEX_FILE)
    with con:
        (text,) = con.execute("SELECT summary FROM runs WHERE path = ?", (run,)).fetchone()
        con.execute("UPDATE runs SET summary = ? WHERE path = ?", (_forged_summary(text), run))
    con.close()


@pytest.fixture
def forged_root(made_runs: RunsRoot, tmp_path: Path) -> Path:
    """A copy of the runs root, indexed (with this test's key), then beta-1's row forged."""
    root = copy_root(made_runs.root, tmp_path / "runs")
    with RunIndex(root) as index:
        genuine = {s.run_dir.name: s for s in index.runs()}
    assert genuine["beta-1"].score is not None and genuine["beta-1"].score < 0.1
    before = _stamps(root / "beta-1")
    _forge_row(root)
    assert _stamps(root / "beta-1") == before  # the attack leaves the files as they were
    return root


def _assert_genuine_beta(run: dict[str, object]) -> None:
    assert run["label"] == "beta" and run["verified"] is True
    assert isinstance(run["score"], float) and run["score"] < 0.1


# ---------------------------------------------------------- each listing --


def test_runs_list_never_lists_a_forged_row_and_says_it_was_edited(forged_root: Path) -> None:
    table = cli("runs", "list", str(forged_root))
    assert table.returncode == 0, table.stderr
    assert FORGED_LABEL not in table.stdout and str(FORGED_SCORE) not in table.stdout
    warning = " ".join(table.stderr.split())
    assert "was edited outside ale-robotics" in warning, table.stderr
    assert "verified again from their files: beta-1" in warning
    _forge_row(forged_root)  # the listing signed the run's row again: forge it again
    r = cli("runs", "list", str(forged_root), "--json")
    assert r.returncode == 0, r.stderr
    assert FORGED_LABEL not in r.stdout and str(FORGED_SCORE) not in r.stdout
    runs = {Path(str(s["run_dir"])).name: s for s in json.loads(r.stdout)["runs"]}
    _assert_genuine_beta(runs["beta-1"])


def test_leaderboard_never_ranks_a_forged_row(forged_root: Path) -> None:
    r = cli("leaderboard", str(forged_root), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(row["rank"], row["label"]) for row in doc["rows"]] == [(1, "alpha"), (2, "beta")]
    assert doc["rows"][0]["score"] == pytest.approx(1000.0 / 982.02)
    assert doc["rows"][1]["score"] < 0.1
    assert FORGED_LABEL not in r.stdout and str(FORGED_SCORE) not in r.stdout


def test_runs_show_reads_a_forged_row_again(forged_root: Path) -> None:
    r = cli("runs", "show", "beta-1", "--root", str(forged_root), "--json")
    assert r.returncode == 0, r.stderr
    _assert_genuine_beta(json.loads(r.stdout)["run"])
    table = cli("runs", "show", "beta-1", "--root", str(forged_root), columns=100)
    assert table.returncode == 0, table.stderr
    assert FORGED_LABEL not in table.stdout and str(FORGED_SCORE) not in table.stdout


def test_json_documents_and_runs_show_warn_that_the_index_was_edited(forged_root: Path) -> None:
    """The warning goes to stderr with --json too (stdout stays one document), and in
    'runs show', which looks the run up in the index: a reader of a document or of one run
    learns the index was edited as a reader of the tables does."""
    for args in (
        ("runs", "list", str(forged_root), "--json"),
        ("leaderboard", str(forged_root), "--json"),
        ("runs", "show", "beta-1", "--root", str(forged_root), "--json"),
        ("runs", "show", "beta-1", "--root", str(forged_root)),
    ):
        _forge_row(forged_root)  # each listing signs the row again: forge it each time
        r = cli(*args)
        assert r.returncode == 0, (args, r.stderr)
        warning = " ".join(r.stderr.split())
        assert "warning:" in warning and "was edited outside ale-robotics" in warning, args
        assert "verified again from their files: beta-1" in warning, args
        if "--json" in args:
            json.loads(r.stdout)  # the document alone on stdout


def test_the_report_never_shows_a_forged_row(forged_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    r = cli("report", str(forged_root), "--out", str(out))
    assert r.returncode == 0, r.stderr
    pages = [out / "index.html", *sorted((out / "runs").glob("*.html"))]
    assert len(pages) == 5
    for page in pages:
        html = page.read_text()
        assert FORGED_LABEL not in html and str(FORGED_SCORE) not in html, page
    assert "verified again from their files: beta-1" in " ".join(r.stderr.split())


# ------------------------------------------------------- forging the MAC --


def test_a_row_with_a_recomputed_hash_or_another_key_is_caught(forged_root: Path) -> None:
    """The attacker rewrites the summary, recomputes the files' digest, and seals the row
    with what it can compute: a plain SHA-256 of the row, or an HMAC with a key of its own."""
    beta = forged_root / "beta-1"
    digest = " ".join(
        hashlib.sha256((beta / name).read_bytes()).hexdigest()
        for name in ("result.json", "trajectory.jsonl")
    )
    con = sqlite3.connect(forged_root / INDEX_FILE)
    columns = "path, stamp, digest, run_id, task_id, started_at, summary, problem"
    key_id, *row = con.execute(
        f"SELECT key_id, {columns} FROM runs WHERE path = 'beta-1'"
    ).fetchone()
    assert row[2] == digest  # the digest of both files, as the row was written
    forged = _Row(*row)
    assert FORGED_LABEL in str(forged.summary)
    message = forged.message(key_id)
    for seal in (
        hashlib.sha256(message).hexdigest(),
        hmac.new(b"\0" * 32, message, hashlib.sha256).hexdigest(),
    ):
        with con:
            con.execute("UPDATE runs SET mac = ? WHERE path = 'beta-1'", (seal,))
        with RunIndex(forged_root) as index:
            runs = {s.run_dir.name: s for s in index.runs()}
            assert index.last_refresh.untrusted == ["beta-1"]
            assert index.last_refresh.updated == index.last_refresh.added == []
        assert runs["beta-1"].label == "beta" and runs["beta-1"].verified
        assert runs["beta-1"].score is not None and runs["beta-1"].score < 0.1
        _forge_row(forged_root)  # the run's row was signed again: forge it again
    con.close()


def test_a_signed_row_moved_to_another_run_is_caught(made_runs: RunsRoot, tmp_path: Path) -> None:
    """alpha-1's genuine signed row (score 1.018) copied over beta-1's, stamp and all."""
    root = copy_root(made_runs.root, tmp_path / "runs")
    with RunIndex(root) as index:
        index.runs()
    con = sqlite3.connect(root / INDEX_FILE)
    with con:
        (beta_stamp,) = con.execute("SELECT stamp FROM runs WHERE path = 'beta-1'").fetchone()
        con.execute("DELETE FROM runs WHERE path = 'beta-1'")
        con.execute(
            "INSERT INTO runs SELECT key_id, 'beta-1', ?, digest, run_id, task_id, started_at, "
            "summary, problem, mac FROM runs WHERE path = 'alpha-1'",
            (beta_stamp,),
        )
    con.close()
    with RunIndex(root) as index:
        rows = index.leaderboard()
        assert index.last_refresh.untrusted == ["beta-1"]
    assert [(r.label, r.run_dir.name) for r in rows] == [("alpha", "alpha-1"), ("beta", "beta-1")]


# ------------------------------------------------------------------ key --


def test_the_key_is_made_once_private_and_outside_the_runs_root(
    made_runs: RunsRoot, tmp_path: Path
) -> None:
    key_file = Path(os.environ["XDG_STATE_HOME"]) / "ale-robotics" / KEY_FILE
    assert not key_file.exists()
    root = copy_root(made_runs.root, tmp_path / "runs")
    with RunIndex(root) as index:
        first = index.runs()
        assert len(index.last_refresh.added) == 4
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key_file.read_text().strip())) == 32
    assert not list(root.rglob(KEY_FILE))
    with RunIndex(root) as index:  # a later command: the rows check, nothing is read again
        assert index.runs() == first
        assert index.last_refresh == type(index.last_refresh)()
        assert index.warnings == []


def test_racing_processes_end_with_one_key(tmp_path: Path) -> None:
    path = tmp_path / "state" / KEY_FILE
    keys: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: keys.append(load_index_key(path).secret)) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no temporary file left


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: (p.write_text("ab" * 32 + "\n"), p.chmod(0o644)), "'chmod 600 "),
        (lambda p: (p.write_text("not a key\n"), p.chmod(0o600)), "is not a key of 64 hex"),
        (lambda p: p.symlink_to(p.with_name("elsewhere")), "is a symbolic link"),
        (lambda p: p.mkdir(), "is not a file"),
    ],
    ids=["open-to-others", "not-hex", "symlink", "directory"],
)
def test_a_key_file_not_private_or_not_a_key_is_refused(
    tmp_path: Path, make: object, says: str
) -> None:
    path = tmp_path / KEY_FILE
    make(path)  # type: ignore[operator]
    with pytest.raises(IndexKeyError, match=says):
        load_index_key(path)


def _no_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A state home that cannot hold a key (a file where the directory should be)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))


def test_without_a_key_no_row_is_trusted_and_every_run_is_verified_from_its_files(
    forged_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_file = forged_root / INDEX_FILE
    before = index_file.read_bytes()
    _no_key(monkeypatch, tmp_path)
    for _ in range(2):  # nothing is kept from one command to the next
        with RunIndex(forged_root) as index:
            runs = {s.run_dir.name: s for s in index.runs()}
            assert sorted(index.last_refresh.added) == ["alpha-1", "alpha-2", "beta-1", "smoke-1"]
            (warning,) = index.warnings
            assert [r.label for r in index.leaderboard()] == ["alpha", "beta"]
        assert "the run index's key is unusable: cannot create" in warning
        assert "every run is verified from its files" in warning
        assert runs["beta-1"].label == "beta" and runs["beta-1"].verified
    assert index_file.read_bytes() == before  # not written (nor trusted)

    r = cli("runs", "list", str(forged_root))
    assert r.returncode == 0, r.stderr
    assert "warning: the run index's key is unusable" in r.stderr
    assert FORGED_LABEL not in r.stdout and "beta" in r.stdout


def test_a_key_open_to_others_is_not_used(
    made_runs: RunsRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_root(made_runs.root, tmp_path / "runs")
    with RunIndex(root) as index:
        index.runs()
    key_file = Path(os.environ["XDG_STATE_HOME"]) / "ale-robotics" / KEY_FILE
    key_file.chmod(0o644)
    with RunIndex(root) as index:
        assert len(index.runs()) == 4 and len(index.last_refresh.added) == 4
        (warning,) = index.warnings
    assert f"'chmod 600 {key_file}'" in warning


def test_users_sharing_a_runs_root_keep_their_own_rows(
    made_runs: RunsRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two keys (two users) take turns on one root: neither reads the other's rows as
    edited, nor verifies every run again on its turn."""
    root = copy_root(made_runs.root, tmp_path / "runs")
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for home, verified in [(alice, 4), (bob, 4), (alice, 0), (bob, 0)]:
        monkeypatch.setenv("XDG_STATE_HOME", str(home))
        with RunIndex(root) as index:
            assert len(index.runs()) == 4
            assert index.warnings == [] and index.last_refresh.untrusted == []
            assert len(index.last_refresh.added) == verified
    con = sqlite3.connect(root / INDEX_FILE)
    assert con.execute("SELECT count(DISTINCT key_id), count(*) FROM runs").fetchone() == (2, 8)
    con.close()
