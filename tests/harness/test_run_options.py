"""The run options' one declaration: the ``run`` command, ``RunOptions`` and the eval-set
SPEC are made from it, agree option for option, and check each rule the same way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer.main

from ale_robotics.cli.main import app
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evalset import EvalSetRunner, load_spec, plan_slots
from ale_robotics.evalset.runner import agent_seed
from ale_robotics.harness.options import MIB, RunOptions, RunSettings, flag_of
from ale_robotics.harness.options.flags import (
    command_fields,
    flag_args,
    from_command_line,
    parse_flags,
)

TASK = "td3-inverted-pendulum-v2"
PROGRAM_SET = {"run_id", "runs_root", "job_timeout_s"}
"""RunOptions' fields that are no options of the command: the program starting a run sets them."""


def _run_command() -> Any:
    group = typer.main.get_command(app)
    return group.commands["run"]  # type: ignore[attr-defined]


def _parsed(args: list[str], cwd: Path) -> RunOptions:
    """``ale-robotics run ARGS`` as the command reads them, without running anything."""
    ctx = _run_command().make_context("run", list(args))
    return from_command_line(ctx.params, cwd)


def test_the_run_command_has_one_flag_per_field_and_a_field_per_flag() -> None:
    params = {p.name: p for p in _run_command().params if p.name != "help"}
    flagged = set(RunOptions.model_fields) - PROGRAM_SET
    assert set(params) == flagged
    for name in flagged:
        field, flag, param = RunOptions.model_fields[name], flag_of(name), params[name]
        if flag.argument:
            assert param.param_type_name == "argument"
        else:
            assert param.opts == [flag.name], name
            assert param.help == field.description, name
        if not field.is_required():
            default = field.get_default()
            scaled = default // flag.scale if flag.scale != 1 and default else default
            if flag.repeat:  # a repeatable option: no value given is the empty tuple
                assert param.multiple and default == () and param.default is None, name
                continue
            assert param.default == scaled, name
    # Those without a flag say so: they are set by whoever starts the run.
    for name in PROGRAM_SET:
        with pytest.raises(KeyError):
            flag_of(name)
    assert [name for _, name, _, _ in command_fields()][:2] == ["task_id", "agent_cmd"]


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "set.yaml"
    path.write_text(
        "schema_version: 1\n"
        f"tasks: [{TASK}]\n"
        'agents: [{label: probe, cmd: "python probe.py"}]\n'
        "repetitions: 1\n" + body
    )
    return path


