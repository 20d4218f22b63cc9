"""Static reach of the simulated robot (core/sim/static_reach.py, experiment plant-reach)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from soft_inverse_ros import cli
from soft_inverse_ros.core.model.snapshot import ActuatorKind
from soft_inverse_ros.core.sim.static_reach import StaticReach


@pytest.fixture(scope="module")
def reach():
    from soft_inverse_ros.core.jit_warm_up import plant_config_from_params
    from soft_inverse_ros.core.sim.plant import make_plant

    return StaticReach(make_plant(plant_config_from_params("sim.yaml")))


def _pose(reach, pulls_mm):
    """The effector under the rest taut strokes plus ``pulls_mm`` (negative: let out)."""
    plant = reach._plant  # noqa: SLF001 - the same plant, driven directly
    strokes = reach._taut + 1e-3 * np.asarray(pulls_mm, float)  # noqa: SLF001
    plant.set_state(reach._rest)  # noqa: SLF001
    plant.set_inputs(cable_strokes=strokes)
    plant.equilibrate(max_iterations=200)
    return plant.effector_position


def test_a_pose_the_robot_takes_is_within_reach(reach):
    # two cables pulled, the two on the far side let out: the robot bends towards a corner
    target = _pose(reach, [-6.0, 4.0, 3.0, -6.0])
    assert np.linalg.norm(target[:2] - reach.rest_effector[:2]) > 5e-3  # a bend, not the rest
    result = reach.solve(target)
    assert result.gap < 1e-5  # 0.01 mm, plant-reach's default tolerance (the search stops near 1 µm)
    np.testing.assert_allclose(result.effector, target, atol=1e-5)
    assert result.equilibria > 0
    assert np.all(result.cable_strokes >= reach.cable_lower) and np.all(result.cable_strokes <= reach.cable_upper)


def test_a_point_below_the_rest_is_out_of_reach_by_about_its_depth(reach):
    # cables only pull: the tip cannot go 5 mm below where it hangs at rest
    target = reach.rest_effector - np.array([0.0, 0.0, 5e-3])
    result = reach.solve(target)
    assert 3e-3 < result.gap <= 5e-3 + 1e-9  # the rest itself is 5 mm away


def test_only_cable_robots_are_accepted():
    class Cavities:
        actuator_kinds = (ActuatorKind.PRESSURE,)

    with pytest.raises(ValueError, match="cables alone"):
        StaticReach(Cavities())


def test_plant_reach_command_reports_each_point(capsys):
    assert cli.main(["experiment", "plant-reach", "--quick", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (row,) = result["raises"]
    assert result["points_per_lap"] == 4 and len(row["points"]) == 4
    assert result["trajectory"]["shape"] == "square"
    gaps = [p["gap_mm"] for p in row["points"]]
    assert row["gap_max_mm"] == max(gaps) and row["points_out_of_reach"] == sum(g > 0.01 for g in gaps)
    assert (result["lowest_reachable_raise_mm"] == 0.0) == (row["points_out_of_reach"] == 0)
    for p in row["points"]:  # the quick lap's points are the square's corners
        assert abs(abs(p["target_mm"][0]) - 10.0) < 1e-9 and abs(abs(p["target_mm"][1]) - 10.0) < 1e-9
        assert np.linalg.norm(np.subtract(p["effector_mm"], p["target_mm"])) == pytest.approx(p["gap_mm"], rel=1e-9)


@pytest.mark.parametrize(("value", "needle"), [("0,half", "expected comma-separated numbers"),
                                              ("nan", "must be comma-separated finite numbers")])
def test_plant_reach_refuses_a_bad_raise_list(capsys, value, needle):
    """Refused while parsing (``nan`` was refused only after the plant was built)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["experiment", "plant-reach", "--raise", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"argument --raise: {needle}" in err


def test_plant_reach_quick_keeps_the_points_and_raises_given():
    """--quick replaced --points and --raise even when given."""
    from soft_inverse_ros.experiments.plant_reach import lap_sizes

    parser = cli.build_parser()
    assert lap_sizes(parser.parse_args(["experiment", "plant-reach", "--quick"])) == (4, [0.0])
    assert lap_sizes(parser.parse_args(["experiment", "plant-reach"])) == (16, [0.0])
    given = parser.parse_args(["experiment", "plant-reach", "--quick", "--points", "8", "--raise", "0,1.5"])
    assert lap_sizes(given) == (8, [0.0, 1.5])


def test_plant_reach_refuses_a_file_that_does_not_place_the_path(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("target_node:\n  ros__parameters:\n    trajectory: square\n    size: 0.02\n")
    assert cli.main(["experiment", "plant-reach", "--params-file", str(params), "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("experiment plant-reach: ") and "sets no target_node center" in err
