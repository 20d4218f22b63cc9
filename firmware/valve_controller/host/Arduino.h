// Minimal Arduino API for building the valve firmware on a PC (tests, development).
// Serial is the process's stdin/stdout (connect them to a pseudo-terminal); pins and
// analog inputs are served by the chamber simulation in host_main.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#define HIGH 1
#define LOW 0
#define OUTPUT 1
#define INPUT 0
#define A0 14
#define A1 15
#define A2 16
#define A3 17
#define A4 18
#define A5 19

void pinMode(uint8_t pin, uint8_t mode);
void digitalWrite(uint8_t pin, uint8_t value);
int analogRead(uint8_t pin);
uint32_t millis();
uint32_t micros();

class HostSerial {
 public:
  void begin(uint32_t baud);
  int available();
  int read();
  size_t write(const uint8_t *data, size_t len);
};

extern HostSerial Serial;
