"""web/test/hostile.py: the live map's app against hostile but ordinary web clients.

test/web_hostile.sh sets up a cluster with a grid map of Helsinki and the app
(scripts/web.sh start DIR), then runs this with
    HOSTILE_URL      the app, e.g. http://127.0.0.1:8080
    HOSTILE_DIR      the app's directory (web.pid, web.app.pid, web.log)
    HOSTILE_PG_PORT  the cluster's port (to check it listens on loopback only)

Every request is an unauthenticated GET through http.client with a timeout;
every wait is bounded.  It checks that
  - hostile GETs (deep filters, long NOT chains, operator chains, huge
    filters, tiles and items off the grid, limits past the cap) get a 400
    whose body names the bad value and what was expected,
  - the app process is still the same one, answering, after each,
  - no error body carries database or server text,
  - an unexpected database error is a generic 500 and is logged by the server,
  - an app killed with SIGKILL answers again by itself within seconds,
  - the app and the cluster listen on 127.0.0.1 only.
Prints each failure and exits 1 if any.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import signal
import sys
import time
import urllib.parse

BASE = urllib.parse.urlsplit(os.environ["HOSTILE_URL"])
DIR = pathlib.Path(os.environ["HOSTILE_DIR"])
PG_PORT = int(os.environ["HOSTILE_PG_PORT"])

TILE = "/collections/trafficdb.tile_features/tiles/WebMercatorQuad"
ITEMS = "/collections/trafficdb.tile_features/items"
# a z16 tile in the middle of test/grid_map.sql's grid
Z, X, Y = 16, 37307, 18969
# what a response must never carry: text of the database, its driver or a traceback
FORBIDDEN = ["ERROR", "psycopg", "asyncpg", "SQLSTATE", "trafficdb.", "Traceback", "postgres",
             'relation "', 'column "', "operator does not exist", "HINT:", "out of range for type",
             "syntax error at", "64-bit"]

failures: list[str] = []
# HOSTILE_ONLY=filters,tiles,items,errors,loopback,kill runs those parts only
ONLY = {w for w in os.environ.get("HOSTILE_ONLY", "").split(",") if w}


def part(name: str) -> bool:
    on = not ONLY or name in ONLY
    if on:
        print(f"-- {name}", flush=True)
    return on


class Dead(Exception):
    """The app stopped answering and did not come back: the rest would prove nothing."""


def fail(msg: str):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def get(path: str, timeout: float = 10.0) -> tuple[int, str]:
    """GET path; (status, body), or (0, reason) when there is no answer."""
    conn = http.client.HTTPConnection(BASE.hostname, BASE.port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        return 0, f"no answer: {type(e).__name__}: {e}"
    finally:
        conn.close()


def app_pid() -> int | None:
    for name in ("web.app.pid", "web.pid"):  # web.app.pid: the app under its supervisor
        p = DIR / name
        if p.exists():
            try:
                return int(p.read_text().strip())
            except ValueError:
                return None
    return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def no_server_text(what: str, status: int, body: str):
    if status >= 400 or status == 0:
        try:  # the text as a client reads it (JSON escapes quotes)
            text = body + "\n" + json.dumps(json.loads(body), ensure_ascii=False).replace('\\"', '"')
        except ValueError:
            text = body
        for word in FORBIDDEN:
            if word in text:
                fail(f"{what}: the {status} body carries server text {word!r}: {body[:300]!r}")
                return


def hostile(what: str, path: str, names: list[str], status: int = 400):
    """path must get `status` with a body naming each of `names`; the app lives on."""
    n = len(failures)
    pid = app_pid()
    t0 = time.monotonic()
    s, body = get(path)
    took = time.monotonic() - t0
    short = body if len(body) < 300 else body[:300] + "..."
    if s != status:
        fail(f"{what}: HTTP {s}, expected {status}: {short!r}")
    else:
        for name in names:
            if name not in body:
                fail(f"{what}: the body does not name {name!r}: {short!r}")
    if took > 5:
        fail(f"{what}: took {took:.1f} s")
    no_server_text(what, s, body)
    # the same process answers at once (not one a supervisor started again)
    s2, b2 = get("/live/state", timeout=5)
    if s2 != 200:
        fail(f"{what}: the app does not answer after it: {s2} {b2[:200]!r}")
        if wait_answering(30) is None:
            raise Dead(f"after {what}, the app (pid {pid}) does not answer for 30 s")
    elif pid is not None and (not alive(pid) or app_pid() != pid):
        fail(f"{what}: the app process {pid} died (now {app_pid()})")
    if len(failures) == n:
        print(f"ok   {what}: {s} {short[:160]}", flush=True)


def wait_answering(seconds: float) -> float | None:
    """Seconds until /live/state answers 200, or None after `seconds`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:  # bounded
        s, _ = get("/live/state", timeout=2)
        if s == 200:
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def q(**params) -> str:
    return urllib.parse.urlencode(params)


