"""The registry's invariants under forge's invariant fuzzer, in the test command.

forge (npm ``@foundry-rs/forge``, pinned by package-lock.json) builds the foundry project (foundry.toml:
contracts/ and tests/contract/*.sol) with the pinned solc through scripts/solc_shim.js, into a temporary
directory, and runs its two tests with foundry.toml's runs, depth and seed: ``invariant_registry``
(FencingRegistryInvariants.t.sol: tokens strictly increase, at most one current holder per resource, an
ended lease's token never current again, no stranger acts on a namespace, the policies and work items'
rules) after every call of the handler (RegistryHandler.sol: every external entry point, four actors,
time moved to expiries ±1 s), and ``test_everyPathIsReached`` (the handler reaches every entry point).
forge's FencingRegistry must be the shipped artifact byte for byte: the invariants hold for what ships.

The control: a copy of the contract with a seeded bug (scripts/forge_mutants.py's cheapest mutant, a
token reused) fails the same invariant test, by the invariant it breaks. scripts/forge_mutants.py runs
all of them; ``scripts/forge_invariants.py --deep`` a longer run.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.scripts import script

ROOT = Path(__file__).resolve().parents[2]

# Each test builds the project (solc through node: CPU-bound) and runs forge: 15 to 30 s of CPU, minutes of
# wall time on a loaded 2-core machine (measured in CONTRIBUTING.md, "Invariant tests (forge)").
pytestmark = pytest.mark.timeout(600)


forge = script("forge_invariants")
mutants = script("forge_mutants")


def test_the_invariants_hold_on_the_shipped_registry(tmp_path):
    built = forge.build(build_dir=tmp_path)
    assert built.ok, built.output
    compiled = json.loads((tmp_path / "out" / "FencingRegistry.sol" / "FencingRegistry.json").read_text())
    shipped = json.loads((ROOT / "src" / "chainfence" / "artifacts" / "FencingRegistry.json").read_text())
    assert compiled["bytecode"]["object"] == shipped["bytecode"], "forge's registry is not the shipped one"
    assert compiled["deployedBytecode"]["object"] == shipped["deployedBytecode"]

    ran = forge.test(build_dir=tmp_path)
    assert ran.ok, ran.output
    config = tomllib.loads((ROOT / "foundry.toml").read_text())["profile"]["default"]["invariant"]
    line = ran.passed(forge.INVARIANT_TEST)
    assert line is not None, ran.output
    counts = re.search(r"runs: (\d+), calls: (\d+), reverts: (\d+)", line)
    assert counts is not None, line
    # Every run ran to its depth, and no handler call reverted (each catches the registry's refusals).
    assert tuple(map(int, counts.groups())) == (config["runs"], config["runs"] * config["depth"], 0), line
    assert ran.passed(forge.DRIVER_TEST) is not None, ran.output


def test_control_a_seeded_bug_fails_the_invariant_test(tmp_path):
    mutant = mutants.by_name(mutants.CHEAP)
    verdict = mutants.run(mutant, tmp_path)
    assert verdict.caught, f"{mutant.name} ({mutant.bug}) was not caught"
    assert verdict.by_its_invariant, verdict.reason
