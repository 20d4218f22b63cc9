"""ModalPlant: the reduced-order plants (POD-reduced co-rotational "reduced", linear "modal")
against the full dynamic FEM plant, on the coarse built-in Diamond (695 nodes)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.sim.modal_plant import ModalPlant
from soft_inverse_ros.core.sim.plant import PlantConfig, PlantConfigError, SoftRobotPlant, make_plant

CELL = 0.011
BASE = dict(robot="builtin_diamond", mesh_cell_size=CELL, dt=0.01, rayleigh_mass=2.0,
            rayleigh_stiffness=0.005, newton_iterations=1)


def plant(model: str, **overrides):
    return make_plant(PlantConfig(model=model, **{**BASE, **overrides}))


def drive(p, steps: int = 300) -> np.ndarray:
    """Effector path under a pull/release of opposite cables plus a common pull, a
    trajectory unlike the POD training inputs (random sines)."""
    p.equilibrate(slack_cables=True)
    s0 = p.cable_strokes.copy()
    pattern = np.array([1.0, 0.0, -1.0, 0.0])
    path = []
    for i in range(steps):
        p.step(cable_strokes=s0 + 0.005 * np.sin(0.025 * i) * pattern
               + 0.002 * (1 - np.cos(0.025 * i)))
        path.append(p.effector_position.copy())
    return np.array(path)


HYPER = 0.002  # the tolerance config/sim.yaml's comment and BENCHMARKS.md measure


@pytest.fixture(scope="module")
def hyper_plant():
    return plant("reduced", hyper_reduction_tolerance=HYPER)


@pytest.fixture(scope="module")
def paths(hyper_plant):
    out = {m: drive(plant(m)) for m in ("fem", "reduced", "modal")}
    out["hyper"] = drive(hyper_plant)
    return out


def test_make_plant_builds_the_model_asked_for():
    assert type(plant("fem")) is SoftRobotPlant
    reduced = plant("reduced")
    assert isinstance(reduced, ModalPlant) and reduced.pod_modes > 0
    modal = plant("modal")
    assert isinstance(modal, ModalPlant) and modal.pod_modes == 0
    assert reduced.n_coordinates > modal.n_coordinates


def test_basis_is_mass_orthonormal_and_small():
    p = plant("reduced")
    gram = p.basis.T @ (p._mass_csc @ p.basis)
    assert np.allclose(gram, np.eye(p.n_coordinates), atol=1e-9)
    assert p.n_coordinates < 0.05 * p.fem.n_free


def test_slack_start_is_the_full_models_equilibrium():
    full, red = plant("fem"), plant("reduced")
    full.equilibrate(slack_cables=True)
    red.equilibrate(slack_cables=True)
    assert np.allclose(red.cable_strokes, full.cable_strokes, atol=1e-9)
    assert np.linalg.norm(red.effector_position - full.effector_position) < 1e-9


def test_reduced_plant_follows_the_full_fem(paths):
    """The POD-reduced co-rotational plant stays within 0.5 mm (mean) / 1.2 mm (max) of
    the full dynamic FEM over a ~14 mm motion it was not trained on."""
    motion = np.linalg.norm(paths["fem"] - paths["fem"][0], axis=1).max()
    assert motion > 0.008
    diff = np.linalg.norm(paths["reduced"] - paths["fem"], axis=1)
    assert diff.mean() < 5e-4 and diff.max() < 1.2e-3, (diff.mean(), diff.max())


def test_linear_modal_plant_misses_the_foreshortening(paths):
    """The linear modal plant is cheaper but further off: it lacks the co-rotational
    geometry (its tip stays higher when the legs bend), so it must differ from the full
    FEM more than the reduced plant does."""
    d_modal = np.linalg.norm(paths["modal"] - paths["fem"], axis=1).mean()
    d_reduced = np.linalg.norm(paths["reduced"] - paths["fem"], axis=1).mean()
    assert d_modal > 1.5 * d_reduced
    assert np.mean(paths["modal"][:, 2] - paths["fem"][:, 2]) > 0.0


def test_small_pull_static_response_matches_the_full_model():
    """0.5 mm beyond slack, the static answer to one cable: the reduced plant (full
    co-rotational forces, the cable's static mode in the basis) agrees with the full FEM to
    2 %; the linear modal plant to 5 % (its K_eq = Σ R K0 Rᵀ lacks the stress stiffness
    of the gravity preload, ~3 % here)."""
    responses = {}
    for model in ("fem", "reduced", "modal"):
        p = plant(model)
        p.equilibrate(slack_cables=True)
        e0 = p.effector_position.copy()
        p.set_inputs(cable_strokes=p.cable_strokes + np.array([0.0005, 0, 0, 0]))
        p.equilibrate()
        responses[model] = p.effector_position - e0
    ref = np.linalg.norm(responses["fem"])
    for model, tolerance in (("reduced", 0.02), ("modal", 0.05)):
        assert np.linalg.norm(responses[model] - responses["fem"]) < tolerance * ref, model


def test_state_and_energies_are_consistent():
    p = plant("reduced")
    p.equilibrate(slack_cables=True)
    p.step(cable_strokes=p.cable_strokes + 0.003)
    state = p.state()
    assert state.positions.shape == (p.fem.n_nodes, 3)
    assert np.all(np.isfinite(state.velocities))
    assert state.kinetic_energy > 0.0
    assert np.all(state.cable_tensions >= 0.0)
    assert p.static_residual_norm() >= 0.0


def test_reduced_plant_builds_from_a_mesh_file_robot(sofa_data):
    p = make_plant(PlantConfig(model="reduced", robot="diamond", dt=0.01, newton_iterations=1))
    p.equilibrate(slack_cables=True)
    s0 = p.cable_strokes.copy()
    for _ in range(20):
        p.step(cable_strokes=s0 + 0.002)
    assert np.all(np.isfinite(p.effector_position))
    assert p.mesh.n_points == 1628


def test_hyper_reduced_plant_samples_few_elements_and_follows_the_reduced_plant(paths, hyper_plant):
    """ECSW (core/sim/hyper_reduction.py): a small weighted sample of the elements, and an
    effector path within 0.2 mm (mean) / 0.4 mm (max) of the same reduced plant evaluating
    every element over a ~14 mm motion it was not trained on (the training run drives
    random sines; measured 0.14 / 0.29 mm on this coarse mesh, 0.04 / 0.08 mm on the
    demo's), and as close to the full FEM as the reduced plant is required to be."""
    hr = hyper_plant.hyper
    assert hr is not None and hr.fraction < 0.25 and np.all(hr.weights > 0)
    assert hr.training_error <= HYPER * (1 + 1e-9)
    diff = np.linalg.norm(paths["hyper"] - paths["reduced"], axis=1)
    assert diff.mean() < 2e-4 and diff.max() < 4e-4, (diff.mean(), diff.max())
    to_fem = np.linalg.norm(paths["hyper"] - paths["fem"], axis=1)
    assert to_fem.mean() < 5e-4 and to_fem.max() < 1.2e-3


def test_hyper_reduced_slack_start_is_still_the_full_models_equilibrium(hyper_plant):
    """The offset c makes the sampled forces exact at x_eq: the slack start does not move."""
    full = plant("fem")
    full.equilibrate(slack_cables=True)
    hyper_plant.equilibrate(slack_cables=True)
    assert np.linalg.norm(hyper_plant.effector_position - full.effector_position) < 1e-9
    assert hyper_plant.static_residual_norm() < 1e-9 * np.linalg.norm(hyper_plant._gravity_r)
    start = hyper_plant.effector_position.copy()
    for _ in range(20):  # no input change: it stays put
        hyper_plant.step(cable_strokes=hyper_plant.cable_strokes)
    assert np.linalg.norm(hyper_plant.effector_position - start) < 1e-9


def test_hyper_reduction_is_the_reduced_models_setting():
    """The linear modal model (and the full FEM) evaluate every element whatever the
    tolerance, as the full FEM ignores modal_modes; a negative one is refused."""
    modal = plant("modal", hyper_reduction_tolerance=0.01)
    assert modal.hyper is None
    with pytest.raises(PlantConfigError, match="hyper_reduction_tolerance"):
        PlantConfig(model="reduced", hyper_reduction_tolerance=-0.1)
