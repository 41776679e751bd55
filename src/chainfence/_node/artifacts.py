"""The compiled contracts shipped as package data (built by scripts/build_contracts.py).

The runtime never compiles: it reads these JSON artifacts.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

#: The contracts whose artifacts ship as package data.
SHIPPED = ("FencingRegistry", "FencedStore", "AgentWallet")


def load(name: str = "FencingRegistry") -> dict[str, Any]:
    """The artifact of contract ``name``: abi, bytecode, deployedBytecode, compiler, sourcesHash."""
    return _load(name)


@functools.cache
def _load(name: str) -> dict[str, Any]:
    """:func:`load`, read once per contract: ``load()`` and ``load("FencingRegistry")`` are one read (a
    cache keyed by the call's own arguments parsed the 150 kB file twice)."""
    # The package's folder, read as a folder (a wheel installs one); importlib.resources, which also reads
    # a package inside a zip, only when there is none: importing it costs more than a CLI command may take.
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts", f"{name}.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as file:
            text = file.read()
    else:  # pragma: no cover - a zipped package
        from importlib import resources

        text = resources.files("chainfence").joinpath("artifacts", f"{name}.json").read_text(encoding="utf-8")
    artifact: dict[str, Any] = json.loads(text)
    return artifact


def abi(name: str = "FencingRegistry") -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = load(name)["abi"]
    return entries


@functools.cache
def functions(name: str = "FencingRegistry") -> dict[str, tuple[bytes, tuple[str, ...]]]:
    """Function name -> (4-byte selector, ABI input types), from the artifact (no overloads here).

    Encoding with these and eth_abi takes microseconds; web3's generic
    ``contract.encode_abi`` takes a quarter of a millisecond per call.
    """
    artifact = load(name)
    table = {}
    for signature, selector in artifact["methodIdentifiers"].items():
        function = signature.split("(", 1)[0]
        entry = next(e for e in artifact["abi"] if e["type"] == "function" and e["name"] == function)
        table[function] = (bytes.fromhex(selector), tuple(_canonical(i) for i in entry["inputs"]))
    return table


def _canonical(param: dict[str, Any]) -> str:
    kind = str(param["type"])
    if kind.startswith("tuple"):  # pragma: no cover - no tuple arguments in these contracts
        return "(" + ",".join(_canonical(c) for c in param["components"]) + ")" + kind[5:]
    return kind
