"""Where a registry lives: the deployment file that `chainfence node` and `chainfence deploy` write.

::

    {"registry": "0x5FbD...", "chain_id": 31337, "block": 1, "block_hash": "0x...",
     "rpc_url": "http://127.0.0.1:8545", "max_ttl": 86400}

The SDK and the CLI read it by default: ``$CHAINFENCE_DEPLOYMENT`` or
``.chainfence/deployment.json`` in the working directory. It binds the
address to a chain and to one deployment (chain id, the block the registry
was deployed in and that block's hash), so a file from another chain, or
from a node that was wiped and redeployed at the same address, is refused
rather than trusted. (Not the genesis hash: anvil rebuilds block 0 with a
new hash each time it reloads its state.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from ._core.records import record
from ._sdk import validate as _validate
from .errors import InvalidInput

__all__ = ["DEFAULT_PATH", "Deployment", "default_path", "load", "save"]

DEFAULT_PATH = Path(".chainfence") / "deployment.json"


class _Deployed(Protocol):
    """What a deployment record is made from: a :class:`~chainfence.Registry` (this module sits below it)."""

    chain: Any
    address: str

    @property
    def max_ttl(self) -> int: ...

    def identity(self) -> dict[str, str]: ...


@record
class Deployment:
    """A registry's address, the chain and block it was deployed in, and where to reach it."""

    registry: str
    chain_id: int
    block: int
    block_hash: str | None
    max_ttl: int
    rpc_url: str | None = None

    def __init__(
        self, registry: str, chain_id: int, block: int, block_hash: str | None, max_ttl: int, rpc_url: str | None = None
    ) -> None:
        self.__dict__.update(
            registry=registry, chain_id=chain_id, block=block, block_hash=block_hash, max_ttl=max_ttl, rpc_url=rpc_url
        )

    @classmethod
    def of(cls, registry: _Deployed, *, rpc_url: str | None) -> Deployment:
        """The record of ``registry`` as the chain reports it, reachable at ``rpc_url``."""
        identity = registry.identity()
        return cls(
            registry=registry.address,
            chain_id=registry.chain.chain_id,
            block=int(identity["deployment_block"]),
            block_hash=identity["deployment_hash"],
            max_ttl=registry.max_ttl,
            rpc_url=rpc_url,
        )


def default_path() -> Path:
    """``$CHAINFENCE_DEPLOYMENT``, else ``.chainfence/deployment.json``."""
    return Path(os.environ.get("CHAINFENCE_DEPLOYMENT") or DEFAULT_PATH)


def load(path: str | os.PathLike[str] | None = None) -> Deployment:
    """Read a deployment file; raises InvalidInput if it is missing or malformed.

    A missing file is said in Python's terms (the CLI checks for it itself, in its own): this is what
    ``Registry.from_deployment`` raises."""
    given = path is not None
    path = Path(path) if path is not None else default_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        where = (
            ""
            if given
            else " ($CHAINFENCE_DEPLOYMENT)"
            if os.environ.get("CHAINFENCE_DEPLOYMENT")
            else f" (the default, in the working directory {os.getcwd()}; $CHAINFENCE_DEPLOYMENT names another)"
        )
        raise InvalidInput(
            f"no deployment file at {path}{where}: `chainfence node` (a local node) or `chainfence deploy` writes "
            "one; or pass its path, Registry.from_deployment(chain, 'path/to/deployment.json'), or the "
            "registry's address, Registry.at(chain, '0x...')"
        ) from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path} is not a readable deployment file: {exc}") from None
    try:
        rpc_url = data.get("rpc_url")
        block_hash = data.get("block_hash")
        if rpc_url is not None and not isinstance(rpc_url, str):
            raise ValueError(f"rpc_url must be a string, got {rpc_url!r}")
        if block_hash is not None and not (isinstance(block_hash, str) and len(block_hash) == 66):
            raise ValueError(f"block_hash must be a 0x-prefixed 32-byte hash, got {block_hash!r}")
        deployment = Deployment(
            registry=_validate.address(data["registry"], "registry"),
            chain_id=int(data["chain_id"]),
            block=int(data["block"]),
            block_hash=block_hash,
            max_ttl=int(data["max_ttl"]),
            rpc_url=rpc_url or None,
        )
    except (KeyError, TypeError, ValueError, InvalidInput) as exc:
        raise InvalidInput(f"{path} is not a valid deployment file: {exc}") from None
    return deployment


def save(deployment: Deployment, path: str | os.PathLike[str] | None = None) -> Path:
    """Write ``deployment`` atomically (temp file + rename); returns the path."""
    path = Path(path) if path is not None else default_path()
    import tempfile  # here: reading a deployment (every CLI command) needs none of it

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".deployment-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        fields = ("registry", "chain_id", "block", "block_hash", "max_ttl", "rpc_url")
        json.dump({name: getattr(deployment, name) for name in fields}, out, indent=2)
        out.write("\n")
    os.replace(tmp, path)
    return path
