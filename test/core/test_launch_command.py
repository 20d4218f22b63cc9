"""``soft-inverse-ros launch ... --dry-run``: the name:=value arguments anywhere on the line,
and what the nodes would refuse only once started refused here, in one line."""

from __future__ import annotations

import pytest

from soft_inverse_ros.cli import main


def test_arguments_after_the_options_are_the_graphs(capsys):
    assert main(["launch", "sim", "--dry-run", "robot:=finger", "clock:=sim"]) == 0
    out = capsys.readouterr().out
    assert "robot:=finger" in out and "use_sim_time:=true" in out.lower()
    with pytest.raises(SystemExit) as exit_:
        main(["launch", "sim", "--dry-run", "--bogus"])
    assert exit_.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


@pytest.mark.parametrize(("arguments", "needle"), [
    (["params_file:={missing}"], "parameter file not found"),
    (["params_file:={notyaml}"], "is not YAML (expected ',' or ']'"),
    (["params_file:={listed}"], "expected node names at the top level, got list"),
    (["robot:=nosuch"], "robot 'nosuch' is neither an existing file nor a known robot name"),
    (["plant_robot:=nosuch"], "robot 'nosuch' is neither"),
])
def test_inputs_the_nodes_would_refuse_are_refused_by_the_dry_run(tmp_path, capsys, arguments, needle):
    (tmp_path / "notyaml.yaml").write_text("a: [1, 2\n")
    (tmp_path / "listed.yaml").write_text("- 1\n")
    paths = {"missing": tmp_path / "missing.yaml", "notyaml": tmp_path / "notyaml.yaml",
             "listed": tmp_path / "listed.yaml"}
    argv = ["launch", "sim", "--dry-run", *(a.format(**paths) for a in arguments)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_duration_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["launch", "sim", "--duration", "-5", "--dry-run"])
    assert exit_.value.code == 2 and "--duration: must be a finite number > 0" in capsys.readouterr().err


@pytest.mark.parametrize(("arguments", "needle"), [
    (["plant_model:=xyz"], "plant_model 'xyz' is not one of ['fem', 'reduced', 'modal', 'mujoco']"),
    (["trajectory:=zigzag"], "trajectory 'zigzag' is not one of ['hold', 'line', 'square', 'circle', 'csv']"),
    (["record:={afile}/bag"], "is a file, not a folder"),
    (["record:={afolder}"], "exists already (the recorder never overwrites a bag)"),
    (["record:=/proc/bag"], "cannot create a folder in /proc"),
    (["trajectory:=csv"], "trajectory:=csv needs target_node's csv_file: set it in the parameters file"),
])
def test_values_the_nodes_would_refuse_are_refused_by_the_dry_run(tmp_path, capsys, arguments, needle):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "afolder").mkdir()
    paths = {"afile": tmp_path / "afile", "afolder": tmp_path / "afolder"}
    assert main(["launch", "sim", "--dry-run", *(a.format(**paths) for a in arguments)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


@pytest.mark.parametrize(("arguments", "needle"), [
    (["servos:={missing}"], "device_config '{missing}': no such file"),
    (["servos:={notdriver}"], "servo_driver_node: device_config {notdriver}: expected a top-level 'servo_driver' mapping"),
    (["servos:=servo_sim.yaml"], "servo_driver.dynamixel: required key is missing"),  # the graph's backend
    (["valves:={notdriver}"], "valve_driver_node: device_config {notdriver}: expected a top-level 'valve_driver'"),
    (["servos:=servo_dynamixel.yaml", "mocap:={missing}"], "source_config '{missing}': no such file"),
    (["servos:=servo_dynamixel.yaml", "mocap:={notdriver}"], "has no top-level 'mocap' key"),
])
def test_hardware_configuration_files_are_read_by_the_dry_run(tmp_path, capsys, arguments, needle):
    """servos:=, valves:= and mocap:= files were accepted unread by --dry-run (the nodes
    refused them only when started)."""
    (tmp_path / "notdriver.yaml").write_text("something: 1\n")
    paths = {"missing": tmp_path / "missing.yaml", "notdriver": tmp_path / "notdriver.yaml"}
    assert main(["launch", "hardware", "--dry-run", *(a.format(**paths) for a in arguments)]) == 2
    err = capsys.readouterr().err
    assert needle.format(**paths) in err and err.count("\n") == 1, err
    assert main(["launch", "hardware", "--dry-run", "servos:=servo_dynamixel.yaml",
                 "valves:=valve_serial.yaml", "mocap:=mocap_vicon.yaml"]) == 0


def test_a_csv_trajectory_whose_file_the_parameters_name_is_accepted(capsys):
    """sim_hybrid.yaml names target_node's csv_file: trajectory:=csv is fine there."""
    assert main(["launch", "hybrid", "--dry-run", "trajectory:=csv"]) == 0
