"""The Python bindings against a live cluster (started by t/006_python.pl, which
sets TRAFFICDB_SHM, TRAFFICDB_LIB and PGHOST/PGPORT/PGDATABASE)."""
import os
import subprocess
import threading
import time

import pytest

import trafficdb

SHM = os.environ["TRAFFICDB_SHM"]


def sql(query):
    out = subprocess.run(["psql", "-XAtq", "-c", query], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture
def reader():
    with trafficdb.Reader(SHM) as r:
        yield r


def test_not_running_is_a_clear_error():
    with pytest.raises(trafficdb.NotRunning) as e:
        trafficdb.Reader("/trafficdb.no-such-server")
    assert "server down" in str(e.value)


def test_get_matches_sql(reader):
    with reader.snapshot() as snap:
        loc = snap.get(7)
        assert loc is not None and loc.id == 7
        speed, name, gen = sql("SELECT speed_kmh, name, generation FROM trafficdb.locations WHERE location_id = 7").split("|")
        assert loc.speed_kmh == pytest.approx(float(speed))
        assert loc.name == name
        assert snap.generation == int(gen)
        assert len(loc.shape) >= 2
        assert snap.get(-5) is None


def test_bbox_matches_sql(reader):
    box = (24.9, 60.15, 24.95, 60.18)
    with reader.snapshot() as snap:
        ids = sorted(loc.id for loc in snap.bbox(*box))
    want = sql(f"SELECT string_agg(location_id::text, ',' ORDER BY location_id) FROM trafficdb.locations "
               f"WHERE geom && ST_MakeEnvelope({box[0]}, {box[1]}, {box[2]}, {box[3]}, 4326)")
    assert ids and ids == [int(v) for v in want.split(",")]


def test_knn_and_radius(reader):
    with reader.snapshot() as snap:
        near = snap.knn(24.95, 60.17, 5)
        assert len(near) == 5 and len({loc.id for loc in near}) == 5
        around = snap.radius(24.95, 60.17, 2000)
        assert {loc.id for loc in near} <= {loc.id for loc in around} or len(around) >= 5


def test_snapshot_is_one_generation_and_ends(reader):
    with reader.snapshot() as snap:
        pinned = snap.generation
        before = snap.get(9).speed_kmh
        sql("INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (9, 123)")
        published = int(sql("SELECT trafficdb.publish()"))
        assert published > snap.generation
        assert snap.get(9).speed_kmh == before          # still the pinned generation
        changed = snap.changes_since(snap.generation - 1)
    with pytest.raises(trafficdb.TrafficDBError):
        snap.get(9)
    with reader.snapshot() as snap2:
        assert snap2.get(9).speed_kmh == 123
        # the daemon's own cycle may publish the row before publish() does
        # (then publish() adds a generation without changes): ask since the pin
        assert 9 in {loc.id for loc in snap2.changes_since(pinned)}
    assert isinstance(changed, list)


def test_wait_wakes_on_publish(reader):
    with reader.snapshot() as snap:
        gen = snap.generation

    def publish_later():
        time.sleep(0.3)
        sql("INSERT INTO trafficdb.feed (location_id, speed_kmh) VALUES (11, 44)")
        sql("SELECT trafficdb.publish()")

    t = threading.Thread(target=publish_later)
    t.start()
    newer = reader.wait(after=gen, timeout=10)
    t.join()
    assert newer is not None and newer > gen
    assert reader.wait(after=newer + 1000, timeout=0.05) is None
