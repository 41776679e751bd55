"""Resource names: what the SDK accepts from callers, and how it shows names read from the chain.

On-chain a resource is ``keccak256(name bytes)`` and the contract checks only
the length of a name. The SDK is stricter about what it *publishes* and
suspicious of what it *reads*:

- :func:`resource_bytes` — any call that names a resource: a ``str`` of 1 to
  128 bytes of UTF-8.
- :func:`publishable` — what ``acquire`` publishes (``ResourceNamed``): also
  no control, format (bidi overrides, zero-width characters), separator or
  surrogate characters, no whitespace but the plain space, and none at
  either end. Such names would let one resource pass for another in an audit
  table (``prod/db`` vs ``prod/db`` + U+202E). And no prefix (the text
  before the first ``/``) that looks like an address but is not an address
  namespace's exact spelling (``0x`` and 40 *lowercase* hex digits): the
  registry gives ``0x5aae.../jobs`` to address 0x5aAe..., but
  ``0x5aAe.../jobs`` (checksummed) or ``0X5AAE.../jobs`` to nobody, so such a
  name would look owned while it is open to all.
- :func:`display` — a name read from the chain, whatever its bytes (anyone
  can call the contract directly: invalid UTF-8, control characters, bidi
  overrides), as text that is safe to print and unambiguous: every code
  point that is not plainly printable is escaped (``\\u202e``), bytes that
  are not UTF-8 as ``\\xff``, the backslash itself as ``\\\\``. Two different
  names never display alike.
- :func:`display_text` — the same escaping for text already decoded (the
  timeline's labels), leaving backslashes alone.
- :func:`decode` — a name read from the chain as the ``str`` the SDK would
  have published, or None when its bytes are not such a name.
- :func:`held_name` — what the admin's paths (``revoke``, ``grant`` and their
  item forms) accept: any name the registry may hold, as ``bytes`` exactly
  (1 to 128 of them, UTF-8 or not) or a ``str`` of any UTF-8; and
  :func:`undisplay`, :func:`display`'s inverse, which turns what a reader was
  shown back into those bytes (the CLI's ``--escaped``). So an operator who
  read a hostile name in an audit table can end its lease; only a name the
  registry already holds is granted unless it is :func:`publishable`.

Claimed work items (``registry.workset(name).claim``) are not named resources: on-chain an
item is ``keccak256(abi.encode(workset, item))``, and the contract names it
in ``ItemNamed(resource, workset, item)``, the two parts apart, never in
``ResourceNamed`` (whose name always hashes to its resource). Joined as
``workset/item`` (as the contract did before issue 25), a stranger's item ``db``
of the open workset ``prod`` would pass for the administered resource
``prod/db``. So the SDK names an item ``workset»item`` (:data:`ITEM_SEPARATOR`,
U+00BB):

- :func:`publishable` refuses ``»`` in a plain name (and so in a workset and
  an item, which are checked as names), and :func:`display` escapes it
  (``\\u00bb``) in a name read from the chain: no plain name ever displays
  with a bare ``»``, and an item always does, exactly once.
- :func:`resource_id` (every call that names a resource) reads
  ``workset»item`` as the item: ``renew``, ``release``, ``complete``,
  ``check_current``, ``last_lease``, ``history``, the audit index, a guard,
  the CLI and the MCP tools all reach an item by the name they print for it.
- :func:`named` turns what a naming log carried (a ``ResourceNamed``'s name, an
  ``ItemNamed``'s workset and item) into ``(name, display)``, only when it
  hashes to the log's id (``keccak256(name)``, ``keccak256(abi.encode(workset,
  item))``): a log naming another id is not believed.
- :func:`label` does the same for a name as the audit index keeps it (an item
  as ``workset/item``, the one split whose ``abi.encode`` hashes to the id).
"""

from __future__ import annotations

import functools
import unicodedata

from .._core.limits import MAX_NAME_LENGTH  # longest resource name, in bytes of UTF-8 (the contract's bound)
from .._node.abi import encode  # leaves of the node layer: eth-abi's and eth-utils' answers without them
from .._node.rlp import keccak256 as keccak
from ..errors import InvalidResourceName

__all__ = [
    "ITEM_SEPARATOR",
    "MAX_NAME_LENGTH",
    "address_namespace",
    "decode",
    "display",
    "display_name",
    "display_text",
    "held_label",
    "held_name",
    "held_prefix",
    "is_address_namespace",
    "item_id",
    "item_name",
    "item_parts",
    "label",
    "logged_id",
    "looks_like_address",
    "named",
    "namespace_id",
    "namespace_prefix",
    "publishable",
    "resource_bytes",
    "resource_id",
    "split_item",
    "undisplay",
]