def test_an_eval_set_with_the_docker_sandbox_makes_the_runs_run_docker_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sandbox: docker`` is accepted (before: ``Literal["auto","bwrap","none"]``, and
    ``--sandbox`` refused in run_args), and each run of the set gets the RunOptions a
    person typing ``ale-robotics run --sandbox docker ...`` gets."""
    monkeypatch.chdir(tmp_path)
    spec = load_spec(
        _spec(
            tmp_path,
            "sandbox: docker\nagent_image: my/agent:1\nbudget_s: 60\nmemory_bytes: 536870912\n"
            "run_args: [--workers, '1', --state-dir, state]\n",
        )
    )
    assert (spec.sandbox, spec.agent_image) == ("docker", "my/agent:1")
    slot = plan_slots(spec, tmp_path / "runs", "set")[0]
    argv = EvalSetRunner(spec, "set", tmp_path / "runs", cli=[]).command(slot)
    assert argv[:2] == ["run", TASK]
    by_the_set = _parsed(argv[1:], tmp_path)
    seed = agent_seed("set", TASK, "probe", 0)
    by_hand = _parsed(
        [TASK, "--agent", "python probe.py", "--run-dir", str(slot.run_dir), "--label",
         "probe", "--repetition", "0", "--agent-seed", str(seed), "--sandbox", "docker",
         "--agent-image", "my/agent:1", "--budget", "60",
         "--memory-mib", "512", "--workers", "1", "--state-dir", "state"],
        tmp_path,
    )  # fmt: skip
    assert by_the_set == by_hand
    assert by_the_set == spec.run_options(
        TASK, "probe", "python probe.py", slot.run_dir, repetition=0, agent_seed=seed
    )
    assert by_the_set.sandbox == "docker" and by_the_set.memory_bytes == 512 * MIB
    assert by_the_set.state_dir == tmp_path / "state" and by_the_set.workers == 1


# Every option an eval set may set, each with a value that is not its default; three
# SPECs, since some options exclude others (--evaluator vs an embedded evaluator's).
_EMBEDDED = {
    "sandbox": "docker",
    "agent_image": "my/agent:1",
    "workspace": "ws",
    "episodes": 2,
    "workers": 3,
    "executor": "ray",
    "ray_address": "10.0.0.1:6379",
    "budget_s": 42.5,
    "disk_quota_bytes": 100 * MIB,
    "log_cap_bytes": 8 * MIB,
    "cpus": 1.5,
    "memory_bytes": 300 * MIB,
    "pids_max": 99,
    "state_dir": "state",
    "videos": 5,
    "no_videos": True,
    "agent_tools": ["tools"],
    "agent_env": ["DISABLE_TELEMETRY=1", "EDITOR=true"],
    "agent_idle_s": 30.0,
}
_SEPARATE = {
    "evaluator": "unix:///srv/ale/agent/agent.sock",
    "evaluator_harness": "unix:///srv/ale/harness.sock",
    "agent_token_file": "agent.token",
    "harness_token_file": "harness.token",
    "submission_volume": "volume",
    "evaluator_retry_s": 42.0,
    "tls_ca": "ca.pem",
    "tls_client_cert": "client.pem",
    "tls_client_key": "client.key",
    "insecure": True,
    "model_upstream": "http://127.0.0.1:9/v1",
    "models": ["m1", "m2"],
    "model_budget_tokens": 5000,
    "model_allow_tools": ["web_search", "web_fetch"],
}
_CONTAINER = {"evaluator_image": "my/evaluator:1"}


def test_every_run_option_works_in_an_eval_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools").mkdir()  # --agent-tools must name a directory
    assert {*_EMBEDDED, *_SEPARATE, *_CONTAINER} == set(RunSettings.model_fields)
    for values in (_EMBEDDED, _SEPARATE, _CONTAINER):
        body = "".join(
            f"{k}: {v!r}\n" if isinstance(v, str) else f"{k}: {v}\n" for k, v in values.items()
        )
        spec = load_spec(_spec(tmp_path, body))
        opts = spec.run_options(TASK, "probe", "python probe.py", tmp_path / "run")
        for key, value in values.items():
            got = getattr(opts, key)
            want = tmp_path / value if isinstance(got, Path) else value
            if isinstance(got, tuple):  # a repeatable option (of paths: from the cwd)
                want = tuple(tmp_path / v if got and isinstance(got[0], Path) else v for v in value)
            assert got == want, key
        # ... and the same given as flags in run_args.
        as_flags = flag_args(RunSettings.model_validate(values), values)
        again = load_spec(_spec(tmp_path, f"run_args: {as_flags!r}\n"))
        assert again.run_options(TASK, "probe", "python probe.py", tmp_path / "run") == opts


@pytest.mark.parametrize(
    ("key", "value", "flags", "message"),
    [
        ("budget_s", "-5", ["--budget", "-5"], "the agent's wall-clock budget must be a positive"),
        ("sandbox", "gvisor", ["--sandbox", "gvisor"], "not a sandbox"),
        ("executor", "spark", ["--executor", "spark"], "use 'local' or 'ray'"),
        ("ray_address", "h:1", ["--ray-address", "h:1"], "--ray-address goes with --executor ray"),
        ("agent_image", "x", ["--agent-image", "x"], "--agent-image goes with --sandbox docker"),
    ],
)
def test_a_rule_is_checked_once_for_the_command_and_the_spec(
    tmp_path: Path, key: str, value: str, flags: list[str], message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as by_cli:
        _parsed([TASK, "--agent", "true", *flags], tmp_path)
    with pytest.raises(InvalidArgumentError) as by_spec:
        load_spec(_spec(tmp_path, f"{key}: {value}\n"))
    assert message in by_cli.value.message and message in by_spec.value.message
    assert by_cli.value.message.startswith(flags[0]), by_cli.value.message


def test_a_size_key_is_a_whole_number_of_mib_the_flag_can_carry(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="1048577 bytes is not a whole number of MiB"):
        load_spec(_spec(tmp_path, "memory_bytes: 1048577\n"))


def test_run_args_hold_options_of_run_only_once_and_never_a_runs_own(tmp_path: Path) -> None:
    for args, message in [
        ("[--nope, '1']", "'--nope' is not an option of 'ale-robotics run'"),
        ("[--worker, '1']", "did you mean --workers?"),
        ("[--label, x]", "--label is set by the eval set for every run"),
        ("[--strict]", "--strict is set by the eval set for every run"),
        ("[--workers]", "--workers needs a value"),
        ("[--workers, '1', --workers, '2']", "--workers is given twice"),
    ]:
        with pytest.raises(InvalidArgumentError) as err:
            load_spec(_spec(tmp_path, f"run_args: {args}\n"))
        assert message in err.value.message, err.value.message
    with pytest.raises(InvalidArgumentError) as err:
        load_spec(_spec(tmp_path, "workers: 2\nrun_args: [--workers, '1']\n"))
    assert "--workers is set by the eval set's key 'workers' already" in err.value.message
    # A SPEC read back from its JSON dump (every key at its value, defaults too) is the same.
    spec = load_spec(_spec(tmp_path, "run_args: [--sandbox, none, --executor, ray]\n"))
    again = type(spec).model_validate_json(spec.model_dump_json())
    assert again.run_flags() == spec.run_flags() == ["--sandbox", "none", "--executor", "ray"]


def test_options_are_made_as_the_command_makes_them(tmp_path: Path) -> None:
    opts = _parsed([TASK, "--agent", "x", "--run-dir", "r", "--disk-quota-mib", "10"], tmp_path)
    assert opts.run_dir == tmp_path / "r" and opts.runs_root == tmp_path / "runs"
    assert opts.workspace == tmp_path and opts.disk_quota_bytes == 10 * MIB
    assert os.path.isabs(str(opts.run_dir))
    # Made by a program, directly: positional task and command, the same defaults.
    direct = RunOptions(TASK, "x", run_dir=tmp_path / "r", workspace=tmp_path,
                        runs_root=tmp_path / "runs", disk_quota_bytes=10 * MIB)  # fmt: skip
    assert direct == opts


def test_a_repeatable_option_collects_its_values_both_ways(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1"
    base = ["t", "--agent", "a"]
    model = ["--model-upstream", url, "--model", "m1", "--model", "m2"]
    opts = _parsed([*base, *model, "--model-budget-tokens", "500"], tmp_path)
    assert opts.models == ("m1", "m2") and opts.model_budget_tokens == 500
    assert _parsed(base, tmp_path).models == ()
    args = flag_args(opts, ["model_upstream", "models", "model_budget_tokens"])
    assert args == [*model, "--model-budget-tokens", "500"]
    assert parse_flags(args)["models"] == ["m1", "m2"]
    with pytest.raises(InvalidArgumentError, match="go with --model-upstream"):
        _parsed([*base, "--model", "m1"], tmp_path)
    with pytest.raises(InvalidArgumentError, match="at least one --model"):
        _parsed([*base, "--model-upstream", url], tmp_path)
