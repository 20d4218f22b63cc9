"""Mocap → robot registration: rigid fit, residuals, YAML round trip, the CLI command."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from soft_inverse_ros.cli import main
from soft_inverse_ros.core.mocap.registration import (
    REGISTRATION_KEY,
    FrameRegistration,
    RegistrationError,
    estimate_rigid_transform,
    fit_rigid_transforms,
    load_registration,
    save_registration,
)
from soft_inverse_ros.core.mocap.rigid_transform import (
    RigidTransform,
    matrix_to_quaternion,
    quaternion_angle,
    quaternion_to_matrix,
    rotation_vector_to_quaternion,
)


def known_transform() -> RigidTransform:
    q = rotation_vector_to_quaternion(np.array([0.3, -1.1, 0.7]))
    return RigidTransform.from_quaternion(q, [0.42, -1.3, 0.25])


def robot_points(rng, n=12, spread=0.15):
    return spread * rng.standard_normal((n, 3)) + np.array([0.1, 0.0, 0.2])


def test_quaternion_matrix_round_trip_including_half_turns():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((200, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    # Half turns (w = 0) are the hard case for trace-based conversions.
    q[:3] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    back = matrix_to_quaternion(quaternion_to_matrix(q))
    assert np.allclose(quaternion_angle(q, back), 0.0, atol=1e-6)
    r = quaternion_to_matrix(q)
    assert np.allclose(r @ np.swapaxes(r, -1, -2), np.eye(3), atol=1e-12)


def test_exact_points_recover_transform_exactly():
    rng = np.random.default_rng(0)
    truth = known_transform()
    r = robot_points(rng)
    m = truth.inverse().apply_points(r)
    res = estimate_rigid_transform(m, r)
    assert np.allclose(res.transform.rotation, truth.rotation, atol=1e-12)
    assert np.allclose(res.transform.translation, truth.translation, atol=1e-12)
    assert res.residual_rms < 1e-12 and res.residual_max < 1e-12


def test_noisy_points_error_bounded_by_noise_and_rms_reported():
    rng = np.random.default_rng(1)
    truth = known_transform()
    sigma = 0.5e-3
    n = 40
    r = robot_points(rng, n)
    m = truth.inverse().apply_points(r) + sigma * rng.standard_normal((n, 3))
    res = estimate_rigid_transform(m, r)
    # Errors of the fit at the calibration points are of the order sigma / sqrt(n).
    fitted = res.transform.apply_points(m)
    true_mapped = truth.apply_points(m)
    point_error = np.linalg.norm(fitted - true_mapped, axis=1)
    assert point_error.max() < 3 * sigma
    assert np.degrees(res.transform.compose(truth.inverse()).rotation_angle()) < 0.5
    # The reported RMS is the RMS of the actual residuals ...
    actual = np.linalg.norm(fitted - r, axis=1)
    assert res.residual_rms == pytest.approx(np.sqrt(np.mean(actual**2)), rel=1e-9)
    assert res.residual_max == pytest.approx(actual.max(), rel=1e-9)
    assert np.allclose(res.residuals, actual)
    # ... and it matches the noise: E|res|² ≈ 3σ² (n − 2)/n for 6 fitted dof in 3n values.
    assert res.residual_rms == pytest.approx(sigma * np.sqrt(3 * (n - 2) / n), rel=0.25)


def test_planar_noisy_points_give_a_proper_rotation_not_a_reflection():
    rng = np.random.default_rng(2)
    truth = known_transform()
    r = np.c_[rng.uniform(-0.1, 0.1, (6, 2)), np.zeros(6)]
    m = truth.inverse().apply_points(r) + 1e-4 * rng.standard_normal((6, 3))
    res = estimate_rigid_transform(m, r)
    assert np.linalg.det(res.transform.rotation) == pytest.approx(1.0)
    assert np.degrees(res.transform.compose(truth.inverse()).rotation_angle()) < 1.0


def test_batched_fits_match_one_by_one_and_ignore_zero_weight_points():
    """fit_rigid_transforms: each set of a batch as estimate_rigid_transform fits it alone;
    a point of weight 0 (an occluded marker) is ignored even when NaN; a collinear set is
    flagged invalid without spoiling the others."""
    rng = np.random.default_rng(7)
    truths = [RigidTransform.from_quaternion(rotation_vector_to_quaternion(rng.normal(size=3)),
                                             rng.normal(size=3)) for _ in range(4)]
    source = np.stack([robot_points(rng, n=5) for _ in truths])
    target = np.stack([t.apply_points(s) for t, s in zip(truths, source)])
    target += 1e-4 * rng.standard_normal(target.shape)
    weights = np.ones((4, 5))
    weights[1, 3] = 0.0
    target[1, 3] = np.nan  # occluded: not used
    source[3] = np.linspace(0.0, 1.0, 5)[:, None] * [1.0, 2.0, 0.5]  # collinear
    target[3] = truths[3].apply_points(source[3])
    fits = fit_rigid_transforms(source, target, weights)
    assert fits.valid.tolist() == [True, True, True, False]
    for b in range(3):
        used = weights[b] > 0
        alone = estimate_rigid_transform(source[b, used], target[b, used]).transform
        assert np.allclose(fits.rotations[b], alone.rotation, atol=1e-12)
        assert np.allclose(fits.translations[b], alone.translation, atol=1e-12)
        assert np.allclose(fits.rotations[b], truths[b].rotation, atol=1e-2)
        assert np.linalg.det(fits.rotations[b]) == pytest.approx(1.0)
    assert np.all(np.isfinite(fits.rotations))


def test_unit_scale_and_weights():
    rng = np.random.default_rng(4)
    truth = known_transform()
    r = robot_points(rng, 8)
    m_mm = truth.inverse().apply_points(r) * 1e3
    m_mm[0] += 50.0  # a bad pair, down-weighted to zero
    w = np.ones(8)
    w[0] = 0.0
    res = estimate_rigid_transform(m_mm, r, w, mocap_unit_scale=1e-3)
    assert np.allclose(res.transform.translation, truth.translation, atol=1e-9)
    assert res.registration.n_points == 7
    assert np.allclose(res.registration.to_robot(m_mm[1:]), r[1:], atol=1e-9)
    assert np.allclose(res.registration.to_mocap(r[1:]), m_mm[1:], atol=1e-6)


@pytest.mark.parametrize(
    "mocap, message",
    [
        (np.zeros((2, 3)), "at least 3"),
        (np.outer(np.arange(5.0), [1.0, 2.0, 3.0]), "collinear"),
        (np.ones((4, 3)), "collinear"),
        (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [np.nan, 0, 0]]), "NaN"),
    ],
)
def test_degenerate_inputs_raise_clear_errors(mocap, message):
    robot = np.random.default_rng(0).standard_normal(mocap.shape)
    with pytest.raises(RegistrationError, match=message):
        estimate_rigid_transform(mocap, robot)


def test_a_point_file_with_a_column_twice_or_a_long_row_is_refused(tmp_path):
    from soft_inverse_ros.core.mocap.registration import read_point_pairs

    header = "mocap_x,mocap_y,mocap_z,robot_x,robot_y,robot_z"
    rows = "\n".join(f"{i},{i * i},{i + 2},{i},{i * i},{i + 2}" for i in range(4))
    (tmp_path / "ok.csv").write_text(f"{header}\n{rows}\n")
    assert read_point_pairs(tmp_path / "ok.csv")[0].shape == (4, 3)
    (tmp_path / "twice.csv").write_text(f"{header},mocap_x\n" + rows.replace("\n", ",5\n") + ",5\n")
    with pytest.raises(RegistrationError, match=r"columns \['mocap_x'\] appear more than once"):
        read_point_pairs(tmp_path / "twice.csv")
    (tmp_path / "long.csv").write_text(f"{header}\n{rows}\n1,2,3,4,5,6,7,8\n")
    with pytest.raises(RegistrationError, match="data row 5 has 8 fields, the header names 6"):
        read_point_pairs(tmp_path / "long.csv")


def test_yaml_round_trip_and_update_keeps_other_keys(tmp_path):
    rng = np.random.default_rng(5)
    truth = known_transform()
    r = robot_points(rng)
    res = estimate_rigid_transform(truth.inverse().apply_points(r), r, parent_frame="world_base")
    out = save_registration(res.registration, tmp_path / "reg.yaml")
    loaded = load_registration(out)
    assert loaded.parent_frame == "world_base"
    assert np.allclose(loaded.transform.rotation, truth.rotation, atol=1e-9)
    assert np.allclose(loaded.transform.translation, truth.translation, atol=1e-12)

    robot_cfg = tmp_path / "robot.yaml"
    robot_cfg.write_text(yaml.safe_dump({"name": "diamond", "mesh": {"path": "x.vtk"}}))
    save_registration(res.registration, robot_cfg, update=True)
    data = yaml.safe_load(robot_cfg.read_text())
    assert data["name"] == "diamond" and data["mesh"] == {"path": "x.vtk"}
    assert np.allclose(load_registration(robot_cfg).transform.rotation, truth.rotation, atol=1e-9)


def test_yaml_block_validation_names_the_key():
    with pytest.raises(ValueError, match="rotation_xyzw"):
        FrameRegistration.from_dict({"translation": [0, 0, 0], "rotation_xyzw": [0, 0, 0, 2]})
    with pytest.raises(ValueError, match="translation"):
        FrameRegistration.from_dict({"rotation_xyzw": [0, 0, 0, 1]})
    with pytest.raises(ValueError, match="unknown keys"):
        FrameRegistration.from_dict(
            {"translation": [0, 0, 0], "rotation_xyzw": [0, 0, 0, 1], "scale": 2}
        )


def write_pairs(path, mocap, robot):
    lines = ["# calibration, mocap in mm", "name,mocap_x,mocap_y,mocap_z,robot_x,robot_y,robot_z"]
    for i, (a, b) in enumerate(zip(mocap, robot)):
        lines.append(f"p{i}," + ",".join(f"{v:.9f}" for v in (*a, *b)))
    path.write_text("\n".join(lines) + "\n")


def test_register_frames_command_writes_and_updates(tmp_path, capsys):
    rng = np.random.default_rng(6)
    truth = known_transform()
    r = robot_points(rng, 10)
    m_mm = truth.inverse().apply_points(r) * 1e3 + 0.1 * rng.standard_normal((10, 3))
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, m_mm, r)

    out = tmp_path / "mocap_registration.yaml"
    assert main(["register-frames", str(pairs), "--out", str(out), "--mocap-unit", "mm"]) == 0
    printed = capsys.readouterr().out
    assert "residual RMS" in printed
    reg = load_registration(out)
    assert reg.mocap_unit_scale == 1e-3
    assert np.degrees(reg.transform.compose(truth.inverse()).rotation_angle()) < 0.2
    assert np.linalg.norm(reg.transform.translation - truth.translation) < 1e-3
    assert 0 < reg.residual_rms < 0.5e-3

    robot_cfg = tmp_path / "robot.yaml"
    robot_cfg.write_text("name: finger\n")
    assert main(["register-frames", str(pairs), "--robot", str(robot_cfg),
                 "--mocap-unit", "mm", "--json"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    import json

    assert json.loads(summary)["n_points"] == 10
    data = yaml.safe_load(robot_cfg.read_text())
    assert data["name"] == "finger" and REGISTRATION_KEY in data

    # A gate on the residual refuses a bad calibration (mocap given in the wrong unit).
    refused = tmp_path / "refused.yaml"
    assert main(["register-frames", str(pairs), "--out", str(refused), "--max-rms", "0.001"]) == 1
    assert not refused.exists()


def test_register_frames_command_rejects_collinear_points(tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    line = np.outer(np.arange(4.0), [0.1, 0.0, 0.0])
    write_pairs(pairs, line, line)
    assert main(["register-frames", str(pairs), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "collinear" in capsys.readouterr().err


def test_update_replaces_only_the_block_and_keeps_comments(tmp_path):
    cfg = tmp_path / "mocap.yaml"
    cfg.write_text(
        "# header comment\n"
        "mocap:\n  backend: simulated  # inline comment\n"
        "mocap_registration:\n  translation: [0, 0, 0]\n  rotation_xyzw: [0, 0, 0, 1]\n"
        "# about the next key\n"
        "other: 1\n"
    )
    reg = FrameRegistration(known_transform(), n_points=3, residual_rms=0.0, residual_max=0.0)
    save_registration(reg, cfg, update=True)
    text = cfg.read_text()
    assert text.startswith("# header comment\nmocap:\n  backend: simulated  # inline comment\n")
    assert text.endswith("# about the next key\nother: 1\n")
    loaded = load_registration(cfg)
    assert np.allclose(loaded.transform.translation, known_transform().translation)
    assert loaded.n_points == 3
    # Appended when absent.
    cfg.write_text("name: x")
    save_registration(reg, cfg, update=True)
    assert yaml.safe_load(cfg.read_text())["name"] == "x"
    assert load_registration(cfg).n_points == 3


def test_registration_saved_into_a_robot_description_keeps_it_loadable(tmp_path, capsys):
    import shutil

    from soft_inverse_ros.core.config_files import resolve_robot
    from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description

    rng = np.random.default_rng(7)
    truth = known_transform()
    r = robot_points(rng, 8)
    pairs = tmp_path / "pairs.csv"
    write_pairs(pairs, truth.inverse().apply_points(r), r)
    robot_cfg = tmp_path / "builtin_diamond.yaml"
    shutil.copy(resolve_robot("builtin_diamond"), robot_cfg)
    assert main(["register-frames", str(pairs), "--robot", str(robot_cfg)]) == 0
    capsys.readouterr()
    desc = load_robot_description(robot_cfg)
    assert desc.actuator_names == ("cable_left", "cable_back", "cable_right", "cable_front")
    assert np.linalg.norm(load_registration(robot_cfg).transform.translation
                          - truth.translation) < 1e-6  # YAML keeps ~9 digits
    # a broken block is reported by the description loader, naming the key
    text = robot_cfg.read_text().replace(f"{REGISTRATION_KEY}:", f"{REGISTRATION_KEY}:\n  bogus: 1\n", 1)
    robot_cfg.write_text(text)
    with pytest.raises(DescriptionError, match=REGISTRATION_KEY):
        load_robot_description(robot_cfg)


def _good_pairs(path, mocap_scale: float = 1.0, bom: bool = False) -> None:
    """8 pairs of a known transform (mocap columns multiplied by ``mocap_scale``)."""
    rng = np.random.default_rng(11)
    r = robot_points(rng, 8)
    m = known_transform().inverse().apply_points(r) * mocap_scale
    if not bom:
        write_pairs(path, m, r)
        return
    rows = [",".join(f"{v:.9f}" for v in (*a, *b)) for a, b in zip(m, r)]  # as Excel saves it
    path.write_text("\ufeffmocap_x,mocap_y,mocap_z,robot_x,robot_y,robot_z\n" + "\n".join(rows) + "\n",
                    encoding="utf-8")


def test_a_wrong_unit_is_refused_without_max_rms(tmp_path, capsys):
    """mocap columns in mm with the default --mocap-unit m: 'residual RMS: 93136.8351 mm', written."""
    _good_pairs(tmp_path / "pairs.csv", mocap_scale=1e3)
    out = tmp_path / "reg.yaml"
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--out", str(out)]) == 1
    assert "exceeds --max-rms 0.01 m" in capsys.readouterr().err and not out.exists()
    # accepted explicitly with a larger bound
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--out", str(out), "--max-rms", "1e6"]) == 0
    assert out.exists()


def test_a_csv_with_a_byte_order_mark_is_read(tmp_path, capsys):
    _good_pairs(tmp_path / "pairs.csv", bom=True)
    assert (tmp_path / "pairs.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--out", str(tmp_path / "reg.yaml")]) == 0
    assert load_registration(tmp_path / "reg.yaml").n_points == 8


def _shipped_mocap_configs(tmp_path):
    import shutil

    from soft_inverse_ros.core.config_files import find_config

    cfg = tmp_path / "cfg"
    cfg.mkdir()
    for name in ("mocap_replay.yaml", "mocap_vicon.yaml"):
        shutil.copy(find_config(name), cfg / name)
    return cfg


def test_config_update_is_what_the_mocap_loader_reads(tmp_path, capsys):
    from soft_inverse_ros.core.mocap.config import load_mocap_config

    cfg = _shipped_mocap_configs(tmp_path)
    _good_pairs(tmp_path / "pairs.csv")
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--config", str(cfg / "mocap_vicon.yaml")]) == 0
    loaded = load_mocap_config(cfg / "mocap_vicon.yaml").registration
    assert loaded.n_points == 8
    assert np.allclose(loaded.transform.translation, known_transform().translation, atol=1e-6)


def test_config_whose_mocap_registration_entry_shadows_the_block_is_refused(tmp_path, capsys):
    """mocap_replay.yaml names mocap_vicon.yaml under mocap.registration: the appended
    top-level block was 'written' and ignored by the loader (identity, n_points 0)."""
    cfg = _shipped_mocap_configs(tmp_path)
    _good_pairs(tmp_path / "pairs.csv")
    before = (cfg / "mocap_replay.yaml").read_text()
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--config", str(cfg / "mocap_replay.yaml")]) == 2
    err = capsys.readouterr().err
    assert "mocap.registration entry takes precedence" in err and "(mocap_vicon.yaml)" in err
    assert err.count("\n") == 1 and (cfg / "mocap_replay.yaml").read_text() == before


def test_config_the_loader_would_refuse_is_not_written(tmp_path, capsys):
    """--robot-frame world into a config whose mocap.robot_frame is base_link."""
    cfg = _shipped_mocap_configs(tmp_path)
    _good_pairs(tmp_path / "pairs.csv")
    before = (cfg / "mocap_vicon.yaml").read_text()
    assert main(["register-frames", str(tmp_path / "pairs.csv"), "--config", str(cfg / "mocap_vicon.yaml"),
                 "--robot-frame", "world"]) == 2
    err = capsys.readouterr().err
    assert "mocap.robot_frame is 'base_link' but the registration maps into 'world'" in err
    assert str(cfg / "mocap_vicon.yaml") in err and ".register-frames" not in err
    assert (cfg / "mocap_vicon.yaml").read_text() == before
    assert sorted(p.name for p in cfg.iterdir()) == ["mocap_replay.yaml", "mocap_vicon.yaml"]
