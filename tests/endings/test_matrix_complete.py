"""The endings model is complete: every part says what it does about every way, and a test attacks each cell."""

from __future__ import annotations

import importlib
import pkgutil

from chainfence import endings
from chainfence.errors import LeaseLost
from tests.endings import matrix

#: The parts that hold, wait for or watch leases: each must be declared in the model.
PROMISED_PARTS = frozenset(
    {
        "keep",  # Lease.keep(), threads
        "aio.keep",  # AsyncLease.keep(), asyncio
        "lock",  # chainfence lock -- CMD
        "election.campaign",
        "election.leadership",
        "election.observe",
        "election.watch",
        "claims",
        "lease_set",
        "batching",  # registry.batched(): group commit
        "waiting",
        "tooz",
        "mcp",
        "guard.follower",
        "audit.index",
        "watchdog",
    }
)


def _import_scenarios() -> None:
    package = importlib.import_module("tests.endings")
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"tests.endings.{module.name}")


def test_every_promised_part_is_declared_in_the_model():
    """A part the model promises but nobody declared (what it does about each way) fails here."""
    missing = sorted(PROMISED_PARTS - set(endings.parts()))
    assert not missing, f"parts not declared in chainfence.endings: {missing}"


def test_every_cell_of_the_matrix_has_a_test():
    """Each declared part has at least one test per way it must handle; a new way or part without one fails."""
    _import_scenarios()
    holes = [
        f"{name} x {way.value}"
        for name, part in sorted(endings.parts().items())
        for way in part.required()
        if not matrix.COVERED.get((name, way))
    ]
    assert not holes, "no test attacks: " + ", ".join(holes)


def test_no_test_claims_a_cell_the_model_does_not_have():
    _import_scenarios()
    parts = endings.parts()
    stray = [
        f"{name} x {way}" for (name, way) in matrix.COVERED if name not in parts or way not in parts[name].required()
    ]
    assert not stray, f"tests cover cells no part declares: {stray}"


def test_lease_lost_names_every_way_of_the_model():
    assert LeaseLost.REASONS == endings.WHYS


def test_the_model_classifies_every_contract_refusal():
    """Each lease-ending revert maps to its end, and each refusal to its name (no catch-all)."""
    from chainfence import errors

    cases = {
        errors.LeaseExpired(token=1, expired_at=5): endings.End.EXPIRED,
        errors.LeaseReleased(token=1): endings.End.RELEASED,
        errors.LeaseCompleted(token=1): endings.End.COMPLETED,
        errors.LeaseRevoked(token=1): endings.End.REVOKED,
        errors.StaleToken(token=1, current_token=2): endings.End.SUPERSEDED,
        errors.ChainRolledBack("x", seen_token=2, chain_token=1): endings.End.ROLLED_BACK,
    }
    for error, end in cases.items():
        assert endings.from_error(error) is end, error
    assert endings.from_error(errors.TokenNotConfirmed(token=1, confirmations=2)) is None
    assert endings.loss_reason(errors.NodeUnreachable("down")) is None
    assert endings.loss_reason(RuntimeError("bug")) == "error"
