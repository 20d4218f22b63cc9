// Host build of the valve firmware: the sketch runs unchanged against simulated valves
// and chambers. Each valve pin switches its chamber between supply (HIGH) and exhaust
// (LOW) at the PWM edges the sketch produces; the chamber pressure follows the model of
// soft_inverse_ros/core/drivers/pneumatic_model.py (switched, not averaged) and the
// analog inputs return MPX5100GP counts.
//
// Time: millis()/micros() and the chambers run on a virtual clock that advances with the
// wall clock but by at most 1 ms per loop pass, so when the host deschedules this process
// the simulated world pauses with it (an MCU is never descheduled mid-PWM-period).
//
// Build (from the repository root):
//   g++ -std=c++17 -O2 -Wall -Wextra -I firmware/valve_controller/host
//       firmware/valve_controller/host/host_main.cpp -o valve_host
// Model parameters from the environment (defaults in brackets): VALVE_SUPPLY_PA [1e5],
// VALVE_K_IN [2100], VALVE_K_OUT [4e5], VALVE_KNEE_PA [2e4].

#include "Arduino.h"
#include "../valve_controller.ino"

#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

HostSerial Serial;

namespace {

struct Chamber {
  double pressure = 0.0;  // Pa gauge
  bool valve_on = false;
};

Chamber chambers[N_CHANNELS];
double supply_pa = 1e5, k_in = 2100.0, k_out = 4e5, knee_pa = 2e4;
double sim_time_s = -1.0;
double virtual_s = 0.0;       // the board's clock [s]
double last_wall_s = -1.0;    // wall clock at the previous loop pass [s]
const double MAX_ADVANCE_S = 1e-3;

double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Advance the virtual clock by the wall time since the last pass, at most 1 ms.
void tick_clock() {
  double w = wall_s();
  if (last_wall_s >= 0.0) virtual_s += std::fmin(std::fmax(w - last_wall_s, 0.0), MAX_ADVANCE_S);
  last_wall_s = w;
}

double now_s() { return virtual_s; }

double env_or(const char *name, double fallback) {
  const char *v = std::getenv(name);
  return v ? std::atof(v) : fallback;
}

// Integrate every chamber up to now with its current valve state.
void simulate() {
  double t = now_s();
  if (sim_time_s < 0.0) { sim_time_s = t; return; }
  double dt = t - sim_time_s;
  sim_time_s = t;
  int steps = (int)std::ceil(dt / 1e-4);
  if (steps < 1) return;
  double h = dt / steps;
  for (auto &c : chambers) {
    for (int i = 0; i < steps; i++) {
      double p = c.pressure;
      double rate = c.valve_on ? k_in * std::sqrt(std::fmax(supply_pa - p, 0.0))
                               : -k_out * p / (p + knee_pa);
      c.pressure = std::fmin(std::fmax(p + h * rate, 0.0), supply_pa);
    }
  }
}

int channel_of_valve(uint8_t pin) {
  for (int c = 0; c < N_CHANNELS; c++) if (VALVE_PINS[c] == pin) return c;
  return -1;
}

int channel_of_sensor(uint8_t pin) {
  for (int c = 0; c < N_CHANNELS; c++) if (SENSOR_PINS[c] == (int16_t)pin) return c;
  return -1;
}

}  // namespace

void pinMode(uint8_t, uint8_t) {}

void digitalWrite(uint8_t pin, uint8_t value) {
  int c = channel_of_valve(pin);
  if (c < 0) return;
  simulate();
  chambers[c].valve_on = value == HIGH;
}

int analogRead(uint8_t pin) {
  int c = channel_of_sensor(pin);
  if (c < 0) return 0;
  simulate();
  double counts = 1023.0 * (0.009 * chambers[c].pressure / 1000.0 + 0.04);
  return (int)std::lround(std::fmin(std::fmax(counts, 0.0), 1023.0));
}

uint32_t millis() { return (uint32_t)(now_s() * 1e3); }
uint32_t micros() { return (uint32_t)(now_s() * 1e6); }

void HostSerial::begin(uint32_t) {}

int HostSerial::available() {
  int n = 0;
  if (ioctl(0, FIONREAD, &n) != 0) return 0;
  return n;
}

int HostSerial::read() {
  uint8_t b;
  return ::read(0, &b, 1) == 1 ? b : -1;
}

size_t HostSerial::write(const uint8_t *data, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t w = ::write(1, data + done, len - done);
    if (w < 0) { if (errno == EINTR) continue; break; }
    done += (size_t)w;
  }
  return done;
}

int main() {
  supply_pa = env_or("VALVE_SUPPLY_PA", supply_pa);
  k_in = env_or("VALVE_K_IN", k_in);
  k_out = env_or("VALVE_K_OUT", k_out);
  knee_pa = env_or("VALVE_KNEE_PA", knee_pa);
  setup();
  for (;;) {
    tick_clock();
    loop();
    usleep(100);  // an MCU spins; on a shared PC, yield between loop passes
  }
}
