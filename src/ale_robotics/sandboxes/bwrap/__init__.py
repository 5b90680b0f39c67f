"""The bubblewrap sandbox: its command line (:mod:`.command`) and its adapter (:mod:`.sandbox`)."""

from ale_robotics.sandboxes.bwrap.sandbox import BwrapSandbox

__all__ = ["BwrapSandbox"]
