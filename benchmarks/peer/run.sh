#!/usr/bin/env bash
# Side-by-side peer benchmark: attestlayer 0.1.0 (the Python system Attest re-implements).
#
#   bash benchmarks/peer/run.sh [VENV_DIR] [--quick] [--json FILE]
#
# VENV_DIR (default target/peer-venv, relative to the repo root) is a throwaway virtual
# environment; it is reused when it already has attestlayer 0.1.0. Everything after it
# is passed to bench_peer.py. Needs python3 (>= 3.11) with venv, and PyPI.
set -euo pipefail

PEER="attestlayer==0.1.0"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/../.."  # repo root: temp ledgers land on the same disk as the Rust benchmark's

venv="target/peer-venv"
if [[ $# -gt 0 && "$1" != --* ]]; then
    venv="$1"
    shift
fi

die() { echo "peer benchmark: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 not found; install Python 3.11+"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "python3 is $(python3 -V 2>&1); attestlayer needs 3.11+"

py="$venv/bin/python"
if [[ ! -x "$py" ]]; then
    python3 -m venv "$venv" \
        || die "could not create a venv at $venv (on Debian: apt-get install python3-venv)"
fi
if ! "$py" -c 'import importlib.metadata as m, sys; sys.exit(m.version("attestlayer") != "0.1.0")' 2>/dev/null; then
    "$py" -m pip install --quiet --disable-pip-version-check "$PEER" \
        || die "pip install $PEER into $venv failed"
fi

exec "$py" "$here/bench_peer.py" "$@"