#: What joins a claimed work item's workset and item in its name and display: ``backfill»2026-11-01``.
#: Never in a plain name (:func:`publishable` refuses it; :func:`display` escapes it).
ITEM_SEPARATOR = "\u00bb"

#: Unicode categories that never appear in a name the SDK publishes.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def item_id(workset: object, item: object) -> bytes:
    """The on-chain id of work item ``item`` of ``workset``: ``keccak256(abi.encode(workset, item))``
    (each a ``str``, or ``bytes`` as the registry holds it: :func:`held_name`).

    At least 192 bytes are hashed, so no resource name (at most 128 bytes) has this id.
    """
    return keccak(encode(["bytes", "bytes"], [held_name(workset), held_name(item)]))


def item_name(workset: object, item: object) -> str:
    """The name of work item ``item`` of ``workset``: ``"workset»item"`` (both checked as publishable names)."""
    publishable(workset)
    publishable(item)
    return f"{workset}{ITEM_SEPARATOR}{item}"


def split_item(name: object) -> tuple[str, str] | None:
    """``(workset, item)`` when ``name`` names a claimed work item (``"workset»item"``), None for a plain
    name. A name with ``»`` that is not one workset and one item, each 1 to 128 bytes, is
    :class:`~chainfence.errors.InvalidResourceName`."""
    if not isinstance(name, str) or ITEM_SEPARATOR not in name:
        return None
    workset, _, item = name.partition(ITEM_SEPARATOR)
    if not workset or not item or ITEM_SEPARATOR in item:
        raise InvalidResourceName(
            f"{name[:80]!r}: '{ITEM_SEPARATOR}' names a claimed work item, as workset{ITEM_SEPARATOR}item "
            f"(exactly one '{ITEM_SEPARATOR}', a name on each side); a plain name never contains it"
        )
    resource_bytes(workset)
    resource_bytes(item)
    return workset, item


def item_parts(raw: bytes, resource_id: bytes) -> tuple[bytes, bytes] | None:
    """``(workset, item)`` bytes if ``raw`` is ``workset/item`` (how the audit index keeps a claimed item's name)
    of the claimed item ``resource_id`` (the one split at a ``/`` whose ``abi.encode`` hashes to it), else None."""
    start = 0
    while (index := raw.find(b"/", start)) >= 0:
        workset, item = raw[:index], raw[index + 1 :]
        if keccak(encode(["bytes", "bytes"], [workset, item])) == resource_id:
            return workset, item
        start = index + 1
    return None


def logged_id(name: bytes | None, workset: bytes | None = None, item: bytes | None = None) -> bytes | None:
    """The id that what a naming log carried hashes to: ``keccak256(name)`` for a ``ResourceNamed``'s
    ``name``; ``keccak256(abi.encode(workset, item))`` for an ``ItemNamed``'s ``workset`` and ``item``; None
    when it carried neither."""
    if workset is not None and item is not None:
        return keccak(encode(["bytes", "bytes"], [bytes(workset), bytes(item)]))
    return None if name is None else keccak(bytes(name))


def named(
    resource_id: bytes, name: bytes | None, workset: bytes | None = None, item: bytes | None = None
) -> tuple[str | None, str] | None:
    """``(name, display)`` of ``resource_id`` from what a naming log of it carried: a ``ResourceNamed``'s
    ``name``, or an ``ItemNamed``'s ``workset`` and ``item``. None unless it hashes to ``resource_id``
    (:func:`logged_id`): a log naming another id is not believed.

    A plain name: its :func:`decode` (None when the SDK would not publish it) and :func:`display`. A
    claimed item: ``"workset»item"`` (None when either part is not a name the SDK would publish) and
    ``display(workset) + "»" + display(item)``.
    """
    if logged_id(name, workset, item) != resource_id:
        return None
    if workset is not None and item is not None:
        return _item_label(bytes(workset), bytes(item))
    raw = bytes(name or b"")
    return decode(raw), display(raw)


def _item_label(workset: bytes, item: bytes) -> tuple[str | None, str]:
    parts = decode(workset), decode(item)
    text = None if parts[0] is None or parts[1] is None else f"{parts[0]}{ITEM_SEPARATOR}{parts[1]}"
    return text, display(workset) + ITEM_SEPARATOR + display(item)


