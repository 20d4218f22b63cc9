"""The reduced plants' build cache (core/sim/build_cache.py): a second build with the same
inputs loads the reduction and simulates bit for bit like the computed one; any changed
input or a damaged entry rebuilds; a disabled or unwritable cache only costs the build."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.sim import build_cache
from soft_inverse_ros.core.sim.plant import PlantConfig, make_plant

BASE = dict(robot="builtin_diamond", mesh_cell_size=0.011, dt=0.01, rayleigh_mass=2.0,
            rayleigh_stiffness=0.005, newton_iterations=1, model="reduced")


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(build_cache.CACHE_DIR_ENV, str(tmp_path))
    return tmp_path / "plants"


def plant(**overrides):
    return make_plant(PlantConfig(**{**BASE, **overrides}))


def drive(p, steps: int = 120) -> np.ndarray:
    p.equilibrate(slack_cables=True)
    s0 = p.cable_strokes.copy()
    path = []
    for i in range(steps):
        p.step(cable_strokes=s0 + 0.004 * np.sin(0.05 * i) * np.array([1.0, 0.0, -1.0, 0.0]))
        path.append(p.effector_position.copy())
    return np.array(path)


@pytest.mark.parametrize("tolerance", [0.0, 0.002], ids=["reduced", "hyper-reduced"])
def test_a_cached_build_simulates_exactly_like_a_computed_one(cache, tolerance):
    built = plant(hyper_reduction_tolerance=tolerance)
    assert not built.from_cache and len(list(cache.glob("*.npz"))) == 1
    loaded = plant(hyper_reduction_tolerance=tolerance)
    assert loaded.from_cache
    assert np.array_equal(loaded.basis, built.basis) and np.array_equal(loaded.x_eq, built.x_eq)
    assert np.array_equal(loaded.stiffness_r, built.stiffness_r)
    if tolerance:
        assert np.array_equal(loaded.hyper.elements, built.hyper.elements)
        assert np.array_equal(loaded.hyper.offset, built.hyper.offset)
    assert np.array_equal(drive(loaded), drive(built))  # bit for bit


def test_a_changed_input_misses_and_each_build_keeps_its_entry(cache):
    plant()
    assert plant(young_modulus_scale=0.7).from_cache is False
    assert plant(model="modal").from_cache is False
    assert len(list(cache.glob("*.npz"))) == 3
    assert plant(young_modulus_scale=0.7).from_cache


def test_a_damaged_entry_is_rebuilt_and_rewritten(cache):
    reference = plant(model="modal")  # the cheaper build: no POD training
    (entry,) = cache.glob("*.npz")
    entry.write_bytes(b"not an npz")
    rebuilt = plant(model="modal")
    assert not rebuilt.from_cache
    # a new build, not the old bytes: the eigen-solver's random start may flip mode signs,
    # the simulated robot is the same
    assert np.allclose(drive(rebuilt), drive(reference), rtol=0.0, atol=1e-9)
    assert plant(model="modal").from_cache


def test_off_or_unwritable_only_costs_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv(build_cache.CACHE_DIR_ENV, "off")
    assert build_cache.cache_dir() is None
    assert not plant(model="modal").from_cache and not plant(model="modal").from_cache
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would go")
    monkeypatch.setenv(build_cache.CACHE_DIR_ENV, str(blocked))
    assert not plant(model="modal").from_cache


def test_the_key_covers_array_contents_and_the_code(monkeypatch):
    a = np.zeros((3, 3))
    b = a.copy()
    b[1, 1] = 1e-300
    assert build_cache.cache_key("k", {"x": a}) != build_cache.cache_key("k", {"x": b})
    assert build_cache.cache_key("k", {"x": a}) != build_cache.cache_key("k", {"x": a.astype(np.float32)})
    key = build_cache.cache_key("k", {"x": a})
    monkeypatch.setattr(build_cache, "code_fingerprint", lambda: "another version of the code")
    assert build_cache.cache_key("k", {"x": a}) != key


def test_only_the_entries_used_last_are_kept(cache, monkeypatch):
    import os

    monkeypatch.setattr(build_cache, "MAX_ENTRIES", 2)

    def entry(i: int):
        return cache / f"t-{build_cache.cache_key('t', {'i': i})[:40]}.npz"

    def use(i: int) -> bool:
        return build_cache.cached_arrays("t", {"i": i}, lambda: {"x": np.arange(3.0) + i})[1]

    assert not use(0) and not use(1)
    os.utime(entry(0), (100, 100))  # both used long ago, 1 after 0
    os.utime(entry(1), (200, 200))
    assert use(0)  # a hit: 0 is now the one used last
    assert not use(2)  # a third entry: the least recently used (1) goes
    assert entry(0).is_file() and entry(2).is_file() and not entry(1).is_file()
    assert use(0) and not use(1)
