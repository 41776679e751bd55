"""The compiled contracts shipped as package data (built by scripts/build_contracts.py).

The runtime never compiles: it reads these JSON artifacts.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

#: The contracts whose artifacts ship as package data.
SHIPPED = ("FencingRegistry", "FencedStore", "AgentWallet")


@functools.cache
def load(name: str = "FencingRegistry") -> dict[str, Any]:
    """The artifact of contract ``name``: abi, bytecode, deployedBytecode, compiler, sourcesHash."""
    text = resources.files("chainfence").joinpath("artifacts", f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


def abi(name: str = "FencingRegistry") -> list[dict[str, Any]]:
    return load(name)["abi"]
