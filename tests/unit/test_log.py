"""The package's loggers (chainfence._core.log): no logging import until a record can go somewhere, and after,
the records logging.getLogger would have made (issue #19: logging was 8% of a per-task command's start).

Each case runs in a fresh interpreter, since which modules are imported is the point.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(code: str) -> dict:
    """What ``code`` (which prints one JSON document last) printed, run by a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.splitlines()[-1]), "stderr": done.stderr}


def test_the_sdk_logs_without_importing_logging_when_nobody_did():
    seen = run(
        """
        import json, sys
        import chainfence.chain, chainfence.registry, chainfence._node.rpc
        from chainfence._core import log as _log
        _log.get("chainfence.registry").warning("nobody hears this %s", 1)
        _log.get("chainfence.rpc").exception("nor this")
        print(json.dumps({"logging": "logging" in sys.modules}))
        """
    )
    assert seen == {"logging": False, "stderr": ""}


def test_once_logging_is_configured_a_record_is_the_one_getlogger_makes():
    """The record names the caller's file, line and function (not _log's), carries its level, arguments
    and exception, and reaches the handlers configured after chainfence was imported."""
    code = """
        import json
        import chainfence
        from chainfence._core import log as _log
        logger = _log.get("chainfence.registry")
        import logging
        records = []
        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record)
        logging.getLogger().addHandler(Keep())
        logging.getLogger().setLevel(logging.DEBUG)
        def caller():
            logger.info("acquired %s token %d", "jobs/a", 7)
            try:
                1 / 0
            except ZeroDivisionError:
                logger.exception("failed")
            logger.debug("deep", stacklevel=1)
        caller()
        print(json.dumps({
            "messages": [r.getMessage() for r in records],
            "levels": [r.levelname for r in records],
            "names": sorted({r.name for r in records}),
            "where": sorted({(r.pathname, r.funcName) for r in records}),
            "lines": [r.lineno for r in records],
            "exc": [r.exc_info[0].__name__ if r.exc_info else None for r in records],
            "null": [type(h).__name__ for h in logging.getLogger("chainfence").handlers],
        }))
        """
    seen = run(code)
    lines = textwrap.dedent(code).splitlines()
    calls = [
        n for n, line in enumerate(lines, 1) if line.strip().startswith(("logger.info", "logger.exc", "logger.deb"))
    ]
    assert seen["messages"] == ["acquired jobs/a token 7", "failed", "deep"]
    assert seen["levels"] == ["INFO", "ERROR", "DEBUG"]
    assert seen["names"] == ["chainfence.registry"]
    assert seen["where"] == [["<string>", "caller"]], "the caller's line, not chainfence._core.log's"
    assert seen["lines"] == calls
    assert seen["exc"] == [None, "ZeroDivisionError", None]
    assert seen["null"] == ["NullHandler"]


def test_the_package_logger_keeps_its_null_handler_so_warnings_are_not_printed_unasked():
    """logging imported after chainfence, no handler configured: a warning of the SDK prints nothing (the
    NullHandler keeps logging's last-resort handler away), as when logging was imported first."""
    for first in ("import chainfence\nimport logging", "import logging\nimport chainfence"):
        seen = run(
            first
            + """
import json
from chainfence._core import log as _log
_log.get("chainfence.chain").warning("unasked")
print(json.dumps({"handlers": [type(h).__name__ for h in logging.getLogger("chainfence").handlers]}))
"""
        )
        assert seen == {"handlers": ["NullHandler"], "stderr": ""}, first


def test_control_a_logger_without_the_null_handler_or_the_stacklevel_is_caught():
    """The checks above can fail: logging's own logger with no NullHandler prints an unasked warning on
    stderr, and a wrapper that does not pass stacklevel names its own line."""
    seen = run(
        """
        import json, logging
        logging.getLogger("other").warning("unasked")
        records = []
        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record)
        logging.getLogger().addHandler(Keep())
        def wrapper(msg):
            logging.getLogger("other").warning(msg)
        def caller():
            wrapper("x")
        caller()
        print(json.dumps({"func": records[0].funcName}))
        """
    )
    assert "unasked" in seen["stderr"]
    assert seen["func"] == "wrapper"
