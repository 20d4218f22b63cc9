"""``soft-inverse-ros fit-pneumatics`` on a logged CSV and in demo mode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from soft_inverse_ros.commands import fit_pneumatics
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams, simulate_schedule

def main(argv: list[str]) -> int:
    """The subcommand alone (independent of the other commands' imports)."""
    import argparse

    parser = argparse.ArgumentParser()
    fit_pneumatics.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


TRUE = PneumaticParams(80e3, 1500.0, 2.5e5, 1.5e4, 0.02)


def test_fit_from_a_logged_csv(tmp_path, capsys):
    times = np.arange(0.0, 3.0, 0.005)
    duty = np.select([times < 0.2, times < 1.0, times < 1.8], [0.0, 1.0, 0.0], 0.4)
    changes = np.flatnonzero(np.diff(duty)) + 1
    clean = simulate_schedule(TRUE, times, times[changes], duty[changes])
    measured = clean + np.random.default_rng(7).normal(0.0, 300.0, times.size)
    path = tmp_path / "step.csv"
    np.savetxt(path, np.column_stack([times, measured, duty]), delimiter=",",
               header="time_s,pressure_pa,duty", comments="")
    assert main(["fit-pneumatics", str(path), "--supply-pa", "80000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    fitted = result["fitted"]
    assert fitted["inflow_coefficient"] == pytest.approx(TRUE.inflow_coefficient, rel=0.03)
    assert fitted["outflow_rate_pa_s"] == pytest.approx(TRUE.outflow_rate_pa_s, rel=0.03)
    assert fitted["outflow_knee_pa"] == pytest.approx(TRUE.outflow_knee_pa, rel=0.08)
    assert fitted["latency_s"] == pytest.approx(TRUE.latency_s, abs=0.003)
    assert result["rms_error_pa"] == pytest.approx(300.0, rel=0.15)


def test_demo_reports_fitted_against_true(capsys):
    assert main(["fit-pneumatics", "--demo", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert all(abs(e) < 0.02 for e in result["relative_error"].values())


def test_bad_csv_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("t,pressure_pa\n0,1\n")
    with pytest.raises(SystemExit, match="lacks column"):
        main(["fit-pneumatics", str(path), "--supply-pa", "1e5"])
