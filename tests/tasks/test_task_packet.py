"""The paper library (attach-paper) and the task packet an agent finds at $ALE_TASK_DIR."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from ale_robotics.errors import ConfigError, InvalidArgumentError
from ale_robotics.tasks import Registry
from ale_robotics.tasks import papers as papers_mod
from ale_robotics.tasks.brief import render_brief
from ale_robotics.tasks.packet import build_task_packet, remove_task_packet
from ale_robotics.tasks.papers import (
    attach_papers,
    default_state_dir,
    list_papers,
    paper_dir,
    sanitize_name,
)

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\n%%EOF\n"


def test_the_library_lives_in_the_embedded_evaluators_state_dir() -> None:
    from ale_robotics.harness.options import default_state_dir as harness_default

    assert default_state_dir() == harness_default()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("TD3 paper (v3).PDF", "TD3_paper_v3.pdf"),
        ("../../etc/passwd.md", "passwd.md"),
        (".hidden.txt", "hidden.txt"),
        ("a\\b\\c.md", "c.md"),
        ("ü.md", "paper.md"),
    ],
)
def test_names_are_sanitized(given: str, expected: str) -> None:
    assert sanitize_name(given) == expected


def test_attach_records_sha256_and_replaces_a_name(tmp_path: Path) -> None:
    (tmp_path / "td3.pdf").write_bytes(PDF)
    (tmp_path / "notes.md").write_text("# notes\n")
    state = tmp_path / "state"
    attach_papers(state, "td3-hopper-v1", [tmp_path / "td3.pdf", tmp_path / "notes.md"])
    (tmp_path / "notes.md").write_text("# notes, second edition\n")
    attach_papers(state, "td3-hopper-v1", [tmp_path / "notes.md"])
    listed = {p.name: p for p in list_papers(state, "td3-hopper-v1")}
    assert sorted(listed) == ["notes.md", "td3.pdf"]
    stored = paper_dir(state, "td3-hopper-v1") / "notes.md"
    assert stored.read_text() == "# notes, second edition\n"
    assert listed["notes.md"].sha256 == hashlib.sha256(stored.read_bytes()).hexdigest()
    assert listed["td3.pdf"].media_type == "application/pdf"
    assert listed["td3.pdf"].bytes == len(PDF)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("paper.pdf", b"<html>not a pdf</html>", "not a PDF"),
        ("paper.md", b"\xff\xfe\x00binary", "not UTF-8 text"),
        ("paper.docx", b"PK\x03\x04", "must be a PDF, Markdown or text file"),
        ("paper", b"text", "must be a PDF, Markdown or text file"),
    ],
)
def test_a_wrong_kind_of_file_attaches_nothing(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    (tmp_path / "good.pdf").write_bytes(PDF)
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InvalidArgumentError, match=message):
        attach_papers(tmp_path / "s", "td3-hopper-v1", [tmp_path / "good.pdf", tmp_path / name])
    assert list_papers(tmp_path / "s", "td3-hopper-v1") == []


def test_size_limit_and_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(papers_mod, "MAX_PAPER_BYTES", 10)
    (tmp_path / "big.txt").write_text("x" * 11)
    with pytest.raises(InvalidArgumentError, match="over the limit of 10 bytes"):
        attach_papers(tmp_path / "s", "td3-hopper-v1", [tmp_path / "big.txt"])
    with pytest.raises(InvalidArgumentError, match="no such file"):
        attach_papers(tmp_path / "s", "td3-hopper-v1", [tmp_path / "absent.pdf"])


@pytest.mark.parametrize("task_id", ["td3-walker2d-repro-v3", "tdmpc2-walker-run-v1"])
def test_the_packet_holds_brief_config_contract_and_papers(
    registry: Registry, tmp_path: Path, task_id: str
) -> None:
    spec = registry.get(task_id)
    entry = registry.manifest_entry(task_id)
    (tmp_path / "paper.pdf").write_bytes(PDF)
    state = tmp_path / "state"
    attach_papers(state, task_id, [tmp_path / "paper.pdf"])
    packet = build_task_packet(spec, state, tmp_path / "packet", entry=entry)
    try:
        assert sorted(p.name for p in packet.iterdir()) == [
            "brief.md",
            "contract.json",
            "paper",
            "task.json",
        ]
        assert (packet / "brief.md").read_text() == render_brief(spec, entry)
        # the view GetSpec gives, nothing more
        assert (packet / "task.json").read_text().strip() == spec.model_dump_json()
        contract = json.loads((packet / "contract.json").read_text())
        if spec.contract is None:
            assert contract is None
        else:
            assert contract == json.loads(spec.contract.model_dump_json())
        assert (packet / "paper" / "paper.pdf").read_bytes() == PDF
        index = json.loads((packet / "paper" / "index.json").read_text())
        assert index["papers"] == [
            {
                "name": "paper.pdf",
                "bytes": len(PDF),
                "sha256": hashlib.sha256(PDF).hexdigest(),
                "media_type": "application/pdf",
            }
        ]
        for path in [packet, *packet.rglob("*")]:
            assert stat.S_IMODE(path.stat().st_mode) & 0o222 == 0, path  # read-only
    finally:
        remove_task_packet(packet)
    assert not packet.exists()


def test_a_paper_changed_after_attaching_is_refused(registry: Registry, tmp_path: Path) -> None:
    (tmp_path / "paper.md").write_text("# the paper\n")
    state = tmp_path / "state"
    attach_papers(state, "td3-hopper-v1", [tmp_path / "paper.md"])
    (paper_dir(state, "td3-hopper-v1") / "paper.md").write_text("# something else\n")
    with pytest.raises(ConfigError, match="changed since it was attached"):
        build_task_packet(registry.get("td3-hopper-v1"), state, tmp_path / "packet")
    remove_task_packet(tmp_path / "packet")


def test_a_packet_without_papers_has_an_empty_index(registry: Registry, tmp_path: Path) -> None:
    packet = build_task_packet(registry.get("edmp-v1"), tmp_path / "none", tmp_path / "p")
    assert [p.name for p in (packet / "paper").iterdir()] == ["index.json"]
    assert json.loads((packet / "paper" / "index.json").read_text())["papers"] == []
    remove_task_packet(packet)
