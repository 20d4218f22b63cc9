"""The experiments' option values: refused while parsing, in one line naming the option
(not the internal config key: ``simulated.noise_std``, ``feedback.ki``, ``cosim.fem_period``),
and implausible sizes and speeds refused before the run."""

from __future__ import annotations

import pytest

from soft_inverse_ros import cli


@pytest.mark.parametrize(("argv", "option"), [
    (["closed-loop", "--noise", "-1"], "--noise"),
    (["closed-loop", "--ki", "nan"], "--ki"),
    (["closed-loop", "--kp", "-0.5"], "--kp"),
    (["closed-loop", "--latency", "-1"], "--latency"),
    (["closed-loop", "--seed", "-1"], "--seed"),
    (["closed-loop", "--fem-period", "0"], "--fem-period"),
    (["closed-loop", "--speed", "25000"], "--speed"),
    (["closed-loop", "--size", "-0.02"], "--size"),
    (["async-vs-sync", "--plant-young-scale", "0"], "--plant-young-scale"),
    (["async-vs-sync", "--z-offset", "inf"], "--z-offset"),
    (["qp-variation", "--size", "nan"], "--size"),
    (["plant-reach", "--points", "0"], "--points"),
    (["plant-reach", "--tolerance", "0"], "--tolerance"),
])
def test_bad_values_are_refused_while_parsing_naming_the_option(capsys, argv, option):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["experiment", *argv, "--quick"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and f"error: argument {option}: " in err


def test_a_square_larger_than_the_robot_is_refused():
    """--size 20 (mm given as m) ran ~3200 s of simulated time."""
    from soft_inverse_ros.experiments.async_vs_sync import check_size_within_robot

    bounds = ((-0.05, -0.05, 0.0), (0.05, 0.05, 0.2))
    check_size_within_robot(0.02, bounds)
    with pytest.raises(SystemExit, match=r"--size 20 m is larger than the robot itself \(200 mm across\)"):
        check_size_within_robot(20.0, bounds)


def test_a_lap_too_short_to_measure_is_refused():
    """--speed 25000: a 3 ms lap, then 'zero-size array to reduction operation maximum'."""
    from soft_inverse_ros.experiments.closed_loop import check_lap

    check_lap(0.02, 500.0, "square")  # 160 ms
    with pytest.raises(SystemExit, match="--size 0.001 m at --speed 400 mm/s is a 10 ms lap"):
        check_lap(0.001, 400.0, "square")
