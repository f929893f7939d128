#!/usr/bin/env python3
"""bench/trails_parquet.py: the Python half of bench/trails_parquet.sh.

  trails_parquet.py gen-flights OUT.csv [SEED [FLIGHTS [SCALE]]]   (SCALE copies, ids and days shifted)
        a flight-shaped set (ADS-B like), seeded and reproducible
  trails_parquet.py gen-adsb OUT.csv [SEED [SCALE]]
        an OpenSky-shaped set (per-flight constant icao24, squawk, onground;
        a float track with all its decimals), SCALE copies shifted by a day
  trails_parquet.py gen-adsb-held OUT.csv [SEED]
        the gen-flights flights as ADS-B state vectors with velocities held
        while the aircraft flies straight (repeats), floats of 6-9 decimals:
        the hard case for file size (bench/trails_size.sh)
  trails_parquet.py parquet-size CSV ID COLUMNS_JSON TSFORMAT OUT.parquet
        writes the CSV as Parquet with DuckDB's defaults sorted by (ID, ts),
        prints its size in bytes
  trails_parquet.py proxy LISTEN_PORT UPSTREAM_PORT CONTROL_PORT
        a counting HTTP proxy on 127.0.0.1 in front of MinIO (loopback only)
  trails_parquet.py bench CONFIG.json
        writes the Parquet files with DuckDB, uploads them, runs the queries
        on both sides through the proxy and prints one TSV line per
        (dataset, query, side): the medians
  trails_parquet.py report RESULTS.tsv META.json
        the readable table: the defaults first, the best other layout beside

Everything here talks to 127.0.0.1 only.  DuckDB loads httpfs and spatial
from their PyPI packages (duckdb-extension-httpfs, duckdb-extension-spatial)
by path, with autoinstall and autoload off: it never downloads anything.
"""
import datetime as dt
import hashlib
import json
import math
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time


