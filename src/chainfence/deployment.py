"""Where a registry lives: the deployment file that `chainfence node` and `chainfence deploy` write.

::

    {"registry": "0x5FbD...", "chain_id": 31337, "genesis_hash": "0x...", "block": 1,
     "rpc_url": "http://127.0.0.1:8545", "max_ttl": 86400}

The SDK and the CLI read it by default: ``$CHAINFENCE_DEPLOYMENT`` or
``.chainfence/deployment.json`` in the working directory. It binds the
address to a chain (id and genesis block), so a file from another chain, or
from a node that was wiped, is refused rather than trusted.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from . import _validate
from .errors import InvalidInput

__all__ = ["DEFAULT_PATH", "Deployment", "default_path", "load", "save"]

DEFAULT_PATH = Path(".chainfence") / "deployment.json"


@dataclass(frozen=True)
class Deployment:
    registry: str
    chain_id: int
    genesis_hash: str
    block: int
    max_ttl: int
    rpc_url: str | None = None


def default_path() -> Path:
    """``$CHAINFENCE_DEPLOYMENT``, else ``.chainfence/deployment.json``."""
    return Path(os.environ.get("CHAINFENCE_DEPLOYMENT") or DEFAULT_PATH)


def load(path: str | os.PathLike[str] | None = None) -> Deployment:
    """Read a deployment file; raises InvalidInput if it is missing or malformed."""
    path = Path(path) if path is not None else default_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(
            f"no deployment file at {path}: run `chainfence node` (local) or `chainfence deploy`, "
            "or give the registry address (--registry / CHAINFENCE_REGISTRY)"
        ) from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path} is not a readable deployment file: {exc}") from None
    try:
        deployment = Deployment(
            registry=_validate.address(data["registry"], "registry"),
            chain_id=int(data["chain_id"]),
            genesis_hash=str(data["genesis_hash"]),
            block=int(data["block"]),
            max_ttl=int(data["max_ttl"]),
            rpc_url=data.get("rpc_url"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{path} is not a valid deployment file: {exc}") from None
    return deployment


def save(deployment: Deployment, path: str | os.PathLike[str] | None = None) -> Path:
    """Write ``deployment`` atomically (temp file + rename); returns the path."""
    path = Path(path) if path is not None else default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".deployment-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(asdict(deployment), out, indent=2)
        out.write("\n")
    os.replace(tmp, path)
    return path
