"""trafficdb.Writer against a writers' ring that src/tests/test_ring.c (test_ring_python)
sets up and drains, committing every 20 ms: python3 ring_check.py PREFIX.
(Not named test_*: pytest under t/006_python.pl must not collect it.)"""
import sys

import trafficdb

prefix = sys.argv[1]
w = trafficdb.Writer(prefix)
w.put(1001, speed_kmh=12.5, free_flow_kmh=50, congestion=2, confidence=90, incident="Åland: road works",
      observed_at_us=1700000000000000)
assert w.put_many([{"location_id": 1002, "speed_kmh": 20}, (1003, 30.0)]) == 2
for kwargs, words in [({"speed_kmh": 401}, "speed_kmh 401"), ({"congestion": 7}, "congestion 7"),
                      ({"confidence": 101}, "confidence 101"), ({"incident": b"a\0b"}, "incident")]:
    try:
        w.put(1001, **kwargs)
        raise AssertionError(f"{kwargs}: no error")
    except trafficdb.BadArg as e:
        assert words in str(e), str(e)
try:
    w.put(999999, speed_kmh=1)
    raise AssertionError("no NotFound")
except trafficdb.NotFound as e:
    assert "999999" in str(e), str(e)
try:
    w.put_many([(1004, 1.0), (1005, 999.0)])
    raise AssertionError("no BadArg")
except trafficdb.BadArg as e:
    assert e.accepted == 1
w.put(1006, speed_kmh=66, sync=True)         # returns after a commit
assert w.sync(5000)
busy = None
for attempt in range(20):                    # a lane of 128 slots, 200 puts in one call
    try:
        w.put_many([(1007, 7.0)] * 200)
    except trafficdb.Busy as e:
        busy = e
        break
assert busy is not None and busy.retry_after_us > 0 and busy.accepted < 200, busy
w.close()
with trafficdb.Writer(prefix) as w2:
    w2.put(1008, confidence=80, wait=True)  # the same lane, still full: wait for the drain
print("OK")
