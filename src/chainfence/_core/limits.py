"""Bounds stated once, importing nothing: the registry contract's, and what a node's reply may hold.

The SDK checks names against :data:`MAX_NAME_LENGTH` (:mod:`chainfence._sdk.names`), the proven reader
does too (:mod:`chainfence.proofs`), and the CLI's ``--help`` states it: a module that imports nothing,
so that ``chainfence acquire --help`` can say the bound without loading the SDK.

Every reply a node or provider sends is read within the ``MAX_REPLY_*`` bounds
(:mod:`chainfence._node.replies`, each transport's reader): a reply past one is refused, typed, before
it is read on or parsed. A transport takes its own (``max_reply=``); these are the defaults.
"""

from __future__ import annotations

__all__ = ["MAX_NAME_LENGTH", "MAX_REPLY_BYTES", "MAX_REPLY_DEPTH", "MAX_REPLY_INT_DIGITS"]

#: Longest resource name, in bytes of UTF-8: the contract's ``_MAX_NAME_LENGTH`` (its ``maxNameLength()``).
MAX_NAME_LENGTH = 128

#: Longest reply to one request, in bytes (a batch's: this much per request in it). Generous for what the
#: SDK asks (a header is about 1 KB, a proof about 5 KB a slot, a page of logs is halved when refused),
#: far below what would strain a verifier: a 200 MB reply swelled one by 800 MB (issue 25).
MAX_REPLY_BYTES = 16 * 1024 * 1024

#: Deepest nesting of arrays and objects in a reply. JSON-RPC answers nest a handful deep (a block's
#: withdrawals, a receipt's logs' topics); the limit is far from where a recursive parser fails.
MAX_REPLY_DEPTH = 64

#: Most digits of a JSON integer in a reply: a uint256 has 78. (Quantities are hex strings; their width
#: is checked where each is read: :func:`chainfence._node.formats.quantity`.)
MAX_REPLY_INT_DIGITS = 78
