"""Request ids (idempotency keys)."""

import uuid


def new_request_id() -> str:
    """Returns a fresh idempotency key."""
    return str(uuid.uuid4())
