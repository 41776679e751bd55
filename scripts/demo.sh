#!/usr/bin/env bash
# Set up chainfence (pinned) in .venv and run `chainfence demo` on the embedded chain.
# Needs Python >= 3.11 only: no node, no compiler, no network beyond the package index.
source "$(dirname "$0")/_env.sh"
# A regular (non-editable) install: the demo runs from the installed package and its artifacts.
# [tester]: the embedded chain (eth-tester, py-evm) is an extra, not a runtime dependency.
setup_python demo ".[tester]"
exec "$VENV/bin/chainfence" demo "$@"
