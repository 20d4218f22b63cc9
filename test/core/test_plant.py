"""SoftRobotPlant: the dynamic FEM plant (coarse built-in Diamond, 695 nodes, for speed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.sim.plant import PlantConfig, PlantConfigError, SoftRobotPlant, _plant_mesh
from soft_inverse_ros.core.model.robot_model import RobotModel

CELL = 0.011  # 695 nodes / 1560 tets


def make_plant(**overrides) -> SoftRobotPlant:
    cfg = dict(robot="builtin_diamond", mesh_cell_size=CELL, dt=0.01, solver="auto")
    cfg.update(overrides)
    return SoftRobotPlant.from_config(PlantConfig(**cfg))


def settle(plant: SoftRobotPlant, strokes, seconds: float) -> None:
    for _ in range(int(round(seconds / plant.config.dt))):
        plant.step(cable_strokes=strokes)


def test_mesh_override_and_names():
    plant = make_plant()
    assert plant.mesh.n_points == 695
    assert plant.cable_names == ("cable_left", "cable_back", "cable_right", "cable_front")
    assert plant.pressure_names == () and plant.force_names == ()
    assert plant.effector_row_names == ("tip.x", "tip.y", "tip.z")
    assert np.isclose(plant.total_mass, 0.5)  # total_mass spread over this mesh
    assert np.allclose(plant.effector_position, [0, 0, 0.125])
    assert plant.time == 0.0


def test_static_limit_matches_the_quasi_static_model():
    """A long damped run under constant strokes ends at the RobotModel equilibrium (same
    mesh, same material) under the plant's final cable tensions."""
    plant = make_plant(rayleigh_mass=30.0, rayleigh_stiffness=0.002, newton_iterations=3)
    plant.equilibrate(slack_cables=True)
    strokes = plant.cable_strokes + np.array([0.004, 0.0, 0.0, 0.002])
    settle(plant, strokes, 3.0)
    state = plant.state()
    assert state.kinetic_energy < 1e-12
    assert state.cable_tensions[0] > 0.5 and state.cable_tensions[3] > 0.1
    model = RobotModel.from_description(plant.description, mesh=plant.mesh, solver="scipy",
                                        factor_reuse=False)
    model.equilibrate(state.efforts, from_rest=True)
    tip_err = np.linalg.norm(model.effector_position - state.effector_position)
    assert tip_err < 2e-6, tip_err
    assert np.abs(model.positions - state.positions).max() < 5e-6
    # and the plant's own static solve agrees
    plant.equilibrate()
    assert np.linalg.norm(plant.effector_position - state.effector_position) < 2e-6


def test_equilibrate_with_slack_cables_matches_the_gravity_equilibrium():
    plant = make_plant()
    plant.equilibrate(slack_cables=True)
    assert np.allclose(plant.efforts(), 0.0)
    model = RobotModel.from_description(plant.description, mesh=plant.mesh, solver="scipy",
                                        factor_reuse=False)
    model.equilibrate(np.zeros(4), from_rest=True)
    assert np.linalg.norm(model.effector_position - plant.effector_position) < 1e-7
    assert plant.effector_position[2] < 0.125 - 1e-3  # it sagged under gravity
    # the strokes are the cable shortenings there: each cable just taut
    assert np.allclose(plant.cable_strokes, model.actuator_stroke, atol=1e-9)
    # standing still: a step keeps it there
    before = plant.effector_position
    plant.step()
    assert np.linalg.norm(plant.effector_position - before) < 1e-7


def total_energy(plant: SoftRobotPlant) -> float:
    return plant.kinetic_energy() + plant.potential_energy()


def free_oscillation(plant: SoftRobotPlant, seconds: float) -> np.ndarray:
    """Released from a pulled static state: energy above the final equilibrium [J] during
    the free motion."""
    plant.equilibrate(slack_cables=True)
    e_rest = total_energy(plant)  # the equilibrium it returns to (cables slack there)
    slack = plant.cable_strokes
    plant.set_inputs(cable_strokes=slack + np.array([0.006, 0, 0, 0]))
    plant.equilibrate()
    plant.set_inputs(cable_strokes=slack - 0.01)  # every cable slack: free motion
    energies = [total_energy(plant)]
    for _ in range(int(round(seconds / plant.config.dt))):
        plant.step()
        energies.append(total_energy(plant))
    return np.asarray(energies) - e_rest


