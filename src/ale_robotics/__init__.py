"""ALE Robotics: evaluate AI agents on robotics tasks tied to published papers.

The evaluator computes every metric itself, on hidden seeds; agents submit
artifacts (batch mode) or drive episodes over gRPC (interactive mode).
"""

from ale_robotics.errors import AleError

__version__ = "0.5.0.dev0"
PROTOCOL_VERSION = "ale_robotics.v1"

__all__ = ["PROTOCOL_VERSION", "AleError", "__version__"]
