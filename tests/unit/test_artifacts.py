"""The committed artifacts are exactly what the pinned compiler makes of contracts/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripts import script

ROOT = Path(__file__).resolve().parents[2]
build = script("build_contracts")


def test_artifacts_record_the_current_sources():
    """Cheap staleness check: the artifact's source hash matches contracts/ as it is now."""
    for name in build.CONTRACTS:
        artifact = json.loads(build.artifact_path(name).read_text())
        assert artifact["sourcesHash"] == build.sources_hash(build.source_files()), (
            f"{name}: contracts/ changed since the artifact was built; run scripts/build_contracts.py"
        )


def test_artifacts_pin_the_compiler_and_settings():
    artifact = json.loads(build.artifact_path("FencingRegistry").read_text())
    compiler = artifact["compiler"]
    assert compiler["version"].startswith(build.SOLC_VERSION + "+commit.")
    settings = compiler["settings"]
    assert settings["evmVersion"] == "cancun"
    assert settings["optimizer"]["enabled"] is True
    assert settings["metadata"]["bytecodeHash"] == "none"


@pytest.fixture(scope="module")
def fresh():
    """One compile of contracts/ with the pinned solc (npm package via the shim, or $SOLC_BINARY), shared
    by the tests that need it: a compile takes seconds."""
    return build.compile_contracts(build.find_compiler(None))


def test_a_fresh_compile_is_byte_identical_to_the_committed_artifacts(fresh):
    """Recompile and compare bytes."""
    for name, artifact in fresh.items():
        committed = build.artifact_path(name).read_text(encoding="utf-8")
        assert committed == build.render(artifact), f"{name}: committed artifact is stale"


def test_the_check_mode_fails_on_a_stale_artifact(tmp_path, monkeypatch, fresh):
    """--check exits 1 when an artifact differs, so CI would catch it (on the fresh compile above)."""
    monkeypatch.setattr(build, "compile_contracts", lambda solc: fresh)
    stale_dir = tmp_path / "artifacts"
    stale_dir.mkdir()
    for name in build.CONTRACTS:
        (stale_dir / f"{name}.json").write_text(build.artifact_path(name).read_text())
    for name in build.ABI_ONLY:
        (stale_dir / f"{name}.abi.json").write_text(build.artifact_path(f"{name}.abi").read_text())
    original = build.artifact_path("FencingRegistry").read_text()
    (stale_dir / "FencingRegistry.json").write_text(original.replace('"viaIR": true', '"viaIR": false'))
    monkeypatch.setattr(build, "ARTIFACTS_DIR", stale_dir)
    assert build.main(["--check"]) == 1
    (stale_dir / "FencingRegistry.json").write_text(original)
    assert build.main(["--check"]) == 0


def test_the_check_mode_fails_on_a_stale_or_missing_abi_file(tmp_path, monkeypatch, fresh):
    """The plain ABI files are build outputs too: one edited by hand, or missing, fails --check."""
    monkeypatch.setattr(build, "compile_contracts", lambda solc: fresh)
    monkeypatch.setattr(build, "ABI_DIR", tmp_path)
    assert build.main(["--check"]) == 1  # abi/FencingRegistry.json missing here
    abi = json.loads(build.render_abi(fresh["FencingRegistry"]["abi"]))
    (tmp_path / "FencingRegistry.json").write_text(build.render_abi(abi[1:]))  # an entry dropped
    assert build.main(["--check"]) == 1
    (tmp_path / "FencingRegistry.json").write_text(build.render_abi(abi))
    assert build.main(["--check"]) == 0


def test_the_plain_abi_files_are_the_registry_artifacts_abi():
    """abi/FencingRegistry.json (repository) and FencingRegistry.abi.json (package): the artifact's ABI, a
    bare JSON array as cast, ethers and viem read it, with every function, event and error."""
    artifact = json.loads(build.artifact_path("FencingRegistry").read_text())
    expected = build.render_abi(artifact["abi"])
    repository = (ROOT / "abi" / "FencingRegistry.json").read_text(encoding="utf-8")
    from importlib import resources

    packaged = (
        resources.files("chainfence").joinpath("artifacts", "FencingRegistry.abi.json").read_text(encoding="utf-8")
    )
    assert repository == packaged == expected
    abi = json.loads(repository)
    assert isinstance(abi, list) and {entry["type"] for entry in abi} >= {"constructor", "function", "event", "error"}


def test_the_shim_answers_version_in_native_format():
    out = subprocess.run([str(build.SHIM), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1].startswith(f"Version: {build.SOLC_VERSION}+commit.")


def test_the_shim_refuses_imports_from_disk(tmp_path):
    """Every source is passed inline; the shim never reads files, so builds cannot depend on paths."""
    source = 'pragma solidity 0.8.28; import "./Missing.sol"; contract A {}'
    request = {"language": "Solidity", "sources": {"A.sol": {"content": source}}, "settings": {}}
    out = subprocess.run(
        [str(build.SHIM), "--standard-json"], input=json.dumps(request), capture_output=True, text=True, check=True
    ).stdout
    errors = json.loads(out)["errors"]
    assert any("import not found" in e["formattedMessage"] or "not found" in e["message"] for e in errors)


def test_a_native_solc_of_another_version_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "solc"
    fake.write_text("#!/bin/sh\necho 'Version: 0.8.19+commit.7dd6d404.Linux.g++'\n")
    fake.chmod(0o755)
    with pytest.raises(build.BuildError, match="is not solc 0.8.28"):
        build.compile_contracts(str(fake))
    monkeypatch.setenv("SOLC_BINARY", str(tmp_path / "missing"))
    assert build.main(["--check"]) == 2


def test_the_installed_package_needs_no_compiler():
    """The runtime reads artifacts as package data; solcx is a dev dependency only."""
    code = "import sys, chainfence, chainfence.registry; print('solcx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
