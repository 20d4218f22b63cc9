"""Test and benchmark fixtures that are not part of the runtime: device emulators on
pseudo-terminals (Dynamixel Protocol 2.0, the valve board) and synthetic compliance
problems. Nothing on a robot imports these."""
