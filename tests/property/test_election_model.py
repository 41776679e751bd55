"""observe() against a reference model: whatever the terms and however the changes are batched into polls.

Hypothesis draws a sequence of steps on the embedded chain: a candidate
acquires the seat (when free, or again when it already holds it: a new
term), the holder resigns or renews, the term expires (a block stamped at
its expiry, no event), a candidate takes the seat over in the block at the
expiry (the term over, then the next: no block in between says so), and
the observer polls. The model says which change
each step makes; the observer's polls, concatenated, must be exactly that
sequence, whether it polled after each step or once after many.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chainfence import Election
from chainfence._waiting import pace
from chainfence.election import _Observer
from tests.conftest import isolated
from tests.support.virtual_time import WaitClock

NAME = "model/leader"

STEPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["acquire", "take_over"]), st.integers(1, 3)),
        st.tuples(st.sampled_from(["release", "renew", "expire", "poll"]), st.just(0)),
    ),
    max_size=12,
)


@given(steps=STEPS)
def test_observe_reports_exactly_the_models_changes(embedded_session, steps):
    chain, registry = embedded_session
    with isolated(chain):
        candidates = {i: registry.connect(chain.accounts[i]) for i in (1, 2, 3)}
        reader = registry.connect(chain.accounts[4])
        timer = WaitClock().install(reader)
        observer = _Observer(Election(reader, NAME, ttl=60), timer, pace(chain))
        seen = [observer.current]
        expected: list[tuple[str, int] | None] = [None]
        lease = None  # the model's current term
        for action, who in steps:
            if action == "acquire" and (lease is None or lease.holder == candidates[who].sender):
                lease = candidates[who].acquire(NAME, ttl=60)
                expected.append((lease.holder, lease.token))
            elif action == "release" and lease is not None:
                lease.release()
                lease = None
                expected.append(None)
            elif action == "renew" and lease is not None:
                lease.renew()  # the same term: no change
            elif action == "take_over" and lease is not None:  # the first block past the expiry elects another
                chain.set_next_block_time(lease.expires_at)
                lease = candidates[who].acquire(NAME, ttl=60)
                expected += [None, (lease.holder, lease.token)]
            elif action == "expire" and lease is not None:
                chain.advance_time(lease.expires_at - chain.now())  # a block at the expiry, no event
                lease = None
                expected.append(None)
            elif action == "poll":
                seen += observer.poll()
        seen += observer.poll()
        assert [None if leader is None else (leader.holder, leader.token) for leader in seen] == expected
