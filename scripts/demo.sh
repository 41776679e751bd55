#!/usr/bin/env bash
# Set up chainfence (pinned) in .venv and run `chainfence demo` on the embedded chain.
# Needs Python >= 3.11 only: no node, no compiler, no network beyond the package index.
source "$(dirname "$0")/_env.sh"
# A regular (non-editable) install: the demo runs from the installed package and its artifacts.
setup_python demo .
exec "$VENV/bin/chainfence" demo "$@"
