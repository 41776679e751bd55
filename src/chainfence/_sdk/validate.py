"""Argument checks shared by the SDK, the guard and the CLI.

Every public entry point validates before it touches the chain or a store,
so bad input costs nothing and changes nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from .._node.addresses import is_checksum_address, is_hex_address, to_checksum_address  # leaves: eth-utils' answers
from .._node.rlp import keccak256 as keccak
from ..errors import DuplicateResource, InvalidInput, InvalidTtl
from .names import MAX_NAME_LENGTH, publishable, resource_bytes, resource_id

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_TOKEN",
    "MAX_URL_LENGTH",
    "MAX_WAIT",
    "address",
    "assignable_prefix",
    "namespace_prefix",
    "progress",
    "publishable",
    "resource_bytes",
    "resource_id",
    "rpc_url",
    "set_order",
    "token",
    "ttl",
    "wait",
]

#: Tokens are uint256 in the ABI.
MAX_TOKEN = 2**256 - 1

#: The longest ``wait=`` accepted: a year of seconds.
MAX_WAIT = 31_536_000

#: The longest node URL accepted, in characters.
MAX_URL_LENGTH = 2048

#: A host name: letters, digits, '-', '_' and '.' (IDNs in their ASCII form, xn--...).
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")


def rpc_url(value: object, what: str = "url") -> str:
    """``value`` as a JSON-RPC node URL: ``http://`` or ``https://``, a host (a name, an IPv4 address, or
    an IPv6 address in brackets), an optional port from 1 to 65535, any path and query; or a node's IPC
    socket, a path ending in ``.ipc`` (``/tmp/anvil.ipc``, as ``cast --rpc-url`` takes one). The one
    check every face runs (``Chain.connect``, ``AsyncChain.connect``, the CLI's ``--rpc-url``, the tooz
    driver's URL): anything else is :class:`~chainfence.errors.InvalidInput` (``argument='url'``), before a socket is opened.
    The message names the problem, never the URL's path or query (API keys live there)."""
    from .._node.urls import split

    if not isinstance(value, str):
        raise InvalidInput(
            f"{what} must be a str (an http:// or https:// JSON-RPC endpoint), got {type(value).__name__}",
            argument="url",
        )
    if not value:
        raise InvalidInput(f"{what} is empty: give an http:// or https:// JSON-RPC endpoint", argument="url")
    if len(value) > MAX_URL_LENGTH:
        raise InvalidInput(f"{what} is {len(value)} characters long (at most {MAX_URL_LENGTH})", argument="url")
    if not value.isascii() or not value.isprintable() or any(char.isspace() for char in value):
        raise InvalidInput(
            f"{what} contains whitespace, control or non-ASCII characters: one http(s) URL, percent-encoded",
            argument="url",
        )
    if "://" not in value and value.endswith(".ipc"):
        return value  # a node's IPC socket on this machine (chainfence._node.ipc)
    scheme = value.split(":", 1)[0].lower() if ":" in value else ""
    if scheme not in ("http", "https") or not value[len(scheme) :].startswith("://"):
        shown = f"scheme {scheme!r}" if scheme.isalnum() else "no scheme"
        raise InvalidInput(
            f"{what} must start with http:// or https:// (a JSON-RPC endpoint), got {shown}", argument="url"
        )
    try:
        parts = split(value)
        host, port = parts.hostname, parts.port
    except ValueError as bad:  # an unclosed '[', a port that is not a number or out of range
        raise InvalidInput(
            f"{what} is not a well-formed URL ({bad}): {scheme}://<host>[:<port>][/<path>]", argument="url"
        ) from None
    if not host:
        raise InvalidInput(f"{what} names no host: {scheme}://<host>[:<port>][/<path>]", argument="url")
    if "[" in parts.netloc:
        import ipaddress  # here: a host in brackets is rare, and the module is large

        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise InvalidInput(f"{what}: {host!r} in brackets is not an IPv6 address", argument="url") from None
    elif not _HOST_NAME.fullmatch(host) or ".." in host:
        raise InvalidInput(
            f"{what}: {host[:64]!r} is not a host name or an IP address (one URL per endpoint: a list is not one)",
            argument="url",
        )
    if port == 0 or parts.netloc.rsplit("@", 1)[-1].endswith(":"):
        raise InvalidInput(f"{what} has an empty or zero port: give one from 1 to 65535, or none", argument="url")
    return value


def ttl(value: object, max_ttl: int) -> int:
    """``value`` as a ttl in seconds, after checking 1 <= value <= max_ttl (ints only)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTtl(
            f"ttl must be an int number of seconds, got {type(value).__name__} {value!r}",
            ttl=value,
            max_ttl=max_ttl,
        )
    if value < 1 or value > max_ttl:
        raise InvalidTtl(ttl=value, max_ttl=max_ttl)
    return value


def namespace_prefix(value: object) -> str:
    """``value`` as a namespace prefix to administer or read: a publishable name of 1 to 127 bytes with
    no ``/`` that, if it looks like an address, is spelled as an address namespace (lowercase)."""
    from ..errors import InvalidNamespace
    from .names import address_namespace, is_address_namespace, looks_like_address

    if not isinstance(value, str):
        raise InvalidNamespace(f"a namespace must be a str, got {type(value).__name__}")
    if "/" in value:
        raise InvalidNamespace(f"a namespace is a name's part before its first '/': {value!r} contains '/'")
    try:
        publishable(value)
    except InvalidInput as bad:
        raise InvalidNamespace(f"invalid namespace {value!r}: {bad}") from None
    if len(value.encode("utf-8")) > MAX_NAME_LENGTH - 1:
        raise InvalidNamespace(f"a namespace is at most {MAX_NAME_LENGTH - 1} bytes of UTF-8")
    if looks_like_address(value) and not is_address_namespace(value):
        raise InvalidNamespace(
            f"{value!r} looks like an address but is not an address namespace: that is "
            f"{address_namespace(value)!r} (lowercase); as written nobody administers it"
        )
    return value


def assignable_prefix(value: object) -> str:
    """``value`` as a namespace the deployer may assign: :func:`namespace_prefix`, and not shaped like an
    address (42 bytes starting ``0x``, which the registry refuses: those are their address's)."""
    from ..errors import InvalidNamespace

    prefix = namespace_prefix(value)
    if len(prefix.encode("utf-8")) == 42 and prefix.startswith("0x"):
        raise InvalidNamespace(
            f"{prefix!r} is shaped like an address namespace (42 bytes starting '0x'): an address namespace "
            "belongs to its address from the start and cannot be assigned; assign another prefix, or let the "
            "address hand it over (Namespace.transfer_admin)"
        )
    return prefix


def token(value: object) -> int:
    """``value`` as a fencing token, after checking it is an int from 1 to 2**256 - 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            f"a fencing token must be an int, got {type(value).__name__} {value!r:.80}", argument="token", value=value
        )
    if value < 1 or value > MAX_TOKEN:
        raise InvalidInput(
            f"a fencing token is an int from 1 to 2**256 - 1, got {value}", argument="token", value=value
        )
    return value


def set_order(leases: Sequence[Any]) -> tuple[list[bytes], list[int]]:
    """A set of leases (each with ``resource_id``, ``token`` and ``resource``) as ``renewMany`` and
    ``releaseMany`` take it: ``(ids, tokens)``, the ids in strictly increasing order (the registry
    refuses any other order: one comparison an item, where a check of every pair cost 205 gas a
    pair). A resource listed twice raises :class:`~chainfence.errors.DuplicateResource`; nothing is
    sent. What the registry answers is read back by id, from each resource's own event."""
    ordered = sorted(leases, key=lambda lease: bytes(lease.resource_id))
    for before, after in zip(ordered, ordered[1:]):
        if before.resource_id == after.resource_id:
            raise DuplicateResource(resource=getattr(after, "resource", None), resource_id=after.resource_id)
    return [lease.resource_id for lease in ordered], [token(lease.token) for lease in ordered]


def progress(value: object) -> bytes:
    """``value`` as a 32-byte progress marker (see :meth:`Registry.renew <chainfence.Registry.renew>`).

    ``bytes`` of 1 to 32 bytes are recorded as given, right-padded with zeros
    (as Solidity's ``bytes32("...")``); an ``int`` from 1 to 2**256 - 1 as a
    big-endian counter; a ``str`` (any length) as the keccak256 of its UTF-8.
    A marker of all zeros reads on-chain as "nothing reported" and is refused.
    """
    if isinstance(value, bool):
        raise _invalid_progress(value)
    if isinstance(value, int):
        if not 1 <= value < 2**256:
            raise _invalid_progress(value)
        return value.to_bytes(32, "big")
    if isinstance(value, str):
        try:
            return keccak(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise _invalid_progress(value, "a str marker must be encodable as UTF-8") from None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if not 1 <= len(data) <= 32 or not any(data):
            raise _invalid_progress(value)
        return data.ljust(32, b"\0")
    raise _invalid_progress(value)


def _invalid_progress(value: object, why: str | None = None) -> InvalidInput:
    """The error for a progress marker that is none of bytes, an int or a str, or out of range."""
    why = why or (
        "a progress marker is 1 to 32 bytes (not all zero), an int from 1 to 2**256 - 1, "
        f"or a str (hashed), got {type(value).__name__} {value!r:.80}"
    )
    return InvalidInput(why, argument="progress", value=value)


def address(value: object, what: str = "address") -> str:
    """``value`` as a checksummed address; mixed-case input must carry a valid checksum."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 20:
        return to_checksum_address(bytes(value))
    if not isinstance(value, str) or not value.startswith("0x") or not is_hex_address(value):
        raise InvalidInput(
            f"{what} must be a 0x-prefixed 20-byte hex address, got {value!r:.80}", argument=what, value=value
        )
    checked = _checksummed(value)
    if checked is None:
        raise InvalidInput(f"{what} {value} has an invalid EIP-55 checksum (mistyped?)", argument=what, value=value)
    return checked


@functools.lru_cache(maxsize=4096)
def _checksummed(value: str) -> str | None:
    """The checksummed form of a hex address, None if it is mixed-case with a wrong checksum
    (cached: every transaction checks its sender, and each check hashes the address)."""
    if value != value.lower() and value[2:] != value[2:].upper() and not is_checksum_address(value):
        return None
    return to_checksum_address(value)


def wait(value: object) -> float:
    """``value`` as seconds to wait for a held resource (0.0: do not wait), after checking it is None
    or a finite int or float from 0 to :data:`MAX_WAIT` (not a bool, not NaN)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(
            f"wait must be None or a number of seconds, got {type(value).__name__} {value!r:.80}",
            argument="wait",
            value=value,
        )
    if not 0 <= value <= MAX_WAIT:  # NaN compares false; inf and huge ints are above
        raise InvalidInput(
            f"wait must be None or a number of seconds from 0 to {MAX_WAIT}, got {value!r}",
            argument="wait",
            value=value,
        )
    return float(value)
