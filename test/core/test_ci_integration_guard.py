"""CI must fail, not skip, the integration tests when the ROS environment is broken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(tmp_path: Path, ci: str) -> subprocess.CompletedProcess:
    broken = tmp_path / "broken"
    (broken / "rclpy").mkdir(parents=True, exist_ok=True)
    (broken / "rclpy" / "__init__.py").write_text("raise ImportError('rclpy is broken here')\n")
    env = dict(os.environ, CI=ci, PYTHONPATH=os.pathsep.join(
        [str(broken), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         str(ROOT / "test" / "integration" / "test_pipeline.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_broken_ros_fails_the_integration_tests_under_ci(tmp_path):
    result = _collect(tmp_path, "true")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "ROS 2 environment is broken" in result.stdout + result.stderr


def test_broken_ros_skips_them_outside_ci(tmp_path):
    result = _collect(tmp_path, "")
    assert result.returncode in (0, 5), result.stdout + result.stderr
