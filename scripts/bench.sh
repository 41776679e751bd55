#!/usr/bin/env bash
# Set up what the benchmarks need and run one of them:
#   scripts/bench.sh bench_vs_etcd.py --samples 200 --rounds 0
# The dev venv (.venv), node_modules' anvil, and Debian's etcd-server and etcd-client (what
# bench_vs_etcd.py and bench_cli_vs_etcdctl.py compare with), each installed only when missing.
# With no arguments it sets up and lists the benchmarks.
source "$(dirname "$0")/_env.sh"
setup_python dev -e ".[dev]"
setup_node
setup_etcd
if [ $# -eq 0 ]; then
    echo "benchmarks (scripts/bench.sh NAME [ARGS]; each takes --help):"
    (cd "$ROOT/scripts" && ls bench_*.py gas_report.py profile_acquire.py)
    exit 0
fi
script=$1; shift
exec "$VENV/bin/python" "$ROOT/scripts/$script" "$@"
