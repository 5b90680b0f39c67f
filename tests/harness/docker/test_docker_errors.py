"""What a user sees when the container path cannot work: one line saying what to run.

No docker, no daemon, a missing image, a command the image does not have, a host file
the container cannot see, options that do not go together: each is refused with exit 2
before the run directory exists, never with a traceback. The first two need no Docker
at all and always run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docker_support import AGENT_IMAGE, need_docker

from ale_robotics.sandboxes.docker.evaluator import parse_loopback_address
from ale_robotics.sandboxes.errors import HarnessError

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"


def _refused(tmp: Path, *args: str, env: dict[str, str] | None = None) -> str:
    run_dir = tmp / "run"
    proc = subprocess.run(
        [*CLI, "run", TASK, "--run-dir", str(run_dir), "--state-dir", str(tmp / "state"), *args],
        capture_output=True, text=True, timeout=180, cwd=tmp, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "score:" not in proc.stdout
    assert not run_dir.exists()
    return " ".join(proc.stderr.split())


def test_no_docker_says_to_install_it(short_tmp: Path) -> None:
    bin_dir = short_tmp / "bin"  # a PATH with the interpreter and no docker
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir)}
    err = _refused(short_tmp, "--sandbox", "docker", "--agent", "python agent.py", env=env)
    assert "docker is not installed" in err and "make docker-deps" in err


def test_a_daemon_that_is_not_running_says_to_start_it(short_tmp: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI here (the test above covers that case)")
    env = {**os.environ, "DOCKER_HOST": f"unix://{short_tmp}/no-daemon.sock"}
    err = _refused(short_tmp, "--sandbox", "docker", "--agent", "python agent.py", env=env)
    assert "Docker daemon cannot be reached" in err and "make docker-deps" in err


def test_a_missing_image_says_to_make_images(short_tmp: Path) -> None:
    need_docker()
    err = _refused(
        short_tmp, "--sandbox", "docker", "--agent-image", "ale-robotics/no-such:image",
        "--agent", "python agent.py",
    )  # fmt: skip
    assert "agent image 'ale-robotics/no-such:image' is not there" in err
    assert "make images" in err
    err = _refused(
        short_tmp, "--evaluator-image", "ale-robotics/no-such:evaluator", "--agent", "true"
    )
    assert "evaluator image 'ale-robotics/no-such:evaluator' is not there" in err
    assert "make images" in err


def test_a_command_the_image_does_not_have_is_refused(short_tmp: Path) -> None:
    need_docker()
    image = ["--sandbox", "docker", "--agent-image", AGENT_IMAGE]
    err = _refused(short_tmp, *image, "--agent", "no-such-agent --fast")
    assert "command not found in the agent image" in err and "'no-such-agent'" in err
    # A host file named as the script: the container mounts no host file.
    script = short_tmp / "agent.py"
    script.write_text("print('hi')\n")
    err = _refused(short_tmp, *image, "--agent", f"python {script}")
    assert (
        f"{script} (in --agent" in err and "exists on this host but not in the agent image" in err
    )
    assert "/workspace" in err


def test_options_that_do_not_go_together(short_tmp: Path) -> None:
    err = _refused(short_tmp, "--agent-image", "x", "--agent", "true")
    assert "--agent-image goes with --sandbox docker" in err
    err = _refused(
        short_tmp, "--evaluator-image", "x", "--evaluator", "unix:///x.sock", "--agent", "true"
    )
    assert "give one of them" in err
    err = _refused(short_tmp, "--evaluator-image", "x", "--episodes", "1", "--agent", "true")
    assert "always runs the task's full protocol" in err


def test_docker_exec_addresses() -> None:
    assert parse_loopback_address("docker-exec://ale-evaluator/tmp/ale/harness.sock") == (
        "ale-evaluator",
        "unix:///tmp/ale/harness.sock",
    )
    assert parse_loopback_address("unix:///x.sock") is None
    with pytest.raises(HarnessError, match="docker-exec://CONTAINER/PATH"):
        parse_loopback_address("docker-exec://ale-evaluator")