def log(msg):
    print(f"  bench/trails_parquet: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# the flight-shaped set
# --------------------------------------------------------------------------
CDG = (2.5479, 49.0097)   # lon, lat
ORY = (2.3652, 48.7262)
AIRLINES = ["AFR", "EZY", "BAW", "DLH", "KLM", "RYR", "TVF", "VLG", "SWR", "IBE", "UAE", "DAL"]


def flights(seed, nflights):
    """Yields (callsign, squawk, start, [(lon, lat, alt ft, ground speed kt,
    track, vertical rate ft/min, on ground)], [seconds between reports]) for
    nflights flights around Paris: departures from and arrivals at CDG and
    ORY, and overflights; 1,000-2,000 reports each, one every 4-6 s."""
    rng = random.Random(seed)
    day0 = dt.datetime(2026, 6, 15, 4, 0, tzinfo=dt.timezone.utc)
    ids = set()
    for _ in range(nflights):
        while True:
            cs = rng.choice(AIRLINES) + str(rng.randint(10, 9999))
            if cs not in ids:
                ids.add(cs)
                break
        kind = rng.choices(["dep_cdg", "arr_cdg", "dep_ory", "arr_ory", "over"],
                           [35, 30, 15, 12, 8])[0]
        n = rng.randint(1000, 2000)
        # squawk: 4 octal digits, a leading zero in about a third
        sq = rng.randint(0, 0o777) if rng.random() < 0.35 else rng.randint(0o1000, 0o7777)
        squawk = f"{sq:04o}"
        cruise = rng.randrange(28000, 39001, 1000)
        bearing = rng.uniform(0, 360)
        steps = [rng.uniform(4.0, 6.0) for _ in range(n)]
        pts = []
        if kind == "over":
            # cruise across the Paris area: start ~ (n * 5 s * 450 kt)/2 away
            spd = rng.uniform(420, 490)
            half_nm = sum(steps) * spd / 3600 / 2
            off = rng.uniform(-15, 15) / 60  # passes within ~15 nm
            cx, cy = 2.45 + off, 48.87 + rng.uniform(-15, 15) / 60
            lat = cy - half_nm / 60 * math.cos(math.radians(bearing))
            lon = cx - half_nm / 60 * math.sin(math.radians(bearing)) / math.cos(math.radians(cy))
            alt, trk, gs, vr, ground = float(cruise), bearing, spd, 0.0, False
            for s in steps:
                pts.append((lon, lat, alt, gs, trk, vr, ground))
                trk = (trk + rng.gauss(0, 0.3)) % 360
                gs = min(520, max(380, gs + rng.gauss(0, 0.5)))
                d = gs * s / 3600
                lat += d / 60 * math.cos(math.radians(trk))
                lon += d / 60 * math.sin(math.radians(trk)) / math.cos(math.radians(lat))
        else:
            ap = CDG if kind.endswith("cdg") else ORY
            lon, lat = ap[0] + rng.uniform(-0.01, 0.01), ap[1] + rng.uniform(-0.006, 0.006)
            elev = 392.0 if ap is CDG else 291.0
            runway = rng.choice([85.0, 265.0]) if ap is CDG else rng.choice([65.0, 245.0])
            alt, trk, gs, vr, ground = elev, rng.uniform(0, 360), 0.0, 0.0, True
            taxi = rng.randint(40, 120)      # reports on the ground
            for i, s in enumerate(steps):
                pts.append((lon, lat, alt, gs, trk, vr, ground))
                if i < taxi:
                    gs = max(0.0, min(25.0, gs + rng.gauss(1.0, 2.0)))
                    trk = (trk + rng.gauss(0, 8)) % 360
                    if i == taxi - 1:
                        trk = runway
                elif ground:
                    gs += rng.uniform(10, 16) * s / 4
                    if gs > 150:
                        ground = False
                else:
                    if alt < cruise:
                        vr = min(3500.0, max(800.0, (vr or 2200.0) + rng.gauss(0, 150)))
                        alt = min(float(cruise), alt + vr * s / 60)
                    else:
                        vr = rng.gauss(0, 40)
                    gs = min(480.0, gs + rng.uniform(0.5, 2.5) * s / 4) + rng.gauss(0, 0.5)
                    # turn towards the flight's bearing once above 3,000 ft
                    if alt > 3000:
                        diff = (bearing - trk + 540) % 360 - 180
                        trk = (trk + max(-3 * s, min(3 * s, diff)) + rng.gauss(0, 0.3)) % 360
                d = gs * s / 3600
                lat += d / 60 * math.cos(math.radians(trk))
                lon += d / 60 * math.sin(math.radians(trk)) / math.cos(math.radians(lat))
            if kind.startswith("arr"):
                # an arrival is a departure run backwards: it ends on the ground
                pts = [(x, y, a, g, (t + 180) % 360, -v, gr) for (x, y, a, g, t, v, gr) in reversed(pts)]
        start = day0 + dt.timedelta(seconds=rng.uniform(0, 14 * 3600))
        yield cs, squawk, start, pts, steps


def tstamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def gen_flights(out, seed=20261126, nflights=300):
    """The flights set: ~440 k reports of 300 flights (flights())."""
    rows = n = 0
    with open(out + ".tmp", "w") as f:
        f.write("callsign,ts,lon,lat,altitude,ground_speed,track,vertical_rate,squawk,on_ground\n")
        for cs, squawk, start, pts, steps in flights(seed, nflights):
            n += 1
            t = start
            for (x, y, a, g, trk, v, gr), s in zip(pts, steps):
                altitude = int(round(a / 25.0)) * 25
                vrate = int(round(v / 64.0)) * 64
                f.write(f"{cs},{tstamp(t)},{x:.6f},{y:.6f},{altitude},{g:.1f},{trk:.1f},{vrate},{squawk},"
                        f"{'true' if gr else 'false'}\n")
                rows += 1
                t += dt.timedelta(milliseconds=round(s * 1000))
    os.replace(out + ".tmp", out)
    log(f"{out}: {n} flights, {rows} reports")


def gen_adsb(out, seed=20261129, scale=1, nflights=200):
    """An ADS-B set shaped like OpenSky's state vectors (issue 33's flight
    data): ~300 k reports of 200 flights (flights()), with icao24, squawk
    and onground constant within a flight, the track a float with all its
    decimals, velocity in m/s and altitudes in metres.  scale > 1 adds
    scale - 1 more sets of distinct flights (another seed each), ids
    suffixed k, times k days later (scale 18: ~5.4 M reports).  Until
    2026-11-29 set k repeated set 0 value for value, which Parquet sorted by
    id stored almost once (73.7 MB by id, 211 MB by time)."""
    rows = 0
    with open(out + ".tmp", "w") as f:
        f.write("callsign,ts,lon,lat,icao24,velocity,track,vertrate,baroaltitude,squawk,onground\n")
        for k in range(scale):
            base = list(flights(seed + 7919 * k, nflights))
            rng = random.Random(seed + 1 + 7919 * k)
            icao = [rng.randrange(0x380000, 0x3C0000) for _ in base]     # French and German blocks
            ground = [rng.random() < 0.05 for _ in base]                   # a few ground vehicles
            shift = dt.timedelta(days=k)
            for i, (cs, squawk, start, pts, steps) in enumerate(base):
                csk = cs if k == 0 else f"{cs}_{k}"
                hexid = f"{(icao[i] + k * 0x400) & 0xFFFFFF:06x}"
                gr = "true" if ground[i] else "false"
                t = start + shift
                for (x, y, a, g, trk, v, _), s in zip(pts, steps):
                    f.write(f"{csk},{tstamp(t)},{x:.6f},{y:.6f},{hexid},{g * 0.514444:.2f},{trk!r},"
                            f"{v * 0.00508:.2f},{a * 0.3048:.2f},{squawk},{gr}\n")
                    rows += 1
                    t += dt.timedelta(milliseconds=round(s * 1000))
            if scale > 1:
                log(f"{out}: copy {k + 1} of {scale} written ({rows} reports)")
    os.replace(out + ".tmp", out)
    log(f"{out}: {nflights * scale} flights, {rows} reports")


def gen_adsb_held(out, seed=20261127):
    """ADS-B state vectors (as OpenSky exports them) of the gen-flights
    flights, one a second-ish: callsign (id), ts, lon, lat, icao24 (6 hex
    digits, constant per flight), squawk (constant per flight, leading
    zeros), onground (0/1, constant for long runs), track and velocity
    (derived from velocity components: full-precision doubles, held while the
    aircraft flies straight, so they repeat), vertrate (6-9 decimals, held),
    baroaltitude (metres, 2 decimals) and alert (0 nearly always)."""
    src = out + ".flights.tmp"
    gen_flights(src, seed)
    rng = random.Random(seed + 1)
    icao, held = {}, {}
    rows = 0
    with open(src) as fi, open(out + ".tmp", "w") as f:
        next(fi)
        f.write("callsign,ts,lon,lat,icao24,squawk,onground,track,velocity,vertrate,baroaltitude,alert\n")
        for line in fi:
            cs, ts, x, y, alt, gs, trk, vr, sq, gr = line.rstrip("\n").split(",")
            if cs not in icao:
                icao[cs] = f"{rng.randrange(0x300000, 0x4fffff):06x}"
                held[cs] = None
            h = held[cs]
            # a new velocity vector when the track or speed changed enough, else the held one
            t, g = float(trk), float(gs)
            if h is None or abs((t - h[0] + 540) % 360 - 180) > 0.8 or abs(g - h[1]) > 1.5 or rng.random() < 0.04:
                vx = g * 0.514444 * math.sin(math.radians(t + rng.uniform(-0.05, 0.05)))
                vy = g * 0.514444 * math.cos(math.radians(t + rng.uniform(-0.05, 0.05)))
                nd = rng.randint(6, 9)
                h = (t, g, math.degrees(math.atan2(vx, vy)) % 360, math.hypot(vx, vy),
                     round(int(vr) * 0.00508 + rng.uniform(-0.01, 0.01), nd))
                held[cs] = h
            f.write(f"{cs},{ts},{x},{y},{icao[cs]},{sq},{1 if gr == 'true' else 0},{h[2]!r},{h[3]!r},"
                    f"{h[4]!r},{round(int(alt) * 0.3048, 2)!r},{1 if rng.random() < 0.001 else 0}\n")
            rows += 1
    os.remove(src)
    os.replace(out + ".tmp", out)
    log(f"{out}: {len(icao)} flights, {rows} state vectors")


def parquet_size(csv, idcol, columns, tsformat, out):
    """The CSV as Parquet, DuckDB's defaults, sorted by (id, ts): its size."""
    import duckdb
    con = duckdb.connect(":memory:")
    cols = ", ".join(f"'{k}': '{v}'" for k, v in json.loads(columns))
    con.execute(f"COPY (SELECT * FROM read_csv('{csv}', header = true, columns = {{{cols}}}, "
                f"timestampformat = '{tsformat}') ORDER BY {idcol}, ts) TO '{out}' (FORMAT parquet)")
    con.close()
    print(os.path.getsize(out))


def scale_flights(out, scale):
    """The set SCALE times: copy k (1 .. SCALE-1) of every flight has the
    callsign suffixed -k and its reports k days later (a bigger file of the
    same shape, as the issue's x18 set)."""
    if scale <= 1:
        return
    days = {}
    rows = 0
    with open(out) as src, open(out + ".tmp", "w") as f:
        header = src.readline()
        f.write(header)
        base = src.readlines()
        for k in range(scale):
            for line in base:
                cs, rest = line.split(",", 1)
                if k:
                    d = rest[:10]
                    key = (d, k)
                    if key not in days:
                        days[key] = (dt.date.fromisoformat(d) + dt.timedelta(days=k)).isoformat()
                    line = f"{cs}-{k},{days[key]}{rest[10:]}"
                f.write(line)
                rows += 1
    os.replace(out + ".tmp", out)
    log(f"{out}: x{scale}, {rows} reports")


# --------------------------------------------------------------------------
# the counting proxy
# --------------------------------------------------------------------------
class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.zero()

    def zero(self):
        self.requests = 0
        self.methods = {}
        self.resp_total = 0      # every byte MinIO sent (heads and bodies)
        self.resp_body = 0       # response bodies only
        self.req_total = 0       # every byte the clients sent
        self.ranges = []         # Range headers of GETs (the first 200)
        self.connections = 0

    def snap(self):
        with self.lock:
            d = dict(requests=self.requests, methods=dict(self.methods), resp_total=self.resp_total,
                     resp_body=self.resp_body, req_total=self.req_total, ranges=list(self.ranges),
                     connections=self.connections)
            self.zero()
            return d


class HttpParser:
    """Splits one direction of an HTTP/1.1 connection into messages: for a
    request stream it records methods (and queues them for the response
    side), for a response stream it counts body bytes."""

    def __init__(self, counts, is_response, methods_queue):
        self.c = counts
        self.resp = is_response
        self.q = methods_queue
        self.buf = b""
        self.state = "head"
        self.left = 0          # body bytes left (length mode)
        self.chunk_state = None

    def feed(self, data):
        if self.resp:
            with self.c.lock:
                self.c.resp_total += len(data)
        else:
            with self.c.lock:
                self.c.req_total += len(data)
        self.buf += data
        for _ in range(100000):        # bounded: a few messages per read at most
            if not self.step():
                break

    def body(self, n):
        if self.resp and n:
            with self.c.lock:
                self.c.resp_body += n

    def step(self):
        if self.state == "head":
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                if len(self.buf) > 1 << 20:
                    raise ValueError("header over 1 MB")
                return False
            head, self.buf = self.buf[:i].decode("latin-1"), self.buf[i + 4:]
            lines = head.split("\r\n")
            hdr = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdr[k.strip().lower()] = v.strip()
            if self.resp:
                status = int(lines[0].split()[1])
                if 100 <= status < 200:
                    return True            # interim: the final response follows
                method = self.q.pop(0) if self.q else "?"
                no_body = method == "HEAD" or status in (204, 304)
            else:
                method = lines[0].split()[0]
                self.q.append(method)
                with self.c.lock:
                    self.c.requests += 1
                    self.c.methods[method] = self.c.methods.get(method, 0) + 1
                    if method == "GET" and len(self.c.ranges) < 200:
                        self.c.ranges.append(hdr.get("range", "-"))
                no_body = False
            if no_body:
                return True
            if "chunked" in hdr.get("transfer-encoding", "").lower():
                self.state, self.chunk_state = "chunked", "size"
            elif "content-length" in hdr:
                self.left = int(hdr["content-length"])
                self.state = "length" if self.left > 0 else "head"
            elif self.resp:
                self.state = "close"       # until the connection closes
            return True
        if self.state == "length":
            n = min(self.left, len(self.buf))
            self.body(n)
            self.left -= n
            self.buf = self.buf[n:]
            if self.left == 0:
                self.state = "head"
                return True
            return False
        if self.state == "close":
            self.body(len(self.buf))
            self.buf = b""
            return False
        if self.state == "chunked":
            if self.chunk_state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return False
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2:]
                if size == 0:
                    self.chunk_state = "trailer"
                else:
                    self.left, self.chunk_state = size + 2, "data"
                return True
            if self.chunk_state == "data":
                n = min(self.left, len(self.buf))
                self.body(max(0, min(n, self.left - 2)))
                self.left -= n
                self.buf = self.buf[n:]
                if self.left == 0:
                    self.chunk_state = "size"
                    return True
                return False
            if self.chunk_state == "trailer":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return False
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                if line == b"":
                    self.state = "head"
                return True
        return False


