"""A private key and its address, loaded as eth-account loads one, without importing eth-account.

``eth_account`` imports ``eth_keyfile``, which loads py_ecc's BLS12-381
tables: most of the second ``from chainfence import Chain`` took before issue
#19. The sender needs only the key and the address (it signs with coincurve,
:mod:`chainfence._node.signing`), so :class:`LocalKey` is what
:meth:`Chain.connect <chainfence.Chain.connect>` holds for a key it is given:

- :meth:`LocalKey.from_key` takes what ``Account.from_key`` takes (a hex string,
  ``0x`` or not; 32 bytes; an int) and refuses what it refuses (a key of
  another length, zero, or not below the curve's order);
- its ``address`` is the one eth-account derives (``tests/unit/test_lean_accounts.py``
  holds both to eth-account with Hypothesis);
- anything else a ``LocalAccount`` offers (``sign_message``, ``unsafe_sign_hash``,
  ``encrypt`` ...) is eth-account's own: :meth:`LocalKey.local_account` builds
  the ``LocalAccount`` the first time one is asked for, and attributes the key
  does not have are that account's.
"""

from __future__ import annotations

import sys
from typing import Any

from .addresses import to_checksum_address
from .rlp import keccak256
from .shapes import HexBytes, _to_bytes

__all__ = ["LocalKey", "is_local_account"]

#: The order of secp256k1: a private key is an integer in [1, N - 1].
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _public_key(secret: bytes) -> bytes:
    """The 64-byte uncompressed public key (x ‖ y) of ``secret``."""
    import coincurve  # with the first key: a command without one never loads it (docs/explanation/design.md)

    return bytes(coincurve.PublicKey.from_secret(secret).format(compressed=False)[1:])


class LocalKey:
    """A private key the SDK signs with, and its checksummed address: what the sender needs of eth-account's
    ``LocalAccount`` (``key``, ``address``), the rest of it built on demand."""

    __slots__ = ("_account", "address", "key")

    def __init__(self, secret: bytes):
        if len(secret) != 32:
            raise ValueError(f"The private key must be exactly 32 bytes long, instead of {len(secret)} bytes.")
        if not 0 < int.from_bytes(secret, "big") < SECP256K1_N:
            raise ValueError("The private key must be an integer from 1 to the order of secp256k1, less one.")
        #: The private key (``HexBytes``, as ``LocalAccount.key``).
        self.key = HexBytes(secret)
        #: The checksummed address the key signs for.
        self.address: str = to_checksum_address(keccak256(_public_key(bytes(secret)))[-20:])
        self._account: Any = None

    @classmethod
    def from_key(cls, value: Any) -> LocalKey:
        """The key ``value`` names, read as ``Account.from_key`` reads it; ``ValueError``/``TypeError``
        for what it refuses."""
        keys = sys.modules.get("eth_keys.datatypes")
        if keys is not None and isinstance(value, keys.PrivateKey):  # as eth-account takes eth-keys' key
            return cls(bytes(value.to_bytes()))
        return cls(_to_bytes(value))

    def local_account(self) -> Any:
        """eth-account's ``LocalAccount`` for this key (imports eth-account the first time)."""
        if self._account is None:
            from eth_account import Account

            self._account = Account.from_key(bytes(self.key))
        return self._account

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in LocalKey.__slots__:
            raise AttributeError(name)
        return getattr(self.local_account(), name)

    def __bytes__(self) -> bytes:
        return bytes(self.key)

    def __repr__(self) -> str:
        return f"<LocalKey {self.address}>"  # never the key itself


def is_local_account(value: object) -> bool:
    """Whether ``value`` is a key the SDK can sign with: a :class:`LocalKey`, or eth-account's
    ``LocalAccount`` (asked only if eth-account was imported: without it there is none)."""
    if isinstance(value, LocalKey):
        return True
    local = sys.modules.get("eth_account.signers.local")
    return local is not None and isinstance(value, local.LocalAccount)
