"""experiment plant-mismatch: the simulated robot vs the controller's model, statically."""

from __future__ import annotations

import json

from soft_inverse_ros import cli


def test_plant_mismatch_reports_each_actuator(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("plant_sim_node:\n  ros__parameters:\n    model: fem\n"
                      "    mesh_cell_size: 0.011\n    young_modulus_scale: 0.7\n"
                      "    visualization_rate_hz: 0.0\n")  # a node-only key is ignored
    code = cli.main(["experiment", "plant-mismatch", "--params-file", str(params), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["plant"]["model"] == "fem" and result["plant"]["young_modulus_scale"] == 0.7
    assert result["plant_nodes"] == 695 and result["model_nodes"] == 1691
    rows = result["actuators"]
    assert [r["actuator"] for r in rows] == ["cable_left", "cable_back", "cable_right",
                                             "cable_front"]
    for r in rows:
        assert len(r["plant_displacement_mm"]) == 3 and len(r["model_displacement_mm"]) == 3
        # a pulled cable moves the effector by millimetres in both models, differently
        assert 0.5 < sum(abs(v) for v in r["plant_displacement_mm"]) < 20.0
        assert 0.01 < r["relative_difference"] < 1.0
    assert result["mean_relative_difference"] <= result["max_relative_difference"]
