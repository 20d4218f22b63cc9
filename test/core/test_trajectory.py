import math

import numpy as np
import pytest

from soft_inverse_ros.core.control.trajectory import Trajectory, TrajectoryConfig

C = (0.0, 0.0, 0.1)


def _speeds(traj, t0, t1, dt=1e-3):
    ts = np.arange(t0, t1, dt)
    p = np.array([traj.position(t) for t in ts])
    return np.linalg.norm(np.diff(p, axis=0), axis=1) / dt, p


def test_square_visits_corners_at_constant_speed():
    traj = Trajectory(TrajectoryConfig("square", C, size=0.02, speed=0.01))
    speeds, p = _speeds(traj, 0.0, traj.duration)
    # constant speed except at the corners, where a finite difference cuts the corner
    assert np.all(speeds <= 0.01 * (1 + 1e-9))
    assert np.mean(np.isclose(speeds, 0.01, rtol=1e-6)) > 0.99
    # the approach goes from the centre to the (+,+) corner: sqrt(2) * 10 mm
    assert traj.lap_time == pytest.approx(0.08 / 0.01)
    corner = traj.position(math.sqrt(2) * 0.01 / 0.01)
    assert np.allclose(corner, [0.01, 0.01, 0.1])
    assert np.allclose(p[:, 2], 0.1)
    assert np.all(np.abs(p[:, :2]) <= 0.01 + 1e-12)


def test_square_loops_and_holds_when_not_looping():
    looping = Trajectory(TrajectoryConfig("square", C, size=0.02, speed=0.01))
    t = looping.duration
    assert np.allclose(looping.position(t + 3 * looping.lap_time), looping.position(t))
    once = Trajectory(TrajectoryConfig("square", C, size=0.02, speed=0.01, loop=False))
    assert np.allclose(once.position(1e3), once.position(once.duration))


def test_circle_radius_and_speed():
    traj = Trajectory(TrajectoryConfig("circle", C, size=0.04, speed=0.02))
    ts = np.linspace(0.02 / 0.02 + 0.01, traj.duration, 500)
    p = np.array([traj.position(t) for t in ts])
    assert np.allclose(np.linalg.norm(p[:, :2], axis=1), 0.02, atol=1e-12)
    speeds, _ = _speeds(traj, 1.2, 3.0)
    assert np.allclose(speeds, 0.02, rtol=1e-3)


def test_hold_and_line():
    hold = Trajectory(TrajectoryConfig("hold", C))
    assert np.allclose(hold.position(5.0), C)
    line = Trajectory(TrajectoryConfig("line", C, size=0.03, speed=0.01))
    assert np.allclose(line.position(3.0), [0.03, 0.0, 0.1])
    assert np.allclose(line.position(6.0), C)


def test_plane_normal_x_puts_square_in_yz():
    traj = Trajectory(TrajectoryConfig("square", C, size=0.02, speed=0.01, plane_normal=(1, 0, 0)))
    p = np.array([traj.position(t) for t in np.linspace(0, traj.duration, 200)])
    assert np.allclose(p[:, 0], 0.0)


def test_csv_waypoints_in_mm_and_timed(tmp_path):
    f = tmp_path / "w.csv"
    f.write_text("x,y,z\n0,0,100\n10,0,100\n")
    traj = Trajectory(TrajectoryConfig("csv", size=0, speed=0.01, csv_file=str(f),
                                       csv_unit_scale=1e-3, loop=False))
    assert np.allclose(traj.position(0.5), [0.005, 0, 0.1])
    g = tmp_path / "t.csv"
    g.write_text("0,0,0,0\n1,0,0,2\n")
    timed = Trajectory(TrajectoryConfig("csv", csv_file=str(g)))
    assert np.allclose(timed.position(1.0), [0.5, 0, 0])


@pytest.mark.parametrize(
    "kwargs,match",
    [({"shape": "zigzag"}, "unknown"), ({"speed": 0.0}, "speed"), ({"size": -1.0}, "size"),
     ({"shape": "csv"}, "csv_file"), ({"center": (0, 0, float("nan"))}, "center")],
)
def test_bad_config_is_a_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrajectoryConfig(**kwargs)


def test_csv_comments_then_a_header_then_held_points(tmp_path):
    f = tmp_path / "held.csv"
    f.write_text("# four targets\n\n# x y z t\nx,y,z,t\n0,0,0,0\n0,0,0,5\n0.01,0,0,7\n")
    held = Trajectory(TrajectoryConfig("csv", csv_file=str(f)))
    assert np.allclose(held.position(4.9), [0, 0, 0])  # a point repeated at two times is held
    assert np.allclose(held.position(6.0), [0.005, 0, 0])
    g = tmp_path / "two_headers.csv"
    g.write_text("x,y,z\n0,0,0\nx,y,z\n")
    with pytest.raises(ValueError, match="two_headers.csv:3: not numbers"):
        Trajectory(TrajectoryConfig("csv", csv_file=str(g)))


