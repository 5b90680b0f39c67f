"""Generated protobuf and gRPC stubs for ``ale_robotics.v1`` (do not edit by hand).

Regenerate with ``python scripts/gen_proto.py``; a test fails when they are stale.
"""
