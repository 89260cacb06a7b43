"""A runtime process for test_drain: it runs test_drain's email handler (a step, then a
gated call waiting interactively) until SIGTERM, with a short drain timeout, and exits."""

import sys

import controlplane  # noqa: F401  # pyright: ignore[reportUnusedImport]  (puts ../src on sys.path)
from agentplane import Client
from agentplane.worker import Worker
from test_drain import email_handler


def main() -> None:
    address, effects, queue = sys.argv[1], sys.argv[2], sys.argv[3]
    c = Client(address)
    Worker(c, email_handler(effects), "py-draining", queues=[queue], poll_wait=0.2, drain_timeout=0.5).run_until_signal()
    c.close()


if __name__ == "__main__":
    main()
