"""web/test/martin_hostile.py: Martin (the live map's tile server) against
hostile but ordinary web clients.

test/web_hostile.sh runs this after web/test/hostile.py, against the same
cluster (test/grid_map.sql) and the Martin that scripts/web.sh started, with
    HOSTILE_DIR      the directory of scripts/web.sh start (martin.pid,
                     martin.port, martin.log, web.port; the cluster's log in pg/)
    HOSTILE_PG_PORT  the cluster's port

Every request is an unauthenticated GET through http.client with a timeout;
every wait is bounded.  Martin 1.14 answers what a client gets wrong so:
  - z, x or y that is not a number of its type (z u8, x and y u32): 404 naming it
  - z outside the source's minzoom..maxzoom (0..22, web/martin.yaml): 404 naming it
  - any query string: ignored (the source, trafficdb.tile_mvt_web, takes no
    options), the valid tile
  - x or y off the grid of z: the function
    refuses it (SQLSTATE 22023, or 22003 past 2^31-1) and Martin answers 500
    with "Unable to get tile Z/X/Y with Json({...}) params": the tile and the
    options are named, the database's message goes to Martin's log only
It checks that each such request is answered (no hang) with that status and
the value named; that Martin (the same process) and the cluster survive it,
and the next valid tile is served with the same bytes; the same for 200
requests at once; no panic in Martin's log, no crashed backend in the
cluster's; CORS only for the page's origin; 304 on an unchanged tile; Martin
listens on 127.0.0.1 only.  Prints each failure and exits 1 if any.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hostile import fetch, listening  # noqa: E402  (web/test/hostile.py: the same /proc/net reading and requests)

DIR = pathlib.Path(os.environ["HOSTILE_DIR"])
PG_PORT = int(os.environ["HOSTILE_PG_PORT"])
PORT = int((DIR / "martin.port").read_text())
WEB_PORT = int((DIR / "web.port").read_text())
PID = int((DIR / "martin.pid").read_text())
# a z16 tile in the middle of test/grid_map.sql's grid
Z, X, Y = 16, 37307, 18969
VALID = f"/traffic/{Z}/{X}/{Y}"
MVT = "application/x-protobuf"
# nothing of the database's own text in a response (the reason is in the log)
FORBIDDEN = ["SQLSTATE", "ERROR:", "trafficdb_web", "postgres", "expected 0 to", "is outside the grid"]

failures: list[str] = []


def fail(msg: str):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def get(path: str, headers: dict | None = None, timeout: float = 10.0):
    """GET path from Martin: (status, headers, body bytes), status 0 when no answer."""
    return fetch(path, headers, timeout, host="127.0.0.1", port=PORT)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


GOOD: bytes = b""


def still_serving(what: str):
    """Martin is the same process and serves the valid tile, the same bytes."""
    if not alive(PID) or int((DIR / "martin.pid").read_text()) != PID:
        raise SystemExit(f"FAIL: after {what}, Martin (pid {PID}) is gone")
    s, h, body = get(VALID)
    if s != 200 or h.get("content-type") != MVT or body != GOOD:
        fail(f"after {what}: the valid tile {VALID} is {s} {h.get('content-type')} of {len(body)} bytes, "
             f"expected 200 {MVT} of the {len(GOOD)} bytes served before")


def hostile(what: str, path: str, status: int, names: list[str]):
    n = len(failures)
    t0 = time.monotonic()
    s, _, raw = get(path)
    took = time.monotonic() - t0
    body = raw.decode("utf-8", "replace")
    short = body if len(body) < 240 else body[:240] + "..."
    if s != status:
        fail(f"{what}: HTTP {s}, expected {status}: {short!r}")
    for name in names:
        if name not in body:
            fail(f"{what}: the body does not name {name!r}: {short!r}")
    for word in FORBIDDEN:
        if word in body:
            fail(f"{what}: the body carries the database's text {word!r}: {short!r}")
    if took > 5:
        fail(f"{what}: took {took:.1f} s")
    still_serving(what)
    if len(failures) == n:
        print(f"ok   {what}: {s} {short[:150]}", flush=True)


def log_clean():
    log = (DIR / "martin.log").read_text(errors="replace")
    # the reason of a refused tile is the database's, in the log: 22023 naming the value
    if "E22023" not in log:
        fail("Martin's log does not carry the database's reason for the tiles off the grid (SQLSTATE 22023)")
    for word in ("panicked", "SIGSEGV", "stack overflow", "RUST_BACKTRACE"):
        if word in log:
            fail(f"Martin's log has {word!r}")
    pg = DIR / "pg" / "postgres.log"
    text = pg.read_text(errors="replace") if pg.exists() else ""
    for word in ("terminated by signal", "PANIC", "was terminated", "server process"):
        if word in text:
            line = next(l for l in text.splitlines() if word in l)
            fail(f"the cluster's log: {line[:200]!r}")


def main():
    global GOOD
    for _ in range(60):  # bounded: 30 s
        s, h, GOOD = get(VALID, timeout=5)
        if s == 200:
            break
        time.sleep(0.5)
    if s != 200 or h.get("content-type") != MVT or not GOOD:
        fail(f"the valid tile {VALID}: {s} {h.get('content-type')} {GOOD[:200]!r}")
        return
    print(f"ok   {VALID}: 200, {len(GOOD)} bytes, ETag {h.get('etag')}, Cache-Control {h.get('cache-control')}", flush=True)

    # -- what a tile cache and a browser rely on
    if h.get("cache-control") != "no-cache":
        fail(f"Cache-Control {h.get('cache-control')!r}, expected no-cache (browsers revalidate)")
    s2, _, b2 = get(VALID, {"If-None-Match": h.get("etag", "")})
    if s2 != 304 or b2:
        fail(f"If-None-Match of the tile's own ETag: {s2} with {len(b2)} bytes, expected 304 and none")
    s2, _, b2 = get(VALID + "?_cb=12345")
    if s2 != 200 or b2 != GOOD:
        fail(f"a cache buster (_cb): {s2}, {len(b2)} bytes, expected the same tile")
    s2, _, b2 = get("/traffic/3/0/0")
    if s2 != 204 or b2:
        fail(f"an empty tile (3/0/0, no road): {s2} with {len(b2)} bytes, expected 204")

    # -- off the grid: the function refuses it, Martin answers 500 naming the tile
    hostile("x off the grid of z 3", "/traffic/3/99/0", 500, ["3/99/0"])
    hostile("y off the grid of z 3", "/traffic/3/0/8", 500, ["3/0/8"])
    hostile("x off the grid of z 16", f"/traffic/16/65536/{Y}", 500, [f"16/65536/{Y}"])
    hostile("x = 2^31 (past integer)", "/traffic/3/2147483648/0", 500, ["3/2147483648/0"])
    hostile("y = 2^32-1 (the largest u32)", "/traffic/3/0/4294967295", 500, ["3/0/4294967295"])
    # -- not a number of the path's type: 404 naming it
    hostile("x = 2^32 (past u32)", "/traffic/3/4294967296/0", 404, ["4294967296"])
    hostile("y = -1", "/traffic/3/0/-1", 404, ["-1"])
    hostile("z = x", "/traffic/x/0/0", 404, ['"x"'])
    hostile("z = 256 (past u8)", "/traffic/256/0/0", 404, ["256"])
    # -- z outside the source's 0..22: 404 naming it
    hostile("z = 23", "/traffic/23/0/0", 404, ["Zoom 23", "0-22"])
    hostile("z = 31", "/traffic/31/0/0", 404, ["Zoom 31", "0-22"])
    hostile("z = 255", "/traffic/255/0/0", 404, ["Zoom 255", "0-22"])
    # -- query strings: Martin passes them as a function's options, but the
    # source is tile_mvt_web(z, x, y), which takes none: each is the valid tile
    for what, q in (("extent=abc&budget=-1&_cb=1", "?extent=abc&budget=-1&_cb=1"),
                    ("the largest tile one could ask for", "?budget=16777216&extent=65536&buffer=65536"),
                    ("budget past 16 MiB", "?budget=99999999999"), ("extent 0", "?extent=0"),
                    ("an unknown option", "?sql=1;DROP"), ("a broken escape", "?%zz"),
                    ("a deep JSON value", "?extent=" + "%5B" * 2000 + "%5D" * 2000),
                    ("a long query string", f"?x{'a' * 20000}=1")):
        t0 = time.monotonic()
        s2, _, b2 = get(VALID + q, timeout=30)
        took = time.monotonic() - t0
        if s2 != 200 or b2 != GOOD or took > 5:
            fail(f"{what}: {s2}, {len(b2)} bytes in {took:.1f} s, expected the valid tile ({len(GOOD)} bytes)")
        else:
            print(f"ok   {what}: the valid tile, options ignored ({took:.2f} s)", flush=True)
    hostile("no such source", "/nosuch/0/0/0", 404, ["nosuch"])
    hostile("two sources, one missing", "/traffic,nosuch/0/0/0", 404, ["nosuch"])

    # -- 200 at once: every one answered, none hangs; Martin and the cluster live on
    paths = ([VALID, "/traffic/3/99/0", f"{VALID}?extent=65536&budget=16777216", "/traffic/31/0/0"] * 50)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        results = list(pool.map(lambda p: get(p, timeout=60), paths))
    took = time.monotonic() - t0
    expected = {VALID: 200, "/traffic/3/99/0": 500, f"{VALID}?extent=65536&budget=16777216": 200, "/traffic/31/0/0": 404}
    wrong = [(p, s) for p, (s, _, _) in zip(paths, results) if s != expected[p]]
    bad_bytes = [p for p, (s, _, b) in zip(paths, results) if expected[p] == 200 and s == 200 and b != GOOD]
    if wrong:
        fail(f"200 requests at once: {len(wrong)} answered otherwise, e.g. {wrong[:4]}")
    if bad_bytes:
        fail(f"200 requests at once: {len(bad_bytes)} valid tiles with other bytes")
    still_serving("200 requests at once")
    if not wrong and not bad_bytes:
        print(f"ok   200 requests at once (50 valid, 150 hostile): each as expected, in {took:.1f} s", flush=True)

    # -- CORS: the page's origin only
    for origin in (f"http://127.0.0.1:{WEB_PORT}", f"http://localhost:{WEB_PORT}"):
        s, h, _ = get(VALID, {"Origin": origin})
        if s != 200 or h.get("access-control-allow-origin") != origin:
            fail(f"Origin {origin} (the page's): {s}, Access-Control-Allow-Origin {h.get('access-control-allow-origin')!r}")
    for origin in ("http://evil.example", f"http://127.0.0.1:{WEB_PORT + 1}", "null"):
        s, h, _ = get(VALID, {"Origin": origin})
        if "access-control-allow-origin" in h:
            fail(f"Origin {origin}: granted {h['access-control-allow-origin']!r}")
    print("ok   CORS grants the page's origin only", flush=True)

    # -- loopback only
    addrs = listening(PORT)
    if addrs != {"127.0.0.1"}:
        fail(f"Martin (port {PORT}) listens on {sorted(addrs)}, not only 127.0.0.1")
    log_clean()


if __name__ == "__main__":
    main()
    if failures:
        print(f"\n{len(failures)} failures", flush=True)
        sys.exit(1)
    print("all hostile Martin client tests passed")
