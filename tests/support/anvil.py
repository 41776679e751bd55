"""The suite's anvil: the package's own local-node helpers, pointed at this checkout's node_modules.

The binary comes from the project's npm install of ``@foundry-rs/anvil``
(package.json, pinned); the platform package ships the native executable,
which runs directly (no node wrapper in between, so signals reach anvil).
"""

from __future__ import annotations

from pathlib import Path

from chainfence.localnode import AnvilProcess, dev_keys, find_anvil, free_port

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Anvil", "anvil_binary", "dev_keys", "free_port"]


def anvil_binary() -> str:
    return find_anvil(start=ROOT)


def Anvil(**options) -> AnvilProcess:  # noqa: N802 - reads like the class it builds
    return AnvilProcess(anvil_binary(), **options)