def test_the_shipped_four_target_sequence_holds_each_target_10_s():
    from soft_inverse_ros.core.config_files import find_config

    traj = Trajectory(TrajectoryConfig("csv", csv_file=str(find_config("trajectories/hybrid_four_targets.csv"))))
    starts = (0.0, 14.0, 28.0, 42.0)
    points = [traj.position(t + 9.9) for t in starts]
    assert all(np.allclose(traj.position(t), p) for t, p in zip(starts, points))
    assert len({tuple(np.round(p, 6)) for p in points}) == 4
    assert traj.duration == 52.0


def test_bad_csv(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("1,2\n")
    with pytest.raises(ValueError, match="x,y,z"):
        Trajectory(TrajectoryConfig("csv", csv_file=str(f)))


def test_line_to_moves_at_speed_then_holds_the_goal():
    from soft_inverse_ros.core.control.trajectory import LineTo

    move = LineTo(np.array([0.0, 0.0, 0.1]), np.array([0.02, 0.0, 0.1]), 0.01)
    assert np.allclose(move.position(1.0), [0.01, 0.0, 0.1])
    assert np.allclose(move.position(5.0), [0.02, 0.0, 0.1])
    assert np.allclose(move.position(-1.0), [0.0, 0.0, 0.1])
    assert np.allclose(LineTo(np.zeros(3), np.zeros(3), 0.01).position(0.0), 0.0)
    with pytest.raises(ValueError, match="speed"):
        LineTo(np.zeros(3), np.ones(3), 0.0)


def test_a_csv_header_names_its_columns_and_a_bad_first_row_is_an_error(tmp_path):
    """The header was skipped unread (y,x,z swapped x and y; a spreadsheet's index column
    was read as x); a mistyped first row (O.0) or a UTF-8 BOM was dropped as a header."""
    f = tmp_path / "yxz.csv"
    f.write_text("y,x,z\n0.0,0.01,0.12\n")
    assert np.allclose(Trajectory(TrajectoryConfig("csv", csv_file=str(f))).position(0.0), [0.01, 0.0, 0.12])
    for text, match in ((",x,y,z\n0,0.0,0.0,0.11\n", r"header \['', 'x', 'y', 'z'\]"),
                        ("x_mm,y_mm,z_mm\n1,2,3\n", "expected the columns x, y, z"),
                        ("0.05,O.0,0.12,0\n0.06,0,0.12,1\n", r":1: not numbers"),
                        ("262.2,10,37,0\n262.2,10,37,10\n", "a file in mm read as metres")):
        g = tmp_path / "bad.csv"
        g.write_text(text)
        with pytest.raises(ValueError, match=match):
            Trajectory(TrajectoryConfig("csv", csv_file=str(g)))
    h = tmp_path / "bom.csv"
    h.write_bytes("\ufeff0.05,0,0.12\n0.06,0,0.12\n".encode("utf-8"))
    assert np.allclose(Trajectory(TrajectoryConfig("csv", csv_file=str(h), speed=0.01)).position(0.0),
                       [0.05, 0, 0.12])


def test_an_infinite_plane_normal_is_refused_and_a_closed_csv_loops(tmp_path):
    """(csv_file with another trajectory is a warning of target_node: a graph's parameters
    file names the csv for its default trajectory, and trajectory:=hold overrides it)"""
    with pytest.raises(ValueError, match="plane_normal must be a finite"):
        TrajectoryConfig("circle", plane_normal=(float("inf"), 0.0, 1.0))
    f = tmp_path / "closed.csv"
    f.write_text("0,0,0,0\n0.01,0,0,1\n0,0,0,2\n")
    looped = Trajectory(TrajectoryConfig("csv", csv_file=str(f)))
    once = Trajectory(TrajectoryConfig("csv", csv_file=str(f), loop=False))
    assert np.allclose(looped.position(2.5), [0.005, 0, 0]) and np.allclose(once.position(2.5), [0, 0, 0])


def test_trailing_commas_are_read_as_before(tmp_path):
    f = tmp_path / "trailing.csv"
    f.write_text("x,y,z,\n0.01,0,0.1,\n0.02,0,0.1,\n")
    assert np.allclose(Trajectory(TrajectoryConfig("csv", csv_file=str(f), speed=0.01)).position(0.0), [0.01, 0, 0.1])


def test_waypoint_interpolation_equals_numpys_per_column_with_repeated_and_clamped_points():
    """One binary search per target replaced numpy.interp per column (which copied each
    column of a million-waypoint CSV per call): the same positions, ends clamped, repeated
    waypoints (zero-length segments) included."""
    from soft_inverse_ros.core.control.trajectory import _interp_rows

    rng = np.random.default_rng(7)
    rows = rng.normal(size=(40, 3))
    xp = np.cumsum(rng.choice([0.0, 0.3, 1.0], size=40))
    for x in np.concatenate([rng.uniform(xp[0] - 1, xp[-1] + 1, 500), xp, [xp[0], xp[-1]]]):
        expected = np.array([np.interp(x, xp, rows[:, k]) for k in range(3)])
        np.testing.assert_allclose(_interp_rows(float(x), xp, rows), expected, rtol=0, atol=1e-12)
