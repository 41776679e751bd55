"""Fixtures shared by every test layer.

Backends: the chain-level suite (tests/chain) runs once per backend, as
tooz runs one suite against every driver: ``embedded`` (eth-tester/py-evm
in-process) and ``anvil`` (a real node started on a free loopback port from
the project's npm install). The tests that make sense on any node also run on
``hardhat`` (hardhat's node, EDR) and those ganache can run on ``ganache``
(tests/support/nodes.py starts both, the same way): a test says which with
``@pytest.mark.nodes("hardhat", "ganache")``; a test not marked for one of
them is not collected for it (reported as deselected, never skipped), and
docs/nodes.md lists what ganache cannot do. ``CHAINFENCE_BACKENDS=embedded``
narrows the run for a quick local loop; the README's test command runs all
four. A missing node is an error, never a skip.

Isolation: every test runs between a snapshot and a revert of its chain, so
tests share one deployment yet see a fresh state.

Time: neither backend's clock follows the wall clock. The embedded chain's
moves one second per block and when a test moves it; the session anvil's
only when a test moves it (``anvil_setBlockTimestampInterval``, see
tests/support/anvil.py). No test's chain-time arithmetic depends on how fast
the machine runs it.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from chainfence import Chain, Registry, Timeouts
from tests.support.anvil import Anvil, dev_keys, ipc_path
from tests.support.nodes import GanacheProcess, HardhatProcess, deploy_past_the_fork_check
from tests.support.sequencer import wait_until

#: The proven mode's attack story (``story``) and lying providers (``providers``), for every test file
#: that attacks a surface of the proven mode.
pytest_plugins = ["tests.support.proven"]


def _temproot() -> Path:
    """A root for this checkout's temporary directories, apart from every other pytest session's.

    pytest keeps tmp_path directories under one per-user root, shared by all sessions of that user,
    and makes that root private (0700) whenever a session starts. The SQL tests' PostgreSQL runs as
    another user and must traverse it: a session starting elsewhere (another checkout's suite) then
    cut PostgreSQL off from its data directory mid-initdb. Sessions of one checkout still share a
    root (run them one at a time); ``PYTEST_DEBUG_TEMPROOT`` or ``--basetemp`` set by hand win.
    """
    digest = hashlib.sha256(str(Path(__file__).resolve().parents[1]).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"chainfence-tests-{digest}"
    root.mkdir(exist_ok=True)
    return root


os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(_temproot()))

# The tests of Ctrl-C and of hang-ups send SIGINT and SIGHUP, to this process and to the ones it starts,
# and expect what a terminal gives: a run started in the background by a script (`cmd &`: SIGINT and
# SIGQUIT ignored) or under nohup (SIGHUP ignored) inherited those signals ignored, and every such test
# failed ("DID NOT RAISE KeyboardInterrupt"; a naive `lock` that outlived its SIGHUP). Handlers given
# back here are also what this process's children inherit (an ignored signal stays ignored across exec).
for _sig, _default in (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGHUP, signal.SIG_DFL),
    (signal.SIGQUIT, signal.SIG_DFL),
):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _default)

# Waiters of one machine take a resource's turn through a lock file keyed by chain id, registry and
# resource (chainfence._sdk.waiting.host_turn_steps); every worker's anvil has the same chain id and registry
# address, so each worker (and the processes it starts) takes its turns in a directory of its own
# (set in each process: xdist's workers inherit the controller's environment), removed as it exits.
os.environ["CHAINFENCE_WAIT_TURNS"] = tempfile.mkdtemp(prefix="cf-turns-")


def _remove_turns(path: str = os.environ["CHAINFENCE_WAIT_TURNS"], owner: int = os.getpid()) -> None:
    if os.getpid() == owner:  # a forked child inherits the hook; the directory is its parent's
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_turns)

settings.register_profile(
    "default",
    # Each example is up to 30 chain operations with every invariant checked after each (~5 views, at
    # ~10-30 ms an eth_call on py-evm): the default run is ~600 steps; HYPOTHESIS_PROFILE=thorough, 9,000.
    max_examples=20,
    stateful_step_count=30,
    deadline=None,  # chain calls take milliseconds; wall-clock deadlines would only flake
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    # The suite's run is the same examples every time (a failure in CI reproduces on any machine);
    # exploring new ones is the thorough profile's job: HYPOTHESIS_PROFILE=thorough draws at random.
    derandomize=True,
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=300, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


#: Every backend, in the order the suite runs them; the last two run only the tests marked for them.
ALL_BACKENDS = ("embedded", "anvil", "hardhat", "ganache")
#: The node implementations a test runs on only when it is marked for them (``pytest.mark.nodes``).
MARKED_NODES = frozenset({"hardhat", "ganache"})


def _backends() -> list[str]:
    chosen = os.environ.get("CHAINFENCE_BACKENDS", ",".join(ALL_BACKENDS))
    wanted = [b.strip() for b in chosen.split(",") if b.strip()]
    unknown = set(wanted) - set(ALL_BACKENDS)
    if unknown:
        raise pytest.UsageError(f"CHAINFENCE_BACKENDS: unknown backend(s) {sorted(unknown)}")
    return wanted


BACKENDS = _backends()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "nodes(*names): the test runs on these node implementations too (hardhat, ganache), besides the "
        "embedded chain and anvil; unmarked, it is not collected for them",
    )


#: The fixtures whose parameter is the backend a test runs on.
BACKEND_FIXTURES = ("backend_chain", "node_chain", "node_registry")


def _backend_of(item: pytest.Item) -> str | None:
    """The backend a collected test runs on (the parameter of one of :data:`BACKEND_FIXTURES`), else None."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for name in BACKEND_FIXTURES:
        if name in callspec.params:
            return str(callspec.params[name])
    return None


def marked_nodes(item: pytest.Item) -> set[str]:
    """The node implementations a test is marked for: its closest ``@pytest.mark.nodes(...)`` (a test's
    own mark replaces its module's: ``nodes("hardhat")`` on one test of a module marked for both)."""
    mark = item.get_closest_marker("nodes")
    if mark is None:
        return set()
    unknown = set(mark.args) - MARKED_NODES
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: pytest.mark.nodes names unknown node(s) {sorted(unknown)}")
    return set(mark.args)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test parametrized onto hardhat or ganache is kept only when it is marked for that node: the
    subset each runs is the marked one, and the rest is reported as deselected. A test parametrized
    (``node_chain``) onto a backend ``CHAINFENCE_BACKENDS`` leaves out is deselected too."""
    kept, dropped = [], []
    for item in items:
        backend = _backend_of(item)
        unwanted = backend is not None and (
            backend not in BACKENDS or (backend in MARKED_NODES and backend not in marked_nodes(item))
        )
        (dropped if unwanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def anvil_node() -> Iterator[Anvil]:
    """A real anvil node on 127.0.0.1, for the whole session, on a logical clock; it answers on an IPC
    socket too (``node.ipc_path``)."""
    with Anvil(logical_clock=True, ipc=ipc_path()) as node:
        yield node


@pytest.fixture(scope="session")
def anvil_chain(anvil_node: Anvil) -> Chain:
    """The one Chain talking to the session's anvil node (one nonce counter per key)."""
    return Chain.connect(anvil_node.url, private_keys=dev_keys(10), timeouts=Timeouts(receipt=30, poll=0.005))


@pytest.fixture(scope="session")
def hardhat_node() -> Iterator[HardhatProcess]:
    """hardhat's node (EDR) on 127.0.0.1, for the whole session, on a logical clock (tests/support/nodes.py)."""
    with HardhatProcess() as node:
        yield node


@pytest.fixture(scope="session")
def hardhat_chain(hardhat_node: HardhatProcess) -> Chain:
    return Chain.connect(hardhat_node.url, private_keys=dev_keys(10), timeouts=Timeouts(receipt=30, poll=0.005))


@pytest.fixture(scope="session")
def ganache_node() -> Iterator[GanacheProcess]:
    """ganache on 127.0.0.1, for the whole session, on its logical clock (tests/support/nodes.py)."""
    with GanacheProcess() as node:
        yield node


@pytest.fixture(scope="session")
def ganache_chain(ganache_node: GanacheProcess) -> Chain:
    return Chain.connect(ganache_node.url, private_keys=dev_keys(10), timeouts=Timeouts(receipt=30, poll=0.005))


@pytest.fixture(scope="session", params=BACKENDS)
def backend_chain(request: pytest.FixtureRequest) -> Chain:
    """One chain per backend for the session (chain-level suite)."""
    if request.param == "embedded":
        return Chain.embedded()
    return request.getfixturevalue(f"{request.param}_chain")


@pytest.fixture
def node_chain(request: pytest.FixtureRequest) -> Iterator[Chain]:
    """The session's chain on the node a test names (``@pytest.mark.parametrize("node_chain", ["ganache"],
    indirect=True)``), reverted to its pre-test state afterwards: for a test of one node's own behaviour."""
    chain = request.getfixturevalue(f"{request.param}_chain")
    with isolated(chain):
        yield chain


@pytest.fixture(scope="session")
def backend_registry(backend_chain: Chain) -> Registry:
    if backend_chain._dev == "ganache":  # Registry.deploy refuses its Shanghai EVM: see deploy_past_the_fork_check
        return deploy_past_the_fork_check(backend_chain, max_ttl=3_600)
    return Registry.deploy(backend_chain, max_ttl=3_600)


#: Blocks each test on anvil begins above (:func:`isolated`): deeper than any test's confirmations.
FRESH_BLOCKS = 8


@contextmanager
def isolated(chain: Chain) -> Iterator[None]:
    """Snapshot the chain, run the block, revert: the next test sees the same state.

    On anvil a transaction a test sent without waiting for it (``eth_sendRawTransaction`` answers before
    the block is mined) would outlive the revert and be mined into the next test's chain, where it shows
    as a lease nobody there took. So the pool is drained before the revert; and a block that still lands
    after it (a transaction the node was mining as the revert came, or one a thread left running sent)
    is undone with a second, outer snapshot and reported as a warning naming what it held. A transaction
    that can never be mined (queued behind a nonce the chain never reaches: a sender that kept its nonce
    across a revert) is dropped, and the test fails naming it, instead of holding every later test here."""
    head = chain.block_number()
    outer = None if chain.rpc.embedded else chain.snapshot()
    snapshot = chain.snapshot()
    if chain._dev == "anvil":
        # anvil keeps the state of about the last 4,000 blocks mined, counted across reverts: after a
        # session's thousands of blocks its head, reverted back to one of its first blocks, has no state
        # below it, and a read a few blocks deep (a guard or a sender waiting for confirmations) fails
        # with BlockOutOfRangeError. A test begins above blocks of its own, as on a live chain.
        for _ in range(FRESH_BLOCKS):
            chain.rpc.transport.request("evm_mine", [])
    try:
        yield
    finally:
        _retire_batchers(chain)
        if outer is None:
            chain.revert(snapshot)
        else:
            # A transaction whose nonce the chain never reaches (a sender that kept its nonce across another
            # revert) can never be mined: left in the pool it would hold every later test of this node here.
            # Dropped, and the test that left it fails, naming it.
            stranded = _drop_stranded(chain)
            wait_until(lambda: _pool_is_empty(chain), "the test's transactions are mined before the revert")
            chain.revert(snapshot)
            late = chain.block_number()
            undone = _blocks_after(chain, head, late) if late != head else []
            if undone:
                wait_until(lambda: _pool_is_empty(chain), "the late transactions are mined before the revert")
            chain.revert(outer)
            late = chain.block_number()
            assert late == head, f"mined after the revert again: {_blocks_after(chain, head, late)}"
            if undone:  # after the revert (the suite turns warnings into errors: raised before it, it would skip it)
                warnings.warn(f"mined after the revert, undone: {undone}", stacklevel=1)
            if stranded:
                raise AssertionError(f"transactions that could never be mined were left in the pool: {stranded}")


def _retire_batchers(chain: Chain) -> None:
    """The chain's shared batchers (``registry.batched()`` keeps one per sender and settings on the chain)
    are waited for until idle, then forgotten: a worker a test left finishing its last batch would
    otherwise take the next test's first call (so that call starts no worker), and a batcher would carry
    its figures across the revert."""
    from chainfence.batching import _ended

    table = chain.__dict__.get("_batchers", {})
    for batcher in list(table.values()):
        wait_until(
            lambda: not batcher._working or _ended(batcher._worker),
            f"the batcher of {batcher.sender} went idle after the test",
        )
    table.clear()


def _blocks_after(chain: Chain, head: int, late: int) -> list[str]:
    """What the blocks mined after the revert hold: each transaction's sender, nonce, target and selector."""
    said = []
    for number in range(head + 1, late + 1):
        block = chain.rpc.transport.request("eth_getBlockByNumber", [hex(number), True])
        for tx in block["transactions"]:
            said.append(
                f"block {number}: from {tx['from']} nonce {int(tx['nonce'], 16)} to {tx['to']} {tx['input'][:10]}"
            )
        if not block["transactions"]:
            said.append(f"block {number}: empty")
    return said


def _drop_stranded(chain: Chain) -> list[str]:
    """Drop the node's queued transactions (a nonce above the sender's next: nothing will ever mine them)
    once the executable ones are mined; returns what they were.

    hardhat's and ganache's nodes keep no such pool while they automine: hardhat refuses a transaction it
    cannot mine at once ("transactions can't be queued when automining"), and ganache answers a send only
    once it has mined it (its "eager" instamine)."""
    if chain._dev != "anvil":
        return []
    status: dict[str, str] = {}

    def nothing_executable() -> bool:
        status.update(chain.rpc.transport.request("txpool_status", []))
        return int(status["pending"], 16) == 0

    wait_until(nothing_executable, "the test's executable transactions are mined before the revert")
    if int(status["queued"], 16) == 0:
        return []  # the usual teardown: one request, not two
    queued = chain.rpc.transport.request("txpool_content", []).get("queued") or {}
    said = [
        f"from {sender} nonce {int(tx['nonce'], 16)} to {tx['to']} {tx['input'][:10]}"
        for sender, by_nonce in queued.items()
        for tx in by_nonce.values()
    ]
    if said:
        chain.rpc.transport.request("anvil_dropAllTransactions", [])
    return said


def _pool_is_empty(chain: Chain) -> bool:
    if chain._dev != "anvil":
        return True  # nothing waits in their pools: see _drop_stranded
    status = chain.rpc.transport.request("txpool_status", [])
    return int(status["pending"], 16) == 0 and int(status["queued"], 16) == 0


@pytest.fixture
def chain(backend_chain: Chain, backend_registry: Registry) -> Iterator[Chain]:
    """The backend's chain, reverted to its pre-test state afterwards."""
    with isolated(backend_chain):
        yield backend_chain


@pytest.fixture
def registry(chain: Chain, backend_registry: Registry) -> Registry:
    """A deployed registry (max ttl 1 h), sending as account 0 by default."""
    return backend_registry


@pytest.fixture
def alice(registry: Registry) -> Registry:
    return registry.connect(registry.chain.accounts[1])


@pytest.fixture
def bob(registry: Registry) -> Registry:
    return registry.connect(registry.chain.accounts[2])


@pytest.fixture
def carol(registry: Registry) -> Registry:
    return registry.connect(registry.chain.accounts[3])


# Embedded-only fixtures, for layers that need no second backend (faults,
# property): one chain per session, snapshot isolation per test.


@pytest.fixture(scope="session")
def embedded_session() -> tuple[Chain, Registry]:
    chain = Chain.embedded()
    return chain, Registry.deploy(chain, max_ttl=3_600)


@pytest.fixture
def embedded(embedded_session: tuple[Chain, Registry]) -> Iterator[Registry]:
    """A registry on the embedded chain, state reverted after the test."""
    chain, registry = embedded_session
    with isolated(chain):
        yield registry


@pytest.fixture(scope="session")
def anvil_session(anvil_chain: Chain) -> tuple[Chain, Registry]:
    return anvil_chain, Registry.deploy(anvil_chain, max_ttl=3_600)


@pytest.fixture
def on_anvil(anvil_session: tuple[Chain, Registry]) -> Iterator[Registry]:
    """A registry on the session's anvil node, state reverted after the test."""
    chain, registry = anvil_session
    with isolated(chain):
        yield registry
