"""Hardware drivers for soft robots, without ROS: cable servos and pneumatic valves.

Each driver is split into

* a **backend** that talks to one kind of device (``DynamixelBackend`` over Protocol 2.0,
  ``SerialValveBackend`` over the framed protocol of ``firmware/valve_controller``) or
  simulates it (``SimServoBackend``, ``SimValveBackend``), and
* a **driver** (``ServoDriver``, ``ValveDriver``) holding the safety layer shared by all
  backends: limits clipped and counted, command watchdog, lifecycle (configure / activate /
  deactivate / shutdown / error) and fault detection with a safe state.

ROS nodes wrap a driver: they feed it commands and call ``update(now)`` once per command
period, then publish the returned status. Device emulators (``DynamixelEmulator``,
``ValveEmulator``) speak the real wire protocols on a pseudo-terminal, for tests and demos.

Units: cable displacement m (positive = cable shortened), servo position rad at the servo
output shaft, raw ticks only at the device; pressure Pa (gauge); time s.
"""
