"""A lean, co-installable package: ranges not pins, the embedded chain as an extra, a light CLI start."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: Top-level modules a fast `chainfence --version` / `--help` must not import.
HEAVY = (
    "web3",
    "eth_utils",
    "eth_abi",
    "eth_account",
    "eth_keys",
    "eth_typing",
    "eth_tester",
    "eth",
    "hexbytes",
    "requests",
    "aiohttp",
    "pydantic",
    "coincurve",
    "chainfence.chain",
    "chainfence.registry",
)


def _imported(argv: list[str], *, exit_code: int = 0, env: dict[str, str] | None = None) -> set[str]:
    """Every module `python -X importtime -m chainfence ARGV` imported (the real entry point)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "chainfence", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    assert done.returncode == exit_code, done.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["status", "--help"], ["acquire", "--help"]])
def test_version_and_help_import_neither_web3_nor_eth_modules(argv):
    """Structural, not timed: what --version and --help import decides how fast they answer."""
    modules = _imported(argv)
    assert "chainfence.cli" in modules  # the check sees the CLI's imports at all
    assert _heavy(modules) == []


#: What a command that reads or takes one lease never uses, loaded where it is used (``registry.batched()``,
#: ``.workset()``, ``.namespace()``, a name 0.2 retired, the families above the registry).
FAMILIES = (
    "chainfence.batching",
    "chainfence.claims",
    "chainfence.namespaces",
    "chainfence._sdk.retired",
    "chainfence.recipes",
    "chainfence.audit",
    "chainfence.guard",
    "chainfence.integrations",
)


#: The first key of anvil's and hardhat's well-known test mnemonic: a sending command's key.
_KEY = {"CHAINFENCE_PRIVATE_KEY": "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, never listened, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "argv",
    [["status", "jobs/a"], ["acquire", "jobs/a", "--ttl", "30"], ["renew", "jobs/a", "--token", "1", "--ttl", "30"]],
)
def test_a_per_task_command_loads_no_family_it_does_not_use(argv):
    """Structural, not timed: the registry loads group commit, the handles and the retired names when they are
    used; a per-task command (here against a port nothing answers: exit 5 once it tries) never does."""
    modules = _imported([*argv, "--rpc-url", f"http://127.0.0.1:{_closed_port()}"], exit_code=5, env=_KEY)
    assert "chainfence.registry" in modules  # the command got as far as the registry
    assert sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FAMILIES)) == []


def test_control_the_family_check_sees_a_family_a_command_loads():
    modules = _imported(["audit", "history", "jobs/a", "--rpc-url", f"http://127.0.0.1:{_closed_port()}"], exit_code=5)
    assert "chainfence.audit" in modules


