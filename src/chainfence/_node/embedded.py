"""The embedded chain: an in-process eth-tester/py-evm backend, and the transport that reaches it.

:func:`embedded_chain` builds a fresh chain with funded dev accounts (nothing
leaves the process). :class:`EmbeddedTransport` carries JSON-RPC to it
through web3's ``EthereumTesterProvider`` and eth-tester's own request
middleware (no web3 result formatters: :mod:`chainfence._node.formats` reads
its answers as it reads a node's), one request at a time (eth-tester is not
thread-safe), and runs its dev controls (mine, snapshot, revert, time travel)
and reads the header being built, in process (:meth:`EmbeddedTransport.in_process`).
Its asyncio twin takes the same lock: eth-tester answers without suspending,
so the lock is never held across a wait.

eth-tester and py-evm are the ``[tester]`` extra: imported when a chain is
built, never when this module is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ExtraNotInstalled, InvalidInput, NotSupported
from .failures import TESTER_CONTROLS
from .transports import AsyncTransport, Transport, reply_result

__all__ = ["AsyncEmbeddedTransport", "EmbeddedChain", "EmbeddedTransport", "embedded_chain"]

#: What the in-process chain does besides JSON-RPC: its dev controls, and the pending header's timestamp.
IN_PROCESS = (*TESTER_CONTROLS, "pending_timestamp")


@dataclass(frozen=True)
class EmbeddedChain:
    """A fresh in-process chain: its transport and the private keys of its funded accounts."""

    transport: EmbeddedTransport
    keys: list[bytes]


def embedded_chain(accounts: int) -> EmbeddedChain:
    """A fresh in-process chain (eth-tester on py-evm) with ``accounts`` funded dev accounts.

    Each transaction is mined in its own block exactly one second after the
    previous one, whatever the wall clock says; ``time_travel`` jumps ahead.
    """
    if isinstance(accounts, bool) or not isinstance(accounts, int) or not 1 <= accounts <= 100:
        raise InvalidInput(f"accounts must be an int from 1 to 100, got {accounts!r}")
    try:
        from eth_tester import EthereumTester, PyEVMBackend
        from eth_tester.backends.pyevm.main import get_default_account_keys
    except ImportError as missing:  # eth-tester and py-evm are the [tester] extra
        raise ExtraNotInstalled(extra="tester", feature="the embedded chain", missing=missing.name) from missing

    class LogicalClockBackend(PyEVMBackend):  # type: ignore[misc]
        """py-evm stamps each new block max(parent + 1, wall clock), taken when the
        previous block is mined or a snapshot restored: chain time would jump to
        the wall clock after a revert or a slow test. Restamp the block being
        built to parent + 1 so time moves only by blocks and by time travel."""

        def mine_blocks(self, num_blocks: int = 1, coinbase: Any = None) -> tuple[bytes, ...]:
            mined: list[bytes] = []
            for _ in range(num_blocks):
                mined.extend(super().mine_blocks(1) if coinbase is None else super().mine_blocks(1, coinbase))
                self._restamp()
            return tuple(mined)

        def revert_to_snapshot(self, snapshot: Any) -> None:
            super().revert_to_snapshot(snapshot)
            self._restamp()

        def _restamp(self) -> None:
            parent = self.chain.get_canonical_head()
            self.chain.header = self.chain.header.copy(timestamp=parent.timestamp + 1)

    keys = list(get_default_account_keys(accounts))
    state = PyEVMBackend.generate_genesis_state(num_accounts=accounts)
    # A random extra_data makes every embedded chain's genesis hash unique
    # (otherwise two chains started in the same second are identical), so
    # state tied to a chain, like a guard's store, can tell them apart.
    params = PyEVMBackend.generate_genesis_params(overrides={"extra_data": os.urandom(32)})
    tester = EthereumTester(LogicalClockBackend(genesis_parameters=params, genesis_state=state))
    return EmbeddedChain(EmbeddedTransport(tester), [bytes(key.to_bytes()) for key in keys])


class EmbeddedTransport(Transport):
    """JSON-RPC to an in-process ``EthereumTester``, one request at a time.

    ``w3`` is a ``Web3`` over the same provider (web3's default middleware and
    formatters) for anything the SDK does not wrap; it takes the same lock.
    """

    embedded = True
    batches = False  # eth-tester's provider takes no batches

    def __init__(self, tester: Any):
        from web3 import Web3
        from web3.providers.eth_tester import EthereumTesterProvider

        lock = threading.RLock()

        class LockedEthereumTesterProvider(EthereumTesterProvider):
            def make_request(self, method: Any, params: Any) -> Any:
                with lock:
                    return super().make_request(method, params)

        provider = LockedEthereumTesterProvider(tester)
        self.tester = tester
        self.lock = lock
        self.w3 = Web3(provider)
        # The provider's own middleware only (eth-tester's parameter and key formats, a default
        # "from"): results stay as the chain gave them, for chainfence._node.formats to read.
        bare = Web3(provider, middleware=[])
        self._send = provider.request_func(bare, bare.middleware_onion)

    def request(self, method: str, params: Sequence[Any]) -> Any:
        with self.lock:
            return reply_result(method, self._send(method, list(params)))

    def in_process(self, name: str, *args: Any) -> Any:
        """A dev control (eth-tester's ``mine_blocks``, ``take_snapshot``, ``revert_to_snapshot``,
        ``time_travel``), or ``pending_timestamp``: the header py-evm is building, read directly (a
        pending-block request builds a whole block to answer; this is an attribute)."""
        if name not in IN_PROCESS:
            raise NotSupported(f"{name} is not a control of the embedded chain")
        with self.lock:
            if name == "pending_timestamp":
                return int(self.tester.backend.chain.header.timestamp)
            return getattr(self.tester, name)(*args)

    def asyncio_twin(self, *, timeout: float) -> AsyncTransport:
        return AsyncEmbeddedTransport(self)


class AsyncEmbeddedTransport(AsyncTransport):
    """:class:`EmbeddedTransport` for asyncio: the same chain, the same lock (eth-tester answers in
    process, without suspending: the event loop waits as long as the chain computes, never longer)."""

    embedded = True
    batches = False

    def __init__(self, transport: EmbeddedTransport):
        self.transport = transport
        self.w3 = transport.w3

    async def request(self, method: str, params: Sequence[Any]) -> Any:
        return self.transport.request(method, params)

    async def in_process(self, name: str, *args: Any) -> Any:
        return self.transport.in_process(name, *args)
