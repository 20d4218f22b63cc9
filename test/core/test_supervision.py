"""supervision.end_with_launcher: armed only with a launcher pid in the environment (the
death signal itself is tested with real processes in test/integration/test_launcher.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from soft_inverse_ros.supervision import LAUNCHER_PID_ENV, end_with_launcher


def test_not_armed_without_a_launcher_or_with_a_malformed_pid():
    assert end_with_launcher({}) is False
    assert end_with_launcher({LAUNCHER_PID_ENV: ""}) is False
    assert end_with_launcher({LAUNCHER_PID_ENV: "not-a-pid"}) is False


def test_armed_in_a_child_of_the_named_launcher():
    code = ("import os; from soft_inverse_ros.supervision import end_with_launcher; "
            "print(end_with_launcher())")
    env = dict(os.environ, **{LAUNCHER_PID_ENV: str(os.getpid())})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == ("True" if sys.platform.startswith("linux") else "False"), out
