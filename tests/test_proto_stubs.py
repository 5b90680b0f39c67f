"""The committed gRPC stubs must match proto/ exactly (regenerate: make proto)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_stubs_are_fresh(tmp_path: Path) -> None:
    _load_generator().generate(tmp_path)
    fresh = tmp_path / "ale_robotics" / "v1"
    committed = ROOT / "src" / "ale_robotics" / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == ["ale_env_pb2.py", "ale_env_pb2.pyi", "ale_env_pb2_grpc.py"]
    stale = [n for n in names if (fresh / n).read_bytes() != (committed / n).read_bytes()]
    assert not stale, f"stale stubs {stale}: run 'make proto' and commit the result"


def test_service_has_the_seventeen_rpcs() -> None:
    from ale_robotics.v1 import ale_env_pb2

    service = ale_env_pb2.DESCRIPTOR.services_by_name["AleEnv"]
    assert ale_env_pb2.DESCRIPTOR.package == "ale_robotics.v1"
    assert [m.name for m in service.methods] == [
        "GetSpec",
        "OpenSession",
        "Reset",
        "Step",
        "StepStream",
        "Render",
        "CloseSession",
        "WatchSessions",
        "OpenDataPlane",
        "SubmitBatchEval",
        "GetBatchEvalStatus",
        "GetEvalResult",
        "SubmitCheckpoint",
        "OpenRun",
        "CloseRun",
        "GetEvalVideos",
        "GetRunActivity",
    ]
    streaming = {m.name for m in service.methods if m.client_streaming or m.server_streaming}
    assert streaming == {"StepStream", "WatchSessions", "GetEvalVideos"}
    videos = service.methods_by_name["GetEvalVideos"]
    assert videos.server_streaming and not videos.client_streaming
    stream = service.methods_by_name["StepStream"]
    assert stream.client_streaming and stream.server_streaming
    assert stream.input_type.name == "StepRequest" and stream.output_type.name == "StepResponse"