def test_damping_dissipates_energy():
    damped = free_oscillation(
        make_plant(rayleigh_mass=5.0, rayleigh_stiffness=0.01, newton_iterations=6,
                   newton_rtol=1e-8, tangent_every=1), 0.6)
    undamped = free_oscillation(
        make_plant(rayleigh_mass=0.0, rayleigh_stiffness=0.0, newton_iterations=6,
                   newton_rtol=1e-8, tangent_every=1), 0.6)
    e0 = damped[0]
    assert e0 == pytest.approx(undamped[0]) and e0 > 1e-4
    assert np.all(damped > -1e-9 * e0)  # never below the equilibrium
    assert np.diff(damped).max() < 1e-6 * e0  # never gains energy (implicit Euler + C)
    assert np.diff(undamped).max() < 1e-6 * e0
    assert undamped[-1] < 0.9 * e0  # implicit Euler alone dissipates a little ...
    assert damped[-1] < 0.5 * undamped[-1]  # ... Rayleigh damping much more


def test_free_oscillation_actually_oscillates_and_decays():
    plant = make_plant(rayleigh_mass=2.0, rayleigh_stiffness=0.002, dt=0.005)
    plant.equilibrate(slack_cables=True)
    rest_tip = plant.effector_position.copy()
    slack = plant.cable_strokes
    plant.set_inputs(cable_strokes=slack + np.array([0.006, 0, 0, 0]))
    plant.equilibrate()
    plant.set_inputs(cable_strokes=slack - 0.01)
    y = []
    for _ in range(200):  # 1 s
        y.append(plant.step().effector_position[1] - rest_tip[1])
    y = np.asarray(y)
    assert np.any(np.diff(np.sign(y)) != 0)  # crosses its rest position
    assert abs(y[-40:]).max() < 0.5 * abs(y[:40]).max()


def test_slack_cable_carries_no_tension():
    plant = make_plant()
    plant.equilibrate(slack_cables=True)
    slack = plant.cable_strokes
    state = plant.step(cable_strokes=slack - 0.005)  # servos let 5 mm out
    assert np.all(state.cable_tensions == 0.0)
    assert np.all(state.efforts == 0.0)
    # pulled: tension = k (s - delta) > 0 on that cable only
    state = plant.step(cable_strokes=slack + np.array([0.003, -0.005, -0.005, -0.005]))
    k = plant.cable_stiffness
    expected = k * np.maximum(0.0, state.cable_strokes - state.actuator_strokes)
    assert np.allclose(state.cable_tensions, expected)
    assert state.cable_tensions[0] > 0 and np.all(state.cable_tensions[1:] == 0)


def tip_response(**overrides) -> tuple[float, float, float]:
    """(gravity sag [m], tip displacement for a 4 mm pull [m], final tension [N])."""
    plant = make_plant(rayleigh_mass=30.0, **overrides)
    plant.equilibrate(slack_cables=True)
    sag = 0.125 - plant.effector_position[2]
    tip0 = plant.effector_position.copy()
    plant.set_inputs(cable_strokes=plant.cable_strokes + np.array([0.004, 0, 0, 0]))
    plant.equilibrate()
    return sag, float(np.linalg.norm(plant.effector_position - tip0)), float(plant.efforts()[0])


def test_mismatch_parameters_change_the_response_in_the_expected_direction():
    sag1, move1, t1 = tip_response()
    sag2, move2, t2 = tip_response(young_modulus_scale=2.0)
    assert sag2 < 0.7 * sag1  # stiffer material sags less under gravity
    assert t2 > t1  # ... and needs more tension for the same stroke
    assert move2 < move1  # ... of which the cable spring takes a larger part
    _, move_soft_cable, t_soft = tip_response(cable_stiffness=200.0)
    assert move_soft_cable < 0.8 * move1 and t_soft < t1  # compliant cable: less motion
    sag_fine, move_fine, _ = tip_response(mesh_cell_size=0.0105)
    assert sag_fine != pytest.approx(sag1, rel=1e-3)  # another mesh: another robot
    assert move_fine == pytest.approx(move1, rel=0.5)  # ... but the same kind of robot


def test_consistent_mass_behaves_like_lumped_mass():
    lumped = make_plant(rayleigh_mass=5.0)
    consistent = make_plant(rayleigh_mass=5.0, mass="consistent")
    for plant in (lumped, consistent):
        plant.equilibrate(slack_cables=True)
        settle(plant, plant.cable_strokes + np.array([0.004, 0, 0, 0]), 0.3)
    d = np.linalg.norm(lumped.effector_position - consistent.effector_position)
    moved = np.linalg.norm(lumped.effector_position - np.array([0, 0, 0.125]))
    assert d < 0.1 * moved


def test_markers_follow_the_mesh_like_the_effector():
    plant = make_plant()
    markers = np.array([[0.0, 0.0, 0.125], [0.0, 0.0, 0.128]])
    assert np.allclose(plant.marker_positions(markers), markers)
    plant.equilibrate(slack_cables=True)
    settle(plant, plant.cable_strokes + np.array([0.004, 0, 0, 0]), 0.1)
    pos = plant.marker_positions(markers)
    assert np.allclose(pos[0], plant.effector_position, atol=1e-12)
    assert np.linalg.norm(pos[1] - markers[1]) > 1e-4
    with pytest.raises(ValueError, match="outside the mesh"):
        plant.marker_positions(np.array([[1.0, 1.0, 1.0]]))


