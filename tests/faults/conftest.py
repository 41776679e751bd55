"""Fixtures of the fault tests: lying proxies in front of the session's anvil."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.lying_proxy import LyingProxy


@pytest.fixture
def liar(anvil_node) -> Iterator[LyingProxy]:
    with LyingProxy(anvil_node.url) as proxy:
        yield proxy


@pytest.fixture
def honest_pair(anvil_node) -> Iterator[tuple[LyingProxy, LyingProxy]]:
    with LyingProxy(anvil_node.url) as h2, LyingProxy(anvil_node.url) as h3:
        yield h2, h3
