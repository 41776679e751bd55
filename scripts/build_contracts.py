#!/usr/bin/env python3
"""Compile contracts/ into the artifacts the SDK ships as package data.

    python scripts/build_contracts.py            # write src/chainfence/artifacts/*.json and abi/*.json
    python scripts/build_contracts.py --check    # exit 1 if the committed artifacts are stale

Besides each contract's artifact, the registry's ABI is written as a plain
JSON array (what ``cast``, ethers and viem read): ``abi/FencingRegistry.json``
in the repository and ``src/chainfence/artifacts/FencingRegistry.abi.json`` in
the package. This script is their only source: rebuild, never edit them.

The compiler is solc, pinned exactly (SOLC_VERSION). It is found in this order:

1. ``--solc PATH`` or ``$SOLC_BINARY``: a native solc binary (it must report
   the pinned version);
2. otherwise ``scripts/solc_shim.js``: a small node script around the npm
   ``solc`` package (scripts/test.sh installs it from package-lock.json). The
   stock ``solcjs`` CLI cannot be driven by py-solc-x (see the shim).

Both routes give byte-identical bytecode. The artifact records the compiler
version without its platform suffix (".Linux.g++" vs ".Emscripten.clang") so
that it is identical too, whichever route built it.

Compilation goes through ``solcx.compile_standard`` with every source inline,
so the output depends only on the sources and the settings below, never on
the checkout's path. Runtime code never compiles: it reads the artifacts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS_DIR = ROOT / "contracts"
ARTIFACTS_DIR = ROOT / "src" / "chainfence" / "artifacts"
ABI_DIR = ROOT / "abi"
SHIM = ROOT / "scripts" / "solc_shim.js"

SOLC_VERSION = "0.8.28"

#: Contracts whose artifacts the SDK ships, by source file.
CONTRACTS = {
    "FencingRegistry": "contracts/FencingRegistry.sol",
    "FencedStore": "contracts/examples/FencedStore.sol",
    "AgentWallet": "contracts/examples/AgentWallet.sol",
}

#: Contracts whose ABI is also written alone, as plain JSON (for tools in other languages).
ABI_ONLY = ("FencingRegistry",)

SETTINGS = {
    # py-evm (eth-tester) stops at Prague and solc >= 0.8.30 defaults to
    # later forks: pin the target fork.
    "evmVersion": "cancun",
    "optimizer": {"enabled": True, "runs": 1_000_000},
    # The IR pipeline saves 100-400 gas per lease operation here (measured
    # with scripts/gas_report.py) and gives smaller code.
    "viaIR": True,
    # No metadata hash in the bytecode: the same sources give the same code
    # whatever the file paths or comments' whitespace in the metadata JSON.
    "metadata": {"bytecodeHash": "none"},
    "outputSelection": {
        "*": {
            "*": [
                "abi",
                "devdoc",
                "userdoc",
                "evm.bytecode.object",
                "evm.deployedBytecode.object",
                "evm.deployedBytecode.immutableReferences",
                "evm.methodIdentifiers",
                "storageLayout",
            ]
        }
    },
}


class BuildError(Exception):
    """The compiler could not be found or did not compile the sources."""


def source_files() -> dict[str, str]:
    """Every .sol file under contracts/, keyed by its path from the project root."""
    files = sorted(CONTRACTS_DIR.rglob("*.sol"))
    if not files:
        raise BuildError(f"no Solidity sources under {CONTRACTS_DIR}")
    return {f.relative_to(ROOT).as_posix(): f.read_text(encoding="utf-8") for f in files}


def sources_hash(sources: dict[str, str]) -> str:
    """sha256 over (path, content) pairs in path order: changes when any source does."""
    digest = hashlib.sha256()
    for path in sorted(sources):
        for part in (path, sources[path]):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
    return "0x" + digest.hexdigest()


def find_compiler(explicit: str | None) -> str:
    """Path of the solc executable to hand to py-solc-x."""
    native = explicit or os.environ.get("SOLC_BINARY")
    if native:
        if not Path(native).is_file():
            raise BuildError(f"solc binary not found: {native}")
        return native
    if not (ROOT / "node_modules" / "solc").is_dir():
        raise BuildError(
            "no solc: run scripts/test.sh or `npm install --no-save` in the project root (the pinned npm solc "
            "package) or point $SOLC_BINARY at a native solc " + SOLC_VERSION
        )
    return str(SHIM)


def compile_contracts(solc: str) -> dict[str, dict]:
    """Compile every source; return one artifact dict per contract in CONTRACTS."""
    import solcx
    from solcx.exceptions import SolcError

    reported = subprocess.run([solc, "--version"], capture_output=True, text=True, check=False).stdout
    long_version = re.search(r"Version: (\d+\.\d+\.\d+\+commit\.[0-9a-f]+)", reported)
    if long_version is None or not long_version.group(1).startswith(SOLC_VERSION + "+"):
        raise BuildError(f"{solc} is not solc {SOLC_VERSION}: it reports {reported.strip()!r}")

    sources = source_files()
    standard_input = {
        "language": "Solidity",
        "sources": {path: {"content": text} for path, text in sources.items()},
        "settings": SETTINGS,
    }
    try:
        output = solcx.compile_standard(standard_input, solc_binary=solc)
    except SolcError as exc:
        raise BuildError(f"solc failed:\n{exc}") from exc
    warnings = [e["formattedMessage"] for e in output.get("errors", []) if e["severity"] != "error"]
    if warnings:
        raise BuildError("solc warnings (fix them; the build is warning-free):\n" + "\n".join(warnings))

    artifacts = {}
    for name, path in CONTRACTS.items():
        compiled = output["contracts"][path][name]
        artifacts[name] = {
            "contractName": name,
            "sourceName": path,
            "abi": compiled["abi"],
            "bytecode": "0x" + compiled["evm"]["bytecode"]["object"],
            "deployedBytecode": "0x" + compiled["evm"]["deployedBytecode"]["object"],
            # Byte ranges of the runtime code that hold immutables (set by the
            # constructor): masked out when checking code found on a chain.
            "immutableReferences": compiled["evm"]["deployedBytecode"]["immutableReferences"],
            "methodIdentifiers": compiled["evm"]["methodIdentifiers"],
            "storageLayout": compiled["storageLayout"],
            "devdoc": compiled["devdoc"],
            "userdoc": compiled["userdoc"],
            "compiler": {"name": "solc", "version": long_version.group(1), "settings": SETTINGS},
            "sourcesHash": sources_hash(sources),
            "sources": sorted(sources),
        }
    return artifacts


def render(artifact: dict) -> str:
    """Deterministic JSON text of an artifact (sorted keys, trailing newline)."""
    return json.dumps(artifact, indent=2, sort_keys=True) + "\n"


def artifact_path(name: str) -> Path:
    return ARTIFACTS_DIR / f"{name}.json"


def render_abi(abi: list) -> str:
    """A plain ABI file: the JSON array, as solc gives it, two-space indented, trailing newline."""
    return json.dumps(abi, indent=2) + "\n"


def abi_files(artifacts: dict[str, dict]) -> dict[Path, str]:
    """The plain ABI files (repository and package) and their text, from the artifacts."""
    files = {}
    for name in ABI_ONLY:
        text = render_abi(artifacts[name]["abi"])
        files[ABI_DIR / f"{name}.json"] = text
        files[ARTIFACTS_DIR / f"{name}.abi.json"] = text
    return files


def outputs(artifacts: dict[str, dict]) -> dict[Path, str]:
    """Every file a build writes, and its text."""
    files = {artifact_path(name): render(artifact) for name, artifact in artifacts.items()}
    files.update(abi_files(artifacts))
    return files


def stale_artifacts(artifacts: dict[str, dict]) -> list[str]:
    """Files (artifact names, or ABI file paths) whose committed text differs from a fresh build (or is missing)."""
    stale = []
    for name, artifact in artifacts.items():
        path = artifact_path(name)
        if not path.is_file() or path.read_text(encoding="utf-8") != render(artifact):
            stale.append(name)
    for path, text in abi_files(artifacts).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(_display(path))
    return stale


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed artifacts")
    parser.add_argument("--solc", help="native solc binary (default: $SOLC_BINARY, else the npm solc shim)")
    args = parser.parse_args(argv)

    try:
        solc = find_compiler(args.solc)
        artifacts = compile_contracts(solc)
    except BuildError as exc:
        print(f"build_contracts: {exc}", file=sys.stderr)
        return 2

    if args.check:
        stale = stale_artifacts(artifacts)
        for name in stale:
            shown = name if name.endswith(".json") else _display(artifact_path(name))
            print(f"stale: {shown} (run scripts/build_contracts.py)")
        if not stale:
            print(f"up to date: {', '.join(sorted(artifacts))} (solc {SOLC_VERSION} via {solc})")
        return 1 if stale else 0

    for path, text in outputs(artifacts).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        name = path.name.removesuffix(".json")
        if name in artifacts and path == artifact_path(name):
            runtime = (len(artifacts[name]["deployedBytecode"]) - 2) // 2
            print(f"wrote {_display(path)} ({runtime} bytes of runtime code)")
        else:
            print(f"wrote {_display(path)} (ABI only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
