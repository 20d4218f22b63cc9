"""The report's contact figures, from a bag whose plant diagnostics carry contact values."""

from __future__ import annotations

from pathlib import Path

import pytest

from soft_inverse_ros import topics as T
from soft_inverse_ros.analysis.contacts import load_contacts, plot_contacts
from soft_inverse_ros.recording.bag_writer import BagWriter
from soft_inverse_ros.recording.typestore import build_typestore

S = 10**9


def _write(path: Path, with_contacts: bool) -> Path:
    store = build_typestore()
    ty = store.types
    Kv, St, Arr = ty["diagnostic_msgs/msg/KeyValue"], ty["diagnostic_msgs/msg/DiagnosticStatus"], ty["diagnostic_msgs/msg/DiagnosticArray"]
    with BagWriter(path, store) as bag:
        bag.add_topic(f"/{T.DIAGNOSTICS}", "diagnostic_msgs/msg/DiagnosticArray")
        for k in range(10):
            values = [Kv(key="real_time_factor", value="1.0")]
            if with_contacts:
                values += [Kv(key="contacts", value=str(max(0, k - 4))),
                           Kv(key="contact_force_total_N", value=str(0.5 * max(0, k - 4))),
                           Kv(key="contact_free_penetration_mm", value="0.02")]
            header = ty["std_msgs/msg/Header"](stamp=ty["builtin_interfaces/msg/Time"](sec=k, nanosec=0), frame_id="")
            status = St(level=0, name="/plant_sim_node: plant", message="ok", hardware_id="", values=values)
            bag.write_message(f"/{T.DIAGNOSTICS}", (100 + k) * S, Arr(header=header, status=[status]))
    return path


def test_contact_series_and_summary(tmp_path):
    series = load_contacts(_write(tmp_path / "bag", True))
    s = series.summary()
    assert s == {"windows": 10, "windows_in_contact": 5, "contacts_max": 5,
                 "contact_force_total_max_N": pytest.approx(2.5), "free_penetration_max_mm": pytest.approx(0.02)}
    assert series.t[0] == 0.0 and series.t[-1] == pytest.approx(9.0)
    assert plot_contacts(series, tmp_path / "contacts.png").stat().st_size > 1000


def test_no_contact_figures_without_contact_values(tmp_path):
    assert load_contacts(_write(tmp_path / "bag", False)) is None
