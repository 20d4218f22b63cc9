"""``experiment inverse-contact`` on SOFA's finger, quick (needs ../shared)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from soft_inverse_ros.core.config_files import resolve_robot


def _finger_available() -> bool:
    try:
        from soft_inverse_ros.core.model.description import load_robot_description

        load_robot_description(resolve_robot("finger"))
        return True
    except (FileNotFoundError, OSError, ValueError):
        return False


pytestmark = pytest.mark.skipif(not _finger_available(), reason="SOFA's finger mesh (../shared) is not here")


def test_quick_run_reaches_a_target_with_the_notches_closed(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "soft_inverse_ros.cli", "experiment", "inverse-contact", "--quick", "--json",
         "--steps", "150", "--ticks-per-update", "3", "--effort-step", "0.02", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["targets"][0]["contacts"] > 0 and result["targets"][0]["force_sum_n"] > 0
    assert result["ticks_not_solved"] == 0
    assert result["max_penetration_mm"] <= 0.05
    assert result["qpcc_checked_ticks"] > 0 and result["qpcc_vs_enumeration_max_rel"] <= 1e-8
    # the pressing run with the limit presses less and misses its (unreachable) target by more;
    # the model's own forces (not only the QP's prediction) stay under the limit
    assert result["press_predicted_force_sum_max_with_limit_n"] <= result["force_sum_limit_n"] * (1 + 1e-9)
    assert result["force_sum_limit_violation"] == 0.0
    assert result["press_force_sum_max_with_limit_n"] <= result["force_sum_limit_n"]
    assert result["press_error_with_limit_mm"] > result["press_error_no_limit_mm"]
    assert (tmp_path / "inverse_contact.png").exists()
    # the reduced basis in the model and the QP: k basis vectors + the per-point check's pattern
    assert result["basis_file"].endswith("finger_model_basis.npz") and result["reduced_ticks_not_solved"] == 0
    assert result["reduced_contact_variables_max"] == result["basis_size"] + 1
    assert result["reduced_max_penetration_mm"] <= 0.05
    assert "reduced_law_alone_max_penetration_mm" in result


def test_bad_option_is_one_line():
    out = subprocess.run([sys.executable, "-m", "soft_inverse_ros.cli", "experiment", "inverse-contact",
                          "--press-limit-fraction", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "press-limit-fraction" in out.stderr and "Traceback" not in out.stderr
