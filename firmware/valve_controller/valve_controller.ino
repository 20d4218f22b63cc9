// Reference firmware of the soft_inverse_ros valve board (protocol version 1).
//
// One PWM-driven 3/2 solenoid valve per channel (on: chamber ↔ supply, off: chamber ↔
// exhaust) and an optional analog pressure sensor (NXP MPX5100GP-style, 0..100 kPa gauge).
// The host (soft_inverse_ros ValveDriver) runs the pressure loop and sends duties; this
// board generates the PWM, reads the sensors and keeps the chambers safe on its own:
//   * boots vented; duties stay 0 until the host sends CONFIG then ARM;
//   * watchdog: no SET_DUTY / HEARTBEAT / ARM / CONFIG within watchdog_ms -> vent (latched);
//   * overpressure: a sensed pressure above its channel maximum -> vent (latched);
//   * a sensor reading at the ADC rails -> SENSOR_FAULT, that channel held at 0.
// Frames: 0xA5 | LEN | TYPE | SEQ | PAYLOAD | CRC16-CCITT-FALSE (LE) — see PROTOCOL.md.
//
// Tested on the host: test/core/test_valve_firmware.py builds this file with g++ against
// firmware/valve_controller/host/Arduino.h and drives it with the Python serial backend.

#include <Arduino.h>

// ---- board configuration -------------------------------------------------------------
#define N_CHANNELS 4
static const uint8_t VALVE_PINS[N_CHANNELS] = {3, 5, 6, 9};
static const int16_t SENSOR_PINS[N_CHANNELS] = {A0, A1, A2, -1};  // -1: no sensor
static const uint32_t BAUD_RATE = 1000000UL;
static const uint16_t FIRMWARE_VERSION = 100;  // 1.0.0
static const uint16_t MAX_PWM_HZ = 500;
static const uint16_t MIN_WATCHDOG_MS = 10;
// Sensor transfer (MPX5100GP, 5 V, 10-bit ADC): counts = 1023 * (0.009 * P[kPa] + 0.04).
static const float SENSOR_COUNTS_PER_PA = 1023.0f * 0.009f / 1000.0f;
static const float SENSOR_OFFSET_COUNTS = 1023.0f * 0.04f;
static const int SENSOR_FAULT_LOW = 8;     // counts: open wire / shorted to ground
static const int SENSOR_FAULT_HIGH = 1015; // counts: shorted to supply

// ---- protocol ------------------------------------------------------------------------
#define PROTOCOL_VERSION 1
#define START_BYTE 0xA5
#define MAX_PAYLOAD 64
#define DUTY_FULL_SCALE 10000
#define NO_SENSOR ((int32_t)0x80000000L)

enum MsgType : uint8_t {
  MSG_HELLO = 0x01, MSG_CONFIG = 0x02, MSG_ARM = 0x03, MSG_SET_DUTY = 0x04,
  MSG_HEARTBEAT = 0x05, MSG_READ_STATE = 0x06, MSG_VENT_ALL = 0x07,
  MSG_INFO = 0x81, MSG_STATE = 0x82, MSG_NACK = 0x8F
};
enum Flag : uint8_t {
  FLAG_CONFIGURED = 0x01, FLAG_VENT_HOST = 0x02, FLAG_VENT_WATCHDOG = 0x04,
  FLAG_VENT_OVERPRESSURE = 0x08, FLAG_SENSOR_FAULT = 0x10, FLAG_VENT_BOOT = 0x20
};
static const uint8_t LATCHED = FLAG_VENT_HOST | FLAG_VENT_WATCHDOG | FLAG_VENT_OVERPRESSURE | FLAG_VENT_BOOT;
enum Nack : uint8_t { NACK_BAD_CRC = 1, NACK_BAD_LENGTH = 2, NACK_UNKNOWN_TYPE = 3,
                      NACK_BAD_VALUE = 4, NACK_NOT_CONFIGURED = 5 };

// ---- state ---------------------------------------------------------------------------
static uint8_t flags = FLAG_VENT_BOOT;
static uint16_t pwm_hz = 60;
static uint16_t watchdog_ms = 100;
static uint32_t max_pressure_pa[N_CHANNELS];
static uint16_t duty[N_CHANNELS];          // as commanded (0..10000)
static int32_t pressure_pa[N_CHANNELS];    // last reading (NO_SENSOR without sensor)
static bool sensor_fault[N_CHANNELS];
static uint32_t last_feed_ms = 0;
static uint32_t pwm_start_us = 0;

// ---- little-endian helpers -----------------------------------------------------------
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)p[0] | ((uint16_t)p[1] << 8); }
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static void put_u16(uint8_t *p, uint16_t v) { p[0] = v & 0xFF; p[1] = v >> 8; }
static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; p[2] = (v >> 16) & 0xFF; p[3] = (v >> 24) & 0xFF;
}

