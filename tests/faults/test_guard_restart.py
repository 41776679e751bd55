"""A guard reopened after a restart keeps fencing: marks live in the store, not in memory."""

from __future__ import annotations

import pytest

from chainfence import Chain, Guard, Registry
from chainfence.errors import GuardStoreMismatch, StaleToken


def test_a_restarted_guard_still_rejects_the_stale_holder(embedded, tmp_path):
    """The service restarts between B's write and A's late write; the new guard remembers token 2."""
    chain = embedded.chain
    path = tmp_path / "guard.sqlite"
    a = embedded.connect(chain.accounts[1]).acquire("r", ttl=30)
    with Guard(embedded, path=path) as guard:
        guard.check("r", a.token)
        chain.advance_time(45)
        b = embedded.connect(chain.accounts[2]).acquire("r", ttl=30)
        guard.check("r", b.token)
    # ...service restarts: new process state, new Registry object, same file.
    restarted = Guard(Registry.at(chain, embedded.address), path=path)
    with pytest.raises(StaleToken) as stale:
        restarted.check("r", a.token)
    assert stale.value.current_token == b.token
    assert restarted.check("r", b.token) == b.token
    restarted.close()


def test_a_store_from_another_embedded_chain_is_refused(embedded, tmp_path):
    """Two in-process chains share chain id and registry address; the hash of the registry's deployment
    block tells them apart, so marks from yesterday's demo chain cannot fence today's tokens."""
    path = tmp_path / "guard.sqlite"
    Guard(embedded, path=path).close()
    other_chain = Chain.embedded()
    other = Registry.deploy(other_chain, max_ttl=3_600)
    assert other.identity()["chain_id"] == embedded.identity()["chain_id"]
    assert other.identity()["registry"] == embedded.identity()["registry"]
    assert other.identity()["deployment_hash"] != embedded.identity()["deployment_hash"]
    with pytest.raises(GuardStoreMismatch, match="deployment_hash"):
        Guard(other, path=path)
