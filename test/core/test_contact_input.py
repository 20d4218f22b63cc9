"""Contact as a user sets it up: what ran silently (or gave a traceback) and is now one line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from soft_inverse_ros import cli
from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.control.inverse_qp import InverseSolverConfig
from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel

DIAMOND = find_config("robots/builtin_diamond.yaml")


def _diamond_with(tmp_path: Path, collision: dict) -> Path:
    data = yaml.safe_load(DIAMOND.read_text(encoding="utf-8"))
    data["collision"] = copy.deepcopy(collision)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("collision", "needle"), [
    # a plane through the robot: 1.4 kN in the first contact step, exit 0
    ({"obstacles": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
     "obstacle 0 already intersects the robot at rest"),
    # an alarm distance across the body: its opposite faces "penetrate" at rest
    ({"self_collision": True, "alarm_distance": "60 mm"},
     "at rest the self-collision finds"),
])
def test_a_collision_model_that_cannot_start_from_the_rest_shape_is_refused(tmp_path, collision, needle):
    desc = load_robot_description(str(_diamond_with(tmp_path, collision)))
    with pytest.raises(ValueError, match=needle):
        RobotModel.from_description(desc)


def test_an_obstacle_clear_of_the_rest_shape_is_accepted(tmp_path):
    desc = load_robot_description(str(_diamond_with(tmp_path, {"obstacles": [
        {"type": "plane", "point": [0, 0, -40], "normal": [0, 0, 1]}]})))
    assert RobotModel.from_description(desc).contact is not None


def test_contact_limits_the_qp_would_ignore_are_refused():
    with pytest.raises(ValueError, match="contacts 'ignore' leaves the contact forces out of the QP; "
                                         "contact_force_sum_max would do nothing"):
        InverseSolverConfig(contacts="ignore", contact_force_sum_max=2.0)
    with pytest.raises(ValueError, match="above contact_force_sum_max 1 N could never bind"):
        InverseSolverConfig(contact_force_sum_max=1.0, contact_group_sources=(0,), contact_group_sum_max=(5.0,))


def test_experiment_and_bench_contact_options_are_checked(sofa_data, capsys):
    """--pull-mm inf was a traceback, --step-mm above --pull-mm ran no step (exit 0),
    3500 N was taken for a 10 N cable, --basis-k 50 was capped to 5 without a word."""
    for argv, needle in ((["experiment", "self-collision", "--quick", "--pull-mm", "2", "--step-mm", "5"],
                          "experiment self-collision: --step-mm 5 is more than --pull-mm 2"),
                         (["experiment", "inverse-contact", "--quick", "--target-efforts", "3500"],
                          "tensions [3500.0] N exceed the finger cable's max_force 10 N"),
                         (["bench", "contact", "--contacts", "5", "--basis-k", "50"],
                          "--basis-k 50: at most 5 here")):
        assert cli.main(argv) == 2, argv
        assert needle in capsys.readouterr().err, argv
    with pytest.raises(SystemExit):
        cli.main(["experiment", "self-collision", "--quick", "--pull-mm", "inf"])
    assert "--pull-mm: must be a finite number > 0" in capsys.readouterr().err


def test_quick_does_not_replace_what_is_given(monkeypatch):
    """--quick made --step-mm at least 0.25 and --target-efforts its first value, silently."""
    from soft_inverse_ros.experiments import inverse_contact, self_collision

    seen = {}
    monkeypatch.setattr(self_collision, "measure", lambda args: seen.update(step=args.step_mm) or {})
    monkeypatch.setattr(inverse_contact, "measure", lambda args: seen.update(
        efforts=args.target_efforts, steps=args.steps, ramp=args.ramp) or {})
    monkeypatch.setattr("soft_inverse_ros.experiments.emit", lambda *a, **k: None)
    cli.main(["experiment", "self-collision", "--quick", "--step-mm", "0.1", "--json"])
    cli.main(["experiment", "inverse-contact", "--quick", "--target-efforts", "4,4.5", "--basis", "none", "--json"])
    assert seen == {"step": 0.1, "efforts": [4.0, 4.5], "steps": 120, "ramp": 15}


def test_mesh_info_builds_the_contact_model(tmp_path, capsys):
    """mesh-info passed a robot whose obstacle cut through it (the model build failed later)."""
    inside = _diamond_with(tmp_path, {"obstacles": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]})
    assert cli.main(["mesh-info", "--robot", str(inside)]) == 2
    assert "obstacle 0 already intersects the robot at rest" in capsys.readouterr().err
    clear = _diamond_with(tmp_path, {"obstacles": [{"type": "plane", "point": [0, 0, -40], "normal": [0, 0, 1]}]})
    assert cli.main(["mesh-info", "--robot", str(clear)]) == 0
    assert "collision:     1 obstacle(s), alarm 1 mm; clear at rest" in capsys.readouterr().out


def test_an_obstacle_faster_than_the_alarm_distance_per_step_is_refused(tmp_path):
    """A 1 km/s obstacle (m/s for mm/s) ran: 15 km of penetration, 5.7e8 N."""
    from soft_inverse_ros.core.sim.plant import PlantConfig, PlantConfigError, make_plant

    fast = _diamond_with(tmp_path, {"obstacles": [{"type": "sphere", "centre": [0, 0, 200], "radius": 10,
                                                   "motion": {"velocity": "[0, 0, -1] m/s"}}]})
    with pytest.raises(PlantConfigError, match="obstacle 0 moves up to 10 mm per 10 ms sub-step, more than the alarm"):
        make_plant(PlantConfig(robot=str(fast), model="fem", dt=0.01))
    with pytest.raises(PlantConfigError, match="up to 2.5 mm per 2.5 ms sub-step"):  # sub-steps count
        make_plant(PlantConfig(robot=str(fast), model="fem", dt=0.01, substeps=4))


def test_the_shipped_bases_record_their_collision_model(sofa_data, tmp_path):
    """They predated the record, so the check was skipped: the finger's self-collision basis
    was accepted with an extra obstacle it never saw."""
    from soft_inverse_ros.core.contact.basis_file import load_basis
    from soft_inverse_ros.core.model.description import DescriptionError

    for name in ("finger_basis.npz", "finger_model_basis.npz"):
        assert load_basis(find_config(f"robots/{name}")).collision_model == "self_collision=True, obstacles: none"
    data = yaml.safe_load(find_config("robots/finger.yaml").read_text(encoding="utf-8"))
    data["mesh"]["file"] = str(sofa_data / "finger.vtk")
    data["collision"]["reduced_basis"] = str(find_config("robots/finger_basis.npz"))
    data["collision"]["obstacles"] = [{"type": "plane", "point": [0, -30, 0], "normal": [0, 1, 0]}]
    path = tmp_path / "finger.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(DescriptionError, match="the basis was built with another collision model"):
        load_robot_description(str(path))


def test_an_obstacle_in_the_wrong_unit_is_warned_about(tmp_path):
    """A box in m written where the robot is in mm: 110 m across, metres away, passed clear."""
    desc = load_robot_description(str(_diamond_with(tmp_path, {"obstacles": [
        {"type": "box", "lower": "[-50, -50, -200] m", "upper": "[50, 50, -100] m"}]})))
    warnings = desc.plausibility_warnings(desc.load_mesh())
    assert any(w.startswith("obstacle 0 (box):") and "check its unit" in w for w in warnings), warnings
    shipped = load_robot_description(str(_diamond_with(tmp_path, {"obstacles": [
        {"type": "sphere", "centre": [0, 0, 200], "radius": 10}]})))
    assert not shipped.plausibility_warnings(shipped.load_mesh())
