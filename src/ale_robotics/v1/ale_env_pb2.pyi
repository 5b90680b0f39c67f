from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[DType]
    DTYPE_FLOAT32: _ClassVar[DType]
    DTYPE_FLOAT64: _ClassVar[DType]
    DTYPE_INT32: _ClassVar[DType]
    DTYPE_INT64: _ClassVar[DType]
    DTYPE_UINT8: _ClassVar[DType]
    DTYPE_BOOL: _ClassVar[DType]
    DTYPE_FLOAT16: _ClassVar[DType]

class SessionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_KIND_UNSPECIFIED: _ClassVar[SessionKind]
    SESSION_KIND_PRACTICE: _ClassVar[SessionKind]
    SESSION_KIND_EVAL: _ClassVar[SessionKind]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_SUCCEEDED: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_REJECTED: _ClassVar[JobState]
    JOB_STATE_TIMED_OUT: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class FailureSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_SOURCE_UNSPECIFIED: _ClassVar[FailureSource]
    FAILURE_SOURCE_SUBMISSION: _ClassVar[FailureSource]
    FAILURE_SOURCE_INFRASTRUCTURE: _ClassVar[FailureSource]
DTYPE_UNSPECIFIED: DType
DTYPE_FLOAT32: DType
DTYPE_FLOAT64: DType
DTYPE_INT32: DType
DTYPE_INT64: DType
DTYPE_UINT8: DType
DTYPE_BOOL: DType
DTYPE_FLOAT16: DType
SESSION_KIND_UNSPECIFIED: SessionKind
SESSION_KIND_PRACTICE: SessionKind
SESSION_KIND_EVAL: SessionKind
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_REJECTED: JobState
JOB_STATE_TIMED_OUT: JobState
JOB_STATE_CANCELLED: JobState
FAILURE_SOURCE_UNSPECIFIED: FailureSource
FAILURE_SOURCE_SUBMISSION: FailureSource
FAILURE_SOURCE_INFRASTRUCTURE: FailureSource

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ("name", "dtype", "shape", "low", "high")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    low: Tensor
    high: Tensor
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., low: _Optional[_Union[Tensor, _Mapping]] = ..., high: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class GetSpecRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class GetSpecResponse(_message.Message):
    __slots__ = ("protocol_version", "task_id", "mode", "task_config_json", "submission_contract_json", "observation_spec", "action_spec", "capabilities", "limits", "brief")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TASK_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_CONTRACT_JSON_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_SPEC_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPEC_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    BRIEF_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    task_id: str
    mode: str
    task_config_json: str
    submission_contract_json: str
    observation_spec: TensorSpec
    action_spec: TensorSpec
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    limits: Limits
    brief: str
    def __init__(self, protocol_version: _Optional[str] = ..., task_id: _Optional[str] = ..., mode: _Optional[str] = ..., task_config_json: _Optional[str] = ..., submission_contract_json: _Optional[str] = ..., observation_spec: _Optional[_Union[TensorSpec, _Mapping]] = ..., action_spec: _Optional[_Union[TensorSpec, _Mapping]] = ..., capabilities: _Optional[_Iterable[str]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., brief: _Optional[str] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_message_bytes", "wall_clock_budget_s", "max_submissions_per_run", "max_sessions", "max_envs_per_session", "session_idle_timeout_s", "call_deadline_s", "eval_episodes", "max_episode_steps", "max_step_streams", "max_sessions_total", "training_steps", "training_steps_unit", "training_agent_steps", "training_agent_steps_used", "training_steps_enforced", "training_budget")
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    WALL_CLOCK_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    MAX_SUBMISSIONS_PER_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_ENVS_PER_SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    CALL_DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    EVAL_EPISODES_FIELD_NUMBER: _ClassVar[int]
    MAX_EPISODE_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEP_STREAMS_FIELD_NUMBER: _ClassVar[int]
    MAX_SESSIONS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    TRAINING_STEPS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_STEPS_UNIT_FIELD_NUMBER: _ClassVar[int]
    TRAINING_AGENT_STEPS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_AGENT_STEPS_USED_FIELD_NUMBER: _ClassVar[int]
    TRAINING_STEPS_ENFORCED_FIELD_NUMBER: _ClassVar[int]
    TRAINING_BUDGET_FIELD_NUMBER: _ClassVar[int]
    max_message_bytes: int
    wall_clock_budget_s: float
    max_submissions_per_run: int
    max_sessions: int
    max_envs_per_session: int
    session_idle_timeout_s: float
    call_deadline_s: float
    eval_episodes: int
    max_episode_steps: int
    max_step_streams: int
    max_sessions_total: int
    training_steps: int
    training_steps_unit: str
    training_agent_steps: int
    training_agent_steps_used: int
    training_steps_enforced: bool
    training_budget: str
    def __init__(self, max_message_bytes: _Optional[int] = ..., wall_clock_budget_s: _Optional[float] = ..., max_submissions_per_run: _Optional[int] = ..., max_sessions: _Optional[int] = ..., max_envs_per_session: _Optional[int] = ..., session_idle_timeout_s: _Optional[float] = ..., call_deadline_s: _Optional[float] = ..., eval_episodes: _Optional[int] = ..., max_episode_steps: _Optional[int] = ..., max_step_streams: _Optional[int] = ..., max_sessions_total: _Optional[int] = ..., training_steps: _Optional[int] = ..., training_steps_unit: _Optional[str] = ..., training_agent_steps: _Optional[int] = ..., training_agent_steps_used: _Optional[int] = ..., training_steps_enforced: _Optional[bool] = ..., training_budget: _Optional[str] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ("task_id", "kind", "num_envs", "run_id", "render_mode", "float64_actions", "autoreset_mode")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RENDER_MODE_FIELD_NUMBER: _ClassVar[int]
    FLOAT64_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    AUTORESET_MODE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    kind: SessionKind
    num_envs: int
    run_id: str
    render_mode: str
    float64_actions: bool
    autoreset_mode: str
    def __init__(self, task_id: _Optional[str] = ..., kind: _Optional[_Union[SessionKind, str]] = ..., num_envs: _Optional[int] = ..., run_id: _Optional[str] = ..., render_mode: _Optional[str] = ..., float64_actions: _Optional[bool] = ..., autoreset_mode: _Optional[str] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ("session_id", "num_envs", "episode_budget", "seeds_ignored", "autoreset_mode", "max_episode_steps", "render_modes", "render_fps", "float64_actions")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_BUDGET_FIELD_NUMBER: _ClassVar[int]
    SEEDS_IGNORED_FIELD_NUMBER: _ClassVar[int]
    AUTORESET_MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_EPISODE_STEPS_FIELD_NUMBER: _ClassVar[int]
    RENDER_MODES_FIELD_NUMBER: _ClassVar[int]
    RENDER_FPS_FIELD_NUMBER: _ClassVar[int]
    FLOAT64_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    num_envs: int
    episode_budget: int
    seeds_ignored: bool
    autoreset_mode: str
    max_episode_steps: int
    render_modes: _containers.RepeatedScalarFieldContainer[str]
    render_fps: int
    float64_actions: bool
    def __init__(self, session_id: _Optional[str] = ..., num_envs: _Optional[int] = ..., episode_budget: _Optional[int] = ..., seeds_ignored: _Optional[bool] = ..., autoreset_mode: _Optional[str] = ..., max_episode_steps: _Optional[int] = ..., render_modes: _Optional[_Iterable[str]] = ..., render_fps: _Optional[int] = ..., float64_actions: _Optional[bool] = ...) -> None: ...

class InfoColumn(_message.Message):
    __slots__ = ("key", "values", "mask", "python_scalars")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    PYTHON_SCALARS_FIELD_NUMBER: _ClassVar[int]
    key: str
    values: Tensor
    mask: Tensor
    python_scalars: bool
    def __init__(self, key: _Optional[str] = ..., values: _Optional[_Union[Tensor, _Mapping]] = ..., mask: _Optional[_Union[Tensor, _Mapping]] = ..., python_scalars: _Optional[bool] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("session_id", "seeds", "reset_mask")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    RESET_MASK_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    seeds: _containers.RepeatedScalarFieldContainer[int]
    reset_mask: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, session_id: _Optional[str] = ..., seeds: _Optional[_Iterable[int]] = ..., reset_mask: _Optional[_Iterable[bool]] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("observation", "seeds_ignored", "info_json", "episodes_completed", "info_columns")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    SEEDS_IGNORED_FIELD_NUMBER: _ClassVar[int]
    INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    EPISODES_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    INFO_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    observation: Tensor
    seeds_ignored: bool
    info_json: _containers.RepeatedScalarFieldContainer[str]
    episodes_completed: int
    info_columns: _containers.RepeatedCompositeFieldContainer[InfoColumn]
    def __init__(self, observation: _Optional[_Union[Tensor, _Mapping]] = ..., seeds_ignored: _Optional[bool] = ..., info_json: _Optional[_Iterable[str]] = ..., episodes_completed: _Optional[int] = ..., info_columns: _Optional[_Iterable[_Union[InfoColumn, _Mapping]]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("session_id", "action")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action: Tensor
    def __init__(self, session_id: _Optional[str] = ..., action: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("observation", "reward", "terminated", "truncated", "info_json", "episodes_completed", "eval_complete", "info_columns")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    EPISODES_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    EVAL_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    INFO_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    observation: Tensor
    reward: Tensor
    terminated: Tensor
    truncated: Tensor
    info_json: _containers.RepeatedScalarFieldContainer[str]
    episodes_completed: int
    eval_complete: bool
    info_columns: _containers.RepeatedCompositeFieldContainer[InfoColumn]
    def __init__(self, observation: _Optional[_Union[Tensor, _Mapping]] = ..., reward: _Optional[_Union[Tensor, _Mapping]] = ..., terminated: _Optional[_Union[Tensor, _Mapping]] = ..., truncated: _Optional[_Union[Tensor, _Mapping]] = ..., info_json: _Optional[_Iterable[str]] = ..., episodes_completed: _Optional[int] = ..., eval_complete: _Optional[bool] = ..., info_columns: _Optional[_Iterable[_Union[InfoColumn, _Mapping]]] = ...) -> None: ...

class RenderRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RenderResponse(_message.Message):
    __slots__ = ("frames",)
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    frames: Tensor
    def __init__(self, frames: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id", "run_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    run_id: str
    def __init__(self, session_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("episodes_completed", "sessions_closed")
    EPISODES_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_CLOSED_FIELD_NUMBER: _ClassVar[int]
    episodes_completed: int
    sessions_closed: int
    def __init__(self, episodes_completed: _Optional[int] = ..., sessions_closed: _Optional[int] = ...) -> None: ...

class WatchSessionsRequest(_message.Message):
    __slots__ = ("session_ids",)
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchSessionsResponse(_message.Message):
    __slots__ = ("not_found", "grace_s")
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    GRACE_S_FIELD_NUMBER: _ClassVar[int]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    grace_s: float
    def __init__(self, not_found: _Optional[_Iterable[str]] = ..., grace_s: _Optional[float] = ...) -> None: ...

class OpenDataPlaneRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class OpenDataPlaneResponse(_message.Message):
    __slots__ = ("socket_name", "ticket", "ticket_ttl_s", "layout_version")
    SOCKET_NAME_FIELD_NUMBER: _ClassVar[int]
    TICKET_FIELD_NUMBER: _ClassVar[int]
    TICKET_TTL_S_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    socket_name: str
    ticket: bytes
    ticket_ttl_s: float
    layout_version: int
    def __init__(self, socket_name: _Optional[str] = ..., ticket: _Optional[bytes] = ..., ticket_ttl_s: _Optional[float] = ..., layout_version: _Optional[int] = ...) -> None: ...

class SubmitBatchEvalRequest(_message.Message):
    __slots__ = ("task_id", "run_id", "submission_path", "client_token")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_PATH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    run_id: str
    submission_path: str
    client_token: str
    def __init__(self, task_id: _Optional[str] = ..., run_id: _Optional[str] = ..., submission_path: _Optional[str] = ..., client_token: _Optional[str] = ...) -> None: ...

class SubmitBatchEvalResponse(_message.Message):
    __slots__ = ("job_id", "deduplicated")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    deduplicated: bool
    def __init__(self, job_id: _Optional[str] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

class GetBatchEvalStatusRequest(_message.Message):
    __slots__ = ("job_id", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("episodes_done", "episodes_total", "coarse")
    EPISODES_DONE_FIELD_NUMBER: _ClassVar[int]
    EPISODES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    COARSE_FIELD_NUMBER: _ClassVar[int]
    episodes_done: int
    episodes_total: int
    coarse: bool
    def __init__(self, episodes_done: _Optional[int] = ..., episodes_total: _Optional[int] = ..., coarse: _Optional[bool] = ...) -> None: ...

class GetBatchEvalStatusResponse(_message.Message):
    __slots__ = ("job_id", "task_id", "state", "progress", "queue_position", "failure_source", "failure_reason", "heartbeat_unix", "created_unix", "updated_unix")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_POSITION_FIELD_NUMBER: _ClassVar[int]
    FAILURE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_UNIX_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    UPDATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    task_id: str
    state: JobState
    progress: Progress
    queue_position: int
    failure_source: FailureSource
    failure_reason: str
    heartbeat_unix: float
    created_unix: float
    updated_unix: float
    def __init__(self, job_id: _Optional[str] = ..., task_id: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., queue_position: _Optional[int] = ..., failure_source: _Optional[_Union[FailureSource, str]] = ..., failure_reason: _Optional[str] = ..., heartbeat_unix: _Optional[float] = ..., created_unix: _Optional[float] = ..., updated_unix: _Optional[float] = ...) -> None: ...

class GetEvalResultRequest(_message.Message):
    __slots__ = ("job_id", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class GetEvalResultResponse(_message.Message):
    __slots__ = ("eval_result_json", "official")
    EVAL_RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    OFFICIAL_FIELD_NUMBER: _ClassVar[int]
    eval_result_json: str
    official: bool
    def __init__(self, eval_result_json: _Optional[str] = ..., official: _Optional[bool] = ...) -> None: ...

class SubmitCheckpointRequest(_message.Message):
    __slots__ = ("task_id", "run_id", "submission_path", "client_token")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_PATH_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    run_id: str
    submission_path: str
    client_token: str
    def __init__(self, task_id: _Optional[str] = ..., run_id: _Optional[str] = ..., submission_path: _Optional[str] = ..., client_token: _Optional[str] = ...) -> None: ...

class SubmitCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint_id", "index", "practice_steps", "deduplicated", "checkpoints_left")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PRACTICE_STEPS_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_LEFT_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: str
    index: int
    practice_steps: int
    deduplicated: bool
    checkpoints_left: int
    def __init__(self, checkpoint_id: _Optional[str] = ..., index: _Optional[int] = ..., practice_steps: _Optional[int] = ..., deduplicated: _Optional[bool] = ..., checkpoints_left: _Optional[int] = ...) -> None: ...

class OpenRunRequest(_message.Message):
    __slots__ = ("run_id", "task_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_id: str
    def __init__(self, run_id: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class OpenRunResponse(_message.Message):
    __slots__ = ("run_id", "task_id", "agent_token", "submission_dir", "submission_subdir")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_DIR_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_SUBDIR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_id: str
    agent_token: str
    submission_dir: str
    submission_subdir: str
    def __init__(self, run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., agent_token: _Optional[str] = ..., submission_dir: _Optional[str] = ..., submission_subdir: _Optional[str] = ...) -> None: ...

class CloseRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CloseRunResponse(_message.Message):
    __slots__ = ("sessions_closed", "jobs_cancelled")
    SESSIONS_CLOSED_FIELD_NUMBER: _ClassVar[int]
    JOBS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    sessions_closed: int
    jobs_cancelled: int
    def __init__(self, sessions_closed: _Optional[int] = ..., jobs_cancelled: _Optional[int] = ...) -> None: ...

class GetRunActivityRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunActivityResponse(_message.Message):
    __slots__ = ("last_agent_call_unix",)
    LAST_AGENT_CALL_UNIX_FIELD_NUMBER: _ClassVar[int]
    last_agent_call_unix: float
    def __init__(self, last_agent_call_unix: _Optional[float] = ...) -> None: ...

class GetEvalVideosRequest(_message.Message):
    __slots__ = ("job_id", "run_id", "episodes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    run_id: str
    episodes: int
    def __init__(self, job_id: _Optional[str] = ..., run_id: _Optional[str] = ..., episodes: _Optional[int] = ...) -> None: ...

class EvalVideoChunk(_message.Message):
    __slots__ = ("index_json", "name", "data")
    INDEX_JSON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    index_json: str
    name: str
    data: bytes
    def __init__(self, index_json: _Optional[str] = ..., name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
