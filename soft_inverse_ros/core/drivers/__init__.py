"""Hardware drivers for soft robots, without ROS: cable servos and pneumatic valves.

Each driver is split into

* a **backend** that talks to one kind of device (``DynamixelBackend`` over Protocol 2.0,
  ``SerialValveBackend`` over the framed protocol of ``firmware/valve_controller``) or
  simulates it (``SimServoBackend``, ``SimValveBackend``), and
* a **driver** (``ServoDriver``, ``ValveDriver``) holding the safety layer shared by all
  backends: limits clipped and counted, command watchdog, lifecycle (configure / activate /
  deactivate / cleanup / shutdown / error) and fault detection with a safe state.

ROS nodes wrap a driver: they feed it commands and call ``update(now)`` once per command
period, then publish the returned status (``ServoStatus``: JointState data + per-servo
diagnostics; ``ValveStatus``: pressures, duties + per-chamber diagnostics). Device
emulators (``DynamixelEmulator``, ``ValveEmulator``) speak the real wire protocols on a
pseudo-terminal, for tests and demos.

Modules:

* servo side: ``servo_calibration`` (cable m ↔ servo rad), ``servo_config``,
  ``servo_backend`` (interface, ``ServoSample``), ``servo_driver`` (safety layer),
  ``sim_servo``, ``dynamixel_backend``, ``dynamixel_emulator``;
* valve side: ``pneumatic_model`` (chamber dynamics, step-response fit), ``valve_protocol``
  (framing, CRC, payloads), ``valve_config``, ``valve_pwm`` (pressure → duty, pairs),
  ``valve_device_model`` (the firmware's behaviour in Python), ``valve_backend`` (serial,
  simulated), ``valve_driver`` (safety layer), ``valve_emulator``;
* shared: ``driver_state`` (lifecycle states, errors, watchdog), ``config_reader``.

Units: cable displacement m (positive = cable shortened), servo position rad at the servo
output shaft, raw ticks only at the device; pressure Pa (gauge); time s.
"""
