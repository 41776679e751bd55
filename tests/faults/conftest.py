"""Fixtures of the fault tests: lying proxies in front of the session's anvil (and a lying transport over the
embedded chain)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chainfence import Registry
from tests.support.follower_proxies import through
from tests.support.lying_proxy import LyingProxy, LyingTransport


@pytest.fixture
def liar(anvil_node) -> Iterator[LyingProxy]:
    with LyingProxy(anvil_node.url) as proxy:
        yield proxy


@pytest.fixture
def honest_pair(anvil_node) -> Iterator[tuple[LyingProxy, LyingProxy]]:
    with LyingProxy(anvil_node.url) as h2, LyingProxy(anvil_node.url) as h3:
        yield h2, h3


@pytest.fixture
def lied(registry, request):
    """(the registry, a liar in front of its chain, the registry read through the liar): a LyingProxy in
    front of anvil, a LyingTransport over the embedded chain."""
    if registry.chain.rpc.embedded:
        liar = LyingTransport(registry.chain)
        yield registry, liar, Registry.at(liar.chain, registry.address)
    else:
        with LyingProxy(request.getfixturevalue("anvil_node").url) as liar:
            yield registry, liar, through(registry, liar.url)
