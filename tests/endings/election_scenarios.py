"""Every way a term of an election ends, staged on a real registry: shared by the observe and watch scenarios.

Each scenario starts with alice leading ``billing/leader`` (namespace ``billing``, assigned at deployment to
account 0, the registry's default sender), makes the term end one way, and says what an observer must report from
then on, as :func:`described` writes changes: ``("ended", End, token)`` for a :class:`TermEnded`, None for
an empty seat, ``(holder, token)`` for a new term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chainfence import Election, Registry
from chainfence.endings import End
from chainfence.recipes.election import TermEnded
from tests.support.virtual_time import SteppedClock

NAME = "billing/leader"
NAMESPACE = "billing"


def described(change):
    if isinstance(change, TermEnded):
        return ("ended", change.end, change.leader.token)
    return None if change is None else (change.holder, change.token)


def election(registry, **options) -> Election:
    """An election whose keep-alive clock stands still (it never renews unless a test moves it)."""
    options.setdefault("clock", SteppedClock())
    return Election(registry, NAME, ttl=options.pop("ttl", 30), **options)


@dataclass
class Stage:
    chain: object
    admin: object  # the namespace's admin (account 0)
    alice: object
    bob: object
    leadership: object  # alice's term
    snapshot: object | None = None


#: End -> (what makes alice's term end that way, what an observer reports after it).
Scenario = Callable[[Stage], list]


def _expire(stage: Stage) -> list:
    chain, term = stage.chain, stage.leadership
    chain.advance_time(term.expires_at - chain.now())  # a block at the expiry; no event says so
    return [("ended", End.EXPIRED, term.token), None]


def _release(stage: Stage) -> list:
    term = stage.leadership
    assert term.resign() is True
    return [("ended", End.RELEASED, term.token), None]


def _complete(stage: Stage) -> list:
    """A result recorded under the term's token ends nothing (a term is a plain lease, never a claimed item):
    the observer reports nothing until alice resigns."""
    term = stage.leadership
    term.lease.complete(b"quarterly report")
    assert term.is_current()
    assert term.resign() is True
    return [("ended", End.RELEASED, term.token), None]


def _supersede(stage: Stage) -> list:
    """alice campaigns again from another process (another Election of the same account): a new term."""
    term = stage.leadership
    again = election(stage.alice).campaign()
    stage.leadership = again
    return [("ended", End.SUPERSEDED, term.token), (stage.alice.sender, again.token)]


def _revoke(stage: Stage) -> list:
    term = stage.leadership
    assert stage.admin.namespace(NAMESPACE).revoke(NAME) == term.token
    return [("ended", End.REVOKED, term.token), None]


def _grant(stage: Stage) -> list:
    """The admin hands the seat to bob over alice's live term: one transaction revokes it and issues bob's."""
    term = stage.leadership
    granted = stage.admin.namespace(NAMESPACE).grant(NAME, stage.bob.sender, 30)
    return [("ended", End.GRANTED, term.token), (stage.bob.sender, granted.token)]


def _roll_back(stage: Stage) -> list:
    """The chain loses the block that elected alice (a dev chain's revert to before the campaign)."""
    term = stage.leadership
    stage.chain.revert(stage.snapshot)
    return [("ended", End.ROLLED_BACK, term.token), None]


SCENARIOS: dict[End, Scenario] = {
    End.EXPIRED: _expire,
    End.RELEASED: _release,
    End.COMPLETED: _complete,
    End.SUPERSEDED: _supersede,
    End.REVOKED: _revoke,
    End.GRANTED: _grant,
    End.ROLLED_BACK: _roll_back,
}


def namespaced(chain) -> Registry:
    """A registry whose deployer (account 0) assigned itself namespace ``billing``: the modules' ``registry``."""
    return Registry.deploy(chain, max_ttl=3_600, namespaces={NAMESPACE: chain.accounts[0]})


def stage(chain, registry, alice, bob) -> Stage:
    """A snapshot taken, then alice elected (``registry``: :func:`namespaced`)."""
    snapshot = chain.snapshot()
    return Stage(chain, registry, alice, bob, election(alice).campaign(), snapshot)
