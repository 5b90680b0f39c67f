"""planner.yaml: the strict schema rejects bad files with a message naming the key and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from ale_robotics.planning.planner_config import PLANNERS, load_planner_config
from ale_robotics.planning.settings import PlannerLimits
from ale_robotics.submission.rejected import SubmissionRejected

REPO = Path(__file__).resolve().parents[2]
LIMITS = PlannerLimits(time_limit_cap_s=10.0)
GOOD = "planner: RRT\ntime_limit_s: 5\nrange: 0.5\ngoal_bias: 0.05\n"


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "planner.yaml"
    path.write_text(text)
    return load_planner_config(path, "planner.yaml", 4096, LIMITS)


def test_the_reference_file_loads(tmp_path: Path) -> None:
    ref = (REPO / "examples/agents/planning/planner.yaml").read_text()
    cfg = _load(tmp_path, ref)
    assert cfg.planner == "RRTConnect" and cfg.parallel_processes == 1
    cfg = _load(tmp_path, GOOD)
    assert cfg.time_limit_s == 5.0 and cfg.goal_bias == 0.05


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "speed: fast\n", "key 'speed': Extra inputs are not permitted"),
        ("planner: RRT\ntime_limit_s: '5'\n", "key 'time_limit_s': Input should be a valid number"),
        (GOOD.replace("0.05", "1.5"), "key 'goal_bias': Input should be less than or equal to 1"),
        (GOOD + "parallel_processes: 3\n", "key 'parallel_processes': Input should be less"),
        (
            GOOD + "parallel_processes: 1.0\n",
            "key 'parallel_processes': Input should be a valid int",
        ),
        (
            GOOD + "parallel_processes: true\n",
            "key 'parallel_processes': Input should be a valid int",
        ),
        (GOOD + "collision_check_resolution: 0.5\n", "key 'collision_check_resolution'"),
        (GOOD + "simplification_time_s: .nan\n", "key 'simplification_time_s'"),
        ("planner: PRM\ntime_limit_s: 1\n", "key 'planner': Input should be 'RRTConnect'"),
        ("planner: AITstar\ntime_limit_s: 1\n", "key 'planner'"),
        ("time_limit_s: 1\n", "key 'planner': Field required"),
        (
            "planner: BITstar\ntime_limit_s: 1\nrange: 1.0\n",
            "key 'range': planner BITstar has no range",
        ),
        ("planner: RRTConnect\ntime_limit_s: 1\ngoal_bias: 0.1\n", "key 'goal_bias': planner"),
        (
            "planner: RRTConnect\ntime_limit_s: 30\n",
            "key 'time_limit_s': 30 is over this task's cap",
        ),
        ("- planner\n- RRTConnect\n", "must be a YAML mapping"),
    ],
)
def test_bad_files_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SubmissionRejected) as err:
        _load(tmp_path, text)
    assert str(err.value).startswith("planner.yaml: ")
    assert message in str(err.value)
    assert err.value.rule == "planner schema"


def test_the_yaml_limits_apply(tmp_path: Path) -> None:
    with pytest.raises(SubmissionRejected, match=r"rule: yaml duplicate keys"):
        _load(tmp_path, GOOD + "planner: RRTConnect\n")
    with pytest.raises(SubmissionRejected, match=r"rule: size limit"):
        _load(tmp_path, GOOD + "#" * 5000)
    with pytest.raises(SubmissionRejected, match=r"rule: yaml format"):
        _load(tmp_path, "planner: !!python/object:os.system x\n")


def test_every_allowed_planner_is_bound_in_ompl() -> None:
    from ompl import geometric as og

    assert all(hasattr(og, name) for name in PLANNERS)
    assert "PRM" not in PLANNERS