def pipe(src, dst, parser):
    try:
        while True:
            data = src.recv(262144)
            if not data:
                break
            parser.feed(data)          # counted before it is forwarded
            dst.sendall(data)
    except (OSError, ValueError):
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def proxy_main(listen_port, upstream_port, control_port):
    counts = Counts()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(128)
    cs = socket.socket()
    cs.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    cs.bind(("127.0.0.1", control_port))
    cs.listen(8)
    live = [0]

    def conn(client):
        try:
            up = socket.create_connection(("127.0.0.1", upstream_port), timeout=30)
        except OSError:
            client.close()
            return
        up.settimeout(120)
        client.settimeout(120)
        for s in (up, client):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        q = []
        with counts.lock:
            counts.connections += 1
        t = threading.Thread(target=pipe, args=(client, up, HttpParser(counts, False, q)), daemon=True)
        t.start()
        pipe(up, client, HttpParser(counts, True, q))
        t.join(130)
        up.close()
        client.close()
        live[0] -= 1

    def control():
        while True:
            c, _ = cs.accept()
            with c:
                cmd = c.recv(64).strip()
                if cmd == b"snap":
                    c.sendall(json.dumps(counts.snap()).encode() + b"\n")
                elif cmd == b"quit":
                    os._exit(0)

    threading.Thread(target=control, daemon=True).start()
    while True:
        c, _ = ls.accept()
        if live[0] >= 256:            # bounded: refuse past 256 open connections
            c.close()
            continue
        live[0] += 1
        threading.Thread(target=conn, args=(c,), daemon=True).start()


