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


def test_events_with_timeout_zero_give_the_events_already_there():
    # events(timeout_ms=0) returned at once without looking: a change already queued was not given
    with trafficdb.Subscriber(SHM, ids=[17]) as sub:
        sub.receive(300)                                    # attached
        sql("INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (17, 23)")
        sql("SELECT trafficdb.publish()")
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = [(e.kind, e.location_id) for e in sub.events(timeout_ms=0)]
            time.sleep(0.05)
        assert got == [("change", 17)]
        start = time.monotonic()
        assert list(sub.events(timeout_ms=0)) == []
        assert list(sub.events(timeout_ms=-5)) == []        # negative: no wait, as 0
        assert time.monotonic() - start < 0.5


def test_timeouts_that_are_not_numbers_are_refused_when_called():
    import math
    import pytest
    with trafficdb.Subscriber(SHM, ids=[18]) as sub:
        for bad in ("100", "abc", b"1", [1]):
            with pytest.raises(TypeError, match="timeout_ms must be a number of milliseconds"):
                sub.events(timeout_ms=bad)                  # at the call, not at the first event
            with pytest.raises(TypeError, match="timeout_ms must be a number of milliseconds"):
                sub.receive(bad)
        with pytest.raises(ValueError, match="NaN"):
            sub.events(timeout_ms=math.nan)
        assert list(sub.events(timeout_ms=float("-inf"))) == []
        it = sub.events(timeout_ms=10 ** 40)                # huge: capped, no OverflowError
        sub.close()
        assert list(it) == []                               # and it ends at the close


def test_ctrl_c_interrupts_the_iteration_promptly():
    import signal
    import pytest
    # Python leaves SIGINT ignored when it started ignored (a test run from a background job, as
    # `make test &` or nohup does): then Ctrl-C never reaches the loop and it waits for ever.  The
    # test sets Python's own handler for its duration, and the loop is bounded whatever happens.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sub = trafficdb.Subscriber(SHM, ids=[19])               # timeout_ms 10 s: one receive's wait
    closer = threading.Timer(10, sub.close)                 # the bound, if SIGINT never arrives
    closer.start()
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            for e in sub:
                pass
        assert time.monotonic() - start < 1.5, "Ctrl-C was not noticed within the iteration's 500 ms wait"
    finally:
        closer.cancel()
        signal.signal(signal.SIGINT, previous)
        sub.close()
