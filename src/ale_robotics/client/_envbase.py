"""What :class:`RemoteEnv` and ``RemoteVectorEnv`` share: session facts, reopening, refusals.

Both envs hold one :class:`RemoteSession` and behave as local Gymnasium envs do
around it: ``reset()`` after ``close()`` opens a new session (SB3's
``check_env`` closes an env and then resets it), and an env can be neither
pickled nor copied (a copy would share, or fail to own, a session on the
evaluator), with an error that says what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from ale_robotics.client.sdk import AleClient
from ale_robotics.client.session import RemoteSession, SessionKindName, StepTransport
from ale_robotics.errors import InvalidArgumentError

if TYPE_CHECKING:
    from gymnasium.envs.registration import EnvSpec

__all__ = [
    "ENTRY_POINT",
    "Connector",
    "Endpoint",
    "SessionProps",
    "connector",
    "env_spec",
    "render_metadata",
]

ENTRY_POINT = "ale_robotics.client:RemoteEnv"
"""What ``gym.register(..., entry_point=ENTRY_POINT, kwargs={"task_id": ...})`` takes."""


def env_spec(session: RemoteSession, entry_point: str, **kwargs: Any) -> EnvSpec:
    """The ``EnvSpec`` of a remote env: its task, entry point and the server's step limit."""
    from gymnasium.envs.registration import EnvSpec

    return EnvSpec(
        id=f"ale-robotics/{session.view.task.id}",
        entry_point=entry_point,
        max_episode_steps=session.max_episode_steps,
        kwargs={"task_id": session.view.task.id, "kind": session.kind, **kwargs},
    )


def render_metadata(session: RemoteSession) -> dict[str, Any]:
    """Gymnasium's ``metadata`` for what the session's task offers on its evaluator."""
    metadata: dict[str, Any] = {"render_modes": list(session.render_modes)}
    if session.render_fps:
        metadata["render_fps"] = session.render_fps
    return metadata


@dataclass(frozen=True)
class Endpoint:
    """How to connect again, as plain data: what an env's ``spec`` carries in its kwargs
    when the env was given a client, so that ``env.spec.make()`` (Gymnasium's
    ``check_env`` does it) reaches the same evaluator. Its repr hides the token."""

    address: str
    token: str = field(repr=False)
    task_id: str = ""
    run_id: str = ""
    timeout_s: float = 30.0

    @classmethod
    def of(cls, client: AleClient) -> Endpoint:
        token = dict(client.metadata)["authorization"].removeprefix("Bearer ")
        return cls(client.endpoint, token, client.task_id, client.run_id, client.timeout_s)

    def client(self) -> AleClient:
        return AleClient(
            self.address,
            self.token,
            task_id=self.task_id,
            run_id=self.run_id,
            timeout_s=self.timeout_s,
        )


def _clone(client: AleClient) -> AleClient:
    """A new connection like ``client`` (whose own may be closed)."""
    return AleClient(
        client.endpoint,
        dict(client.metadata)["authorization"].removeprefix("Bearer "),
        task_id=client.task_id,
        run_id=client.run_id,
        submission_dir=client.submission_dir,
        timeout_s=client.timeout_s,
    )


@dataclass
class Connector:
    """Where an env gets its client, now and again after ``close()``.

    A client the caller passed and still owns is reused as it is; one the env
    owns (built from the environment's variables, or handed over with
    ``own_client=True``) is closed with the session, so a reopen builds a new one.
    """

    first: AleClient
    own: bool
    again: Callable[[], AleClient]
    endpoint: Endpoint | None = None
    """Set when the env was given its client (see :class:`Endpoint`)."""

    def open(self, **session_kw: Any) -> RemoteSession:
        return RemoteSession(self.first, own_client=self.own, **session_kw)

    def reopen(self, **session_kw: Any) -> RemoteSession:
        client = self.again() if self.own else self.first
        return RemoteSession(client, own_client=self.own, **session_kw)


def connector(
    client: AleClient | Endpoint | None,
    *,
    own_client: bool | None,
    task_id: str | None,
    env: Mapping[str, str] | None,
) -> Connector:
    """The env's :class:`Connector`: ``client``, or one from ``env`` (the process's by default)."""
    if isinstance(client, Endpoint):
        where = client if task_id is None else Endpoint(**{**vars(client), "task_id": task_id})
        return Connector(where.client(), own_client is not False, where.client, where)
    if client is None:

        def build() -> AleClient:
            made = AleClient.from_env(None if env is None else dict(env))
            if task_id is not None:
                made.task_id = task_id
            return made

        return Connector(build(), True if own_client is None else own_client, build)
    if task_id is not None and task_id != client.task_id:
        raise InvalidArgumentError(
            f"task_id {task_id!r} differs from the client's ({client.task_id!r}): pass it to "
            "AleClient(..., task_id=...) instead, or omit the client"
        )
    first = client
    return Connector(first, bool(own_client), lambda: _clone(first), Endpoint.of(client))


class SessionProps:
    """Session facts shared by both env classes."""

    _session: RemoteSession

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def task_id(self) -> str:
        return self._session.view.task.id

    @property
    def kind(self) -> SessionKindName:
        return self._session.kind

    @property
    def max_episode_steps(self) -> int:
        """The server's step limit per episode (its TimeLimit truncates there)."""
        return self._session.max_episode_steps

    @property
    def episode_budget(self) -> int:
        """Episodes of an eval session (0 for practice)."""
        return self._session.episode_budget

    @property
    def episodes_completed(self) -> int:
        """Eval sessions: budget episodes that have ended so far."""
        return self._session.episodes_completed

    @property
    def eval_complete(self) -> bool:
        """Eval sessions: every budget episode has ended; the evaluator has the result."""
        return self._session.eval_complete

    @property
    def seeds_ignored(self) -> bool:
        return self._session.seeds_ignored

    @property
    def transport(self) -> StepTransport:
        """How Steps travel: "shm" (shared memory), "stream" (one StepStream call) or "unary"
        (a Step call each)."""
        return self._session.transport

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        """Refuse pickling and ``copy``: an env is a live session on the evaluator."""
        raise TypeError(
            f"{type(self).__name__} cannot be pickled or copied: it is a live session "
            f"({self._session.session_id}) on the evaluator. Pickle a function that makes "
            "the env instead (lambda: gym.make(ID) or RemoteEnv.from_env), as SubprocVecEnv "
            "and AsyncVectorEnv do, and open one env per process"
        )
