#!/usr/bin/env python3
"""Mutation run of the registry's invariant tests: seed bugs into copies of the contract, show each is caught.

    python scripts/forge_mutants.py                  # every mutant, the suite's runs and depth
    python scripts/forge_mutants.py token-reused     # the named ones
    python scripts/forge_mutants.py --runs 256 --depth 128 --list

Each mutant is made here from the real source, never kept as a copy: one exact piece of text of
contracts/, found exactly once (or the run stops: the source moved on and the mutant must follow it),
replaced by the bug. The mutated copy of the foundry project (foundry.toml, contracts/, tests/contract/)
is built and its invariant test run (scripts/forge_invariants.py) in a temporary directory; a mutant is
caught when that test fails, and by its invariant when the failure names the one in its ``caught_by``
(the invariant test names every invariant a run broke). Exit status 0 only if every
mutant built and was caught by its invariant.

tests/contract/test_forge_invariants.py runs the cheapest one, :data:`CHEAP`, in the suite: the suite
can fail.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forge_invariants as forge

ROOT = forge.ROOT
REGISTRY = "contracts/FencingRegistry.sol"

# The invariants' names, as the invariant test's failure messages begin.
TOKENS = "tokens strictly increase"
ONE_HOLDER = "at most one current holder per resource"
ENDED = "an ended lease's token never becomes current again"
ADMIN = "no stranger acts on a namespace"
RULES = "policies and work items hold"
INTENTS = "a signed intent lands once, in time, for its signer only"


class MutantError(Exception):
    """A mutant could not be made (its text is not in the source exactly once) or built."""


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str  # what the mutant breaks, in words
    find: str  # text of the real source, exactly once
    replace: str
    caught_by: str  # the invariant that must catch it
    path: str = REGISTRY

    def apply(self, source: str) -> str:
        count = source.count(self.find)
        if count != 1:
            raise MutantError(f"{self.name}: its text is in {self.path} {count} times, not once:\n{self.find}")
        return source.replace(self.find, self.replace)


MUTANTS = (
    Mutant(
        "token-reused",
        "acquire does not move the counter: the next acquisition gets the same token",
        find="""        _acquireOne(name, ttl, expiresAt, token, counter, _holder());
        // The token's 48-bit check is in pack, which ran: no carry into the filter bits.
        _counter = counter.withLatest(token);""",
        replace="""        _acquireOne(name, ttl, expiresAt, token, counter, _holder());""",
        caught_by=TOKENS,
    ),
    Mutant(
        "claim-token-reused",
        "claimNext issues the latest token again instead of the next one",
        find="""            unchecked {
                token = counter.latest() + 1;
            }
            if (token > MAX_TOKEN)""",
        replace="""            unchecked {
                token = counter.latest();
            }
            if (token > MAX_TOKEN)""",
        caught_by=TOKENS,
    ),
    Mutant(
        "held-until-a-second-early",
        "acquire takes a live lease from its holder in its last second (expiry check off by one)",
        find="if (previousExpiresAt > block.timestamp && previous.holder() != holder) {\n            revert",
        replace="if (previousExpiresAt > block.timestamp + 1 && previous.holder() != holder) {\n            revert",
        caught_by=ONE_HOLDER,
    ),
    Mutant(
        "renew-at-expiry",
        "a lease can be renewed at its expiry second, when it has already expired (off by one)",
        find="if (expiresAt <= block.timestamp) revert FencingRegistryLeaseExpired(",
        replace="if (expiresAt < block.timestamp) revert FencingRegistryLeaseExpired(",
        caught_by=ENDED,
    ),
    Mutant(
        "current-at-expiry",
        "isCurrent still says yes at the expiry second (off by one)",
        find="return token != 0 && token == lease.token() && block.timestamp < lease.expiresAt();",
        replace="return token != 0 && token == lease.token() && block.timestamp <= lease.expiresAt();",
        caught_by=ENDED,
    ),
    Mutant(
        "lock-delay-a-second-short",
        "the lock-delay after an expiry ends a second early (off by one)",
        find="if (block.timestamp < until) revert FencingRegistryLockDelay(",
        replace="if (block.timestamp + 1 < until) revert FencingRegistryLockDelay(",
        caught_by=RULES,
    ),
    Mutant(
        "revoke-without-admin-check",
        "revoke does not check that the caller administers the name's namespace",
        find="""        _requireAdmin(_namespaceOfAdministered(name));
        return _revoke(keccak256(bytes(name)));""",
        replace="""        _namespaceOfAdministered(name);
        return _revoke(keccak256(bytes(name)));""",
        caught_by=ADMIN,
    ),
    Mutant(
        "admission-without-admin-check",
        "setAdmission does not check that the caller administers the namespace",
        find="""        _requireAdmin(namespace);
        for (uint256 i; i < holders.length; ++i) {""",
        replace="""        for (uint256 i; i < holders.length; ++i) {""",
        caught_by=ADMIN,
    ),
    Mutant(
        "accept-without-offer",
        "acceptNamespaceAdmin lets anyone take the namespace, offered or not",
        find="        if (pending != msg.sender) revert FencingRegistryNotPendingAdmin(namespace, msg.sender, pending);\n",
        replace="",
        caught_by=ADMIN,
    ),
    Mutant(
        "release-by-anyone",
        "release checks the token and that the lease is live, but not that the caller holds it",
        find="""        PackedLease lease = _requireHolder(resource, token, holder);
        // Holder and token kept""",
        replace="""        PackedLease lease = _requireCurrentToken(resource, token);
        _requireLive(resource, token, lease);
        // Holder and token kept""",
        caught_by=ONE_HOLDER,
    ),
    Mutant(
        "batch-by-call",
        "batchCalls runs its operations with call, not delegatecall: the registry, not the caller, holds",
        find="ok := delegatecall(gas(), address(), data, size, 0, 32)",
        replace="ok := call(gas(), address(), 0, data, size, 0, 32)",
        caught_by=ONE_HOLDER,
    ),
    Mutant(
        "complete-not-done",
        "complete ends a claimed item's lease without marking it done: it can be claimed again",
        find="_leases[resource] = lease.ended().withFlags(LEASE_DONE);",
        replace="_leases[resource] = lease.ended();",
        caught_by=RULES,
    ),
    Mutant(
        "grant-ignores-policy",
        "grant issues a lease to a holder the namespace does not admit, or past its maxTtl",
        find="        PackedNamespace ns = _requireAdmin(namespace);\n        _applyPolicy(ns, namespace, holder, ttl);\n",
        replace="        PackedNamespace ns = _requireAdmin(namespace);\n",
        caught_by=RULES,
    ),
    Mutant(
        "set-any-order",
        "renewMany and releaseMany take a set whose resources are not in increasing order of ids",
        find="        revert FencingRegistryUnsortedResources(resource, previous);\n",
        replace="",
        caught_by=RULES,
    ),
    Mutant(
        "set-repeat-allowed",
        "renewMany and releaseMany take a resource listed twice in a row (the order check is <, not <=)",
        find="if (resource == previous) revert FencingRegistryDuplicateResource(resource);",
        replace="if (resource == previous) return;",
        caught_by=RULES,
    ),
    Mutant(
        "renew-many-at-expiry",
        "renewMany renews a lease at its expiry second, when it has already expired (off by one)",
        find="|| lease.expiresAt() <= block.timestamp\n            ) _requireHolder(",
        replace="|| lease.expiresAt() < block.timestamp\n            ) _requireHolder(",
        caught_by=ENDED,
    ),
    Mutant(
        "intent-any-signer",
        "performIntents takes any valid signature for the holder it names: anyone acts for anyone",
        find="if (signer == holder && signer != address(0)) return true;",
        replace="if (signer != address(0)) return true;",
        caught_by=INTENTS,
    ),
    Mutant(
        "intent-no-deadline",
        "performIntents lands an intent after its deadline",
        find="if (block.timestamp > intent.deadline) {",
        replace="if (false) {",
        caught_by=INTENTS,
    ),
    Mutant(
        "intent-acquisition-replayed",
        "an acquisition intent is not held to the latest token it was signed against: it lands again",
        find="bool stale = current != guard;",
        replace="bool stale = kind == IntentKind.Renew && current != guard;",
        caught_by=INTENTS,
    ),
    Mutant(
        "intent-relayer-holds",
        "the lease operations ignore the signer an intent appends: the registry itself holds what intents take",
        find="if eq(holder, address()) { holder := shr(96, calldataload(sub(calldatasize(), 20))) }",
        replace="",
        caught_by=ONE_HOLDER,
    ),
)

