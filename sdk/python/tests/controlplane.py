"""A real control plane for the tests: built from the tree (or $AGENTPLANE_BIN),
started on a free loopback port with a temporary data directory, restartable on the
same port and data."""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

_built = None
_running = set()  # servers started and not yet stopped


def _stop_all(*_):
    for cp in list(_running):
        cp.stop()


def _on_sigterm(signum, frame):
    _stop_all()
    sys.exit(128 + signum)


# Servers still running when the suite ends (a test failed before its cleanup, the run was
# interrupted) are stopped with it and their data directories removed.
atexit.register(_stop_all)
signal.signal(signal.SIGTERM, _on_sigterm)


def binary():
    """Returns the controlplane binary: $AGENTPLANE_BIN, or one built once per run."""
    global _built
    if os.environ.get("AGENTPLANE_BIN"):
        return os.environ["AGENTPLANE_BIN"]
    if _built is None:
        out = tempfile.mkdtemp(prefix="agentplane-pybin-")
        _built = os.path.join(out, "controlplane")
        subprocess.run(["go", "build", "-o", _built, "./cmd/controlplane"], cwd=REPO, check=True, timeout=600)
    return _built


def new_token(tenant, *roles):
    """Returns (token, config entry YAML) from `controlplane token new`."""
    args = [binary(), "token", "new", "--name", "py-" + tenant, "--tenant", tenant]
    for r in roles:
        args += ["--role", r]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout
    token = re.search(r"^\s+(apt_\S+)$", out, re.M).group(1)
    entry = out[out.index("  - name:"):]
    return token, entry


def tls_files(directory):
    """Writes a self-signed certificate for 127.0.0.1 that is its own CA (Go's
    crypto/tls/generate_cert.go) into directory; returns (cert.pem, key.pem)."""
    goroot = subprocess.run(["go", "env", "GOROOT"], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["go", "run", os.path.join(goroot, "src", "crypto", "tls", "generate_cert.go"),
                    "--host", "127.0.0.1", "--ca"], cwd=directory, check=True, capture_output=True, timeout=300)
    return os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ControlPlane:
    def __init__(self, config_yaml=None):
        self.data_dir = tempfile.mkdtemp(prefix="agentplane-pytest-")
        self.extra = []
        if config_yaml is not None:
            path = os.path.join(self.data_dir, "controlplane.yaml")
            with open(path, "w") as f:
                f.write(config_yaml)
            self.extra = ["--config", path]
        self.address = f"127.0.0.1:{_free_port()}"
        self.proc = None
        _running.add(self)
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [binary(), "--data-dir", self.data_dir, "--grpc-addr", self.address, "--http-addr", "off",
             "--log-level", "warn", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        out = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"controlplane exited ({self.proc.wait()}):\n{out}")
            out += line
            if re.search(r"^\s+store\s", line):
                return
        raise RuntimeError(f"controlplane did not start within 60 s:\n{out}")

    def kill(self):
        """SIGKILLs the server (no graceful shutdown)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc.stdout.close()

    def restart(self):
        self.kill()
        self.start()

    def stop(self):
        _running.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        if self.proc:
            self.proc.stdout.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)
