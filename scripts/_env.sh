# Shared setup for scripts/demo.sh and scripts/test.sh (sourced, not run).
#
# Creates .venv with the project's pinned dependencies (requirements/constraints.txt)
# and, when asked, the pinned npm toolchain (package-lock.json: solc, anvil).
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
        rm -f "$VENV"/.chainfence-*  # one flavour at a time: an install replaces the other
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            -c requirements/constraints.txt "$@"
        echo "$stamp" > "$stamp_file"
    fi
}

# setup_node: node_modules from package-lock.json (solc for the build test, anvil for the node tests).
setup_node() {
    command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js (>= 18) with npm"
    local stamp_file="$ROOT/node_modules/.chainfence-stamp"
    local stamp
    stamp="$(stamp_of package.json package-lock.json)"
    if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
        echo "==> installing node toolchain (solc, anvil: pinned by package.json and package-lock.json)"
        # Not `npm ci`: it insists that the lock list anvil's optional packages
        # for every platform, and a registry mirror may carry only this one's
        # (this project's does). `npm install --no-save` installs the same
        # pinned versions from the committed lock and never rewrites it.
        npm install --no-save --no-audit --no-fund --loglevel=error
        echo "$stamp" > "$stamp_file"
    fi
}

# setup_chromium: Debian's chromium for the timeline's browser test, installed quietly when it is missing
# and we are root with apt-get. Otherwise nothing is installed: that test then fails and says how to
# install it (a skipped browser check would pass without checking anything).
setup_chromium() {
    if [ -n "${CHAINFENCE_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "chainfence setup: chromium not found; the timeline browser test will fail until it is installed" \
             "(as root: apt-get install -y chromium)" >&2
        return 0
    fi
    echo "==> installing chromium (Debian package) for the timeline's browser test"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq chromium >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq chromium >/dev/null 2>&1 \
            || echo "chainfence setup: apt-get install chromium failed; the timeline browser test will fail" >&2
    fi
}