def test_import_chainfence_is_lazy_until_a_name_is_used():
    code = (
        "import sys, json, chainfence\n"
        "before = sorted(m for m in sys.modules if m.split('.')[0] in ('web3', 'eth_utils') or m == 'chainfence.registry')\n"
        "chainfence.Registry\n"
        "after = 'chainfence.registry' in sys.modules\n"
        "print(json.dumps([before, after, 'Registry' in dir(chainfence)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert json.loads(out) == [[], True, True]


def test_every_public_name_is_loaded_lazily():
    """A new public name goes into _LAZY (name -> module), not into an import at the package's top."""
    import chainfence

    assert sorted(chainfence._LAZY) == chainfence.__all__
    top = (ROOT / "src" / "chainfence" / "__init__.py").read_text(encoding="utf-8").split("if TYPE_CHECKING:")[0]
    assert not re.search(r"^from \.[a-z]\w* import", top, flags=re.M), "an eager import in chainfence/__init__.py"


def test_an_unknown_attribute_is_an_attribute_error():
    import chainfence

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        chainfence.Nope  # noqa: B018


_WITHOUT_TESTER = "import sys\nsys.modules['eth_tester'] = None  # as if chainfence[tester] were not installed\n"


def test_embedded_chain_without_the_tester_extra_raises_a_typed_error():
    code = _WITHOUT_TESTER + (
        "import json\nfrom chainfence import Chain\nfrom chainfence.errors import ExtraNotInstalled\n"
        "try:\n    Chain.embedded()\nexcept ExtraNotInstalled as e:\n"
        "    print(json.dumps([isinstance(e, ImportError), e.details()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    is_import_error, details = json.loads(out)
    assert is_import_error and details["extra"] == "tester" and details["missing"] == "eth_tester"
    assert "pip install '.[tester]' in a chainfence checkout" in details["message"]


def test_demo_without_the_tester_extra_says_how_to_install_it():
    code = _WITHOUT_TESTER + "from chainfence.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    done = subprocess.run(
        [sys.executable, "-c", code, "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "chainfence demo: ExtraNotInstalled: the embedded chain needs the [tester] extra: "
        "pip install '.[tester]' in a chainfence checkout (no module 'eth_tester')"
    )


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_runtime_dependencies_are_ranges_with_an_upper_bound():
    for requirement in PYPROJECT["project"]["dependencies"]:
        assert "==" not in requirement, f"{requirement}: an exact pin keeps users' own versions out"
        assert ">=" in requirement and "<" in requirement.replace("<=", ""), f"{requirement}: give a range"
    names = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert {"web3", "eth-account", "coincurve"} <= names
    assert not names & {"eth-tester", "py-evm"}, "the embedded chain is the [tester] extra"


def test_the_tester_extra_is_pinned_and_dev_and_the_demo_install_it():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert sorted(_name(r) for r in extras["tester"]) == ["eth-tester", "py-evm"]
    assert all("==" in r for r in extras["tester"]), "pre-releases: pip takes them only when named exactly"
    assert "chainfence[tester]" in extras["dev"]
    assert 'setup_python demo ".[tester]"' in (ROOT / "scripts" / "demo.sh").read_text()


def test_constraints_pin_every_declared_dependency_exactly():
    pins = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared = [*PYPROJECT["project"]["dependencies"], *extras["tester"], *extras["dev"]]
    for requirement in declared:
        if _name(requirement) != "chainfence":
            assert pins.get(_name(requirement)), f"{requirement} is not pinned in requirements/constraints.txt"


def test_the_license_file_is_the_mit_license_pyproject_names():
    assert PYPROJECT["project"]["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 chainfence developers" in text


# ---------------------------------------------------------------------------
# How the words say to install it (issue 27): from a checkout, never from a registry
# ---------------------------------------------------------------------------

#: ``pip install chainfence`` / ``pip install 'chainfence[X]'`` / a bare ``chainfence[X]``: the package is not on
#: a registry; it installs from a checkout (``pip install .``, ``pip install '.[X]'``, or ./scripts/demo.sh).
FROM_A_REGISTRY = re.compile(r"pip install\s+['\"]?chainfence\b|\bchainfence\[[\w,]+\]")
#: ``pip install '.[a,b]'`` (``-e`` too): the extras it names (a placeholder, ``.[EXTRA]``, is not one).
FROM_A_CHECKOUT = re.compile(r"pip install\s+(?:-e\s+)?['\"]?\.\[([a-z,]+)\]")


def install_texts() -> dict[str, str]:
    """Everything a user reads or sees: the code's messages and docstrings, the scripts, the pages."""
    paths = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    paths += sorted((ROOT / "src").rglob("*.py")) + sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in paths}


def test_every_install_command_installs_from_a_checkout():
    texts = install_texts()
    assert len(texts) > 100
    found = [f"{name}: {hit.group(0)}" for name, text in texts.items() for hit in FROM_A_REGISTRY.finditer(text)]
    assert found == [], "the package installs from a checkout: pip install '.[EXTRA]'"
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    named = {extra for text in texts.values() for hit in FROM_A_CHECKOUT.finditer(text) for extra in hit[1].split(",")}
    assert {"tester", "mcp", "tooz", "metrics", "dev"} <= named
    assert named <= extras, f"no such extra: {sorted(named - extras)}"


def test_control_the_registry_forms_are_found():
    old = "the embedded chain needs the [tester] extra: pip install 'chainfence[tester]'; or pip install chainfence"
    assert len(FROM_A_REGISTRY.findall(old)) == 2
    assert FROM_A_REGISTRY.findall("Install `chainfence[tooz]`; the driver") == ["chainfence[tooz]"]
    assert FROM_A_REGISTRY.findall("pip install '.[tooz,tester]' from a chainfence checkout") == []
    assert FROM_A_CHECKOUT.findall("pip install -e '.[dev]' and pip install '.[tooz,tester]'") == ["dev", "tooz,tester"]


def test_a_missing_extras_message_says_to_install_it_from_a_checkout():
    from chainfence.errors import ExtraNotInstalled

    error = ExtraNotInstalled(extra="metrics", feature="Prometheus metrics", missing="prometheus_client")
    assert str(error) == (
        "Prometheus metrics needs the [metrics] extra: pip install '.[metrics]' in a chainfence checkout"
        " (no module 'prometheus_client')"
    )
