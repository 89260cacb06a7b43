from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackupRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class BackupResponse(_message.Message):
    __slots__ = ["chunk", "total_bytes"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    chunk: bytes
    total_bytes: int
    def __init__(self, chunk: _Optional[bytes] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ["active_leases", "checkpoints", "commits", "events", "log_bytes", "pending_interrupts", "queue_depth", "schema_version", "server_version", "start_time", "store", "store_bytes", "store_path", "tasks_by_state", "updates", "uptime", "write_ahead_log"]
    class QueueDepthEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TasksByStateEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ACTIVE_LEASES_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    COMMITS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    PENDING_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    STORE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    STORE_PATH_FIELD_NUMBER: _ClassVar[int]
    TASKS_BY_STATE_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_FIELD_NUMBER: _ClassVar[int]
    WRITE_AHEAD_LOG_FIELD_NUMBER: _ClassVar[int]
    active_leases: int
    checkpoints: int
    commits: int
    events: int
    log_bytes: int
    pending_interrupts: int
    queue_depth: _containers.ScalarMap[str, int]
    schema_version: int
    server_version: str
    start_time: _timestamp_pb2.Timestamp
    store: str
    store_bytes: int
    store_path: str
    tasks_by_state: _containers.ScalarMap[str, int]
    updates: int
    uptime: _duration_pb2.Duration
    write_ahead_log: bool
    def __init__(self, server_version: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., uptime: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., store: _Optional[str] = ..., store_path: _Optional[str] = ..., store_bytes: _Optional[int] = ..., tasks_by_state: _Optional[_Mapping[str, int]] = ..., events: _Optional[int] = ..., pending_interrupts: _Optional[int] = ..., active_leases: _Optional[int] = ..., schema_version: _Optional[int] = ..., log_bytes: _Optional[int] = ..., checkpoints: _Optional[int] = ..., commits: _Optional[int] = ..., updates: _Optional[int] = ..., queue_depth: _Optional[_Mapping[str, int]] = ..., write_ahead_log: bool = ...) -> None: ...

class ListWebhookDeadLettersRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "tenant"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhookDeadLettersResponse(_message.Message):
    __slots__ = ["dead_letters", "next_page_token"]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[WebhookDeadLetter]
    next_page_token: str
    def __init__(self, dead_letters: _Optional[_Iterable[_Union[WebhookDeadLetter, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PurgeTasksRequest(_message.Message):
    __slots__ = ["dry_run", "older_than"]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    older_than: _duration_pb2.Duration
    def __init__(self, older_than: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., dry_run: bool = ...) -> None: ...

class PurgeTasksResponse(_message.Message):
    __slots__ = ["events", "tasks"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    events: int
    tasks: int
    def __init__(self, tasks: _Optional[int] = ..., events: _Optional[int] = ...) -> None: ...

class RetryWebhookDeadLetterRequest(_message.Message):
    __slots__ = ["all", "id", "tenant"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    all: bool
    id: str
    tenant: str
    def __init__(self, id: _Optional[str] = ..., all: bool = ..., tenant: _Optional[str] = ...) -> None: ...

class RetryWebhookDeadLetterResponse(_message.Message):
    __slots__ = ["retried"]
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    retried: int
    def __init__(self, retried: _Optional[int] = ...) -> None: ...

class WebhookDeadLetter(_message.Message):
    __slots__ = ["attempts", "create_time", "dead_time", "endpoint", "event_type", "id", "last_error", "tenant"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DEAD_TIME_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    create_time: _timestamp_pb2.Timestamp
    dead_time: _timestamp_pb2.Timestamp
    endpoint: str
    event_type: str
    id: str
    last_error: str
    tenant: str
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., endpoint: _Optional[str] = ..., event_type: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., dead_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
