"""An Inspect sample whose ALE run confines its agent in a container (``sandbox="docker"``):
the toolbox runs in the agent image, a login shell's ``python`` is the image's SDK Python,
and the shipped pendulum checkpoint submitted from a bash call scores as it does in bwrap."""

from __future__ import annotations

import json
from pathlib import Path

from docker_support import AGENT_IMAGE, need_docker
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from ale_robotics.inspect import ale_task


def test_the_shipped_checkpoint_from_a_tool_call_in_the_agent_container(tmp_path: Path) -> None:
    need_docker()
    net = "import socket; socket.create_connection(('1.1.1.1', 53), 3)"
    calls = [
        f'command -v python; python -c "{net}" && echo LEAK-NET || echo BLOCKED-NET',
        "python /workspace/examples/agents/submit_checkpoint.py",
    ]
    outputs = [ModelOutput.for_tool_call("mockllm/model", "bash", {"command": c}) for c in calls]
    outputs.append(ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "done"}))
    for out in outputs:
        out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    task = ale_task(
        "td3-inverted-pendulum-v2",
        sandbox="docker",
        runs_root=str(tmp_path / "runs"),
        settings={"agent_image": AGENT_IMAGE, "state_dir": str(tmp_path / "state")},
    )
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    assert log.samples is not None and log.samples[0].scores is not None
    tools = [m.text for m in log.samples[0].messages if m.role == "tool"]
    assert "/opt/ale/bin/python" in tools[0].splitlines()  # stderr (the traceback) comes first
    assert "BLOCKED-NET" in tools[0] and "LEAK-NET" not in tools[0]
    score = log.samples[0].scores["ale_scorer"]
    assert isinstance(score.value, float) and round(score.value, 3) == 1.018
    assert score.metadata is not None
    report = json.loads((Path(score.metadata["run_dir"]) / "result.json").read_text())
    assert report["sandbox"] == "docker" and report["official"] is True
    assert report["agent_cmd"] == "python -m ale_robotics.inspect.toolbox"
