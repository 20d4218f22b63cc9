"""Building a reduced contact basis: sweep specs and the posture design (core/contact/sweep.py),
snapshot columns, the basis file."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.core.contact.basis_builder import forces_per_node
from soft_inverse_ros.core.contact.basis_file import (
    BasisFile,
    BasisFileError,
    load_basis,
    rest_checksum,
    save_basis,
)
from soft_inverse_ros.core.contact.sweep import ActuatorRange, Sweep, SweepError, parse_sweep, parse_sweep_spec
from soft_inverse_ros.core.model.snapshot import ActuatorKind

KINDS = {"cable": ActuatorKind.CABLE, "cable2": ActuatorKind.CABLE, "cavity": ActuatorKind.PRESSURE,
         "push": ActuatorKind.FORCE}


def test_a_spec_is_read_in_si_units():
    r = parse_sweep_spec("cable=0:55:0.05mm", KINDS)
    assert (r.name, r.low, r.high) == ("cable", 0.0, pytest.approx(0.055))
    assert r.step == pytest.approx(5e-5) and r.spec == "cable=0:55:0.05mm"
    p = parse_sweep_spec("cavity=10:200 kPa", KINDS)
    assert (p.low, p.high, p.step) == (pytest.approx(1e4), pytest.approx(2e5), None)
    f = parse_sweep_spec("push=-2:3N", KINDS)
    assert (f.low, f.high) == (-2.0, 3.0)


@pytest.mark.parametrize("spec, message", [
    ("cable=0:55", "give the unit of the length"),
    ("cable=0:55kPa", "unit 'kPa' is a pressure, expected a length"),
    ("cavity=0:2mm", "is a length, expected a pressure"),
    ("finger=0:55mm", "unknown actuator 'finger'"),
    ("cable=55:0mm", "LO must be < HI"),
    ("cable=0:55:0mm", "STEP must be > 0"),
    ("cable=-5:55mm", "cables only pull"),
    ("cable 0..55mm", "expected NAME=LO:HI[:STEP]UNIT"),
    ("cable=0:55:0.05:1mm", "expected NAME=LO:HI[:STEP]UNIT"),
    ("cable=0:55furlong", "unknown unit 'furlong'"),
])
def test_bad_specs_are_one_clear_line(spec, message):
    with pytest.raises(SweepError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        parse_sweep([spec], KINDS)
    assert "\n" not in str(err.value) and spec in str(err.value)


def test_the_controllers_model_is_swept_in_efforts_and_postures_can_be_held():
    r = parse_sweep_spec("cable=0:5:0.02N", KINDS, efforts=True)  # a cable's tension
    assert (r.high, r.step) == (5.0, pytest.approx(0.02))
    with pytest.raises(SweepError, match="unit 'mm' is a length, expected a force"):
        parse_sweep_spec("cable=0:5mm", KINDS, efforts=True)
    with pytest.raises(SweepError, match="is a force, expected a length"):
        parse_sweep_spec("cable=0:5N", KINDS)
    (inputs, first), = parse_sweep(["cable=0:5:1N"], KINDS, hold=3, efforts=True).ramps()
    np.testing.assert_allclose(inputs[:, 0], [0, 1, 2, 3, 4, 5, 5, 5, 5])
    assert first == 0
    with pytest.raises(SweepError, match="--hold must be an integer >= 0"):
        parse_sweep(["cable=0:5:1N"], KINDS, hold=-1, efforts=True)


def test_bad_sweeps():
    with pytest.raises(SweepError, match="at least one --sweep"):
        parse_sweep([], KINDS)
    with pytest.raises(SweepError, match=r"\['cable'\] given more than once"):
        parse_sweep(["cable=0:5mm", "cable=0:6mm"], KINDS)
    with pytest.raises(SweepError, match="plant steps"):
        parse_sweep(["cable=0:55000:0.05mm"], KINDS)


def test_one_actuator_ramps_from_rest_and_records_from_lo():
    sweep = parse_sweep(["cable=10:55:0.05mm"], KINDS)
    (inputs, first), = sweep.ramps()
    assert inputs.shape == (1101, 1) and inputs[0, 0] == 0.0 and inputs[-1, 0] == pytest.approx(0.055)
    assert np.diff(inputs[:, 0]).max() <= 5e-5 * (1 + 1e-9)
    assert inputs[first, 0] == pytest.approx(0.010) and inputs[first - 1, 0] < 0.010
    default = parse_sweep(["cable=0:20mm"], KINDS, default_steps=40)
    assert default.ramps()[0][0].shape == (41, 1) and default.ramps()[0][1] == 0
    both_signs = parse_sweep(["push=-2:3:0.5N"], KINDS).ramps()
    assert [r[0][-1, 0] for r in both_signs] == [3.0, -2.0]


def test_several_actuators_follow_a_two_level_hadamard_design():
    sweep = parse_sweep(["cable=0:20:1mm", "cable2=5:10:1mm", "cavity=0:100:10kPa"], KINDS)
    postures = sweep.postures()
    assert postures.shape == (4, 3)  # order-4 Hadamard: 4 runs for 3 factors
    low, high = np.array([0.0, 0.005, 0.0]), np.array([0.02, 0.01, 1e5])
    signs = np.where(np.isclose(postures, high), 1, np.where(np.isclose(postures, low), -1, 0))
    assert (signs != 0).all()
    assert (signs.sum(axis=0) == 0).all()  # each factor balanced: 2 runs low, 2 high
    assert (signs.T @ signs == 4 * np.eye(3)).all()  # orthogonal factors
    ramps = sweep.ramps()
    for (inputs, first), target in zip(ramps, postures):
        assert first == 0 and (inputs[0] == 0).all()
        np.testing.assert_allclose(inputs[-1], target)
        steps = len(inputs) - 1
        assert steps == max(1, int(np.ceil(max(abs(target[0]) / 1e-3, abs(target[1]) / 1e-3,
                                                abs(target[2]) / 1e4) - 1e-9)))
    seven = Sweep(tuple(ActuatorRange(f"a{i}", 0.0, 1.0, None, "") for i in range(7)))
    assert seven.postures().shape == (8, 7)


def test_forces_are_summed_per_contact_vertex():
    class Stats:
        contacts = 3
        forces = np.array([1.0, 2.0, 4.0])

        class contact_set:  # noqa: N801 - mimics ContactSet
            vertex = np.array([7, 3, 7])

    index = np.full(10, -1)
    index[[3, 7]] = [0, 1]
    np.testing.assert_allclose(forces_per_node(Stats, index), [2.0, 5.0])
    np.testing.assert_allclose(forces_per_node(None, index), [0.0, 0.0])


def _basis_file(rest: np.ndarray, k: int = 3) -> BasisFile:
    rng = np.random.default_rng(0)
    nodes = np.array([1, 4, 5, 9])
    psi = rng.random((4, k))
    return BasisFile(nodes=nodes, psi=psi / np.linalg.norm(psi, axis=0), robot="toy", mesh_nodes=len(rest),
                     rest_checksum=rest_checksum(rest), sweep=("cable=0:5mm",), nnmf="hals", snapshots=12,
                     error_vs_k={1: 0.3, 2: 0.1, 3: 0.01}, simulator="model", hold=7)


def test_basis_file_round_trip(tmp_path):
    rest = np.random.default_rng(1).random((10, 3))
    data = _basis_file(rest)
    path = save_basis(tmp_path / "sub" / "toy", data)
    assert path.name == "toy.npz"
    back = load_basis(path)
    np.testing.assert_array_equal(back.nodes, data.nodes)
    np.testing.assert_array_equal(back.psi, data.psi)
    assert (back.robot, back.mesh_nodes, back.sweep, back.nnmf, back.snapshots, back.k) == \
        ("toy", 10, ("cable=0:5mm",), "hals", 12, 3)
    assert (back.simulator, back.hold) == ("model", 7)
    assert back.error_vs_k == data.error_vs_k
    back.check_mesh(rest.copy(), where="test")  # the same mesh passes
    basis = back.basis()
    np.testing.assert_array_equal(basis.rows_for(np.array([9, 2])), np.vstack([data.psi[3], np.zeros(3)]))


def test_a_basis_for_another_mesh_is_refused(tmp_path):
    rest = np.random.default_rng(1).random((10, 3))
    back = load_basis(save_basis(tmp_path / "toy.npz", _basis_file(rest)))
    with pytest.raises(BasisFileError, match="mesh of 10 nodes, this mesh has 11 nodes: rebuild it"):
        back.check_mesh(np.vstack([rest, rest[:1]]), where="here")
    moved = rest.copy()
    moved[3, 0] += 1e-6
    with pytest.raises(BasisFileError, match="this mesh has other rest positions"):
        back.check_mesh(moved, where="here")
    back.check_mesh(rest + 1e-16, where="here")  # round-off far below the 1 nm rounding: the same mesh


def test_bad_basis_files_are_one_line(tmp_path):
    with pytest.raises(BasisFileError, match="not found"):
        load_basis(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(BasisFileError, match="not an .npz archive"):
        load_basis(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(BasisFileError, match="not a contact basis file"):
        load_basis(tmp_path / "other.npz")
    path = save_basis(tmp_path / "neg.npz", _basis_file(np.zeros((10, 3))))
    with np.load(path) as z:
        fields = dict(z)
    fields["psi"] = -fields["psi"]
    np.savez(path, **fields)
    with pytest.raises(BasisFileError, match="psi is not finite and >= 0"):
        load_basis(path)


def test_edited_or_damaged_basis_files_are_one_line(tmp_path):
    rest = np.random.default_rng(1).random((10, 3))
    path = save_basis(tmp_path / "good.npz", _basis_file(rest))
    with np.load(path) as z:
        good = dict(z)

    def edited(name, **changes):
        out = tmp_path / name
        np.savez(out, **{**good, **changes})
        return out

    (tmp_path / "adir.npz").mkdir()
    with pytest.raises(BasisFileError, match="is a directory"):
        load_basis(tmp_path / "adir.npz")
    np.save(tmp_path / "plain.npy", np.zeros(3))
    (tmp_path / "plain.npy").rename(tmp_path / "plain.npz")
    with pytest.raises(BasisFileError, match="not an .npz archive"):
        load_basis(tmp_path / "plain.npz")
    with pytest.raises(BasisFileError, match="pickled Python objects"):
        load_basis(edited("objects.npz", psi=np.array([object()], dtype=object)))
    psi = good["psi"]
    cases = [
        ({"format": np.str_("other")}, "format entry 'other'"),
        ({"version": np.array([1, 1])}, "its version entry is int64 of shape .2,."),
        ({"version": np.float64(1.7)}, "its version entry is float64"),
        ({"mesh_nodes": np.str_("abc")}, "its mesh_nodes entry is <U3"),
        ({"robot": np.array(["a", "b"])}, "its robot entry"),
        ({"simulator": np.str_("bogus")}, "its simulator is 'bogus'"),
        ({"nnmf": np.str_("bogus")}, "its nnmf is 'bogus'"),
        ({"snapshots": np.int64(-5)}, "snapshots -5"),
        ({"nodes": np.array([1, 4, 5, 10**12])}, "not distinct ids of the mesh's 10 nodes"),
        ({"nodes": np.array([1, 4, 4, 9])}, "not distinct ids"),
        ({"nodes": np.array([1.0, 4.5, 5.0, 9.0])}, "not a list of node ids"),
        ({"psi": psi.astype(complex)}, "not .4, k >= 1. real numbers"),
        ({"psi": np.zeros_like(psi)}, "columns are not unit vectors"),
        ({"psi": 2 * psi}, "columns are not unit vectors"),
        ({"error": np.full(3, np.nan)}, "error curve is not finite"),
        ({"error": np.zeros((3, 1))}, "error_k and error are not two lists"),
        ({"sweep": np.zeros((2, 2), dtype="<U3")}, "sweep entry is not a list of strings"),
        ({"nodes": np.array([0, 4, 5, 9])}, "do not match the checksum"),
    ]
    for i, (changes, needle) in enumerate(cases):
        with pytest.raises(BasisFileError, match=needle):
            load_basis(edited(f"edit{i}.npz", **changes))
    # a file written before the collision model and the checksum were kept: read without them
    older = {k: v for k, v in good.items() if k not in ("collision_model", "contents_sha256")}
    np.savez(tmp_path / "older.npz", **older)
    back = load_basis(tmp_path / "older.npz")
    assert back.collision_model == "" and back.k == 3


def test_a_basis_of_another_collision_model_is_refused():
    from types import SimpleNamespace

    from soft_inverse_ros.core.contact.basis_file import collision_model_of

    rest = np.random.default_rng(1).random((10, 3))
    itself = SimpleNamespace(self_collision=True, obstacles=())
    data = dataclasses.replace(_basis_file(rest), collision_model=collision_model_of(itself))
    data.check_collision(itself, where="here")
    floor = SimpleNamespace(kind="plane", params=(("point", (0.0, 0.0, np.float64(0.5))), ("normal", (0, 0, 1))),
                            motion=None)
    plane = SimpleNamespace(self_collision=False, obstacles=(floor,))
    with pytest.raises(BasisFileError, match=r"here: the basis was built with another collision model "
                                             r"\(self_collision=True, obstacles: none\) than this description's "
                                             r"\(self_collision=False, obstacles: plane\(point=\(0, 0, 0.5\), "
                                             r"normal=\(0, 0, 1\)\)\)"):
        data.check_collision(plane, where="here")
    dataclasses.replace(data, collision_model="").check_collision(plane, where="here")  # an older file


@pytest.mark.parametrize("specs, options", [
    (["cable=0:55mm"], {"default_steps": 1_000_000_000}),
    (["cable=0:55:1e-12mm"], {}),
    (["cable=0:55:1mm"], {"hold": 1_000_000_000}),
    (["cable=0:20:1e-12mm", "cavity=0:100:10kPa"], {}),
])
def test_a_huge_step_count_is_refused_before_any_ramp_is_built(monkeypatch, specs, options):
    def never(self):
        raise AssertionError("the ramps were built")

    monkeypatch.setattr(Sweep, "ramps", never)
    with pytest.raises(SweepError, match=r"plant steps, more than 200000 \(the limit\)") as err:
        parse_sweep(specs, KINDS, **options)
    assert "\n" not in str(err.value)


def test_a_step_count_beyond_a_float_is_refused():
    with pytest.raises(SweepError, match=r"STEP .* gives more than 200000 plant steps \(the limit\)"):
        parse_sweep(["cable=0:55:1e-318mm"], KINDS)


def test_the_step_count_is_the_ramps_length():
    for specs, options in ((["cable=10:55:0.05mm"], {"hold": 7}), (["push=-2:3:0.5N"], {}),
                           (["cable=0:20:1mm", "cable2=5:10:1mm", "cavity=0:100:10kPa"], {"hold": 2}),
                           (["cable=0:20mm"], {"default_steps": 40})):
        sweep = parse_sweep(specs, KINDS, **options)
        assert sweep.total_steps() == sum(len(inputs) for inputs, _ in sweep.ramps())
