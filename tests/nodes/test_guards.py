"""Guards in every mode on hardhat's node and ganache: the paused holder who wakes before its successor's
first write (tests/faults/test_guard_modes.py's scenarios, each run here on the node), and the follower
keeping up and resuming from the node's logs. The proven mode's guard: tests/chain/test_proven_views.py,
marked for both nodes."""

from __future__ import annotations

from tests.faults import test_guard_modes as modes
from tests.nodes.conftest import NODES, on_nodes

pytestmark = on_nodes(*NODES)


def test_control_mark_mode_accepts_the_late_write(node_registry, tmp_path):
    modes.test_control_mark_mode_accepts_the_late_write(node_registry, tmp_path)


def test_strict_mode_rejects_the_late_write(node_registry, tmp_path):
    modes.test_strict_mode_rejects_the_late_write(node_registry, tmp_path)


def test_strict_mode_rejects_an_expired_holder_even_with_no_successor(node_registry, tmp_path):
    modes.test_strict_mode_rejects_an_expired_holder_even_with_no_successor(node_registry, tmp_path)


def test_follow_mode_rejects_the_late_write_before_the_successor_writes(node_registry, tmp_path):
    modes.test_follow_mode_rejects_the_late_write_before_the_successor_writes(node_registry, tmp_path)


def test_the_follower_thread_keeps_up_on_its_own(node_registry, tmp_path):
    modes.test_the_follower_thread_keeps_up_on_its_own(node_registry, tmp_path)


def test_a_follower_resumes_where_it_stopped(node_registry, tmp_path):
    modes.test_a_follower_resumes_where_it_stopped(node_registry, tmp_path)


def test_an_exclusive_follower_updates_its_memory_too(node_registry, tmp_path):
    modes.test_an_exclusive_follower_updates_its_memory_too(node_registry, tmp_path)
