"""Valve board framing: checksum, frames, resynchronization, payloads."""

from __future__ import annotations

import pytest

from soft_inverse_ros.core.drivers import valve_protocol as vp


def test_crc_is_ccitt_false():
    assert vp.crc16_ccitt(b"123456789") == 0x29B1  # the standard check value
    assert vp.crc16_ccitt(b"") == 0xFFFF


def test_frame_layout_by_hand():
    frame = vp.encode_frame(vp.MsgType.HEARTBEAT, 7)
    assert frame[:4] == bytes([0xA5, 0x00, 0x05, 0x07])
    assert int.from_bytes(frame[4:], "little") == vp.crc16_ccitt(bytes([0x00, 0x05, 0x07]))
    assert len(vp.encode_frame(vp.MsgType.SET_DUTY, 1, vp.encode_duties([0.5, 0.25]))) == 6 + 5


def test_decoder_resynchronizes_after_garbage_and_split_reads():
    frames = [
        vp.encode_frame(vp.MsgType.SET_DUTY, 1, vp.encode_duties([0.1, 0.2, 1.0])),
        vp.encode_frame(vp.MsgType.READ_STATE, 2),
    ]
    stream = b"\x00\xa5\xff\x13" + frames[0] + b"\x42" + frames[1]
    decoder = vp.FrameDecoder()
    got = []
    for i in range(0, len(stream), 3):  # arrives in small pieces
        got += decoder.feed(stream[i : i + 3])
    good = [f for f in got if f.crc_ok]
    assert [(f.msg_type, f.seq) for f in good] == [(vp.MsgType.SET_DUTY, 1), (vp.MsgType.READ_STATE, 2)]
    assert vp.decode_duties(good[0].payload) == [1000, 2000, 10000]


def test_corrupted_frame_is_flagged():
    frame = bytearray(vp.encode_frame(vp.MsgType.HEARTBEAT, 9))
    frame[3] ^= 0x01
    got = vp.FrameDecoder().feed(bytes(frame))
    assert got and not got[0].crc_ok


def test_payload_round_trips():
    state = vp.decode_state(vp.encode_state(0x03, [1200, None, -5], [0, 5000, 10000]))
    assert state.flags == vp.Flags.CONFIGURED | vp.Flags.VENT_HOST
    assert state.pressure_pa == (1200, None, -5)
    assert state.duty == (0.0, 0.5, 1.0)
    assert vp.decode_config(vp.encode_config(60, 100, [50000, 4294967295])) == (60, 100, [50000, 4294967295])
    info = vp.DeviceInfo(1, 4, 0b0101, 100, 500)
    decoded = vp.decode_info(vp.encode_info(info))
    assert decoded == info and decoded.has_sensor(2) and not decoded.has_sensor(1)


def test_bad_payloads_raise():
    with pytest.raises(vp.ProtocolError, match="outside"):
        vp.encode_duties([1.2])
    with pytest.raises(vp.ProtocolError, match="STATE length"):
        vp.decode_state(bytes([0, 2, 0, 0]))
    with pytest.raises(vp.ProtocolError, match="exceeds"):
        vp.encode_frame(vp.MsgType.SET_DUTY, 0, bytes(65))