def proxy_snap(control_port):
    with socket.create_connection(("127.0.0.1", control_port), timeout=10) as c:
        c.sendall(b"snap\n")
        data = b""
        while not data.endswith(b"\n"):
            d = c.recv(65536)
            if not d:
                break
            data += d
    return json.loads(data)


# --------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def norm(v):
    """A value as both sides should agree on it: times in µs since 1970,
    floats rounded to 6 decimals, booleans as 0/1."""
    if isinstance(v, dt.datetime):
        d = v - (EPOCH_TZ if v.tzinfo else EPOCH)
        return d // dt.timedelta(microseconds=1)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        return 0.0 if v == 0 else round(v, 6)
    if hasattr(v, "is_integer") or type(v).__name__ == "Decimal":
        return round(float(v), 6)
    return v


def checksum(rows):
    rs = sorted(repr(tuple(norm(v) for v in r)) for r in rows)
    h = hashlib.sha256()
    for r in rs:
        h.update(r.encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


class Duck:
    def __init__(self, cfg):
        import duckdb
        import duckdb_extension_httpfs
        import duckdb_extension_spatial
        self.duckdb = duckdb
        self.version = duckdb.__version__
        self.ext = [os.path.join(os.path.dirname(m.__file__), "extensions", f"v{self.version}",
                                 f"{n}.duckdb_extension")
                    for m, n in ((duckdb_extension_httpfs, "httpfs"), (duckdb_extension_spatial, "spatial"))]
        for p in self.ext:
            if not os.path.exists(p):
                raise SystemExit(f"bench/trails_parquet: {p} missing (duckdb and its extension packages disagree?)")
        self.cfg = cfg

    def connect(self, endpoint_port):
        c = self.duckdb.connect(":memory:", config={
            "autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "extension_directory": self.cfg["work"] + "/duckdb-ext"})
        for p in self.ext:
            c.execute(f"LOAD '{p}'")
        c.execute(f"""CREATE SECRET minio (TYPE s3, KEY_ID '{self.cfg["key"]}', SECRET '{self.cfg["secret"]}',
                      REGION 'us-east-1', ENDPOINT '127.0.0.1:{endpoint_port}', URL_STYLE 'path', USE_SSL false)""")
        # cold: no cache across queries (a fresh in-memory database has none anyway)
        c.execute("SET enable_external_file_cache = false")
        c.execute("SET enable_http_metadata_cache = false")
        c.execute("SET parquet_metadata_cache = false")
        return c


def run_pg(cfg, sql, server, cache_dir):
    import psycopg2
    dsn = dict(host="127.0.0.1", port=cfg["pg_port"], user="postgres", dbname=cfg["pg_db"])
    with psycopg2.connect(**dsn) as a:
        a.autocommit = True
        with a.cursor() as cur:
            cur.execute(f"ALTER SERVER {server} OPTIONS (SET cache_dir %s)", (cache_dir,))
    a.close()
    c = psycopg2.connect(**dsn)            # a fresh backend: an empty memory cache
    try:
        with c.cursor() as cur:
            cur.execute("SET TimeZone = 'UTC'; SET statement_timeout = '120s'")
            # load PostGIS in the backend before the clock starts (DuckDB loads its extensions first too)
            cur.execute("SELECT ST_AsText('SRID=4326;POINT(0 0)'::geometry::geography::geometry)")
            cur.fetchall()
            t0 = time.perf_counter()
            cur.execute(sql)
            rows = cur.fetchall()
            ms = (time.perf_counter() - t0) * 1000
        c.rollback()
    finally:
        c.close()
    return ms, rows


def explain_pg(cfg, sql, server, cache_dir):
    """Our plan with its figures (one more cold run, not measured)."""
    import psycopg2
    dsn = dict(host="127.0.0.1", port=cfg["pg_port"], user="postgres", dbname=cfg["pg_db"])
    with psycopg2.connect(**dsn) as a:
        a.autocommit = True
        with a.cursor() as cur:
            cur.execute(f"ALTER SERVER {server} OPTIONS (SET cache_dir %s)", (cache_dir,))
    a.close()
    c = psycopg2.connect(**dsn)
    try:
        with c.cursor() as cur:
            cur.execute("SET TimeZone = 'UTC'; SET statement_timeout = '120s'")
            cur.execute("EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql)
            plan = [r[0] for r in cur.fetchall()]
        c.rollback()
    finally:
        c.close()
    return plan


def engine_pg(cfg, sql, server, cache_dir):
    """Server-side time without moving rows to the client: EXPLAIN (ANALYZE,
    TIMING OFF) of the query in a fresh backend (PostGIS loaded first, as in
    run_pg).  Returns (execution ms, planning ms, the top node's rows)."""
    import psycopg2
    dsn = dict(host="127.0.0.1", port=cfg["pg_port"], user="postgres", dbname=cfg["pg_db"])
    with psycopg2.connect(**dsn) as a:
        a.autocommit = True
        with a.cursor() as cur:
            cur.execute(f"ALTER SERVER {server} OPTIONS (SET cache_dir %s)", (cache_dir,))
    a.close()
    c = psycopg2.connect(**dsn)
    try:
        with c.cursor() as cur:
            cur.execute("SET TimeZone = 'UTC'; SET statement_timeout = '120s'")
            cur.execute("SELECT ST_AsText('SRID=4326;POINT(0 0)'::geometry::geography::geometry)")
            cur.fetchall()
            cur.execute("EXPLAIN (ANALYZE, TIMING OFF) " + sql)
            plan = [r[0] for r in cur.fetchall()]
        c.rollback()
    finally:
        c.close()
    ex = pl = rows = None
    for ln in plan:
        if ln.startswith("Execution Time:"):
            ex = float(ln.split()[2])
        elif ln.startswith("Planning Time:"):
            pl = float(ln.split()[2])
    m = re.search(r"actual rows=(\d+)", plan[0])
    if m:
        rows = int(m.group(1))
    if ex is None or pl is None:
        raise SystemExit("bench/trails_parquet: no Execution/Planning Time in\n  " + "\n  ".join(plan))
    return ex, pl, rows


def engine_duck(duck, port, sql):
    """DuckDB's own total time (its profiler's latency: binding, which reads
    the Parquet footer, planning and execution, without handing rows to
    Python): EXPLAIN ANALYZE in a fresh database.  Returns (ms, the top
    operator's rows)."""
    c = duck.connect(port)
    try:
        timer = threading.Timer(120, c.interrupt)
        timer.start()
        out = c.execute("EXPLAIN ANALYZE " + sql).fetchall()
        timer.cancel()
    finally:
        c.close()
    text = "\n".join(str(r[-1]) for r in out)
    m = re.search(r"Total Time: ([0-9.]+)s", text)
    if not m:
        raise SystemExit("bench/trails_parquet: no Total Time in DuckDB's EXPLAIN ANALYZE:\n" + text)
    # the operators' row counts, top down: EXPLAIN_ANALYZE's own (0), then the query's top operator
    counts = [int(x.replace(",", "")) for x in re.findall(r"(?<![~0-9,.])([0-9][0-9,]*) rows?\b", text)]
    return float(m.group(1)) * 1000, (counts[1] if len(counts) > 1 else None)


def run_duck(duck, port, sql):
    c = duck.connect(port)
    try:
        timer = threading.Timer(120, c.interrupt)
        timer.start()
        t0 = time.perf_counter()
        rows = c.execute(sql).fetchall()
        ms = (time.perf_counter() - t0) * 1000
        timer.cancel()
    finally:
        c.close()
    return ms, rows


def queries(ds, p):
    """(name, what, duckdb sql, postgres sql) for one data set."""
    idc, extra, q5col = ds["id"], ds["extra"], ds["q5"]
    pq = "{pq}"                     # read_parquet(...) of the id- or the time-sorted file
    cols_d = ", ".join([idc, "ts", "lon", "lat"] + extra)
    cols_p = ", ".join([idc, "ts", "ST_X(geom) AS lon", "ST_Y(geom) AS lat"] + extra)
    idlit = f"'{p['id']}'" if isinstance(p["id"], str) else str(p["id"])
    x0, y0, x1, y1 = p["box"]
    cx, cy = p["centre"]
    # bbox prefilter of the radius, as a DuckDB user writes it: 3 km plus a margin
    dlat = 3100 / 111132.0
    dlon = dlat / math.cos(math.radians(cy))
    q5_d = f"max({q5col})"
    q5_p = f"max({q5col})"         # lat: the column the bench adds to the imported table
    ids = ", ".join(f"('{i}')" if isinstance(i, str) else f"({i})" for i in p["ids"])
    return [
        ("q1_one_trail", f"{idc} = {p['id']}",
         f"SELECT {cols_d} FROM {pq} WHERE {idc} = {idlit}",
         f"SELECT {cols_p} FROM {{t}} WHERE {idc} = {idlit}"),
        ("q2_window_5min", f"ts in [{p['t0']}, {p['t1']}]",
         f"SELECT {cols_d} FROM {pq} WHERE ts >= TIMESTAMP '{p['t0']}' AND ts <= TIMESTAMP '{p['t1']}'",
         f"SELECT {cols_p} FROM {{t}} WHERE ts >= '{p['t0']}+00' AND ts <= '{p['t1']}+00'"),
        ("q3_box", f"box {x0},{y0},{x1},{y1}",
         f"SELECT {cols_d} FROM {pq} WHERE lon BETWEEN {x0} AND {x1} AND lat BETWEEN {y0} AND {y1}",
         # ST_Intersects is exact like BETWEEN; && on PostGIS's float4 boxes matched 3 more (x18)
         f"SELECT {cols_p} FROM {{t}} WHERE ST_Intersects(geom, ST_MakeEnvelope({x0}, {y0}, {x1}, {y1}, 4326))"),
        ("q4_radius_3km", f"3 km of {cx},{cy}",
         f"SELECT {cols_d} FROM {pq} WHERE lon BETWEEN {cx - dlon:.6f} AND {cx + dlon:.6f} "
         f"AND lat BETWEEN {cy - dlat:.6f} AND {cy + dlat:.6f} "
         f"AND ST_Distance_Spheroid(ST_Point(lat, lon), ST_Point({cy}, {cx})) <= 3000",
         f"SELECT {cols_p} FROM {{t}} WHERE ST_DWithin(geom::geography, "
         f"ST_SetSRID(ST_MakePoint({cx}, {cy}), 4326)::geography, 3000)"),
        ("q5_max_per_id", f"max({q5col}) GROUP BY {idc}",
         f"SELECT {idc}, {q5_d} FROM {pq} GROUP BY {idc}",
         f"SELECT {idc}, {q5_p} FROM {{t}} GROUP BY {idc}"),
        ("q6_count", "count(*)",
         f"SELECT count(*) FROM {pq}",
         "SELECT count(*) FROM {t}"),
        ("q7_map_5min", f"{idc}, ts, lon, lat in ts [{p['t0']}, {p['t1']}]",
         f"SELECT {idc}, ts, lon, lat FROM {pq} WHERE ts >= TIMESTAMP '{p['t0']}' AND ts <= TIMESTAMP '{p['t1']}'",
         f"SELECT {idc}, ts, ST_X(geom) AS lon, ST_Y(geom) AS lat FROM {{t}} "
         f"WHERE ts >= '{p['t0']}+00' AND ts <= '{p['t1']}+00'"),
        ("q8_join_100_ids", f"{len(p['ids'])} ids joined",
         f"SELECT {cols_d} FROM (VALUES {ids}) AS ids(id) JOIN {pq} ON {idc} = ids.id",
         f"SELECT {cols_p} FROM (VALUES {ids}) AS ids(id) JOIN {{t}} ON {{t}}.{idc} = ids.id"),
    ]


def pick_params(con, ds, bucket):
    """The query constants, from the local copy of the data."""
    t = ds["name"]
    # Q1: the id of median report count (a mid-sized trail)
    ids = con.execute(f"SELECT {ds['id']}, count(*) n FROM {t} GROUP BY 1 ORDER BY n, 1").fetchall()
    pid, pn = ids[len(ids) // 2]
    # Q2: the 5 minutes from the middle of the span
    lo, hi = con.execute(f"SELECT min(ts), max(ts) FROM {t}").fetchone()
    mid = lo + (hi - lo) / 2
    if ds.get("q2_at") == "median":
        # a typical busy window: of the 5-minute bins that hold reports, the one of median count
        # (copies a day apart leave nights empty, and the middle of their span falls in one)
        nb = con.execute(f"SELECT count(DISTINCT time_bucket(INTERVAL 5 MINUTE, ts)) FROM {t}").fetchone()[0]
        mid = con.execute(f"SELECT time_bucket(INTERVAL 5 MINUTE, ts) b, count(*) n FROM {t} GROUP BY 1 "
                          f"ORDER BY n, b LIMIT 1 OFFSET {nb // 2}").fetchone()[0]
    mid = mid.replace(microsecond=0)
    t0, t1 = mid, mid + dt.timedelta(minutes=5)
    # Q3/Q4 centre: CDG for flights, else the busiest 0.1-degree cell's centre
    if ds.get("airport"):
        cx, cy = ds["airport"]
    else:
        gx, gy, _ = con.execute(f"SELECT floor(lon * 10) gx, floor(lat * 10) gy, count(*) n FROM {t} "
                                "GROUP BY 1, 2 ORDER BY n DESC, 1, 2 LIMIT 1").fetchone()
        cx, cy = round((gx + 0.5) / 10, 4), round((gy + 0.5) / 10, 4)
    # no report within 1 cm of the 3 km circle: both sides solve the same
    # inverse geodesic on WGS 84 (PostGIS and DuckDB spatial with
    # GeographicLib) and then agree on every row; bounded nudges
    for k in range(40):
        near = con.execute(f"SELECT count(*) FROM {t} WHERE abs(ST_Distance_Spheroid(ST_Point(lat, lon), "
                           f"ST_Point({cy}, {cx})) - 3000) < 0.01").fetchone()[0]
        if near == 0:
            break
        cx, cy = round(cx + 0.00031 * (k + 1), 6), round(cy + 0.00017 * (k + 1), 6)
    else:
        raise SystemExit(f"bench/trails_parquet: {t}: no radius centre without reports on its circle")
    box = (round(cx - 0.1, 4), round(cy - 0.1, 4), round(cx + 0.1, 4), round(cy + 0.1, 4))
    # Q8: 100 ids (all when fewer), drawn with a fixed seed
    every = sorted(i for i, _ in ids)
    join = sorted(random.Random(33).sample(every, min(100, len(every))))
    return dict(id=pid, id_reports=pn, t0=t0.isoformat(sep=" "), t1=t1.isoformat(sep=" "),
                box=box, centre=(cx, cy), bucket=bucket, ids=join)


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def bench_main(cfg_path):
    cfg = json.load(open(cfg_path))
    duck = Duck(cfg)
    work = cfg["work"]
    os.makedirs(work + "/duckdb-ext", exist_ok=True)
    nruns = int(cfg.get("runs", 3))
    cport = cfg["proxy_control"]
    pport = cfg["proxy_port"]
    out = open(cfg["out"], "w")
    meta = {"duckdb": duck.version, "datasets": {}}

    wanted = cfg.get("sets", "").split()
    for ds in cfg["datasets"]:
        name = ds["name"]
        if wanted and name not in wanted:
            continue
        local = duck.duckdb.connect(":memory:", config={
            "autoinstall_known_extensions": False, "autoload_known_extensions": False,
            "extension_directory": work + "/duckdb-ext"})
        for p in duck.ext:
            local.execute(f"LOAD '{p}'")
        cols = ", ".join(f"'{k}': '{v}'" for k, v in ds["columns"])
        local.execute(f"CREATE TABLE {name} AS SELECT * FROM read_csv('{ds['csv']}', header = true, "
                      f"columns = {{{cols}}}, timestampformat = '{ds.get('tsformat', '%Y-%m-%dT%H:%M:%S')}')")
        pq = f"{work}/{name}.parquet"
        t0 = time.perf_counter()
        local.execute(f"COPY (SELECT * FROM {name} ORDER BY {ds['id']}, ts) TO '{pq}' (FORMAT parquet)")
        pq_ms = (time.perf_counter() - t0) * 1000
        # the same sorted by time (the order a time window or a map prefers)
        pqt = f"{work}/{name}.bytime.parquet"
        local.execute(f"COPY (SELECT * FROM {name} ORDER BY ts, {ds['id']}) TO '{pqt}' (FORMAT parquet)")
        md = local.execute(f"SELECT row_group_id, any_value(row_group_num_rows), any_value(compression), "
                           f"sum(total_compressed_size) FROM parquet_metadata('{pq}') GROUP BY 1 ORDER BY 1").fetchall()
        params = pick_params(local, ds, cfg["bucket"])
        local.close()
        size = os.path.getsize(pq)
        for f, key in ((pq, f"{name}.parquet"), (pqt, f"{name}.bytime.parquet")):
            subprocess.run([cfg["put"], "put", f, f"s3://{cfg['bucket']}/{key}"], check=True, timeout=1200,
                           stdout=subprocess.DEVNULL)
        read_pq = {"duckdb": f"read_parquet('s3://{cfg['bucket']}/{name}.parquet')",
                   "duckdb_time": f"read_parquet('s3://{cfg['bucket']}/{name}.bytime.parquet')"}
        meta["datasets"][name] = dict(parquet_bytes=size, parquet_time_bytes=os.path.getsize(pqt),
                                      parquet_write_ms=round(pq_ms), scale=cfg.get("scale", 1),
                                      row_groups=len(md), row_group_rows=[r[1] for r in md],
                                      compression=sorted({r[2] for r in md}), params=params,
                                      trail_bytes=ds["trail_bytes"], trail_pages=ds["trail_pages"],
                                      layouts=dict(cfg["layouts"]))
        log(f"{name}: parquet {size} bytes, {len(md)} row groups of {[r[1] for r in md][:3]}... rows, "
            f"{sorted({r[2] for r in md})}; trail {ds['trail_bytes']} bytes; params {params}")

        only = cfg.get("queries", "").split()
        for qname, what, dsql, psql in queries(ds, params):
            if only and qname.split("_")[0] not in only:
                continue
            results = {}
            # our side, per layout and block size, cold with a fresh disk
            # cache (filled as it reads) and, if asked, cold without one
            # (cache_dir 'none')
            sides = [("duckdb", None, None, None), ("duckdb_time", None, None, None)]
            for lay, _ in cfg["layouts"]:
                for bs, srv in cfg["servers"]:
                    sides.append((f"trail_{lay}_{bs}", f"{srv}_{lay}", True, srv))
                    if cfg.get("nocache"):
                        sides.append((f"trail_{lay}_{bs}_nocache", f"{srv}_{lay}", False, srv))
            plans = {}
            for side, schema, disk, srv in sides:
                runs = []
                for i in range(nruns):
                    proxy_snap(cport)                  # zero the counters
                    if srv is None:
                        ms, rows = run_duck(duck, pport, dsql.format(pq=read_pq[side]))
                    else:
                        cache = f"{cfg['cache_root']}/{name}-{qname}-{side}-{i}" if disk else "none"
                        ms, rows = run_pg(cfg, psql.format(t=f"{schema}.{name}"), srv, cache)
                    time.sleep(0.05)                   # the connection is closed: all counted
                    s = proxy_snap(cport)
                    runs.append(dict(ms=ms, rows=len(rows), sum=checksum(rows), body=s["resp_body"],
                                     total=s["resp_total"], requests=s["requests"], methods=s["methods"],
                                     ranges=s["ranges"], connections=s["connections"]))
                sums = {r["sum"] for r in runs}
                if len(sums) != 1:
                    raise SystemExit(f"bench/trails_parquet: {name} {qname} {side}: runs disagree")
                # the engine's time: the same query cold again, rows not moved to the client
                eng = []
                for i in range(nruns):
                    proxy_snap(cport)
                    if srv is None:
                        ems, erows = engine_duck(duck, pport, dsql.format(pq=read_pq[side]))
                        eplan = None
                    else:
                        cache = f"{cfg['cache_root']}/{name}-{qname}-{side}-engine-{i}" if disk else "none"
                        ems, eplan, erows = engine_pg(cfg, psql.format(t=f"{schema}.{name}"), srv, cache)
                    time.sleep(0.05)
                    s = proxy_snap(cport)
                    eng.append(dict(ms=ems, plan=eplan, rows=erows, body=s["resp_body"], requests=s["requests"]))
                for i, r in enumerate(runs):
                    r["engine"] = eng[i]
                results[side] = runs
                if srv is not None:
                    cache = f"{cfg['cache_root']}/{name}-{qname}-{side}-explain" if disk else "none"
                    plans[side] = explain_pg(cfg, psql.format(t=f"{schema}.{name}"), srv, cache)
                    proxy_snap(cport)
                    footer = any("Aggregates From Footer" in ln for ln in plans[side])
                    if qname in ("q5_max_per_id", "q6_count") and not side.startswith("trail_v1_") \
                            and not footer:
                        raise SystemExit(f"bench/trails_parquet: {name} {qname} {side}: not answered from the "
                                         "footer:\n  " + "\n  ".join(plans[side]))
            base = results["duckdb"][0]
            for side, runs in results.items():
                r0 = runs[0]
                if r0["rows"] != base["rows"]:
                    raise SystemExit(f"bench/trails_parquet: {name} {qname}: {side} returned {r0['rows']} rows, "
                                     f"DuckDB {base['rows']}")
                if r0["sum"] != base["sum"]:
                    raise SystemExit(f"bench/trails_parquet: {name} {qname}: {side} rows differ from DuckDB's "
                                     f"(checksum {r0['sum']} vs {base['sum']}, {r0['rows']} rows each)")
                eng = [r["engine"] for r in runs]
                e_body = int(median_of(eng, "body"))
                if side == "duckdb" and all(e["rows"] is None for e in eng):
                    log(f"note {name} {qname}: DuckDB's EXPLAIN ANALYZE shows no operator (answered while "
                        f"optimizing), Total Time {[round(e['ms'], 1) for e in eng]} ms")
                elif any(e["rows"] != r0["rows"] for e in eng):
                    log(f"WARNING {name} {qname} {side}: EXPLAIN ANALYZE's top rows {[e['rows'] for e in eng]}, "
                        f"the query returned {r0['rows']}")
                if e_body != int(median_of(runs, "body")):
                    log(f"note {name} {qname} {side}: EXPLAIN ANALYZE fetched {e_body} B (median), "
                        f"the query {int(median_of(runs, 'body'))} B")
                line = [name, qname, side, r0["rows"], f"{median_of(runs, 'ms'):.1f}", int(median_of(runs, "body")),
                        int(median_of(runs, "total")), int(median_of(runs, "requests")),
                        f"{median_of(eng, 'ms'):.2f}",
                        f"{median_of(eng, 'plan'):.2f}" if eng[0]["plan"] is not None else "",
                        e_body, int(median_of(eng, "requests")),
                        ",".join(str(e["rows"]) for e in eng)]
                out.write("\t".join(str(v) for v in line) + "\n")
                out.flush()
            meta["datasets"][name].setdefault("queries", {})[qname] = dict(
                what=what, duckdb_sql=dsql, postgres_sql=psql,
                detail={side: dict(methods=runs[0]["methods"], ranges=runs[0]["ranges"][:40],
                                   connections=runs[0]["connections"], ms=[round(r["ms"], 1) for r in runs],
                                   body=[r["body"] for r in runs], requests=[r["requests"] for r in runs],
                                   engine=dict(ms=[round(r["engine"]["ms"], 2) for r in runs],
                                               plan_ms=[r["engine"]["plan"] for r in runs],
                                               rows=[r["engine"]["rows"] for r in runs],
                                               body=[r["engine"]["body"] for r in runs],
                                               requests=[r["engine"]["requests"] for r in runs]),
                                   **({"plan": plans[side]} if side in plans else {}))
                        for side, runs in results.items()})
            log(f"{name} {qname}: {base['rows']} rows; " + ", ".join(
                f"{side} {median_of(runs, 'ms'):.0f} ms (engine {median_of([r['engine'] for r in runs], 'ms'):.1f})"
                f" {int(median_of(runs, 'body'))} B "
                f"{int(median_of(runs, 'requests'))} req" for side, runs in results.items()))
    out.close()
    with open(cfg["meta"], "w") as f:
        json.dump(meta, f, indent=1, default=str)


def report(tsv, meta_path):
    """The readable table: per data set and query, DuckDB on both Parquet
    files, then the trail defaults (ratios against each), then the best of
    the other layouts and block sizes."""
    rows = [ln.rstrip("\n").split("\t") for ln in open(tsv)]
    meta = json.load(open(meta_path))
    print(f"\nTrail files (trail FDW) vs DuckDB {meta['duckdb']} on Parquet sorted by id, time ('id') and by "
          "time ('ts'), same MinIO, cold, medians; bytes = response bodies from MinIO; engine ms = server-side "
          "time without moving rows to the client; x = ours / DuckDB's (< 1: fewer bytes, faster)")
    worst = {}
    for name, m in meta["datasets"].items():
        lays = m["layouts"]
        print(f"\n### {name}" + (f" (x{m['scale']})" if m.get("scale", 1) > 1 else "") + "\n")
        print(f"Parquet by id {m['parquet_bytes']:,} B ({m['row_groups']} row groups of {m['row_group_rows'][0]:,} "
              f"rows), by time {m['parquet_time_bytes']:,} B; " + "; ".join(
                  f"{lab} {m['trail_bytes'][lay]:,} B ({m['trail_bytes'][lay] / m['parquet_bytes']:.2f}x), "
                  f"{m['trail_pages'][lay]:,} pages" for lay, lab in lays.items()))
        print("\n| query | rows | DuckDB id: bytes, engine ms | DuckDB ts: bytes, engine ms "
              "| defaults: bytes (x id, x ts) | engine ms (x id, x ts) | ms to client (x id, x ts) "
              "| best other: layout, block | bytes (x id, x ts) | engine ms (x id, x ts) |")
        print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")

        def x(a, b):
            return f"{a / b:.2f}" if b else "-"
        for q in m["queries"]:
            r = {side: dict(rows=int(n), ms=float(ms), body=int(b), ems=float(ems))
                 for st, qq, side, n, ms, b, t, req, ems, *_ in rows if st == name and qq == q}
            d, dt_ = r["duckdb"], r["duckdb_time"]
            ours = [sd for sd in r if sd.startswith("trail_") and not sd.endswith("_nocache")]
            dflt = "trail_default_0" if "trail_default_0" in r else ours[0]
            o = r[dflt]

            def label(sd):
                lay, bs = sd[len("trail_"):].rsplit("_", 1)
                bs = int(bs)
                return (f"{lays.get(lay, lay)}, " + ("default blocks" if bs == 0 else
                        f"{bs // 1048576} MB" if bs >= 1048576 else f"{bs // 1024} kB"))
            others = sorted((sd for sd in ours if sd != dflt), key=lambda sd: (r[sd]["body"], r[sd]["ems"]))
            best = (f"{label(others[0])} | {r[others[0]]['body']:,} ({x(r[others[0]]['body'], d['body'])}, "
                    f"{x(r[others[0]]['body'], dt_['body'])}) | {r[others[0]]['ems']:.1f} "
                    f"({x(r[others[0]]['ems'], d['ems'])}, {x(r[others[0]]['ems'], dt_['ems'])})"
                    if others else "| |")
            print(f"| {q} | {d['rows']:,} | {d['body']:,}, {d['ems']:.1f} | {dt_['body']:,}, {dt_['ems']:.1f} "
                  f"| {o['body']:,} ({x(o['body'], d['body'])}, {x(o['body'], dt_['body'])}) "
                  f"| {o['ems']:.1f} ({x(o['ems'], d['ems'])}, {x(o['ems'], dt_['ems'])}) "
                  f"| {o['ms']:.0f} ({x(o['ms'], d['ms'])}, {x(o['ms'], dt_['ms'])}) | {best} |")
            worst[(name, q)] = (o["body"] / max(1, min(d["body"], dt_["body"])),
                                max(o["ems"] / d["ems"] if d["ems"] else 0, o["ems"] / dt_["ems"] if dt_["ems"] else 0))
    if worst:
        wb = max(worst.items(), key=lambda kv: kv[1][0])
        we = max(worst.items(), key=lambda kv: kv[1][1])
        print(f"\nDefaults, worst ratios (goal of issue 33: bytes <= 0.5x the DuckDB side that fetched fewer, "
              f"engine ms <= 1.0x both): bytes {wb[1][0]:.2f}x ({' '.join(wb[0])}), "
              f"engine ms {we[1][1]:.2f}x ({' '.join(we[0])})")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "gen-flights":
        gen_flights(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20261126,
                    int(sys.argv[4]) if len(sys.argv) > 4 else 300)
        if len(sys.argv) > 5:
            scale_flights(sys.argv[2], int(sys.argv[5]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "gen-adsb":
        gen_adsb(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20261129,
                 int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif len(sys.argv) >= 3 and sys.argv[1] == "gen-adsb-held":
        gen_adsb_held(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20261127)
    elif len(sys.argv) == 7 and sys.argv[1] == "parquet-size":
        parquet_size(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "proxy":
        proxy_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "bench":
        bench_main(sys.argv[2])
    else:
        sys.exit(__doc__)
