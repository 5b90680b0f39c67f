"""A tiny engine and a rollout kind that runs in it, installed the way a plug-in is.

``tiny_site(tmp)`` writes a module and a ``.dist-info`` (its entry points: the engine
``tiny`` on the evaluator's Python, ``tiny312`` on Python 3.12, and their kinds) into a
directory; put on ``sys.path`` it registers them in this process, and copied into an
engine's site-packages it registers them there (a worker finds its kind by entry point,
like the evaluator). The engine pins only what a worker of ``ale_robotics`` imports
(numpy, pydantic, safetensors), so an install takes seconds, and nothing of MuJoCo: a
worker that could import ``mujoco`` would be seeing the evaluator's environment.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ale_robotics.tasks import TaskSpec
from ale_robotics.tasks.registry import default_registry

MODULE = "ale_test_tiny_engine"

PINS = """\
# the worker side of ale_robotics: numpy, pydantic, safetensors (the project's versions)
annotated-types==0.8.0
numpy==2.4.6
pydantic==2.14.4
pydantic_core==2.50.5
safetensors==0.8.0
typing-inspection==0.4.5
typing_extensions==4.16.0
"""

SOURCE = '''
import os
import sys
from pathlib import Path

from ale_robotics.engines.base import Engine
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.rollouts.policy import PolicyRolloutKind

PINS_FILE = {pins!r}


class TinyEngine(Engine):
    name = "tiny"
    python = "{python}"
    constraints = PINS_FILE
    modules = ("numpy", "pydantic", "safetensors")
    reported = ("numpy", "pydantic")
    summary = "a test engine: the worker side of ale_robotics only"
    warm_up = (
        "import os, pathlib, ale_robotics\\n"
        "pathlib.Path(os.environ['TINY_WARM']).write_text(ale_robotics.__file__)"
    )
    device_probe = "print('tiny-device')"

    def worker_env(self, home):
        return {{"TINY_WARM": str(home / "warm.txt"), "TINY_HOME": str(home)}}


class Tiny312Engine(TinyEngine):
    name = "tiny312"
    python = "3.12"


class TinyKind(PolicyRolloutKind):
    """Returns per episode: the seed mod 997, and the worker's Python minor as the length."""

    name = "tiny_kind"
    engine = "tiny"

    def run_shard(self, task, artifact, seeds, on_episode=None):
        out = []
        for index, seed in seeds:
            o = EpisodeOutcome(index, float(seed % 997), sys.version_info.minor, False)
            if on_episode is not None:
                on_episode(o)
            out.append(o)
        return out


class Tiny312Kind(TinyKind):
    name = "tiny312_kind"
    engine = "tiny312"
'''

ENTRY_POINTS = f"""\
[ale_robotics.engines]
tiny = {MODULE}:TinyEngine
tiny312 = {MODULE}:Tiny312Engine

[ale_robotics.rollout_kinds]
tiny_kind = {MODULE}:TinyKind
tiny312_kind = {MODULE}:Tiny312Kind
"""


def tiny_site(site: Path) -> Path:
    """Write the plug-in (module, dist-info, its pins file) into ``site``; ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    pins = site / "engine-tiny.txt"
    pins.write_text(PINS)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (site / f"{MODULE}.py").write_text(
        textwrap.dedent(SOURCE.format(pins=str(pins), python=python))
    )
    info = site / f"{MODULE}-0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ale-test-tiny-engine\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


def copy_plugin(site: Path, site_packages: Path) -> None:
    """The plug-in's module and dist-info, copied into an engine's site-packages."""
    import shutil

    shutil.copy(site / f"{MODULE}.py", site_packages / f"{MODULE}.py")
    shutil.copytree(site / f"{MODULE}-0.0.dist-info", site_packages / f"{MODULE}-0.0.dist-info")


def task_of_kind(kind: str) -> TaskSpec:
    """The InvertedPendulum TD3 task (v2's config) with ``eval.backend`` ``kind``."""
    raw = default_registry().entry("td3-inverted-pendulum-v2").raw
    doc = json.loads(raw)
    doc["id"] = f"{kind.replace('_', '-')}-test-v1"
    doc["eval"]["backend"] = kind
    doc["eval"].pop("threads", None)
    return TaskSpec.model_validate(doc)
