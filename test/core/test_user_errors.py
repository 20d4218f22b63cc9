"""User errors: one clear line and a non-zero exit, never a traceback; implausible robots
are warned about."""

from __future__ import annotations

from pathlib import Path

from soft_inverse_ros import cli
from soft_inverse_ros.core.model.description import plausibility_warnings


def test_a_bench_on_a_mesh_the_robot_does_not_fit_is_one_line(sofa_data, capsys):
    code = cli.main(["bench", "fem", "--mesh", str(sofa_data / "finger.vtk"), "--repeat", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # read as the description's own mesh (its checks at loading): the cable lies outside it
    assert err.startswith("bench fem: cannot load the robot:") and "is outside the mesh bounding box" in err


def test_mesh_info_of_a_robot_that_cannot_be_built_fails(sofa_data, capsys):
    code = cli.main(["mesh-info", str(sofa_data / "finger.vtk"), "--robot", "builtin_diamond"])
    out, err = capsys.readouterr()
    assert code != 0
    assert "mesh-info: error" in err and "Traceback" not in err


def test_plausibility_warnings_catch_wrong_units():
    assert plausibility_warnings(0.15, 0.5, 1e6) == []
    assert "size" in plausibility_warnings(3e-5, 0.5, 1e6)[0]  # metres read as mm
    assert "mass" in plausibility_warnings(0.15, 3.2e8, 1e6)[0]  # mm declared in metres
    assert "Young" in plausibility_warnings(0.15, 0.5, 180.0)[0]  # '180' meant kPa


def test_an_implausible_robot_is_warned_about_where_its_model_is_built(tmp_path, caplog):
    """A bare ``young_modulus: 1`` (1 Pa) and a pull point in metres where the file is in mm:
    the nodes and ``bench fem`` build the model, and say so there, not only ``mesh-info``."""
    import logging
    from pathlib import Path

    import yaml

    from soft_inverse_ros.core.model.description import parse_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    source = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    desc = parse_robot_description(data, source=source)
    assert desc.plausibility_warnings(desc.load_mesh()) == []
    data["material"]["young_modulus"] = 1
    data["actuators"][0]["pull_point"] = [0, 10000, 30]  # 10 m in the file's mm
    desc = parse_robot_description(data, source=source)
    warnings = desc.plausibility_warnings(desc.load_mesh())
    assert len(warnings) == 2 and "Young's modulus" in warnings[0]
    assert warnings[1].startswith(f"cable {desc.actuators[0].name}: its pull point [0.0, 10.0, 0.03] m lies")
    with caplog.at_level(logging.WARNING, logger="soft_inverse_ros.core.model.robot_model"):
        RobotModel.from_description(desc)
    assert sum("implausible Young's modulus" in r.getMessage() for r in caplog.records) == 1


def test_a_key_without_a_value_is_refused_not_taken_for_the_default():
    """``max_stroke:`` (YAML null) gave no stroke limit at all."""
    from pathlib import Path

    import pytest
    import yaml

    from soft_inverse_ros.core.model.description import DescriptionError, parse_robot_description

    source = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["actuators"][0]["max_stroke"] = None
    with pytest.raises(DescriptionError, match="max_stroke: given without a value: write one, or leave the key out"):
        parse_robot_description(data, source=source)


def test_a_builtin_mesh_in_the_wrong_length_unit_names_the_file_and_its_params():
    from pathlib import Path

    import pytest
    import yaml

    from soft_inverse_ros.core.model.description import parse_robot_description
    from soft_inverse_ros.core.model.mesh import MeshError

    source = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["length_unit"] = "m"  # its numbers are in mm
    desc = parse_robot_description(data, source=source)
    with pytest.raises(MeshError, match=r"builtin_diamond.yaml: mesh: builtin 'diamond' with .*cell_size 7 m.*"
                                        r"check the params' length_unit and cell size"):
        desc.load_mesh()


def test_bad_numeric_options_are_refused_before_any_work(tmp_path, capsys):
    """--ticks 0 was a traceback, --duration nan ran the whole demo graph, --out under a file
    failed only after an experiment's run: argparse (cli_values) or a check first, exit 2."""
    import pytest

    for argv, needle in ((["bench", "qp", "--ticks=0"], "--ticks: must be at least 1"),
                         (["bench", "pipeline", "--rate=inf"], "--rate: must be a finite number > 0"),
                         (["bench", "pipeline", "--realtime-priority=100"], "priority in 1..99"),
                         (["bench", "plant", "--seconds=0"], "--seconds: must be a finite number > 0"),
                         (["demo", "--duration=nan"], "--duration: must be a finite number > 0"),
                         (["experiment", "plant-mismatch", "--pressure=-1"], "--pressure: must be a finite number >= 0")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and needle in err, (argv, err)
    (tmp_path / "afile").write_text("x")
    assert cli.main(["experiment", "self-collision", "--out", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("experiment self-collision: --out ") and "is a file, not a folder" in err


def test_options_the_chosen_mode_would_ignore_are_refused(capsys):
    """An option a mode does not read did nothing (bench plant --modal-modes with the FEM
    plant, bench markers --format without --mesh, snake-gait --offset-psi with
    --only-anisotropic): refused in one line, exit 2, before any work."""
    for argv, needle in (
            (["bench", "plant", "--model", "fem", "--modal-modes", "8"],
             "--modal-modes applies to --model reduced or modal only, not fem"),
            (["bench", "plant", "--model", "modal", "--tangent-every", "3"],
             "--tangent-every applies to --model fem or reduced only, not modal"),
            (["bench", "plant", "--model", "reduced", "--pcg-on-new-tangent"],
             "--pcg-on-new-tangent applies to --model fem only, not reduced"),
            (["bench", "plant", "--model", "mujoco", "--newton-iterations", "1"],
             "--newton-iterations applies to --model fem or reduced or modal only, not mujoco"),
            (["bench", "plant", "--hyper-reduction-tolerances", "0.01"],
             "--hyper-reduction-tolerances applies to --model reduced only, not fem"),
            (["bench", "markers", "--scale", "1"], "--scale applies to --mesh only"),
            (["bench", "markers", "--mesh", "x.vtk", "--cells", "3"], "--cells sizes the box used without --mesh"),
            (["experiment", "snake-gait", "--only-anisotropic", "--offset-psi", "1"],
             "experiment snake-gait: --offset-psi sets the turning runs, which --only-anisotropic leaves out")):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, (argv, err)


def test_a_robot_named_for_qp_variation_that_cannot_load_is_an_error_on_stderr(capsys):
    """It printed its skip on stdout (exit 2, no prefix)."""
    assert cli.main(["experiment", "qp-variation", "--quick", "--robot", "nosuch"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("experiment qp-variation: nosuch: not run: robot 'nosuch' is neither")
    assert captured.err.rstrip().endswith("experiment qp-variation: cannot run --robot nosuch (above)")


def test_an_experiments_refusal_is_one_line_with_its_name(capsys):
    """Shared helpers refused without the experiment's name (and exit 1)."""
    for argv, line in ((["experiment", "async-vs-sync", "--speeds", "abc"],
                        "experiment async-vs-sync: --speeds must be comma-separated numbers in mm/s, got 'abc'"),
                       (["experiment", "closed-loop", "--mocap-rate", "7"],
                        "experiment closed-loop: --mocap-rate must divide 1000 Hz (the QP rate), got 7.0"),
                       (["experiment", "closed-loop", "--size", "0.001", "--speed", "400"],
                        "experiment closed-loop: --size 0.001 m at --speed 400 mm/s is a 10 ms lap, under 100 ms: "
                        "too short to measure (a smaller --speed or a larger --size)")):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == line + "\n"


def test_a_key_given_twice_in_a_users_yaml_is_refused_with_its_line(tmp_path):
    """PyYAML kept the last of two equal keys: robot descriptions, driver, mocap and
    parameters files now refuse them (core/yaml_files.py)."""
    import pytest
    import yaml

    from soft_inverse_ros.core.drivers.config_reader import DriverConfigError, read_driver_section
    from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description
    from soft_inverse_ros.core.yaml_files import load_yaml
    from soft_inverse_ros.nodes.node_runtime import params_file_problem

    assert load_yaml("a: &x {b: 1}\nc:\n  <<: *x\n  b: 2\n") == {"a": {"b": 1}, "c": {"b": 2}}  # merges keep working
    desc = tmp_path / "robot.yaml"
    source = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"
    desc.write_text(source.read_text() + "name: twice\nname: again\n")
    with pytest.raises(DescriptionError, match=r"robot.yaml: not YAML \(found duplicate key 'name' at line \d+"):
        load_robot_description(str(desc))
    driver = tmp_path / "servo.yaml"
    driver.write_text("servo_driver:\n  backend: sim\n  backend: dynamixel\n")
    with pytest.raises(DriverConfigError, match=r"not YAML \(found duplicate key 'backend' at line 3, column 3\)"):
        read_driver_section(driver, "servo_driver", None)
    params = tmp_path / "params.yaml"
    params.write_text("fem_node:\n  ros__parameters:\n    rate_hz: 30.0\n    rate_hz: 3.0\n")
    assert "found duplicate key 'rate_hz' at line 4" in params_file_problem(["--ros-args", "--params-file", str(params)])
    with pytest.raises(yaml.YAMLError):
        load_yaml("x: 1\nx: 1\n")
