"""Regenerate the gRPC stubs from proto/ into src/ale_robotics/v1/.

The stubs are committed so that `pip install` needs no protoc; the test
tests/test_proto_stubs.py regenerates them into a temporary folder and fails
when the committed ones are stale.

Usage: python scripts/gen_proto.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_FILE = "ale_robotics/v1/ale_env.proto"


def generate(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            PROTO_FILE,
        ]
    )
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src")
