"""chainfence.cli.run, the command's entry point, exits as Python would, without the interpreter's teardown
when nothing needs it (issue #19): the same exit code, the output flushed, the exit functions run; with
another thread still running it exits as Python does, after that thread.

Each case is a fresh interpreter whose ``main`` is replaced by the case's, so no chain is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any


def child(body: str, tmp_path, *, wait: bool = True) -> Any:
    """Run ``run()`` with ``main`` replaced by ``body``'s ``fake_main``; ``os._exit`` leaves a mark in
    ``tmp_path / "fast"`` when it is the way out."""
    code = (
        textwrap.dedent(
            f"""
        import atexit, os, sys, threading
        import chainfence.cli as cli
        MARK = {str(tmp_path / "fast")!r}
        real_exit = os._exit
        def marked_exit(code):
            with open(MARK, "w") as file:
                file.write(str(code))
            real_exit(code)
        os._exit = marked_exit
        """
        )
        + textwrap.dedent(body)
        + "\ncli.main = fake_main\ncli.run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output buffered, as by default
    if not wait:  # a process the test talks to: stdin and stdout are pipes
        pipe = subprocess.PIPE
        return subprocess.Popen([sys.executable, "-c", code], stdin=pipe, stdout=pipe, env=env, text=True)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_command_exits_with_its_code_its_output_flushed_and_its_exit_functions_run(tmp_path):
    done = child(
        f"""
        def fake_main():
            atexit.register(lambda: open({str(tmp_path / "atexit")!r}, "w").write("ran"))
            sys.stdout.write("held " * 1000)  # buffered, not yet written
            sys.stderr.write("note")
            return 3
        """,
        tmp_path,
    )
    assert done.returncode == 3
    assert done.stdout == "held " * 1000 and done.stderr == "note"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "fast").read_text() == "3", "the teardown was skipped"


def test_with_another_thread_running_it_exits_as_python_does_after_that_thread(tmp_path):
    """The thread blocks on stdin until the test writes there, once the child said how many threads it
    counted when its command returned: the process must wait for the thread (whose output is the last)
    and must not take the short way out."""
    body = """
        counted = threading.active_count
        def counting():
            n = counted()
            print("counted", n, flush=True)
            return n
        threading.active_count = counting
        def late():
            sys.stdin.readline()
            print("late")
        def fake_main():
            threading.Thread(target=late).start()
            return 4
        """
    process = child(body, tmp_path, wait=False)
    assert process.stdout.readline() == "counted 2\n"
    out, _ = process.communicate("go\n", timeout=60)
    assert process.returncode == 4
    assert out == "late\n"
    assert not (tmp_path / "fast").exists()


def test_control_a_bare_os_exit_would_lose_buffered_output_and_exit_functions(tmp_path):
    """The control: leaving with os._exit alone, unflushed and without the exit functions, loses both; the
    checks above can fail."""
    done = child(
        f"""
        def fake_main():
            atexit.register(lambda: open({str(tmp_path / "atexit")!r}, "w").write("ran"))
            sys.stdout.write("held")
            os._exit(5)
        """,
        tmp_path,
    )
    assert done.returncode == 5 and done.stdout == ""
    assert not (tmp_path / "atexit").exists()