#: The suite's mutant: caught at the second acquisition of any run.
CHEAP = "token-reused"


def by_name(name: str) -> Mutant:
    for mutant in MUTANTS:
        if mutant.name == name:
            return mutant
    raise MutantError(f"no mutant {name!r}: {', '.join(m.name for m in MUTANTS)}")


def copy_project(destination: Path) -> Path:
    """A copy of the foundry project (foundry.toml and its Solidity) at ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "foundry.toml", destination / "foundry.toml")
    for folder in forge.PROJECT_SOURCES:
        shutil.copytree(ROOT / folder, destination / folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return destination


def make(mutant: Mutant, destination: Path) -> Path:
    """A copy of the project at ``destination`` with ``mutant`` applied to its source."""
    project = copy_project(destination)
    target = project / mutant.path
    target.write_text(mutant.apply(target.read_text(encoding="utf-8")), encoding="utf-8")
    return project


@dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    caught: bool
    reason: str  # the failure forge reported (empty if none)
    build_seconds: float
    run_seconds: float

    @property
    def by_its_invariant(self) -> bool:
        return self.caught and f"{self.mutant.caught_by}: " in self.reason


def run(
    mutant: Mutant, workdir: Path, *, runs: int | None = None, depth: int | None = None, seed: str | None = None
) -> Verdict:
    """Build ``mutant`` in ``workdir`` and run the invariant test on it."""
    project = make(mutant, workdir / mutant.name)
    built = forge.build(project)
    if not built.ok:
        raise MutantError(f"{mutant.name} did not build:\n{built.output}")
    ran = forge.test(project, runs=runs, depth=depth, seed=seed, match_test=forge.INVARIANT_TEST)
    failures = ran.failures()
    return Verdict(mutant, not ran.ok and bool(failures), failures[0] if failures else "", built.seconds, ran.seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--runs", type=int, help="invariant runs (default: foundry.toml's)")
    parser.add_argument("--depth", type=int, help="calls per run (default: foundry.toml's)")
    parser.add_argument("--seed", help="fuzz seed (default: foundry.toml's)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    if args.list:
        for mutant in MUTANTS:
            print(f"{mutant.name:28} {mutant.bug} (caught by: {mutant.caught_by})")
        return 0
    try:
        mutants = [by_name(name) for name in args.names] if args.names else list(MUTANTS)
        source = (ROOT / REGISTRY).read_text(encoding="utf-8")
        for mutant in mutants:
            mutant.apply(source)  # every mutant still finds its text before anything is built
        verdicts = []
        with tempfile.TemporaryDirectory(prefix="chainfence-mutants-") as workdir:
            for mutant in mutants:
                verdict = run(mutant, Path(workdir), runs=args.runs, depth=args.depth, seed=args.seed)
                verdicts.append(verdict)
                shown = "caught" if verdict.by_its_invariant else ("CAUGHT BY ANOTHER" if verdict.caught else "MISSED")
                print(
                    f"{mutant.name:28} {shown:8} build {verdict.build_seconds:5.1f} s, run {verdict.run_seconds:5.1f} s"
                    f"  {verdict.reason or '(every invariant held)'}",
                    flush=True,
                )
    except (MutantError, forge.ForgeNotFound) as exc:
        print(f"forge_mutants: {exc}", file=sys.stderr)
        return 2
    missed = [v.mutant.name for v in verdicts if not v.by_its_invariant]
    print(
        f"{len(verdicts) - len(missed)} of {len(verdicts)} mutants caught by their invariant"
        + (f"; not: {', '.join(missed)}" if missed else "")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
