"""``chainfence relay``: a relayer for agents whose keys hold no gas (:mod:`chainfence.integrations.relay`).

::

    chainfence relay [--host H] [--port N] [--journal FILE] [--rate N] [--spend-cap GAS] [--allow ADDRESS ...]

The key (``CHAINFENCE_PRIVATE_KEY`` or ``--keystore``) pays; agents run any command, or the SDK, with
``--relayer http://HOST:PORT`` (or ``CHAINFENCE_RELAYER``) and a key of their own that needs no gas.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from ._common import EXIT_OK, add_command, connect, emit, int_at_least

__all__ = ["register"]

_port = int_at_least(0, 65_535)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``relay``."""
    relay = add_command(
        subparsers,
        "relay",
        parents=[common],
        example="chainfence relay --port 8646 --journal .chainfence/relay.jsonl",
        help="send agents' signed lease operations from this key: agents need keys, not gas",
        description="Serve HTTP/JSON (POST /v1/intents) on --host:--port: agents sign their acquisitions, "
        "renewals, releases, completions and claims (`--relayer URL` on any command, or Chain.connect(..., "
        "relayer=URL)), and this key sends them, up to 64 a transaction, and pays. The registry makes each "
        "agent the holder, refuses a replay, a late intent or another's, and agents read every outcome from "
        "their own node: the relayer needs no trust. Each key is held to --rate and --spend-cap; "
        "--total-spend-cap bounds all keys together (new keys cost nothing to make), --allow closes the "
        "relayer to other keys. With --journal, what was taken and not seen landing is sent again after a "
        "restart (nothing lands twice). Ctrl-C stops it.",
    )
    relay.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)")
    relay.add_argument("--port", type=_port, default=8646, help="port (default 8646; 0: any free one, printed)")
    relay.add_argument("--journal", help="file of the intents taken and settled, read back at a restart (default none)")
    relay.add_argument(
        "--rate", type=int_at_least(1, 1_000_000), default=120, help="intents a key may hand in a minute (default 120)"
    )
    relay.add_argument(
        "--spend-cap",
        type=int_at_least(21_000, 10**12),
        default=5_000_000,
        help="gas a key's intents may cost in an hour (default 5000000)",
    )
    relay.add_argument(
        "--total-spend-cap",
        type=int_at_least(21_000, 10**15),
        default=None,
        help="gas all keys' intents may cost in an hour (default: no cap)",
    )
    relay.add_argument(
        "--allow", action="append", metavar="ADDRESS", help="take intents of this holder only (repeat for more)"
    )
    relay.set_defaults(run=_relay)


def _relay(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._sdk import validate as _validate
    from ..integrations.relay import Limits, Relay

    allow = None if args.allow is None else frozenset(_validate.address(a, "--allow") for a in args.allow)
    limits = Limits(rate=args.rate, spend_cap=args.spend_cap, total_spend_cap=args.total_spend_cap, allow=allow)
    chain, registry = connect(args, needs_key=True)
    chain.use_relayer(None)  # the relayer sends its own transactions, whatever --relayer says
    relay = Relay(registry.connect(chain.accounts[0]), journal=args.journal, limits=limits)
    server = relay.serve(args.host, args.port)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    url = f"http://{host}:{port}"
    document = {"url": url, "registry": registry.address, "relayer": relay.sender, "pending": relay.pending()}
    emit(args, document, f"relaying for registry {registry.address} at {url} from {relay.sender} (Ctrl-C stops)")
    sys.stdout.flush()
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    relay.close()
    return EXIT_OK