static uint16_t crc16_update(uint16_t crc, uint8_t byte) {
  crc ^= (uint16_t)byte << 8;
  for (uint8_t i = 0; i < 8; i++) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
  return crc;
}

static void send_frame(uint8_t type, uint8_t seq, const uint8_t *payload, uint8_t len) {
  uint8_t head[4] = {START_BYTE, len, type, seq};
  uint16_t crc = 0xFFFF;
  for (uint8_t i = 1; i < 4; i++) crc = crc16_update(crc, head[i]);
  for (uint8_t i = 0; i < len; i++) crc = crc16_update(crc, payload[i]);
  uint8_t tail[2];
  put_u16(tail, crc);
  Serial.write(head, 4);
  if (len) Serial.write(payload, len);
  Serial.write(tail, 2);
}

// ---- outputs and sensors -------------------------------------------------------------
static bool latched() { return (flags & LATCHED) != 0; }

// Sensed pressure of channel c above its maximum (max 0xFFFFFFFF = no limit).
static bool over_limit(uint8_t c) {
  return pressure_pa[c] != NO_SENSOR && !sensor_fault[c] && pressure_pa[c] > 0 &&
         (uint32_t)pressure_pa[c] > max_pressure_pa[c];
}

static uint16_t applied_duty(uint8_t c) {
  if (latched() || sensor_fault[c]) return 0;
  return duty[c];
}

static void vent(uint8_t reason) {
  flags |= reason;
  for (uint8_t c = 0; c < N_CHANNELS; c++) {
    duty[c] = 0;
    digitalWrite(VALVE_PINS[c], LOW);  // exhaust
  }
}

static void read_sensors() {
  bool any_fault = false;
  for (uint8_t c = 0; c < N_CHANNELS; c++) {
    if (SENSOR_PINS[c] < 0) { pressure_pa[c] = NO_SENSOR; continue; }
    int counts = analogRead(SENSOR_PINS[c]);
    sensor_fault[c] = counts < SENSOR_FAULT_LOW || counts > SENSOR_FAULT_HIGH;
    any_fault |= sensor_fault[c];
    float pa = ((float)counts - SENSOR_OFFSET_COUNTS) / SENSOR_COUNTS_PER_PA;
    pressure_pa[c] = sensor_fault[c] ? -1 : (int32_t)(pa + (pa >= 0 ? 0.5f : -0.5f));
    if ((flags & FLAG_CONFIGURED) && over_limit(c)) vent(FLAG_VENT_OVERPRESSURE);
  }
  if (any_fault) flags |= FLAG_SENSOR_FAULT; else flags &= ~FLAG_SENSOR_FAULT;
}

static void update_pwm() {
  uint32_t period_us = 1000000UL / pwm_hz;
  uint32_t phase = (micros() - pwm_start_us) % period_us;
  for (uint8_t c = 0; c < N_CHANNELS; c++) {
    uint32_t on_us = (uint32_t)((uint64_t)applied_duty(c) * period_us / DUTY_FULL_SCALE);
    digitalWrite(VALVE_PINS[c], phase < on_us ? HIGH : LOW);
  }
}

static void send_state(uint8_t seq) {
  uint8_t p[2 + 6 * N_CHANNELS];
  p[0] = flags;
  p[1] = N_CHANNELS;
  for (uint8_t c = 0; c < N_CHANNELS; c++) {
    put_u32(p + 2 + 4 * c, (uint32_t)pressure_pa[c]);
    put_u16(p + 2 + 4 * N_CHANNELS + 2 * c, applied_duty(c));
  }
  send_frame(MSG_STATE, seq, p, sizeof(p));
}

static void send_nack(uint8_t seq, uint8_t code, uint8_t type) {
  uint8_t p[2] = {code, type};
  send_frame(MSG_NACK, seq, p, 2);
}

