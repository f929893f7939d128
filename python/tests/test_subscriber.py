"""trafficdb.Subscriber's iteration against a live cluster (started by t/006_python.pl, publishing every
100 ms): `for e in sub` lasts while traffic is quiet and ends when the subscriber is closed;
events(timeout_ms=N) ends after N ms without an event."""
import os
import subprocess
import threading
import time

import trafficdb

SHM = os.environ["TRAFFICDB_SHM"]


def sql(query):
    out = subprocess.run(["psql", "-XAtq", "-c", query], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_iteration_lasts_through_quiet_traffic_until_closed():
    # timeout_ms of the constructor (one receive's wait) is short: it must not end the iteration
    sub = trafficdb.Subscriber(SHM, ids=[13], timeout_ms=200)
    got = []

    def consume():
        for e in sub:
            got.append((e.kind, e.location_id))

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(1.5)                     # quiet: no change of location 13 (the daemon attaches the subscriber)
    assert t.is_alive(), "the iteration ended after 1.5 s without events"
    sql("INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (13, 31)")
    sql("SELECT trafficdb.publish()")
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got and got[0] == ("change", 13)
    assert t.is_alive()
    sub.close()                         # from another thread: the iteration ends
    t.join(5)
    assert not t.is_alive(), "the iteration did not end when the subscriber was closed"


def test_events_with_a_timeout_end_after_that_much_quiet():
    with trafficdb.Subscriber(SHM, ids=[15]) as sub:
        start = time.monotonic()
        assert list(sub.events(timeout_ms=300)) == []
        took = time.monotonic() - start
        assert 0.25 <= took < 3, took
    assert list(sub.events(timeout_ms=300)) == []    # closed: ends at once