def test_reset_and_time():
    plant = make_plant()
    state = plant.step(dt=0.02, cable_strokes=[0.002, 0, 0, 0])
    assert state.time == pytest.approx(0.02)
    assert plant.time == pytest.approx(0.02)
    plant.reset()
    assert plant.time == 0.0 and np.all(plant.cable_strokes == 0)
    assert np.allclose(plant.positions, plant.fem.rest_points)
    assert plant.kinetic_energy() == 0.0


def test_substeps_split_the_step():
    one = make_plant(rayleigh_mass=5.0, newton_iterations=5, newton_rtol=1e-9, tangent_every=1)
    four = make_plant(rayleigh_mass=5.0, newton_iterations=5, newton_rtol=1e-9, tangent_every=1,
                      substeps=4)
    fine = make_plant(rayleigh_mass=5.0, newton_iterations=5, newton_rtol=1e-9, tangent_every=1,
                      dt=0.0025)
    for p in (one, four, fine):
        p.equilibrate(slack_cables=True)
    pull = one.cable_strokes + np.array([0.004, 0, 0, 0])
    for _ in range(3):
        one.step(cable_strokes=pull)
        four.step(cable_strokes=pull)
    for _ in range(12):
        fine.step(cable_strokes=pull)
    assert np.allclose(four.effector_position, fine.effector_position, atol=1e-9)
    assert not np.allclose(one.effector_position, fine.effector_position, atol=1e-6)


def test_bad_configuration_is_named():
    with pytest.raises(PlantConfigError, match="dt"):
        PlantConfig(dt=0.0)
    with pytest.raises(PlantConfigError, match="cable_stiffness"):
        PlantConfig(cable_stiffness=float("inf"))
    with pytest.raises(PlantConfigError, match="mass"):
        PlantConfig(mass="diagonal")
    with pytest.raises(PlantConfigError, match="substeps"):
        PlantConfig(substeps=0)
    with pytest.raises(PlantConfigError, match="young_modulus_scale"):
        PlantConfig(young_modulus_scale=-1.0)
    with pytest.raises(PlantConfigError, match="mesh_cell_size"):
        PlantConfig(mesh_cell_size=0.01, mesh_file="x.vtk")
    with pytest.raises(PlantConfigError, match="mesh_file"):
        make_plant(mesh_cell_size=0.0, mesh_file="/nonexistent/robot.vtk")
    desc = load_robot_description("builtin_diamond")
    file_desc = dataclasses.replace(
        desc, mesh=dataclasses.replace(desc.mesh, builtin=None, builtin_params={},
                                       file=__import__("pathlib").Path("/x.vtk")))
    # a robot whose mesh is a file keeps it: mesh_cell_size regenerates built-in meshes only
    assert _plant_mesh(file_desc, PlantConfig(mesh_cell_size=0.01)).mesh == file_desc.mesh
    assert _plant_mesh(desc, PlantConfig(mesh_cell_size=0.01)).mesh.builtin_params[
        "cell_size"] == 0.01


def test_bad_inputs_are_rejected_and_leave_the_inputs_unchanged():
    plant = make_plant()
    plant.set_inputs(cable_strokes=[0.001, 0, 0, 0])
    with pytest.raises(ValueError, match="cable_strokes: expected 4"):
        plant.step(cable_strokes=[0.0, 0.0])
    with pytest.raises(ValueError, match="finite"):
        plant.step(cable_strokes=[np.nan, 0, 0, 0])
    with pytest.raises(ValueError, match="pressures"):
        plant.set_inputs(pressures=[1000.0])
    with pytest.raises(ValueError, match="dt"):
        plant.step(dt=-1.0)
    assert np.allclose(plant.cable_strokes, [0.001, 0, 0, 0])


def test_violent_stroke_jumps_stay_stable():
    """20 mm stroke steps (~100 N of cable tension at once) alternating between opposite
    cables: the line search keeps the lagged-tangent Newton from diverging, and the plant
    settles at a static equilibrium each time."""
    plant = make_plant(mesh_cell_size=0.0105, rayleigh_mass=2.0, rayleigh_stiffness=0.005)
    plant.equilibrate(slack_cables=True)
    slack = plant.cable_strokes
    tips = []
    for k in range(200):
        pull = np.array([0.02, 0, 0, 0]) if (k // 50) % 2 == 0 else np.array([0, 0, 0.02, 0])
        state = plant.step(cable_strokes=slack + pull)
        assert np.all(np.isfinite(state.positions))
        if k % 50 == 49:
            tips.append(state.effector_position)
    assert plant.static_residual_norm() < 0.05  # settled (N; the tensions are ~10 N)
    assert tips[0][1] * tips[1][1] < 0  # pulled one way, then the other