// ---- message handling ----------------------------------------------------------------
static void handle(uint8_t type, uint8_t seq, const uint8_t *p, uint8_t len) {
  bool configured = (flags & FLAG_CONFIGURED) != 0;
  switch (type) {
    case MSG_HELLO: {
      uint8_t info[7];
      uint8_t mask = 0;
      for (uint8_t c = 0; c < N_CHANNELS; c++) if (SENSOR_PINS[c] >= 0) mask |= 1 << c;
      info[0] = PROTOCOL_VERSION; info[1] = N_CHANNELS; info[2] = mask;
      put_u16(info + 3, FIRMWARE_VERSION); put_u16(info + 5, MAX_PWM_HZ);
      send_frame(MSG_INFO, seq, info, 7);
      return;
    }
    case MSG_CONFIG: {
      if (len < 5 || len != 5 + 4 * p[4]) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      uint16_t hz = get_u16(p), wd = get_u16(p + 2);
      if (hz < 1 || hz > MAX_PWM_HZ || wd < MIN_WATCHDOG_MS || p[4] != N_CHANNELS) {
        send_nack(seq, NACK_BAD_VALUE, type); return;
      }
      pwm_hz = hz; watchdog_ms = wd;
      for (uint8_t c = 0; c < N_CHANNELS; c++) max_pressure_pa[c] = get_u32(p + 5 + 4 * c);
      flags |= FLAG_CONFIGURED;
      last_feed_ms = millis();
      break;
    }
    case MSG_ARM: {
      if (len != 0) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      if (!configured) { send_nack(seq, NACK_NOT_CONFIGURED, type); return; }
      flags &= ~(FLAG_VENT_HOST | FLAG_VENT_WATCHDOG | FLAG_VENT_BOOT);
      bool over = false;
      for (uint8_t c = 0; c < N_CHANNELS; c++) over |= over_limit(c);
      if (!over) flags &= ~FLAG_VENT_OVERPRESSURE;
      for (uint8_t c = 0; c < N_CHANNELS; c++) duty[c] = 0;
      last_feed_ms = millis();
      pwm_start_us = micros();
      break;
    }
    case MSG_SET_DUTY: {
      if (len < 1 || len != 1 + 2 * p[0]) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      if (!configured) { send_nack(seq, NACK_NOT_CONFIGURED, type); return; }
      if (p[0] != N_CHANNELS) { send_nack(seq, NACK_BAD_VALUE, type); return; }
      for (uint8_t c = 0; c < N_CHANNELS; c++)
        if (get_u16(p + 1 + 2 * c) > DUTY_FULL_SCALE) { send_nack(seq, NACK_BAD_VALUE, type); return; }
      last_feed_ms = millis();
      if (!latched())
        for (uint8_t c = 0; c < N_CHANNELS; c++) duty[c] = get_u16(p + 1 + 2 * c);
      break;
    }
    case MSG_HEARTBEAT:
      if (len != 0) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      last_feed_ms = millis();
      break;
    case MSG_READ_STATE:
      if (len != 0) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      break;
    case MSG_VENT_ALL:
      if (len != 0) { send_nack(seq, NACK_BAD_LENGTH, type); return; }
      vent(FLAG_VENT_HOST);
      break;
    default:
      send_nack(seq, NACK_UNKNOWN_TYPE, type);
      return;
  }
  read_sensors();
  send_state(seq);
}

// ---- frame receiver ------------------------------------------------------------------
static uint8_t rx[4 + MAX_PAYLOAD + 2];
static uint8_t rx_len = 0;

// Drop the first byte and everything up to the next start byte.
static void drop_to_next_start() {
  uint8_t i = 1;
  while (i < rx_len && rx[i] != START_BYTE) i++;
  memmove(rx, rx + i, rx_len - i);
  rx_len -= i;
}

// Handle every complete frame at the head of the buffer (no recursion: small stacks).
static void parse_buffer() {
  while (rx_len > 0) {
    if (rx_len >= 2 && rx[1] > MAX_PAYLOAD) { drop_to_next_start(); continue; }
    if (rx_len < 4 || rx_len < (uint8_t)(6 + rx[1])) return;
    uint8_t len = rx[1];
    uint8_t total = 6 + len;
    uint16_t crc = 0xFFFF;
    for (uint8_t i = 1; i < 4 + len; i++) crc = crc16_update(crc, rx[i]);
    if (crc != get_u16(rx + 4 + len)) {
      send_nack(rx[3], NACK_BAD_CRC, rx[2]);
      drop_to_next_start();  // the start byte may have been noise: rescan the rest
      continue;
    }
    handle(rx[2], rx[3], rx + 4, len);
    memmove(rx, rx + total, rx_len - total);
    rx_len -= total;
  }
}

static void receive_byte(uint8_t b) {
  if (rx_len == 0 && b != START_BYTE) return;  // hunt for a start byte
  rx[rx_len++] = b;
  parse_buffer();
}

// ---- Arduino entry points ------------------------------------------------------------
void setup() {
  for (uint8_t c = 0; c < N_CHANNELS; c++) {
    pinMode(VALVE_PINS[c], OUTPUT);
    digitalWrite(VALVE_PINS[c], LOW);
    max_pressure_pa[c] = 0xFFFFFFFFUL;
    duty[c] = 0;
  }
  Serial.begin(BAUD_RATE);
  last_feed_ms = millis();
  pwm_start_us = micros();
}

void loop() {
  while (Serial.available() > 0) receive_byte((uint8_t)Serial.read());
  read_sensors();
  if ((flags & FLAG_CONFIGURED) && !latched() && (uint32_t)(millis() - last_feed_ms) > watchdog_ms)
    vent(FLAG_VENT_WATCHDOG);
  update_pwm();
}
