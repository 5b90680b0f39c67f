"""The SPEC format: what it accepts, and the one-line messages for what it does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evalset import EvalSetSpec, load_spec, plan_slots

GOOD = """\
schema_version: 1
tasks: [td3-inverted-pendulum-v1, td3-halfcheetah-vec-v1]
agents:
  - {label: checkpoint, cmd: "python examples/agents/submit_checkpoint.py"}
  - {label: random, cmd: "python random_agent.py"}
repetitions: 3
episodes: 2
"""


def write(tmp_path: Path, text: str, name: str = "smoke.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_spec_loads_with_defaults(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.schema_version == 1
    assert [a.label for a in spec.agents] == ["checkpoint", "random"]
    assert (spec.repetitions, spec.episodes, spec.budget_s, spec.sandbox) == (3, 2, None, "auto")
    assert spec.bootstrap.seed == 0 and spec.bootstrap.confidence == 0.95
    assert spec.set_name(tmp_path / "smoke.yaml") == "smoke"
    assert spec.model_copy(update={"name": "other"}).set_name(tmp_path / "x.yaml") == "other"


def test_slots_are_repetition_major_with_deterministic_dirs(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    slots = plan_slots(spec, tmp_path / "runs", "smoke")
    assert len(slots) == 12
    assert [s.key for s in slots[:4]] == [
        "td3-inverted-pendulum-v1/checkpoint/rep0",
        "td3-inverted-pendulum-v1/random/rep0",
        "td3-halfcheetah-vec-v1/checkpoint/rep0",
        "td3-halfcheetah-vec-v1/random/rep0",
    ]
    assert slots[5].run_dir == tmp_path / "runs/smoke/td3-inverted-pendulum-v1/random/rep1"
    assert slots[5].log_path == tmp_path / "runs/smoke/td3-inverted-pendulum-v1/random/rep1.log"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("schema_version: 1\n", ""), ":1:1: schema_version is missing; add"),
        (GOOD.replace("schema_version: 1", "schema_version: 2"), ":1:17: schema_version: Input"),
        (GOOD + "repetition: 4\n", ":8:1: repetition: unknown key"),
        (GOOD.replace("repetitions: 3", "repetitions: 0"), ":6:14: repetitions: Input should be"),
        (GOOD.replace("label: random", "label: two words"), ":5:13: agents.1.label: 'two words'"),
        (
            GOOD.replace("label: random", "label: checkpoint"),
            ":4:3: agents: agent label 'checkpoint' is listed twice",
        ),
        (
            GOOD.replace("td3-halfcheetah-vec-v1]", "td3-inverted-pendulum-v1]"),
            ":2:8: tasks: task 'td3-inverted-pendulum-v1' is listed twice",
        ),
        (GOOD.replace("tasks: [", "tasks: [../escape, "), ":2:8: tasks: task id '../escape'"),
        (GOOD + "run_args: [--run-dir, x]\n", ":8:11: run_args: --run-dir is set by the eval set"),
        (
            GOOD + "run_args: ['--episodes=3']\n",
            ":8:11: run_args: --episodes is set by the eval set's key 'episodes' already",
        ),
        (
            GOOD + "agents: []\n",
            ":8:1: mapping key 'agents' appears twice (rule: yaml duplicate keys)",
        ),
        ("- just a list\n", ": a SPEC is a YAML mapping"),
        (
            "tasks: [a\n",
            ":2:1: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence "
            "started at line 1, column 8) (rule: yaml format)",
        ),
    ],
)
def test_a_bad_spec_is_one_line_saying_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidArgumentError) as err:
        load_spec(path)
    assert err.value.message.startswith(f"{path}:"), err.value.message
    assert f"{path}{message}" in err.value.message, err.value.message
    assert "\n" not in err.value.message


def test_every_problem_is_reported_each_with_its_line_and_column(tmp_path: Path) -> None:
    """Issue 48.5: "tasks: Input should be a valid list (and 1 more problem(s))" named one
    problem of several, and where none of them was; and a YAML syntax error had neither
    line nor column. Now: each problem at its place, in the order of the file."""
    path = write(
        tmp_path,
        "schema_version: 1\n"
        "tasks: td3-inverted-pendulum-v2\n"
        "agents:\n"
        '  - {label: a b, cmd: "python x.py"}\n'
        "  - label: ok\n"
        '    cmd: ""\n'
        "bootstrap: {reps: 5000, sed: 3}\n",
    )
    with pytest.raises(InvalidArgumentError) as err:
        load_spec(path)
    assert err.value.message.splitlines() == [
        f"{path}: 5 problems",
        f"{path}:1:1: repetitions: missing; add it (a SPEC needs schema_version, tasks, agents, "
        "repetitions)",
        f"{path}:2:8: tasks: Input should be a valid list",
        f"{path}:4:13: agents.0.label: 'a b': a label is 1 to 64 letters, digits, '.', '_', '+' "
        "or '-', starting with a letter or a digit (e.g. td3-baseline)",
        f"{path}:6:10: agents.1.cmd: String should have at least 1 character",
        f"{path}:7:25: bootstrap.sed: unknown key (a SPEC has no such setting; check its spelling)",
    ]


def test_a_yaml_syntax_error_says_where(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("repetitions: 3", "repetitions: [3"))
    with pytest.raises(InvalidArgumentError) as err:
        load_spec(path)
    assert err.value.message == (
        f"{path}:7:9: expected ',' or ']', but got ':' (while parsing a flow sequence started "
        "at line 6, column 14) (rule: yaml format)"
    )


def test_a_file_stem_that_cannot_name_a_set_is_refused(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD, name="my set.yaml"))
    with pytest.raises(InvalidArgumentError, match=re.escape("rename it or add 'name: ...'")):
        spec.set_name(tmp_path / "my set.yaml")


def test_the_models_forbid_unknown_fields() -> None:
    with pytest.raises(ValueError, match="Extra inputs"):
        EvalSetSpec.model_validate(
            {
                "schema_version": 1,
                "tasks": ["t"],
                "agents": [{"label": "a", "cmd": "c"}],
                "repetitions": 1,
                "bootstrap": {"reps": 1000, "sed": 3},
            }
        )
