"""Fixtures of the integration tests: real nodes as separate processes over real DDS."""

from __future__ import annotations

import os
import random

import pytest


@pytest.fixture(scope="module")
def graph_env():
    """Localhost-only discovery and a random domain (unless ROS_DOMAIN_ID is set), applied
    to this process and inherited by the node processes."""
    keys = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(10, 99)))
    yield dict(os.environ)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
