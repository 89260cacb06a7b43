#!/usr/bin/env bash
# The Python SDK's CI, run from the repository root:
#   sdk/python/ci.sh deps    install Debian's protoc, gRPC Python plugin, grpcio and protobuf when absent
#                            (scripts/test and .ci/run call it)
#   sdk/python/ci.sh gen     regenerate sdk/python/src's generated modules (then .ci/run checks git diff)
#   sdk/python/ci.sh typecheck  pyright --strict over the package, its tests and examples/python-runtime
#                            (pyrightconfig.json; pyright from sdk/python's package-lock.json, which
#                            scripts/test installs with npm ci); fails on any error
#   sdk/python/ci.sh test    typecheck, then build the control plane (or use $AGENTPLANE_BIN) and run the
#                            unittest suite against it (go test ./sdk runs it, as part of the README's test
#                            command, scripts/test)
# Uses /usr/bin/python3 (Debian's, where python3-grpcio is installed), not a python3 on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3

loud() {
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  echo "!!! Python SDK: $*" >&2
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  exit 1
}

# The packaging test (sdk/sdk_test.go) builds the wheel and sdist offline with build and
# setuptools (--no-isolation) and installs the wheel into a venv (ensurepip's pip).
have_deps() {
  command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null && [ -x "$PY" ] &&
    "$PY" -c 'import grpc, google.protobuf, build, setuptools, wheel, venv, ensurepip' 2>/dev/null
}

case "${1:-}" in
deps)
  if ! have_deps; then
    scripts/apt-install protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf \
      python3-build python3-setuptools python3-wheel python3-venv ||
      loud "could not install the Debian packages (above); the SDK can be neither generated nor tested"
    have_deps || loud "protoc, grpc_python_plugin or $PY with grpc, protobuf, build, setuptools, wheel and venv still missing"
  fi
  protoc --version
  "$PY" -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
  ;;
gen)
  # Not `clean` in the templates (src/ holds the hand-written package): delete the
  # generated files first so that a proto file removed from proto/ leaves nothing behind.
  find sdk/python/src/agentplane/v1 \( -name "*_pb2*.py" -o -name "*_pb2*.pyi" \) -delete
  go tool -modfile=tools/buf/go.mod buf generate --template buf.gen.py.yaml
  # The google.rpc copies (sdk/python/proto) go in as descriptors, not as protoc modules:
  # a protoc module registers its file in protobuf's default pool, where
  # googleapis-common-protos registers the same names; agentplane._rpc loads these into a
  # pool of its own.
  go tool -modfile=tools/buf/go.mod buf build sdk/python/proto --exclude-source-info \
    -o sdk/python/src/agentplane/_rpc/google_rpc.binpb
  # The typed service clients (agentplane/_services.py) and enums (agentplane/enums.py),
  # from the API's descriptors with their comments.
  desc=$(mktemp --suffix=.binpb)
  trap 'rm -f "$desc"' EXIT
  go tool -modfile=tools/buf/go.mod buf build proto -o "$desc"
  "$PY" sdk/python/gen_services.py "$desc" sdk/python/src
  ;;
typecheck)
  pyright=sdk/python/node_modules/.bin/pyright
  [ -x "$pyright" ] || loud "pyright is not installed: run 'npm ci' in sdk/python (scripts/test does)"
  # --pythonpath: Debian's interpreter, whose site-packages hold grpc and protobuf (their
  # types come from the stubs pyright bundles).
  (cd sdk/python && node_modules/.bin/pyright --pythonpath "$PY") || loud "pyright --strict found errors (above)"
  ;;
test)
  "$0" typecheck
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bin="${AGENTPLANE_BIN:-}"
  if [ -z "$bin" ]; then
    bin="$tmp/controlplane"
    go build -o "$bin" ./cmd/controlplane
  fi
  # unittest exits non-zero on a failure or an error, and when it finds no test at all
  # (Python 3.12+; checked below for older ones).
  out="$tmp/unittest.log"
  status=0
  # --foreground keeps the suite in this script's process group, so that a signal to the
  # group (go test ./sdk stopping it) reaches the suite and the control planes it started.
  AGENTPLANE_BIN="$bin" timeout --foreground 600 "$PY" -m unittest discover -v -s sdk/python/tests 2>&1 | tee "$out" || status=$?
  [ "$status" -eq 0 ] || loud "unittest failed (exit $status)"
  grep -Eq '^Ran [1-9][0-9]* tests? in' "$out" || loud "unittest ran no test"
  ;;
*)
  echo "usage: $0 deps|gen|typecheck|test" >&2
  exit 2
  ;;
esac
