"""Instructions per pulled message: MessageStore.read_queue_raw (the pull path's store read) and
read_queue (the POP path), over a store of 4096 x 256-byte messages in one queue, pulls of 32.
Run with callgrind at two round counts; the difference / messages is the per-message cost."""
import sys, tempfile
from txmq.common.clock import FakeClock
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.store import MessageStore

rounds, which = int(sys.argv[1]), sys.argv[2]
N, BATCH = 4096, 32
with tempfile.TemporaryDirectory() as tmp:
    store = MessageStore.open(StoreConfig(data_dir=tmp, segment_bytes=1 << 28, flush_mode=FlushMode.ASYNC), clock=FakeClock())
    for i in range(N):
        store.put_nowait(PutRequest("T", 0, b"x" * 256, properties=b"KEYS\x01k%d\x02" % i, tags_code=i % 3))
    store.flush()
    read = store.read_queue_raw if which == "raw" else store.read_queue
    for _ in range(rounds):
        offset = 0
        while offset < N:
            offset = read("T", 0, offset, BATCH).next_offset
