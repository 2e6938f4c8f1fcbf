"""Binary message records (pull bodies) and batch bodies: golden bytes, round trips, bad input."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from txmq.common import errors
from txmq.protocol.remoting import message_codec as mc
from txmq.protocol.remoting.errors import InvalidBody

# Golden record, computed by hand from protocol.md §6.4 (MessageDecoder.encode field order):
# topic "T", body b"hi", no properties; 88 fixed bytes (fields 1-14 plus the body length) + 2 body
# + 1 topic length + 1 topic + 2 properties length = 94 = 0x5e. BODYCRC = CRC-32("hi") & 0x7fffffff
# = 0x58932aac (zlib.crc32, masked as UtilAll.crc32 does). Hosts: 127.0.0.1:5 and 10.0.0.1:10911 (0x2a9f).
GOLDEN_RECORD = bytes.fromhex(
    "0000005e"  # 1 TOTALSIZE 94
    "daa320a7"  # 2 MAGICCODE V1
    "58932aac"  # 3 BODYCRC
    "00000001"  # 4 QUEUEID 1
    "00000000"  # 5 FLAG 0
    "0000000000000002"  # 6 QUEUEOFFSET 2
    "0000000000000003"  # 7 PHYSICALOFFSET 3
    "00000000"  # 8 SYSFLAG 0
    "0000000000000004"  # 9 BORNTIMESTAMP 4
    "7f000001 00000005"  # 10 BORNHOST 127.0.0.1:5
    "0000000000000006"  # 11 STORETIMESTAMP 6
    "0a000001 00002a9f"  # 12 STOREHOST 10.0.0.1:10911
    "00000000"  # 13 RECONSUMETIMES 0
    "0000000000000000"  # 14 PREPARED TRANSACTION OFFSET 0
    "00000002 6869"  # 15 BODY "hi"
    "01 54"  # 16 TOPIC "T"
    "0000"  # 17 PROPERTIES (none)
)
GOLDEN_MESSAGE = mc.WireMessage(
    topic="T", body=b"hi", queue_id=1, queue_offset=2, commit_log_offset=3, born_timestamp=4,
    born_host=("127.0.0.1", 5), store_timestamp=6, store_host=("10.0.0.1", 10911),
    body_crc=mc.body_crc(b"hi"), store_size=94,
)  # fmt: skip

# Golden batch entry (MessageDecoder.encodeMessage): total 4+4+4+4+4 + 2 (body) + 2 + 4 (properties) = 28,
# magic 0, crc 0, flag 7, body "hi", properties "K\x01V\x02" (4 bytes).
GOLDEN_BATCH = bytes.fromhex("0000001c 00000000 00000000 00000007 00000002 6869 0004 4b015602")


def test_golden_record() -> None:
    assert mc.body_crc(b"hi") == 0x58932AAC
    assert mc.encode_message(GOLDEN_MESSAGE) == GOLDEN_RECORD
    assert mc.decode_messages(GOLDEN_RECORD) == [GOLDEN_MESSAGE]
    assert GOLDEN_MESSAGE.offset_msg_id == "0A00000100002A9F0000000000000003"


def test_golden_batch() -> None:
    entry = mc.BatchMessage(b"hi", {"K": "V"}, 7)
    assert mc.encode_batch([entry]) == GOLDEN_BATCH
    assert mc.decode_batch(GOLDEN_BATCH) == [entry]


def test_many_records_round_trip() -> None:
    messages = [
        mc.WireMessage(
            topic=f"topic-{i}",
            body=bytes([i]) * i,
            properties={"TAGS": f"t{i}", "UNIQ_KEY": f"u{i}"},
            queue_id=i % 4,
            queue_offset=i,
            commit_log_offset=1000 * i,
            sys_flag=0x8 if i % 2 else 0,
            born_timestamp=1_700_000_000_000 + i,
            born_host=("192.168.1.9", 50000 + i),
            store_timestamp=1_700_000_000_001 + i,
            store_host=("10.1.2.3", 10911),
            reconsume_times=i % 3,
            prepared_transaction_offset=i * 7,
            flag=i,
            body_crc=mc.body_crc(bytes([i]) * i),
        )
        for i in range(20)
    ]
    decoded = mc.decode_messages(mc.encode_messages(messages))
    assert [dataclasses.replace(m, store_size=0) for m in decoded] == messages
    assert [m.store_size for m in decoded] == [len(mc.encode_message(m)) for m in messages]


def test_v1_for_ali_ons_even_with_ipv6_hosts() -> None:
    msg = mc.WireMessage(topic="T", body=b"", sys_flag=0x30, born_host=("::1", 1))
    data = mc.encode_message(msg)
    assert data[4:8] == bytes.fromhex("daa320a7")
    (decoded,) = mc.decode_messages(data)
    assert decoded.sys_flag == 0
    assert decoded.born_host == ("0.0.0.0", 1)
    mapped = mc.WireMessage(topic="T", body=b"", born_host=("::ffff:10.1.2.3", 2))
    assert mc.decode_messages(mc.encode_message(mapped))[0].born_host == ("10.1.2.3", 2)


def test_long_topic_uses_v2_and_decodes() -> None:
    msg = mc.WireMessage(topic="%RETRY%" + "g" * 150, body=b"b")
    data = mc.encode_message(msg)
    assert struct.unpack(">i", data[4:8])[0] == mc.MAGIC_V2
    assert mc.decode_messages(data)[0].topic == msg.topic


def test_decodes_ipv6_hosts_from_a_java_broker() -> None:
    fixed = struct.pack(">iiiiiqqiq", 0, mc.MAGIC_V1, 0, 0, 0, 0, 0, 0x30, 0)
    born = bytes(15) + b"\x01" + struct.pack(">i", 7)
    store = struct.pack(">q", 0) + bytes(16) + struct.pack(">i", 8)
    tail = struct.pack(">iqi", 0, 0, 0) + b"\x01T" + b"\x00\x00"
    record = bytearray(fixed + born + store + tail)
    struct.pack_into(">i", record, 0, len(record))
    (msg,) = mc.decode_messages(bytes(record))
    assert msg.born_host == ("::1", 7)
    assert msg.store_host == ("::", 8)
    assert msg.topic == "T"


@pytest.mark.parametrize("cut", [1, 4, 20, 60, 88, 90, 93])
def test_truncated_record_rejected(cut: int) -> None:
    with pytest.raises(InvalidBody):
        mc.decode_messages(GOLDEN_RECORD[:cut])


def test_bad_magic_and_sizes_rejected() -> None:
    bad_magic = GOLDEN_RECORD[:4] + b"\x00\x00\x00\x00" + GOLDEN_RECORD[8:]
    small_total = b"\x00\x00\x00\x10" + GOLDEN_RECORD[4:]
    huge_body = GOLDEN_RECORD[:84] + b"\x7f\xff\xff\xff" + GOLDEN_RECORD[88:]
    for data in (bad_magic, small_total, huge_body):
        with pytest.raises(InvalidBody):
            mc.decode_messages(data)


def test_batch_round_trip_and_bad_entries() -> None:
    entries = [mc.BatchMessage(b"x" * i, {"KEYS": f"k{i}"} if i % 2 else {}, i) for i in range(10)]
    data = mc.encode_batch(entries)
    assert mc.decode_batch(data) == entries
    assert mc.decode_batch(b"") == []
    for bad in (data[:-1], data[:3], b"\x00\x00\x00\x99" + data[4:], GOLDEN_BATCH[:-4] + b"junk"):
        with pytest.raises(InvalidBody):
            mc.decode_batch(bad)


def test_properties_limits_apply_on_encode() -> None:
    with pytest.raises(errors.InvalidProperty):
        mc.encode_message(mc.WireMessage(topic="T", body=b"", properties={"a\x01": "v"}))
    with pytest.raises(errors.PropertiesTooLarge):
        mc.encode_batch([mc.BatchMessage(b"", {"K": "v" * 40_000})])


def test_raw_properties_are_written_verbatim() -> None:
    raw = b"TAGS\x01a\x02KEYS\x01k\x02"
    via_raw = mc.WireMessage(topic="T", body=b"b", properties_raw=raw)
    via_dict = mc.WireMessage(topic="T", body=b"b", properties={"TAGS": "a", "KEYS": "k"})
    assert mc.encode_message(via_raw) == mc.encode_message(via_dict)
    assert mc.decode_messages(mc.encode_message(via_raw))[0].properties == {"TAGS": "a", "KEYS": "k"}


def test_record_ending_right_after_the_body_is_rejected() -> None:
    cut = bytearray(GOLDEN_RECORD[:90])  # fields 1-15 only: no topic length byte
    struct.pack_into(">i", cut, 0, 90)
    with pytest.raises(InvalidBody):
        mc.decode_messages(bytes(cut))
