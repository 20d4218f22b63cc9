"""Effector rows grouped into points (core/model/snapshot.py ``effector_points``): what the
controller node subscribes one target topic for."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.snapshot import effector_points


def test_rows_are_grouped_by_point_in_order_of_first_appearance():
    points = effector_points(["tip.x", "tip.y", "tip.z", "knee.z", "knee.x", "arm[1].y"])
    assert [p.name for p in points] == ["tip", "knee", "arm[1]"]
    np.testing.assert_array_equal(points[0].rows, [0, 1, 2])
    np.testing.assert_array_equal(points[0].axes, [0, 1, 2])
    np.testing.assert_array_equal(points[1].rows, [3, 4])
    np.testing.assert_array_equal(points[1].axes, [2, 0])
    np.testing.assert_array_equal(points[2].rows, [5])
    np.testing.assert_array_equal(points[2].axes, [1])
    assert [p.topic_token for p in points] == ["tip", "knee", "arm_1"]


def test_one_point_with_a_subset_of_axes():
    (point,) = effector_points(["tip.x", "tip.z"])
    np.testing.assert_array_equal(point.axes, [0, 2])


@pytest.mark.parametrize("names, why", [
    (["tip.x", "tip.w"], "POINT.x/y/z"),
    (["tip"], "POINT.x/y/z"),
    ([".x"], "POINT.x/y/z"),
    (["tip.x", "tip.x"], "axis twice"),
    (["a[1].x", "a_1.x"], "distinct ROS names"),
])
def test_bad_row_names_are_refused_with_the_reason(names, why):
    with pytest.raises(ValueError, match=why):
        effector_points(names)
