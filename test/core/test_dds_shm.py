"""Stale Fast DDS shared-memory files: removed when no process holds their locks, kept
otherwise (dds_shm.py)."""

from __future__ import annotations

import fcntl
import sys

import pytest

from soft_inverse_ros.dds_shm import remove_stale_fastdds_files

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock, /dev/shm")


def _touch(folder, *names):
    for name in names:
        (folder / name).write_bytes(b"x")


def test_only_files_whose_locks_nobody_holds_are_removed(tmp_path):
    dead, live = "fastdds_0123456789abcdef", "fastdds_fedcba9876543210"
    _touch(tmp_path, dead, f"{dead}_el", live, f"{live}_el")
    _touch(tmp_path, "fastdds_port7007", "fastdds_port7007_el", "sem.fastdds_port7007_mutex")
    # a port one of whose two locks is still held by a live process
    _touch(tmp_path, "fastdds_port7011", "fastdds_port7011_el", "fastdds_port7011_sl",
           "sem.fastdds_port7011_mutex")
    _touch(tmp_path, "other_program_segment", "fastdds_not_a_segment_el")
    held = []
    for lock in (f"{live}_el", "fastdds_port7011_sl"):
        handle = open(tmp_path / lock, "ab")
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(handle)
    try:
        assert remove_stale_fastdds_files(tmp_path) == 5
    finally:
        for handle in held:
            handle.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        live, f"{live}_el", "fastdds_port7011", "fastdds_port7011_el", "fastdds_port7011_sl",
        "sem.fastdds_port7011_mutex", "other_program_segment", "fastdds_not_a_segment_el"])
    # once the owners are gone, the rest goes too
    assert remove_stale_fastdds_files(tmp_path) == 6


def test_a_missing_folder_removes_nothing(tmp_path):
    assert remove_stale_fastdds_files(tmp_path / "absent") == 0
