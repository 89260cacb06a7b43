"""The retry policy of every agentplane SDK (docs/clients.md, "Retries, request ids and
reconnection"), over the tables tools/sdkgen generates from the API (agentplane._api):
which RPCs may be repeated (their idempotency_level), after which errors, with which
backoff. Client and AsyncClient use it for every unary call and for watch."""

import random
import time

from agentplane import _api
from agentplane.errors import AgentplaneError

_DECLARED = frozenset(_api.REASON_NAMES)


def retryable(method: str, err: AgentplaneError) -> bool:
    """Whether a call of method ("agentplane.v1.TaskService/GetTask") that failed with
    err (an AgentplaneError) may be made again unchanged: the RPC is NO_SIDE_EFFECTS or
    IDEMPOTENT in the API, and either the error's reason is declared retryable
    (STORE_UNAVAILABLE, LIMIT_CONCURRENCY, ...) or it has no declared reason and its code
    is one the policy retries for that level (UNAVAILABLE, DEADLINE_EXCEEDED)."""
    rpc = _api.RPCS.get(method)
    if rpc is None or rpc[0] == _api.IDEMPOTENCY_UNKNOWN:
        return False
    if err.reason in _DECLARED:
        return err.reason in _api.RETRYABLE_REASONS
    return err.code in _api.RETRY_CODES[rpc[0]]


def delay(n: int, err: AgentplaneError | None = None, base: float | None = None) -> float:
    """Seconds before retry number n (from 1): BACKOFF_BASE doubled per retry up to
    BACKOFF_MAX, drawn from [(1-JITTER)*d, d], never shorter than the error's RetryInfo."""
    d = _api.BACKOFF_BASE if base is None else base
    for _ in range(1, n):
        if d >= _api.BACKOFF_MAX:
            break
        d *= 2
    d = min(d, max(_api.BACKOFF_MAX, base or 0))
    d = random.uniform(d * (1 - _api.JITTER), d)
    hint = err.retry_delay if err is not None else None
    return max(d, hint or 0.0)


class Attempts:
    """The attempts of one logical unary call: the remaining time of its timeout (which
    covers every attempt, as a Go context does) and whether to try again after an error."""

    def __init__(self, method: str, timeout: float | None) -> None:
        self.method = method
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.attempt = 0

    def timeout(self) -> float | None:
        """The timeout of the next attempt (None: no deadline)."""
        self.attempt += 1
        if self.deadline is None:
            return None
        return max(self.deadline - time.monotonic(), 0.0)

    def pause(self, err: AgentplaneError) -> float | None:
        """Seconds to wait before the next attempt after err, or None to give up (raise err)."""
        if self.attempt >= _api.RETRY_ATTEMPTS or not retryable(self.method, err):
            return None
        d = delay(self.attempt, err)
        if self.deadline is not None and time.monotonic() + d >= self.deadline:
            return None
        return d
