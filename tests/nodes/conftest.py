"""The portability modules: each concern's scenarios, as the suite runs them on the embedded chain or
anvil elsewhere, on hardhat's node and on ganache (docs/nodes.md).

A test takes ``node_registry``, parametrized by its module onto the nodes it is marked for
(``pytest.mark.nodes``): the session's registry on that node (one deployment per node, as the
chain-level suite's), between a snapshot and a revert.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chainfence import Registry
from tests.conftest import isolated
from tests.support.nodes import deploy_past_the_fork_check

#: The nodes the portability modules run on (anvil runs every scenario in its home module).
NODES = ("hardhat", "ganache")


def on_nodes(*nodes: str) -> list[pytest.MarkDecorator]:
    """A module's ``pytestmark``: its tests run on ``nodes``, each given ``node_registry`` there."""
    return [pytest.mark.nodes(*nodes), pytest.mark.parametrize("node_registry", nodes, indirect=True)]


@pytest.fixture(scope="session")
def _node_registries() -> dict[str, Registry]:
    return {}


@pytest.fixture
def node_registry(request: pytest.FixtureRequest, _node_registries: dict[str, Registry]) -> Iterator[Registry]:
    name = request.param
    chain = request.getfixturevalue(f"{name}_chain")
    if name not in _node_registries:  # before the snapshot: it outlives the test
        _node_registries[name] = (
            deploy_past_the_fork_check(chain, max_ttl=3_600)
            if name == "ganache"
            else Registry.deploy(chain, max_ttl=3_600)
        )
    with isolated(chain):
        yield _node_registries[name]