def label(resource_id: bytes, raw: bytes | None) -> tuple[str | None, str]:
    """``(name, display)`` of ``resource_id`` from its name as the audit index keeps it (None: none known).

    A plain name (``keccak256(raw) == resource_id``): as :func:`named`. A claimed item, kept as
    ``workset/item``: the one split whose ``abi.encode`` hashes to the id, as :func:`named` shows an
    ``ItemNamed``. Anything else, or no name: None and the ``0x`` id.
    """
    if raw is not None:
        raw = bytes(raw)
        if keccak(raw) == resource_id:
            return decode(raw), display(raw)
        parts = item_parts(raw, resource_id)
        if parts is not None:
            return _item_label(*parts)
    return None, "0x" + bytes(resource_id).hex()


def display_name(name: str | bytes) -> str:
    """How ``name``, given by a caller, is shown: :func:`display` of its UTF-8 (of the bytes themselves
    for ``bytes``: a plain name as the registry holds it), or for a work item (``"workset»item"``) the
    display of each part joined by ``»``."""
    if isinstance(name, (bytes, bytearray)):
        return display(bytes(name))
    parts = split_item(name)
    if parts is not None:
        return (
            display(parts[0].encode("utf-8", "surrogatepass"))
            + ITEM_SEPARATOR
            + display(parts[1].encode("utf-8", "surrogatepass"))
        )
    return display(name.encode("utf-8", "surrogatepass"))


def namespace_prefix(name: object) -> str | None:
    """The namespace of resource ``name``: its text before the first ``/``; None for a name without ``/``
    (in no namespace: always open). ``"prod/db/main"`` is in namespace ``"prod"``; ``"/x"`` in ``""``,
    which nobody can claim (so it stays open). A work item (``"workset»item"``) is in its workset's."""
    parts = split_item(name)
    if parts is not None:
        name = parts[0]
    data = resource_bytes(name)
    if b"/" not in data:
        return None
    return data.split(b"/", 1)[0].decode("utf-8")


_HEX = frozenset("0123456789abcdefABCDEF")
_LOWER_HEX = frozenset("0123456789abcdef")


def address_namespace(address: str | bytes) -> str:
    """The namespace that ``address`` administers by construction: ``"0x"`` and its 40 lowercase hex
    digits (``address`` as a 0x-hex string, any case, or 20 bytes)."""
    raw = bytes(address) if isinstance(address, (bytes, bytearray)) else bytes.fromhex(address[2:])
    if len(raw) != 20:
        raise ValueError(f"an address is 20 bytes, got {len(raw)}")
    return "0x" + raw.hex()


def looks_like_address(prefix: str) -> bool:
    """Whether ``prefix`` reads as an address: ``0x`` or ``0X`` and 40 hex digits, in any case."""
    return len(prefix) == 42 and prefix[0] == "0" and prefix[1] in "xX" and set(prefix[2:]) <= _HEX


def is_address_namespace(prefix: str) -> bool:
    """Whether ``prefix`` is an address namespace: exactly ``0x`` and 40 lowercase hex digits (the only
    spelling the registry gives to an address; see :func:`address_namespace`)."""
    return len(prefix) == 42 and prefix.startswith("0x") and set(prefix[2:]) <= _LOWER_HEX


def namespace_id(prefix: str) -> bytes:
    """The on-chain id of namespace ``prefix``: ``keccak256(utf8(prefix))``."""
    return keccak(prefix.encode("utf-8"))


#: Names whose id and publishability are remembered (each a hash and a scan of the name per call before):
#: a service acquires and releases the same few names over and over (docs/benchmarks/history.md, "The SDK's own
#: work per call").
_NAMES_REMEMBERED = 4096


def resource_id(name: object) -> bytes:
    """The on-chain id of resource ``name``: ``keccak256(utf8(name))``, after validating it; for a claimed
    work item named ``"workset»item"``, :func:`item_id` of its parts. Remembered for the last
    :data:`_NAMES_REMEMBERED` names (a name that is refused is not: it raises each time)."""
    if type(name) is str:
        return _remembered_id(name)
    return _resource_id(name)


def _resource_id(name: object) -> bytes:
    parts = split_item(name)
    if parts is not None:
        return item_id(*parts)
    return keccak(resource_bytes(name))


