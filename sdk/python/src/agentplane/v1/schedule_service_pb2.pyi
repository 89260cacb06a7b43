from agentplane.v1 import task_pb2 as _task_pb2
from agentplane.v1 import task_service_pb2 as _task_service_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SCHEDULE_OVERLAP_POLICY_ALLOW_ALL: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_BUFFER_ONE: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_CANCEL_PREVIOUS: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_SKIP: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_UNSPECIFIED: ScheduleOverlapPolicy
SCHEDULE_RUN_OUTCOME_BUFFERED: ScheduleRunOutcome
SCHEDULE_RUN_OUTCOME_FAILED: ScheduleRunOutcome
SCHEDULE_RUN_OUTCOME_MISSED: ScheduleRunOutcome
SCHEDULE_RUN_OUTCOME_SKIPPED: ScheduleRunOutcome
SCHEDULE_RUN_OUTCOME_STARTED: ScheduleRunOutcome
SCHEDULE_RUN_OUTCOME_UNSPECIFIED: ScheduleRunOutcome

class CreateScheduleRequest(_message.Message):
    __slots__ = ["paused", "policy", "schedule_id", "spec", "task"]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    paused: bool
    policy: SchedulePolicy
    schedule_id: str
    spec: ScheduleSpec
    task: _task_service_pb2.StartTaskRequest
    def __init__(self, schedule_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., policy: _Optional[_Union[SchedulePolicy, _Mapping]] = ..., task: _Optional[_Union[_task_service_pb2.StartTaskRequest, _Mapping]] = ..., paused: bool = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ["created", "schedule"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    created: bool
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., created: bool = ...) -> None: ...

class CronSpec(_message.Message):
    __slots__ = ["expression", "time_zone"]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    expression: str
    time_zone: str
    def __init__(self, expression: _Optional[str] = ..., time_zone: _Optional[str] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class IntervalSpec(_message.Message):
    __slots__ = ["every", "offset"]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    every: _duration_pb2.Duration
    offset: _duration_pb2.Duration
    def __init__(self, every: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., offset: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["next_page_token", "schedules"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ["reason", "schedule_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["buffered_nominal_time", "counts", "create_time", "created_by", "next_fire_time", "next_nominal_times", "pause_reason", "paused", "policy", "recent_runs", "revision", "run_as", "schedule_id", "spec", "task", "tenant", "update_time"]
    BUFFERED_NOMINAL_TIME_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_NOMINAL_TIMES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RECENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    buffered_nominal_time: _timestamp_pb2.Timestamp
    counts: ScheduleCounts
    create_time: _timestamp_pb2.Timestamp
    created_by: str
    next_fire_time: _timestamp_pb2.Timestamp
    next_nominal_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    pause_reason: str
    paused: bool
    policy: SchedulePolicy
    recent_runs: _containers.RepeatedCompositeFieldContainer[ScheduleRun]
    revision: int
    run_as: str
    schedule_id: str
    spec: ScheduleSpec
    task: _task_service_pb2.StartTaskRequest
    tenant: str
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, schedule_id: _Optional[str] = ..., tenant: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., policy: _Optional[_Union[SchedulePolicy, _Mapping]] = ..., task: _Optional[_Union[_task_service_pb2.StartTaskRequest, _Mapping]] = ..., paused: bool = ..., pause_reason: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., revision: _Optional[int] = ..., next_nominal_times: _Optional[_Iterable[_Union[_timestamp_pb2.Timestamp, _Mapping]]] = ..., next_fire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., recent_runs: _Optional[_Iterable[_Union[ScheduleRun, _Mapping]]] = ..., counts: _Optional[_Union[ScheduleCounts, _Mapping]] = ..., buffered_nominal_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run_as: _Optional[str] = ...) -> None: ...

class ScheduleCounts(_message.Message):
    __slots__ = ["failed", "missed", "skipped", "started"]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    failed: int
    missed: int
    skipped: int
    started: int
    def __init__(self, started: _Optional[int] = ..., skipped: _Optional[int] = ..., missed: _Optional[int] = ..., failed: _Optional[int] = ...) -> None: ...

class SchedulePolicy(_message.Message):
    __slots__ = ["catchup_window", "overlap"]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    catchup_window: _duration_pb2.Duration
    overlap: ScheduleOverlapPolicy
    def __init__(self, overlap: _Optional[_Union[ScheduleOverlapPolicy, str]] = ..., catchup_window: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ScheduleRun(_message.Message):
    __slots__ = ["fire_time", "last_missed_time", "manual", "message", "missed_count", "nominal_time", "outcome", "task_id"]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_MISSED_TIME_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MISSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    fire_time: _timestamp_pb2.Timestamp
    last_missed_time: _timestamp_pb2.Timestamp
    manual: bool
    message: str
    missed_count: int
    nominal_time: _timestamp_pb2.Timestamp
    outcome: ScheduleRunOutcome
    task_id: str
    def __init__(self, nominal_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., fire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[ScheduleRunOutcome, str]] = ..., task_id: _Optional[str] = ..., manual: bool = ..., message: _Optional[str] = ..., missed_count: _Optional[int] = ..., last_missed_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ["at", "cron", "interval", "jitter"]
    AT_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    cron: CronSpec
    interval: IntervalSpec
    jitter: _duration_pb2.Duration
    def __init__(self, cron: _Optional[_Union[CronSpec, _Mapping]] = ..., interval: _Optional[_Union[IntervalSpec, _Mapping]] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., jitter: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ["request_id", "schedule_id"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ["run", "task"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    run: ScheduleRun
    task: _task_pb2.Task
    def __init__(self, run: _Optional[_Union[ScheduleRun, _Mapping]] = ..., task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ["expected_revision", "policy", "schedule_id", "spec", "task"]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    expected_revision: int
    policy: SchedulePolicy
    schedule_id: str
    spec: ScheduleSpec
    task: _task_service_pb2.StartTaskRequest
    def __init__(self, schedule_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., policy: _Optional[_Union[SchedulePolicy, _Mapping]] = ..., task: _Optional[_Union[_task_service_pb2.StartTaskRequest, _Mapping]] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ScheduleOverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScheduleRunOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
