"""The container sandbox (the optional extra ``docker``): the agent in a container.

:mod:`.sandbox` is the adapter the registry loads; :mod:`.container` the agent's
container, :mod:`.images` what a run asks of an image, :mod:`.cli` the docker CLI (its
errors, labels, reaper), and :mod:`.evaluator` the evaluator's container for a run
(``run --evaluator-image``), which the harness imports only for such a run. All of it
drives the docker CLI: the extra installs no Python package; what it needs is Docker
(``make docker-deps``) and the images (``make images``).
"""

from ale_robotics.sandboxes.docker.sandbox import DockerSandbox

__all__ = ["DockerSandbox"]