def items(**params) -> str:
    return f"{ITEMS}?{q(**params)}"


def tile(z, x, y, **params) -> str:
    return f"{TILE}/{z}/{x}/{y}" + (f"?{q(**params)}" if params else "")


def main():
    if wait_answering(30) is None:
        fail("the app does not answer at the start")
        return

    if part("ordinary"):
        ordinary()
    if part("filters"):
        filters()
    if part("tiles"):
        tiles()
    if part("items"):
        items_bounded()
    if part("others"):
        others()
    if part("basemap"):
        basemap()
    if part("streams"):
        streams()
    if part("errors"):
        errors()
    if part("loopback"):
        loopback()
    if part("kill"):
        kill()


def ordinary():
    """What a map client does still works."""
    s, body = get(tile(Z, X, Y))
    if s != 200 or not body:
        fail(f"the tile {Z}/{X}/{Y}: {s}, {len(body)} bytes")
    s, body = get(items(z=Z, x=X, y=Y, limit=5))
    if s != 200 or len(json.loads(body)["features"]) != 5:
        fail(f"items of tile {Z}/{X}/{Y}, limit 5: {s} {body[:200]!r}")
    for f in ["name = 'Street 1' AND NOT location_id IS NULL",
              "name = '((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((('",
              "name = 'NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT NOT'",
              "location_id = 1 + 2 - 3 * 4 + 100",
              "S_INTERSECTS(geom, POLYGON((24.9 60.1, 25.0 60.1, 25.0 60.2, 24.9 60.2, 24.9 60.1)))",
              json.dumps({"op": "and", "args": [{"op": "=", "args": [{"property": "name"}, "Street 1"]},
                                                {"op": "not", "args": [{"op": "isNull", "args": [{"property": "location_id"}]}]}]})]:
        s, body = get(items(z=Z, x=X, y=Y, limit=1, filter=f))
        if s != 200:
            fail(f"an ordinary filter {f[:60]!r}: {s} {body[:300]!r}")
        s, body = get(tile(Z, X, Y, filter=f))
        if s != 200:
            fail(f"an ordinary filter on a tile {f[:60]!r}: {s} {body[:300]!r}")



def filters():
    """Filters that overflowed the stack of the app's own filter check (SIGSEGV)."""
    for path_of in (lambda f: items(z=Z, x=X, y=Y, limit=1, filter=f), lambda f: tile(Z, X, Y, filter=f)):
        kind = "items" if path_of("x").startswith(ITEMS) else "tile"
        hostile(f"{kind}: 2,000 nested parentheses", path_of("(" * 2000 + "location_id = 1" + ")" * 2000),
                ["filter", "2000", "expected at most"])
        hostile(f"{kind}: 5,000 NOT", path_of("NOT " * 5000 + "location_id = 1"), ["filter", "5000 NOT", "expected at most"])
        hostile(f"{kind}: 1,600 NOT", path_of("NOT " * 1600 + "location_id = 1"), ["filter", "1600 NOT"])
        hostile(f"{kind}: a chain of 1,600 additions", path_of("location_id = " + "+".join(["1"] * 1600)),
                ["filter", "operators", "expected at most"])
        hostile(f"{kind}: a chain of 1,600 comparisons", path_of("location_id" + " = 1" * 1600), ["filter", "operators"])
        hostile(f"{kind}: a chain of 1,600 subtractions without spaces", path_of("location_id = 1" + " -1" * 1600),
                ["filter", "operators"])
        deep_json = ('{"op":"not","args":[' * 600 + '{"op":"=","args":[{"property":"location_id"},1]}' + "]}" * 600)
        hostile(f"{kind}: cql2-json nested 600 deep", path_of(deep_json), ["filter", "brackets", "expected at most"])
        hostile(f"{kind}: cql2-json arrays nested 5,000 deep",
                path_of('{"op":"in","args":[{"property":"location_id"},' + "[" * 5000 + "]" * 5000 + "]}"),
                ["filter", "brackets", "expected at most"])
        hostile(f"{kind}: a query string of 40,000 characters",
                path_of("location_id = 1 AND " * 2000 + "location_id = 1"), ["query string", "expected at most"])
        hostile(f"{kind}: a filter of 6,000 characters",
                path_of(" AND ".join(["location_id = 1"] * 300)), ["filter", "characters", "expected at most"])



