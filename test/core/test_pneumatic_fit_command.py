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


def test_a_plot_without_suffix_is_reported_as_written(tmp_path, capsys):
    assert main(["fit-pneumatics", "--demo", "--plot", str(tmp_path / "plotnoext"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["plot"] == str(tmp_path / "plotnoext.png") and (tmp_path / "plotnoext.png").is_file()
    assert main(["fit-pneumatics", "--demo", "--plot", f"{tmp_path}/plotdir/"]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "is a directory" in err and err.count("\n") == 1
    assert not (tmp_path / "plotdir.png").exists()


def _step_log(path, scale_t: float = 1.0, header: str = "time_s,pressure_pa,duty", prefix: str = "") -> None:
    """A 0.55 s step response (200 Hz) of TRUE, its times multiplied by ``scale_t``."""
    times = np.arange(0.0, 0.55, 0.005)
    duty = np.select([times < 0.05, times < 0.3], [0.0, 1.0], 0.0)
    changes = np.flatnonzero(np.diff(duty)) + 1
    clean = simulate_schedule(TRUE, times, times[changes], duty[changes])
    measured = clean + np.random.default_rng(7).normal(0.0, 300.0, times.size)
    rows = "\n".join(f"{t * scale_t:.6f},{p:.3f},{d:g}" for t, p, d in zip(times, measured, duty))
    path.write_text(f"{prefix}{header}\n{rows}\n", encoding="utf-8")


def test_a_log_in_ms_is_refused_by_its_sample_period(tmp_path, capsys):
    """A 0.55 s log in ms (span 550 "s") fitted to 1000x wrong parameters with exit 0."""
    _step_log(tmp_path / "ms.csv", scale_t=1e3)
    assert _cli(["fit-pneumatics", str(tmp_path / "ms.csv"), "--supply-pa", "80000"]) == 2
    err = capsys.readouterr().err
    assert "median sample period of 5 s" in err and "not ms?" in err and err.count("\n") == 1


def test_parameters_at_the_bounds_exit_1_unless_accepted(tmp_path, capsys, monkeypatch):
    """The same ms log past the period check (as a faster ms log would be): pinned at bounds."""
    monkeypatch.setattr(fit_pneumatics, "MIN_REFUSED_PERIOD_S", float("inf"))
    import functools

    from soft_inverse_ros.core.drivers import pneumatic_model

    # RK4 sub-steps of 1 "s" on the 550 "s" log (the default 2 ms ones: a minute per fit)
    monkeypatch.setattr(pneumatic_model, "fit_step_response",
                        functools.partial(pneumatic_model.fit_step_response, max_step=1.0))
    _step_log(tmp_path / "ms.csv", scale_t=1e3)
    argv = ["fit-pneumatics", str(tmp_path / "ms.csv"), "--supply-pa", "80000"]
    assert main([*argv, "--json"]) == 1
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["at_bounds"] and "not trusted: exit 1" in captured.err
    assert main([*argv, "--accept-bounds"]) == 0
    captured = capsys.readouterr()
    assert "# at the fit's" in captured.out and "accepted (--accept-bounds)" in captured.err


def test_seconds_log_has_no_parameter_at_a_bound(tmp_path, capsys):
    _step_log(tmp_path / "s.csv")
    assert _cli(["fit-pneumatics", str(tmp_path / "s.csv"), "--supply-pa", "80000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["at_bounds"] == {}


@pytest.mark.parametrize(("prefix", "header"), [
    ("# logged 2024-05-01 on valve 2\n", "time_s,pressure_pa,duty"),
    ("", "\ufefftime_s,pressure_pa,duty"),  # Excel's UTF-8 byte-order mark
])
def test_a_comment_line_or_a_bom_is_read(tmp_path, capsys, prefix, header):
    _step_log(tmp_path / "log.csv", header=header, prefix=prefix)
    assert _cli(["fit-pneumatics", str(tmp_path / "log.csv"), "--supply-pa", "80000", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["fitted"]
    assert fitted["inflow_coefficient"] == pytest.approx(TRUE.inflow_coefficient, rel=0.1)


@pytest.mark.parametrize(("rows", "needle"), [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("time_s,pressure_pa,duty\n" + "0,1,0\n1,2,3,4\n" * 500, "Line #3 (got 4 columns instead of 3) (and 499 more"),
])
def test_unreadable_csv_is_one_short_line(tmp_path, capsys, rows, needle):
    (tmp_path / "bad.csv").write_text(rows)
    assert _cli(["fit-pneumatics", str(tmp_path / "bad.csv"), "--supply-pa", "1e5"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and len(err) < 400


@pytest.mark.parametrize(("argv", "needle"), [
    (["--demo", "--seed", "-1"], "argument --seed: must be >= 0"),
    (["--demo", "--rate-hz", "1e7"], "argument --rate-hz: must be at most 10000"),
])
def test_demo_values_are_refused_naming_the_option(capsys, argv, needle):
    with pytest.raises(SystemExit) as exit_:
        _cli(["fit-pneumatics", *argv])
    assert exit_.value.code == 2 and needle in capsys.readouterr().err
