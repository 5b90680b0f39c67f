"""The task packet: the read-only directory an agent finds at ``$ALE_TASK_DIR``.

::

    brief.md        the task brief (:func:`ale_robotics.tasks.brief.render_brief`)
    task.json       the task config, exactly GetSpec's ``task_config_json`` (the config
                    is public: its base seeds are public, the hidden seeds derive from a
                    secret the packet never holds)
    contract.json   the submission contract, GetSpec's ``submission_contract_json``;
                    ``null`` for a task without one (interactive)
    paper/          copies of the papers the operator attached (:mod:`.papers`) and their
                    ``index.json``; only an index with no papers when none were

The harness builds it outside the agent's reach and binds it read-only into the
sandbox; its files are also made read-only (0444, folders 0555) so that a run
without a sandbox cannot change it by accident. :func:`remove_task_packet` undoes
the modes to delete it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from ale_robotics.errors import ConfigError
from ale_robotics.tasks.brief import render_brief
from ale_robotics.tasks.manifest import ManifestEntry
from ale_robotics.tasks.papers import INDEX_NAME, list_papers, paper_dir
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["PACKET_FILES", "build_task_packet", "remove_task_packet"]

PACKET_FILES = ("brief.md", "task.json", "contract.json", "paper")
"""What a packet holds, at its top level."""


def build_task_packet(
    spec: TaskSpec,
    state_dir: Path,
    dest: Path,
    *,
    entry: ManifestEntry | None = None,
) -> Path:
    """Write the packet of ``spec`` into ``dest`` (created; must not exist) and return it.

    ``state_dir`` holds the operator's paper library; ``entry`` is the task's release
    manifest entry (target, budgets) for the brief.
    """
    dest.mkdir(parents=True)
    _write(dest / "brief.md", render_brief(spec, entry))
    _write(dest / "task.json", spec.model_dump_json() + "\n")
    contract = spec.contract.model_dump_json() if spec.contract is not None else "null"
    _write(dest / "contract.json", contract + "\n")
    papers_out = dest / "paper"
    papers_out.mkdir()
    source = paper_dir(state_dir, spec.id)
    papers = list_papers(state_dir, spec.id)
    for paper in papers:
        copy = papers_out / paper.name
        shutil.copyfile(source / paper.name, copy)
        os.chmod(copy, 0o444)
        if hashlib.sha256(copy.read_bytes()).hexdigest() != paper.sha256:
            raise ConfigError(
                f"paper {source / paper.name} changed since it was attached (its SHA-256 "
                f"is not the index's): attach it again with 'ale-robotics tasks attach-paper "
                f"{spec.id} FILE'"
            )
    index = {
        "schema_version": 1,
        "task_id": spec.id,
        "papers": [
            {"name": p.name, "bytes": p.bytes, "sha256": p.sha256, "media_type": p.media_type}
            for p in papers
        ],
    }
    _write(papers_out / INDEX_NAME, json.dumps(index, indent=2) + "\n")
    os.chmod(papers_out, 0o555)
    os.chmod(dest, 0o555)
    return dest


def remove_task_packet(path: Path) -> None:
    """Delete a packet made by :func:`build_task_packet` (its folders are read-only)."""
    if not path.exists():
        return
    for root, dirs, _ in os.walk(path):
        for d in [root, *(os.path.join(root, x) for x in dirs)]:
            os.chmod(d, stat.S_IRWXU)
    shutil.rmtree(path)


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    os.chmod(path, 0o444)
