"""edmp-v1: the agent's copy is checked against the allow-list; the generator is deterministic
and its sphere model's gradients are right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ale_robotics.planning.edmp import generate_trajectory
from ale_robotics.planning.edmp_config import EdmpConfig, EdmpTaskSettings, load_edmp_config
from ale_robotics.planning.scenes import SCENE_TYPES, generate_problem
from ale_robotics.planning.spheres import BoxSet, sphere_model
from ale_robotics.planning.world import Box, CollisionWorld
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import default_registry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def settings() -> EdmpTaskSettings:
    planning = default_registry().get("edmp-v1").planning
    assert planning is not None and planning.edmp is not None
    return planning.edmp


def _load(tmp_path: Path, text: str, settings: EdmpTaskSettings) -> EdmpConfig:
    path = tmp_path / "edmp_config.yaml"
    path.write_text(text)
    return load_edmp_config(path, "edmp_config.yaml", 16384, settings)


def test_reference_and_untouched_copies_load(tmp_path: Path, settings: EdmpTaskSettings) -> None:
    ref = _load(
        tmp_path, (REPO / "examples/agents/planning/edmp_config.yaml").read_text(), settings
    )
    assert len(ref.guides) == 3 and ref.trajectory_length == 64
    assert ref.step_size == settings.defaults.step_size  # not agent-settable: the task's value
    assert _load(tmp_path, "", settings) == settings.defaults
    # a key that is not agent-settable may appear with the task's own value
    assert (
        _load(tmp_path, f"step_size: {settings.defaults.step_size}\n", settings)
        == settings.defaults
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scene_types: [tabletop]\n", "key 'scene_types' is not a setting; agent-settable: ["),
        ("step_size: 0.5\n", "key 'step_size' is not agent-settable in this task"),
        ("samples_per_guide: 0\n", "key 'samples_per_guide': Input should be greater than"),
        ("steps: 10.5\n", "key 'steps': Input should be a valid integer"),
        (
            "guides: [{name: a, weights: {collision: -1}}]\n",
            "key 'guides.0.weights.collision': Input should be greater than or equal to 0",
        ),
        ("guides: [{name: a, weights: {colision: 1}}]\n", "key 'guides.0.weights.colision'"),
        ("guides: []\n", "key 'guides': List should have at least 1 item"),
        (
            "samples_per_guide: 64\nsteps: 400\ntrajectory_length: 128\n",
            "guides x samples_per_guide x steps x trajectory_length = 3276800",
        ),
        ("[1, 2]\n", "must be a YAML mapping"),
    ],
)
def test_bad_copies_are_rejected_naming_the_key(
    tmp_path: Path, settings: EdmpTaskSettings, text: str, message: str
) -> None:
    with pytest.raises(SubmissionRejected) as err:
        _load(tmp_path, text, settings)
    assert str(err.value).startswith("edmp_config.yaml: ") and message in str(err.value)


def test_generator_is_deterministic_in_the_seed(world: CollisionWorld) -> None:
    problem = generate_problem(7, SCENE_TYPES, world)
    cfg = EdmpConfig.model_validate(
        {
            "guides": [{"name": "c", "weights": {"collision": 50.0, "smoothness": 1.0}}],
            "samples_per_guide": 2,
            "steps": 5,
            "trajectory_length": 16,
            "step_size": 0.03,
            "prior_noise": 0.3,
            "collision_margin": 0.02,
            "retract_distance": 0.1,
        }
    )
    a, b = generate_trajectory(problem, cfg, 11), generate_trajectory(problem, cfg, 11)
    assert a.shape == (16, 7) and np.array_equal(a, b)
    np.testing.assert_allclose(a[0], problem.start)
    np.testing.assert_allclose(a[-1], problem.goal)
    assert not np.array_equal(a, generate_trajectory(problem, cfg, 12))


def test_sphere_gradients_match_finite_differences() -> None:
    model = sphere_model()
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, size=(3, 7))
    g = rng.normal(size=(3, len(model.links), 3))
    pos, axes, origins = model.positions(q)
    analytic = model.pullback(pos, axes, origins, g)
    numeric = np.zeros_like(analytic)
    for j in range(7):
        dq = q.copy()
        dq[:, j] += 1e-6
        numeric[:, j] = ((model.positions(dq)[0] - pos) / 1e-6 * g).sum(axis=(1, 2))
    np.testing.assert_allclose(analytic, numeric, atol=1e-4)


def test_box_penetration_and_normal() -> None:
    boxes = BoxSet([Box((0.5, 0.0, 0.3), (0.1, 0.2, 0.05), yaw=0.3)])
    points = np.array([[0.5, 0.0, 0.37], [2.0, 2.0, 2.0], [0.5, 0.0, 0.01]])
    idx, depth, normal = boxes.penetrations(points, np.array([0.05, 0.05, 0.05]))
    by_sphere = dict(
        zip(idx.tolist(), zip(depth.tolist(), normal.tolist(), strict=True), strict=False)
    )
    assert 1 not in by_sphere
    np.testing.assert_allclose(by_sphere[0][0], 0.03)  # 2 cm above the top face, radius 5 cm
    np.testing.assert_allclose(by_sphere[0][1], [0, 0, 1], atol=1e-12)
    assert 2 in by_sphere  # 1 cm above the ground