def tiles():
    """Tiles off the grid: a 400 that names the value, never the database's text."""
    hostile("tile x = 2147483648", tile(3, 2147483648, 0), ["x = 2147483648", "expected 0 to 7"])
    hostile("tile y = 2147483648", tile(3, 0, 2147483648), ["y = 2147483648", "expected 0 to 7"])
    hostile("tile z = 2147483648", tile(2147483648, 0, 0), ["2147483648", "expected 0 to 30"])
    hostile("tile z = 10^30", tile(10**30, 0, 0), [str(10**30), "expected 0 to 30"])
    hostile("tile x = -1", tile(3, -1, 0), ["x = -1", "expected 0 to 7"])
    hostile("tile z = 31", tile(31, 0, 0), ["31", "expected 0 to 30"])
    hostile("tile x = abc", tile(3, "abc", 0), ["abc", "expected 0 to 7"])



def items_bounded():
    """Items: bounded like tiles."""
    hostile("items of the whole map, limit 10000", items(z=0, x=0, y=0, limit=10000), ["limit", "10000", "1 to"])
    hostile("items limit 0", items(z=Z, x=X, y=Y, limit=0), ["limit", "1 to"])
    hostile("items limit -1", items(z=Z, x=X, y=Y, limit=-1), ["limit", "-1"])
    hostile("items without a tile", items(limit=1), ["z, x and y"])
    hostile("items x = 2147483648", items(z=3, x=2147483648, y=0, limit=1), ["x = 2147483648", "expected 0 to 7"])
    hostile("items z = 31", items(z=31, x=0, y=0), ["31", "expected 0 to 30"])
    hostile("items y = 8 at z 3", items(z=3, x=0, y=8), ["y = 8", "expected 0 to 7"])
    hostile("items offset 10^20", items(z=Z, x=X, y=Y, offset=10**20), ["offset", str(10**20)])
    hostile("items bbox of 3 numbers", items(z=Z, x=X, y=Y, bbox="1,2,3"), ["bbox", "1,2,3"])
    hostile("items bbox off the earth", items(z=Z, x=X, y=Y, bbox="24,60,999,61"), ["bbox", "999", "-180"])
    hostile("items bbox nan", items(z=Z, x=X, y=Y, bbox="nan,60,25,61"), ["bbox", "nan"])
    s, body = get(items(z=0, x=0, y=0, limit=1000))
    if s != 200 or len(json.loads(body)["features"]) > 1000:
        fail(f"items of zoom 0, limit 1000: {s} {body[:200]!r}")
    s, body = get(items(z=Z, x=X, y=Y, bbox="24.9,60.1,25,60.2", limit=1))
    if s != 200:
        fail(f"items with a bbox: {s} {body[:200]!r}")



def others():
    """tipg's other parameters and routes, given garbage: a client's error (4xx) or an answer,
    never a 5xx, never server text, and the app lives on."""
    tj = "/collections/trafficdb.tile_features/tiles/WebMercatorQuad"
    for what, path in [
        ("tilejson minzoom 2^31", f"{tj}/tilejson.json?minzoom=2147483648&maxzoom=2147483649"),
        ("tilejson maxzoom -1", f"{tj}/tilejson.json?maxzoom=-1"),
        ("style.json minzoom 10^30", f"{tj}/style.json?minzoom={10**30}"),
        ("map.html maxzoom 10^30", f"{tj}/map.html?maxzoom={10**30}"),
        ("an unknown tile matrix set", f"/collections/trafficdb.tile_features/tiles/NoSuchTMS/{Z}/{X}/{Y}"),
        ("an unknown collection", "/collections/pg_catalog.pg_authid/items?limit=1"),
        ("an item by id", "/collections/trafficdb.tile_features/items/1"),
        ("simplify nan", items(z=Z, x=X, y=Y, simplify="nan")),
        ("simplify 1e308", items(z=Z, x=X, y=Y, simplify="1e308")),
        ("simplify -1", items(z=Z, x=X, y=Y, simplify="-1")),
        ("datetime garbage", items(z=Z, x=X, y=Y, datetime="not-a-time")),
        ("sortby an unknown column", items(z=Z, x=X, y=Y, sortby="-pg_sleep")),
        ("properties unknown", items(z=Z, x=X, y=Y, properties="secret,pg_read_file")),
        ("geom-column unknown", items(z=Z, x=X, y=Y, **{"geom-column": "x"})),
        ("filter-lang unknown", items(z=Z, x=X, y=Y, **{"filter-lang": "sql", "filter": "1=1"})),
        ("a filter that does not parse", items(z=Z, x=X, y=Y, filter="((( AND")),
        ("z twice", items(z=Z, x=X, y=Y, limit=1) + "&z=0"),
        ("trails minute 2^63", "/trails/positions?minute=9223372036854775808"),
    ]:
        n = len(failures)
        pid = app_pid()
        s, body = get(path)
        if not 200 <= s < 500:
            fail(f"{what}: HTTP {s}: {body[:300]!r}")
        no_server_text(what, s, body)
        if get("/live/state", timeout=5)[0] != 200 or app_pid() != pid or not alive(pid):
            fail(f"{what}: the app did not live on")
            if wait_answering(30) is None:
                raise Dead(f"after {what}, the app does not answer for 30 s")
        if len(failures) == n:
            print(f"ok   {what}: {s} {body[:160]}", flush=True)


