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


def _cli(argv: list[str]) -> int:
    from soft_inverse_ros.cli import main as cli_main

    return cli_main(argv)


@pytest.mark.parametrize(("rows", "needle"), [
    ("t,pressure_pa\n0,1\n", "lacks column"),
    ("", "cannot read"),
    ("time_s,pressure_pa,duty\n", "0 data row(s)"),
    ("time_s,pressure_pa,duty\n0,0,0\n0.1,0,0\n0.2,0,0\n", "the duty never changes"),
    ("time_s,pressure_pa,duty\n0,0,0\n1000,0,1\n2000,10,1\n", "spans 2000 s (more than 600 s): is it in seconds?"),
    ("time_s,pressure_pa,duty\n0,0,0\n0.1,0,1\n0.2,90000,1\n", "reaches 90000 Pa, above --supply-pa 1000 Pa"),
])
def test_bad_csv_is_one_line_and_exit_2(tmp_path, capsys, rows, needle):
    path = tmp_path / "bad.csv"
    path.write_text(rows)
    assert _cli(["fit-pneumatics", str(path), "--supply-pa", "1000"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["--supply-pa", "0"], ["--supply-pa=-1e5"], ["--supply-pa", "nan"],
    ["--demo", "--rate-hz", "0"], ["--demo", "--noise-pa", "-1"],
])
def test_bad_values_are_refused(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        _cli(["fit-pneumatics", *argv])
    assert exit_.value.code == 2 and "must be a finite number" in capsys.readouterr().err


def test_demo_takes_no_csv(tmp_path, capsys):
    assert _cli(["fit-pneumatics", str(tmp_path / "x.csv"), "--demo"]) == 2
    assert "--demo fits a synthetic response" in capsys.readouterr().err


def test_demo_options_with_a_csv_are_refused(tmp_path, capsys):
    """--noise-pa, --rate-hz and --seed were ignored without a word for a CSV."""
    (tmp_path / "x.csv").write_text("time_s,pressure_pa,duty\n0,0,0\n0.1,0,1\n")
    assert _cli(["fit-pneumatics", str(tmp_path / "x.csv"), "--supply-pa", "1e5", "--seed", "3",
                 "--rate-hz", "10"]) == 2
    assert "--rate-hz, --seed: for the --demo response only" in capsys.readouterr().err


def test_a_log_in_kpa_is_warned_about(tmp_path, capsys):
    """Pressures in kPa fitted silently (inflow 0.65, latency 3e-18 s)."""
    times = np.arange(0.0, 3.0, 0.005)
    duty = np.select([times < 0.2, times < 1.0, times < 1.8], [0.0, 1.0, 0.0], 0.4)
    changes = np.flatnonzero(np.diff(duty)) + 1
    kpa = simulate_schedule(TRUE, times, times[changes], duty[changes]) / 1e3
    path = tmp_path / "kpa.csv"
    np.savetxt(path, np.column_stack([times, kpa, duty]), delimiter=",", header="time_s,pressure_pa,duty",
               comments="")
    _cli(["fit-pneumatics", str(path), "--supply-pa", "80000"])
    assert "under 5 % of --supply-pa 80000 Pa: is the log in kPa?" in capsys.readouterr().err