def resource_bytes(name: object) -> bytes:
    """``name`` as UTF-8, after checking it is a str of 1 to MAX_NAME_LENGTH bytes."""
    if not isinstance(name, str):
        raise InvalidResourceName(f"resource name must be a str, got {type(name).__name__}")
    try:
        data = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidResourceName(f"resource name is not valid UTF-8: {exc.reason}") from None
    if not data:
        raise InvalidResourceName("resource name must not be empty", length=0, max_length=MAX_NAME_LENGTH)
    if len(data) > MAX_NAME_LENGTH:
        raise InvalidResourceName(length=len(data), max_length=MAX_NAME_LENGTH)
    return data


def _unsafe(char: str) -> bool:
    if char == " ":
        return False
    category = unicodedata.category(char)
    return category in _UNSAFE_CATEGORIES or category == "Zs"


#: How a character a name may not hold is named in a message (controls have no Unicode name).
_CHARACTER_NAMES = {"\t": "a tab", "\n": "a newline", "\r": "a carriage return", " ": "a space"}


def _character(char: str) -> str:
    """``char`` as a message names it: ``U+0009 (a tab)``, ``U+200B (ZERO WIDTH SPACE)``."""
    return f"U+{ord(char):04X} ({_CHARACTER_NAMES.get(char) or unicodedata.name(char, 'a control character')})"


def publishable(name: object) -> bytes:
    """``name`` as UTF-8, after checking it is fit to publish on-chain (see the module docstring). Remembered
    for the last :data:`_NAMES_REMEMBERED` names, as :func:`resource_id` is."""
    if type(name) is str:
        return _remembered_publishable(name)
    return _publishable(name)


def _publishable(name: object) -> bytes:
    data = resource_bytes(name)
    assert isinstance(name, str)
    ends = [
        f"{side} with whitespace, {_character(char)}"
        for side, char in (("starts", name[0]), ("ends", name[-1]))
        if char.isspace()
    ]
    if ends:
        raise InvalidResourceName(
            f"resource name {name!r} {' and '.join(ends)}: a name may not start or end with whitespace; strip it "
            "(a shell variable or a line read from a file often brings a trailing space or newline)"
        )
    for position, char in enumerate(name):
        if _unsafe(char):
            raise InvalidResourceName(
                f"resource name {name!r} contains {_character(char)} at position {position}: names are "
                "printable text, spaces inside only"
            )
    prefix = name.split("/", 1)[0]
    if "/" in name and looks_like_address(prefix) and not is_address_namespace(prefix):
        raise InvalidResourceName(
            f"the namespace {prefix!r} looks like an address but is not an address namespace: only '0x' and "
            f"40 lowercase hex digits ({address_namespace(prefix)!r}) belong to that address; as written it "
            "belongs to nobody and anyone may use it. Write the prefix in lowercase"
        )
    if ITEM_SEPARATOR in name:
        raise InvalidResourceName(
            f"resource name contains '{ITEM_SEPARATOR}' (U+00BB) at position {name.index(ITEM_SEPARATOR)}: it is "
            f"reserved for claimed work items (workset{ITEM_SEPARATOR}item), so that no name can pass for one"
        )
    return data


_remembered_id = functools.lru_cache(maxsize=_NAMES_REMEMBERED)(_resource_id)
_remembered_publishable = functools.lru_cache(maxsize=_NAMES_REMEMBERED)(_publishable)


def held_name(name: object) -> bytes:
    """``name`` as the bytes the registry holds for it: ``bytes`` of 1 to MAX_NAME_LENGTH as given (a
    name anyone put on-chain need not be UTF-8), or a ``str`` as UTF-8 (:func:`resource_bytes`: any
    text, printable or not). What the admin's paths accept, so that they reach every name the
    registry holds; anything else is :class:`~chainfence.errors.InvalidResourceName`."""
    if isinstance(name, (bytes, bytearray, memoryview)):
        data = bytes(name)
        if not data:
            raise InvalidResourceName("resource name must not be empty", length=0, max_length=MAX_NAME_LENGTH)
        if len(data) > MAX_NAME_LENGTH:
            raise InvalidResourceName(length=len(data), max_length=MAX_NAME_LENGTH)
        return data
    if isinstance(name, str):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidResourceName(
                "resource name is not valid UTF-8 text (a lone surrogate: bytes a terminal sent that are not "
                "UTF-8?): give a name that is not UTF-8 as bytes, or as chainfence displays it with --escaped"
            ) from None
    return resource_bytes(name)