def fetch(path: str, headers: dict | None = None, timeout: float = 10.0, method: str = "GET",
          host: str | None = None, port: int | None = None):
    """GET (or method) path with headers from the app (or host:port): (status, response headers,
    body bytes), or (0, {}, reason)."""
    conn = http.client.HTTPConnection(host or BASE.hostname, port or BASE.port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, {}, f"no answer: {type(e).__name__}: {e}".encode()
    finally:
        conn.close()


def basemap():
    """The base map's files (web/basemap.py): ranges, caching headers, and no path of the
    client's reaching the file system.  test/web_hostile.sh gives the app a map archive
    (HOSTILE_BASEMAP) and a glyphs directory with the font "Open Sans Regular"."""
    path = os.environ.get("HOSTILE_BASEMAP")
    if not path:
        fail("HOSTILE_BASEMAP is not set: test/web_hostile.sh names the archive the app serves")
        return
    data = pathlib.Path(path).read_bytes()
    n = len(failures)
    s, h, body = fetch("/basemap/map.pmtiles", {"Range": "bytes=0-126", "Accept-Encoding": "gzip, br, zstd"})
    if s != 206 or body != data[:127] or h.get("content-range") != f"bytes 0-126/{len(data)}":
        fail(f"a range of the archive: {s} {h.get('content-range')!r} {len(body)} bytes, expected 206 with bytes 0-126")
    if "content-encoding" in h:
        fail(f"a range of the archive is compressed ({h['content-encoding']}): PMTiles needs the bytes as they are")
    if h.get("cache-control") != "public, max-age=3600" or not h.get("etag") or not h.get("last-modified"):
        fail(f"the archive's caching headers: {h!r}")
    s, h2, body = fetch("/basemap/map.pmtiles", {"Range": f"bytes={len(data) - 10}-"})
    if s != 206 or body != data[-10:]:
        fail(f"the archive's last 10 bytes: {s}, {len(body)} bytes")
    s, _, body = fetch("/basemap/map.pmtiles", {"If-None-Match": h.get("etag", "x")})
    if s != 304:
        fail(f"the archive with its ETag in If-None-Match: {s}, expected 304")
    s, _, body = fetch("/basemap/map.pmtiles", {"Range": f"bytes={len(data) + 10}-{len(data) + 20}"})
    if s != 416:
        fail(f"a range past the archive's end: {s}, expected 416")
    # many ranges of the whole file: not many copies of it
    s, _, body = fetch("/basemap/map.pmtiles", {"Range": "bytes=" + ",".join(["0-"] * 200)})
    if s == 0 or len(body) > 2 * len(data) + 100_000:
        fail(f"200 ranges of the whole archive: {s}, {len(body)} bytes for an archive of {len(data)}")
    # HEAD (curl -I, a cache revalidating): the GET's status and headers, no body
    for p, want in [("/basemap/map.pmtiles", len(data)),
                    ("/fonts/Open%20Sans%20Regular/0-255.pbf", None)]:
        s, h3, body = fetch(p, method="HEAD")
        if s != 200 or body or not h3.get("etag") or (want is not None and h3.get("content-length") != str(want)):
            fail(f"HEAD {p}: {s}, {len(body)} bytes, content-length {h3.get('content-length')!r}, "
                 f"expected 200 with no body, its ETag and length")
    s, h3, body = fetch("/basemap/map.pmtiles", {"Range": "bytes=0-9"}, method="HEAD")
    if s != 206 or body or h3.get("content-range") != f"bytes 0-9/{len(data)}":
        fail(f"HEAD of a range of the archive: {s}, {len(body)} bytes, {h3.get('content-range')!r}")
    s, h, body = fetch("/fonts/Open%20Sans%20Regular,Arial%20Unicode%20MS%20Regular/0-255.pbf")
    if s != 200 or not body or h.get("cache-control") != "public, max-age=3600":
        fail(f"the glyphs 0-255 of a font stack: {s}, {len(body)} bytes, {h.get('cache-control')!r}")
    s, _, body = fetch("/vendor/pmtiles/pmtiles.js")
    if s != 200 or b"PMTiles" not in body:
        fail(f"/vendor/pmtiles/pmtiles.js: {s}, {len(body)} bytes")
    s, _, body = fetch("/config.json")
    try:
        cfg = json.loads(body)["basemap"]
        if cfg["map"] != "/basemap/map.pmtiles" or cfg["glyphs"] != "/fonts/{fontstack}/{range}.pbf":
            fail(f"/config.json's basemap: {cfg!r}")
    except (ValueError, KeyError, TypeError) as e:
        fail(f"/config.json: {s} {body[:200]!r}: {e}")
    if len(failures) == n:
        print("ok   the base map's archive in ranges, its caching headers, HEAD, glyphs, pmtiles.js, /config.json")
    for what, p in [
        ("a font of ..", "/fonts/..%2F..%2Fetc%2Fpasswd/0-255.pbf"),
        ("a font of %2e%2e", "/fonts/%2e%2e/0-255.pbf"),
        ("a font of an absolute path", "/fonts/%2Fetc%2Fpasswd/0-255.pbf"),
        ("a font with NUL", "/fonts/Open%20Sans%20Regular%00/0-255.pbf"),
        ("a font with NUL in the range", "/fonts/Open%20Sans%20Regular/0-255%00.pbf"),
        ("a range of ..", "/fonts/Open%20Sans%20Regular/..%2F..%2Fapp.py"),
        ("a range off the grid", "/fonts/Open%20Sans%20Regular/1-256.pbf"),
        ("a range past 65535", "/fonts/Open%20Sans%20Regular/65536-65791.pbf"),
        ("a huge range", "/fonts/Open%20Sans%20Regular/" + "9" * 5000 + "-1.pbf"),
        ("a stack of 10000 fonts", "/fonts/" + ",".join(["x"] * 10000) + "/0-255.pbf"),
        ("an unknown font", "/fonts/Comic%20Sans/0-255.pbf"),
        ("another archive", "/basemap/other.pmtiles"),
        ("an archive of ..", "/basemap/..%2Fapp.py"),
        ("an archive of %2e%2e", "/basemap/%2e%2e/%2e%2e/web/app.py"),
        ("pmtiles' package.json through ..", "/vendor/pmtiles/..%2Fpackage.json"),
        ("pmtiles through %2e%2e", "/vendor/pmtiles/%2e%2e/%2e%2e/%2e%2e/app.py"),
        ("pmtiles through an absolute path", "/vendor/pmtiles//etc/passwd"),
    ]:
        hostile(what, p, [], status=404)
    for what, p in [("a raw .. in a font", "/fonts/../../etc/passwd/0-255.pbf"),
                    ("a raw .. in pmtiles' dist", "/vendor/pmtiles/../../app.py")]:
        s, _, body = fetch(p)  # http.client sends the path as it is
        if s not in (400, 404) or b"root:" in body or b"import" in body:
            fail(f"{what}: {s} {body[:200]!r}")
        else:
            print(f"ok   {what}: {s}")


MAX_STREAMS = int(os.environ.get("HOSTILE_MAX_STREAMS", "100"))  # the app's TRAFFICDB_WEB_MAX_STREAMS


def streams():
    """One client opening live streams (server-sent events) without end: the app answers
    503 past its cap instead of holding every one, keeps serving, and frees a closed one."""
    import socket
    n = len(failures)
    socks, statuses = [], []
    try:
        for _ in range(MAX_STREAMS + 20):  # bounded
            sk = socket.create_connection((BASE.hostname, BASE.port), timeout=10)
            socks.append(sk)
            sk.sendall(f"GET /live HTTP/1.1\r\nHost: {BASE.hostname}:{BASE.port}\r\n\r\n".encode())
            try:
                line = sk.makefile("rb").readline(200).decode("latin-1")
                statuses.append(int(line.split()[1]) if line.startswith("HTTP/") else 0)
            except (OSError, ValueError, IndexError):
                statuses.append(0)
        ok, busy = statuses.count(200), statuses.count(503)
        if ok > MAX_STREAMS:
            fail(f"streams: {ok} live streams of one client held open: expected at most {MAX_STREAMS}")
        if ok + busy != len(statuses):
            fail(f"streams: other answers than 200 and 503: {sorted(set(statuses))}")
        s, body = get("/live/state", timeout=5)
        if s != 200:
            fail(f"streams: with {ok} streams open the app does not answer: {s} {body[:200]!r}")
        s, body = get(tile(Z, X, Y), timeout=10)
        if s != 200:
            fail(f"streams: with {ok} streams open a tile is not served: {s} {body[:200]!r}")
        if len(failures) == n:
            print(f"ok   streams: {ok} held, {busy} refused with 503", flush=True)
    finally:
        for sk in socks:
            sk.close()
    # the closed streams are freed: a new one is served again
    t0 = time.monotonic()
    while time.monotonic() - t0 < 15:  # bounded
        sk = socket.create_connection((BASE.hostname, BASE.port), timeout=10)
        try:
            sk.sendall(f"GET /live HTTP/1.1\r\nHost: {BASE.hostname}:{BASE.port}\r\n\r\n".encode())
            line = sk.makefile("rb").readline(200).decode("latin-1")
        finally:
            sk.close()
        if " 200 " in line:
            break
        time.sleep(0.5)
    else:
        fail("streams: 15 s after the streams closed, a new one is still refused")


def errors():
    """An unexpected database error: a generic 500, the details in the server's log."""
    log = DIR / "web.log"
    before = log.stat().st_size if log.exists() else 0
    s, body = get("/trails/positions?minute=1")  # the trail table is missing (test/web_hostile.sh)
    if s != 500:
        fail(f"a database error: HTTP {s}, expected 500: {body[:300]!r}")
    no_server_text("a database error", s, body)
    time.sleep(0.5)
    logged = log.read_bytes()[before:].decode("utf-8", "replace") if log.exists() else ""
    if "us_coastal_2020_06_30" not in logged:
        fail(f"the database error is not in the server's log {log}")
    s, body = get(items(z=Z, x=X, y=Y, filter="name = 1"))  # text = integer: the database refuses
    if s not in (400, 500):
        fail(f"a filter of the wrong type: HTTP {s}: {body[:300]!r}")
    no_server_text("a filter of the wrong type", s, body)



def loopback():
    """The app and the cluster listen on 127.0.0.1 only."""
    for port, what in ((BASE.port, "the app"), (PG_PORT, "the cluster")):
        addrs = listening(port)
        if not addrs:
            fail(f"{what} (port {port}): no listening socket found")
        elif addrs != {"127.0.0.1"}:
            fail(f"{what} (port {port}) listens on {sorted(addrs)}, not only 127.0.0.1")



def kill():
    """An app killed with SIGKILL comes back by itself."""
    for n in (1, 2):
        pid = app_pid()
        if not alive(pid):
            fail(f"kill {n}: no app process ({pid})")
            break
        os.kill(pid, signal.SIGKILL)
        took = wait_answering(20)
        if took is None:
            fail(f"kill {n}: the app (pid {pid}) was killed and does not answer again after 20 s")
            break
        if app_pid() == pid:
            fail(f"kill {n}: the answering app has the killed pid {pid}")
        print(f"ok   kill -9 of the app {pid}: answering again after {took:.1f} s (pid {app_pid()})", flush=True)
    log = DIR / "web.log"
    if log.exists():  # what the supervisor did, for the record
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(("web-supervisor:", "serve:")):
                print(f"     {line}", flush=True)


def listening(port: int) -> set[str]:
    """The IPv4/IPv6 addresses with a LISTEN socket on port (from /proc/net)."""
    out = set()
    for f, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = pathlib.Path(f).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, state = parts[1], parts[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:
                continue
            if v6:
                out.add("::1" if addr == "00000000000000000000000001000000" else f"[{addr}]")
            else:
                out.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return out


if __name__ == "__main__":
    try:
        main()
    except Dead as e:
        fail(f"{e}; stopping")
    if failures:
        print(f"\n{len(failures)} failures", flush=True)
        sys.exit(1)
    print("all hostile web client tests passed")
