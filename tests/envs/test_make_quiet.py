"""Making a MuJoCo env starts no child process (glfw's library probe would start one per
candidate library, in the caller's process group, where a Ctrl-C prints its traceback)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import os, subprocess
started = []
real = subprocess.Popen.__init__
def spy(self, args, *a, **k):
    started.append(args)
    return real(self, args, *a, **k)
subprocess.Popen.__init__ = spy
from ale_robotics.envs.make import make_env
from ale_robotics.tasks.registry import default_registry
env = make_env(default_registry().get("td3-inverted-pendulum-v2").env)
env.reset(seed=0)
import glfw  # loaded, from the bundled library
assert "PYGLFW_LIBRARY" not in os.environ, "the variable leaked past the import"
print(len(started), started[:1])
"""


def test_making_a_mujoco_env_starts_no_child_process() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MUJOCO_GL",)}
    env.pop("PYGLFW_LIBRARY", None)
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "0", out.stdout


THREADS = """
import os, threading
from ale_robotics.envs.make import make_env
from ale_robotics.tasks.registry import default_registry
spec = default_registry().get("td3-inverted-pendulum-v2").env
start, errors = threading.Barrier(6), []
def make():
    start.wait()
    try:
        make_env(spec).reset(seed=0)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=make) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
assert "PYGLFW_LIBRARY" not in os.environ, "the variable leaked past the import"
print(errors)
"""


def test_threads_making_the_first_mujoco_envs_at_once_all_get_one() -> None:
    """An evaluator answers its first GetSpec and OpenSession calls on several threads: each
    may be the first to import MuJoCo (a load test met ``KeyError: 'PYGLFW_LIBRARY'`` when
    two did at once)."""
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MUJOCO_GL",)}
    env.pop("PYGLFW_LIBRARY", None)
    out = subprocess.run(
        [sys.executable, "-c", THREADS], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
