"""observe() against a reference model: whatever the terms and however the changes are batched into polls.

Hypothesis draws a sequence of steps on the embedded chain: a candidate
acquires the seat (when free, or again when it already holds it: a new
term, the old one superseded), the holder resigns or renews, the term
expires (a block stamped at its expiry, no event), a candidate takes the
seat over in the block at the expiry (the term over, then the next: no
block in between says so), the namespace's admin revokes the term or
grants the seat to a candidate (over a live term: one transaction ends it
and begins the next), and the observer polls. The model says which change
each step makes, and how each term ended (the model's words,
:class:`chainfence.endings.End`); the observer's polls, concatenated, must
be exactly that sequence, whether it polled after each step or once after
many.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chainfence import Election
from chainfence._sdk.names import address_namespace
from chainfence._sdk.waiting import pace
from chainfence.endings import End
from chainfence.recipes._election_observer import Observer
from chainfence.recipes.election import TermEnded
from tests.conftest import isolated
from tests.support.virtual_time import WaitClock

STEPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["acquire", "take_over", "grant"]), st.integers(1, 3)),
        st.tuples(st.sampled_from(["release", "renew", "expire", "revoke", "poll"]), st.just(0)),
    ),
    max_size=12,
)


def described(change):
    if isinstance(change, TermEnded):
        return ("ended", change.end, change.leader.token)
    return None if change is None else (change.holder, change.token)


@given(steps=STEPS)
def test_observe_reports_exactly_the_models_changes(embedded_session, steps):
    chain, registry = embedded_session
    with isolated(chain):
        # The seat is in account 0's address namespace: account 0 (the registry's sender) revokes and grants.
        name = f"{address_namespace(registry.sender)}/leader"
        candidates = {i: registry.connect(chain.accounts[i]) for i in (1, 2, 3)}
        reader = registry.connect(chain.accounts[4])
        timer = WaitClock().install(reader)
        observer = Observer(Election(reader, name, ttl=60)._seat, timer, pace(chain))
        reader._drive(observer.start_steps())
        seen = [observer.current]
        expected: list[object] = [None]
        term = None  # the model's current term: (holder's registry, token, expires_at)

        def begin(holder, token, expires_at):
            nonlocal term
            term = (holder, token, expires_at)
            expected.append((holder.sender, token))

        def end(how, *, empties=True):
            nonlocal term
            expected.append(("ended", how, term[1]))
            if empties:
                expected.append(None)
            term = None

        for action, who in steps:
            if action == "acquire" and (term is None or term[0].sender == candidates[who].sender):
                if term is not None:
                    end(End.SUPERSEDED, empties=False)  # its holder again: a new term fences off the old
                lease = candidates[who].acquire(name, ttl=60)
                begin(candidates[who], lease.token, lease.expires_at)
            elif action == "release" and term is not None:
                term[0].release(name, term[1])
                end(End.RELEASED)
            elif action == "renew" and term is not None:
                term = (term[0], term[1], term[0].renew(name, term[1], 60))  # the same term: no change
            elif action == "take_over" and term is not None:  # the first block past the expiry elects another
                chain.set_next_block_time(term[2])
                end(End.EXPIRED)
                lease = candidates[who].acquire(name, ttl=60)
                begin(candidates[who], lease.token, lease.expires_at)
            elif action == "expire" and term is not None:
                chain.advance_time(term[2] - chain.now())  # a block at the expiry, no event
                end(End.EXPIRED)
            elif action == "revoke" and term is not None:
                registry.namespace().revoke(name)
                end(End.REVOKED)
            elif action == "grant":
                if term is not None:
                    end(End.GRANTED, empties=False)  # revoked and handed over in one transaction
                lease = registry.namespace().grant(name, candidates[who].sender, 60)
                begin(candidates[who], lease.token, lease.expires_at)
            elif action == "poll":
                seen += reader._drive(observer.poll_steps())
        seen += reader._drive(observer.poll_steps())
        assert [described(change) for change in seen] == expected