def held_label(raw: bytes) -> str:
    """How the SDK names held name ``raw`` in its answers, errors and logs: the text itself when it is
    UTF-8 without ``»`` (a ``str`` that reaches the same resource; its ``repr`` escapes what is not
    printable), else its :func:`display` (which never reads as a work item's name)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return display(raw)
    return display(raw) if ITEM_SEPARATOR in text else text


def held_prefix(raw: bytes) -> str | None:
    """The namespace of held name ``raw`` as messages name it: its bytes before the first ``/`` as text
    (:func:`display` where they are not UTF-8); None for a name without ``/``."""
    if b"/" not in raw:
        return None
    return held_label(raw.split(b"/", 1)[0])


def undisplay(text: object) -> bytes | tuple[bytes, bytes]:
    """The name :func:`display` showed as ``text``: its bytes; for a claimed work item
    (``display(workset) + "»" + display(item)``: a bare ``»`` only ever joins an item's parts) the
    ``(workset, item)`` bytes. Only what :func:`display` writes is read back (``\\\\``, ``\\xNN``,
    ``\\uNNNN``, ``\\UNNNNNNNN``, each where it would write it): anything else is
    :class:`~chainfence.errors.InvalidResourceName`, so one text names one resource."""
    if not isinstance(text, str):
        raise InvalidResourceName(f"an escaped name must be a str, got {type(text).__name__}")
    if text.count(ITEM_SEPARATOR) > 1:
        raise InvalidResourceName(
            f"{text[:80]!r}: a bare '{ITEM_SEPARATOR}' joins a work item's workset and item, once "
            f"(a '{ITEM_SEPARATOR}' inside a name is displayed \\u00bb)"
        )
    if ITEM_SEPARATOR in text:
        workset, _, item = text.partition(ITEM_SEPARATOR)
        return _undisplayed(workset), _undisplayed(item)
    return _undisplayed(text)


_ESCAPE_DIGITS = {"x": 2, "u": 4, "U": 8}


def _undisplayed(text: str) -> bytes:
    out = bytearray()
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\":
            try:
                out += char.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidResourceName(f"escaped name {text[:80]!r} is not valid UTF-8 text") from None
            position += 1
            continue
        kind = text[position + 1 : position + 2]
        if kind == "\\":
            out += b"\\"
            position += 2
            continue
        width = _ESCAPE_DIGITS.get(kind)
        digits = text[position + 2 : position + 2 + width] if width else ""
        if width is None or len(digits) != width or not set(digits) <= _HEX:
            raise InvalidResourceName(
                f"escaped name {text[:80]!r}: at position {position} a backslash starts no escape chainfence "
                "writes (\\\\, \\xNN, \\uNNNN, \\UNNNNNNNN)"
            )
        code = int(digits, 16)
        if kind == "x" and code >= 0x80:
            out.append(code)  # a byte that is not UTF-8
        elif code > 0x10FFFF:
            raise InvalidResourceName(f"escaped name {text[:80]!r}: U+{code:X} at position {position} is no character")
        else:
            out += chr(code).encode("utf-8", "surrogatepass")
        position += 2 + width
    data = held_name(bytes(out))
    if display(data) != text:
        raise InvalidResourceName(
            f"escaped name {text[:80]!r} is not written as chainfence displays a name (that is "
            f"{display(data)[:80]!r}): copy it as shown"
        )
    return data


def display(raw: bytes) -> str:
    """``raw`` (a name's bytes, from the chain) as safe, unambiguous text (see the module docstring)."""
    out: list[str] = []
    position = 0
    while position < len(raw):
        try:
            text = raw[position:].decode("utf-8")
            end = len(raw)
        except UnicodeDecodeError as bad:
            text = raw[position : position + bad.start].decode("utf-8")
            end = position + bad.start
        for char in text:
            if char == "\\":
                out.append("\\\\")
            elif _unsafe(char) or char == ITEM_SEPARATOR:  # a bare » only ever joins an item's two parts
                out.append(_escaped(char))
            else:
                out.append(char)
        if end < len(raw):
            out.append(f"\\x{raw[end]:02x}")  # not UTF-8: escape the byte (always >= 0x80 here)
            end += 1
        position = end
    return "".join(out)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def display_text(text: str) -> str:
    """``text`` (already decoded, of unknown origin) with every code point that is not plainly printable
    escaped as :func:`display` escapes it. Backslashes are left alone, so :func:`display`'s output passes
    through unchanged; pass the raw bytes to :func:`display` when the name must be unambiguous."""
    return "".join(_escaped(char) if _unsafe(char) else char for char in text)


def decode(raw: bytes) -> str | None:
    """The name ``raw`` spells if the SDK could have published it, else None."""
    try:
        name = raw.decode("utf-8")
        publishable(name)
    except (UnicodeDecodeError, InvalidResourceName):
        return None
    return name
