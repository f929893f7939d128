"""trafficdb's live map: tipg's FastAPI app with a few routes added.

    DATABASE_URL=postgresql://trafficdb_web@127.0.0.1:5433/trafficdb_demo \
        uvicorn --app-dir web app:app --host 127.0.0.1 --port 8080

The page's traffic tiles come from Martin (scripts/martin.sh, web/martin.yaml),
which serves trafficdb.tile_mvt(z, x, y): the tile encoded in C from the
R-tree in shared memory.  tipg (OGC API Features and Tiles for PostGIS) still
serves trafficdb.tile_features(z, x, y) as OGC API collections (items, its own
tiles and HTML pages) for other clients.  Added here:

  GET /map/                the page (web/static/) and, under /vendor/maplibre-gl/,
                           MapLibre GL JS as npm installed it (no CDN)
  GET /live                server-sent events: one "publish" event per
                           publication (LISTEN trafficdb_publish), with the
                           generation, when it was published and the boxes of
                           the locations it changed (trafficdb.changes_since)
  GET /live/state          the same as JSON, for the current generation
  GET /config.json         where the page gets its tiles: Martin's URL
                           (TRAFFICDB_WEB_TILES, which scripts/web.sh sets),
                           and the base map's ("basemap": web/basemap.py)
  GET /basemap/..., /fonts/..., /vendor/pmtiles/...
                           the base map's PMTiles archives and glyphs
                           (TRAFFICDB_WEB_BASEMAP, _WORLD, _GLYPHS: web/basemap.py)
  GET /trails/positions    vessels at a minute of the demo's AIS day, from S3
                           through the trail FDW (the time window pushed down)

Anyone who reaches the port is a client: the request guard below refuses
what could crash, starve or mislead the app (deep or long CQL2 filters,
tiles off the grid, unbounded items) with a 400 naming the value, and no
response carries the database's own text.  scripts/web.sh runs the app
under a supervisor that starts it again when it dies.

Settings, from the environment: DATABASE_URL (tipg's own, also used for the
listener; an ordinary role, see web/role.sql), TRAFFICDB_WEB_TILES (Martin's
base URL, e.g. http://127.0.0.1:3000; unset: the page has no traffic layer),
TRAFFICDB_WEB_MAX_BOXES (boxes
per event before one box of all changes is sent instead; default 200),
TRAFFICDB_WEB_HOSTS (the names the app answers to, by the Host header;
default 127.0.0.1,localhost: it listens on 127.0.0.1 only),
TRAFFICDB_WEB_POLL (seconds between reads of the generation when no
notification came, which also find a lost listener connection; default 2),
TRAFFICDB_WEB_TRAIL_TABLE (default trails.us_coastal_2020_06_30),
TRAFFICDB_WEB_MAX_ITEMS (the most features one items request returns;
default 1000), TRAFFICDB_WEB_MAX_FILTER (the longest CQL2 filter, in
characters; default 4096), TRAFFICDB_WEB_MAX_STREAMS (live streams open at
once; default 100) and tipg's TIPG_* variables; the defaults set
below expose the tile function only, let no tile be cached by the browser (a repainted tile must be fetched anew) and
grant no other origin (CORS).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import math
import os
import pathlib
import re
from urllib.parse import parse_qsl

# tipg reads its settings when it is imported: our defaults first.
os.environ.setdefault("TIPG_DB_SCHEMAS", '["trafficdb"]')
os.environ.setdefault("TIPG_DB_FUNCTIONS", '["trafficdb.tile_features"]')
os.environ.setdefault("TIPG_DB_EXCLUDE_TABLE_SCHEMAS", '["trafficdb"]')
os.environ.setdefault("TIPG_SET_MVT_LAYERNAME", "true")
os.environ.setdefault("TIPG_CACHECONTROL", "no-store")
os.environ.setdefault("TIPG_DB_MAX_CONN_SIZE", "4")
# tipg's default "*" answers every origin, with credentials: any web site a
# user of the map visits could read through it.  The page is same-origin.
os.environ.setdefault("TIPG_CORS_ORIGINS", "")
# one items request returns at most this many features (checked before tipg)
MAX_ITEMS = int(os.environ.get("TRAFFICDB_WEB_MAX_ITEMS", "1000"))
os.environ.setdefault("TIPG_MAX_FEATURES_PER_QUERY", str(MAX_ITEMS))

import asyncpg  # noqa: E402
import basemap  # noqa: E402
import functools  # noqa: E402
from cql2 import Expr  # noqa: E402
from fastapi import HTTPException, Query, Request  # noqa: E402
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse  # noqa: E402
from starlette.middleware.cors import CORSMiddleware  # noqa: E402
from starlette.middleware.trustedhost import TrustedHostMiddleware  # noqa: E402
from starlette.staticfiles import StaticFiles  # noqa: E402
from starlette_cramjam.middleware import CompressionMiddleware  # noqa: E402
from tipg import errors as tipg_errors  # noqa: E402
from tipg.dependencies import filter_query as tipg_filter_query  # noqa: E402
from tipg.main import app, jinja2_env  # noqa: E402

log = logging.getLogger("trafficdb.web")

HERE = pathlib.Path(__file__).resolve().parent
MAX_BOXES = int(os.environ.get("TRAFFICDB_WEB_MAX_BOXES", "200"))
TRAIL_TABLE = os.environ.get("TRAFFICDB_WEB_TRAIL_TABLE", "trails.us_coastal_2020_06_30")
if not re.fullmatch(r"[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*", TRAIL_TABLE):
    raise SystemExit(f"TRAFFICDB_WEB_TRAIL_TABLE={TRAIL_TABLE!r}: expected schema.table in lower case")
TRAIL_DAY = dt.datetime(2020, 6, 30, tzinfo=dt.timezone.utc)
TRAIL_TAIL_MINUTES = 30
POLL = float(os.environ.get("TRAFFICDB_WEB_POLL", "2"))  # seconds between reads without a notification
MAX_STREAMS = int(os.environ.get("TRAFFICDB_WEB_MAX_STREAMS", "100"))  # live streams open at once
# Martin, the tile server (scripts/martin.sh): the page fetches the traffic
# tiles from it directly, at TILES_URL/traffic/{z}/{x}/{y}
TILES_URL = os.environ.get("TRAFFICDB_WEB_TILES", "").rstrip("/")
if TILES_URL and not re.fullmatch(r"https?://[A-Za-z0-9.\[\]:-]+(/[A-Za-z0-9._~/-]*)?", TILES_URL):
    raise SystemExit(f"TRAFFICDB_WEB_TILES={TILES_URL!r}: expected Martin's base URL, e.g. http://127.0.0.1:3000")

# the name of the loaded map, as the page's title shows it ("Helsinki")
MAP_NAME = os.environ.get("TRAFFICDB_WEB_MAP_NAME", "")[:60] or None
# the traffic simulation's status file (web/sumo_feeder.py --status), when one feeds the map
SIM_STATUS = os.environ.get("TRAFFICDB_WEB_SIM_STATUS") or None

# An event stream must reach the browser as it is written: no compression.
for m in app.user_middleware:
    if m.cls is CompressionMiddleware:
        # and a range of a PMTiles archive must reach it as the bytes asked for
        m.kwargs["exclude_path"] = {r"/live", r"/live/.*", r"/basemap/.*"}

# No origin granted: no CORS middleware at all (tipg adds one for [""]).
app.user_middleware[:] = [m for m in app.user_middleware
                          if not (m.cls is CORSMiddleware and m.kwargs.get("allow_origins") == [""])]

# Only the loopback's names: a page of another site whose name an attacker
# points at 127.0.0.1 (DNS rebinding) is refused.
HOSTS = [h.strip() for h in os.environ.get("TRAFFICDB_WEB_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
app.add_middleware(TrustedHostMiddleware, allowed_hosts=HOSTS)

# tipg's HTML pages (/collections/...?f=html) show the rows' values, and
# the feed's incident text is anyone's input: escape it (tipg's Jinja
# environment does not by default; its templates mark what is HTML |safe).
jinja2_env.autoescape = True

app.mount("/map", StaticFiles(directory=HERE / "static", html=True), name="map")
MAPLIBRE_DIST = HERE / "node_modules" / "maplibre-gl" / "dist"
if MAPLIBRE_DIST.is_dir():
    app.mount("/vendor/maplibre-gl", StaticFiles(directory=MAPLIBRE_DIST), name="maplibre")
else:
    log.warning("%s is missing: run npm ci in web/", MAPLIBRE_DIST)
# the base map: PMTiles archives, glyphs and the pmtiles reader (web/basemap.py)
BASEMAP = basemap.install(app, HERE)


# ---------------------------------------------------------------------------
# Errors: no response carries the database's or the server's own text (it
# names tables, functions, settings and values of other requests).  What the
# client got wrong is a 400 the guard below writes, naming the value; what
# the database refuses anyway is a generic 400 or 500, and the details go to
# the server's log only.  (tipg's handlers answer str(exc) for every error.)
# ---------------------------------------------------------------------------

CLIENT_DB_ERRORS = (
    asyncpg.exceptions.DataError,  # class 22: a value out of range, a bad literal
    asyncpg.exceptions.UndefinedFunctionError,  # a filter comparing text with a number
    asyncpg.exceptions.DatatypeMismatchError,
)


def _where(request: Request) -> str:
    return f"{request.method} {request.url.path}"


async def database_error(request: Request, exc: Exception):
    if isinstance(exc, CLIENT_DB_ERRORS):
        log.warning("%s: the database refused the request: %s: %s", _where(request), type(exc).__name__, exc)
        return JSONResponse({"detail": "the database refused a value of the request (a filter or a parameter "
                                       "of the wrong type or out of range)"}, status_code=400)
    log.error("%s: database error: %s: %s", _where(request), type(exc).__name__, exc)
    return JSONResponse({"detail": "internal error: the server logged it"}, status_code=500)


async def server_error(request: Request, exc: Exception):
    log.error("%s: unexpected error", _where(request), exc_info=exc)
    return JSONResponse({"detail": "internal error: the server logged it"}, status_code=500)


async def client_error(request: Request, exc: Exception):
    """tipg's own message about a parameter of the client's (no database text)."""
    return JSONResponse({"detail": str(exc)}, status_code=400)


app.add_exception_handler(asyncpg.PostgresError, database_error)
app.add_exception_handler(Exception, server_error)
# tipg answers these 500: a datetime or geometry filter on a collection without such a column
app.add_exception_handler(tipg_errors.MissingDatetimeColumn, client_error)
app.add_exception_handler(tipg_errors.MissingGeometryColumn, client_error)


# ---------------------------------------------------------------------------
# CQL2 filters: operators only.  cql2 writes any other "op" of a filter as a
# call of the SQL function of that name (pg_read_file, query_to_xml,
# lo_export, current_setting, pg_sleep, ...), and tipg runs it as the app's
# role: anyone who reaches the port could read files and other tables, read
# the trail FDW's keys or write files as the server.  Every "op" must be one
# of CQL2's own, whose SQL is fixed.
# ---------------------------------------------------------------------------

CQL2_OPS = frozenset({
    "and", "or", "not", "=", "<>", "<", "<=", ">", ">=", "like", "between", "in", "isNull",
    "casei", "+", "-", "*", "/", "%", "^", "div",
    "s_intersects", "s_equals", "s_disjoint", "s_touches", "s_within", "s_overlaps", "s_crosses", "s_contains",
    "t_after", "t_before", "t_contains", "t_disjoint", "t_during", "t_equals", "t_finishedBy", "t_finishes",
    "t_intersects", "t_meets", "t_metBy", "t_overlappedBy", "t_overlaps", "t_startedBy", "t_starts",
    "a_equals", "a_contains", "a_containedBy", "a_overlaps",
})


def cql2_functions(node) -> list[str]:
    """The ops of a cql2-json tree that are not CQL2's operators."""
    bad, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            op = n.get("op")
            if op is not None and op not in CQL2_OPS:
                bad.append(str(op))
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return bad


@functools.wraps(tipg_filter_query)
def filter_query(*args, **kwargs):
    query = kwargs.get("query", args[0] if args else None)
    if query is not None:
        try:
            check_filter(query)  # the guard did; again here, before any parser, whatever the route
        except BadRequest as e:
            raise HTTPException(400, str(e)) from None
        try:
            tree = Expr(query).to_json()
        except Exception as e:
            raise HTTPException(400, f"filter: {e}") from None
        if tree_depth(tree) > MAX_FILTER_TREE:
            raise HTTPException(400, f"filter nests {tree_depth(tree)} levels deep: expected at most {MAX_FILTER_TREE}")
        bad = cql2_functions(tree)
        if bad:
            raise HTTPException(400, f"filter: SQL function {bad[0]} is not allowed: only CQL2's operators are")
    return tipg_filter_query(*args, **kwargs)


app.dependency_overrides[tipg_filter_query] = filter_query


# ---------------------------------------------------------------------------
# The request guard: what a client sends is checked before tipg, cql2 or the
# database sees it, and refused with a 400 that names the value and what is
# expected.
#   - a CQL2 filter: its length, the nesting of its brackets, NOT in a row
#     and operators in a row, counted over the raw text (cql2's native parser
#     recurses once per level and a few thousand levels overflow its stack:
#     the process dies of SIGSEGV; a chain of operators is also quadratic)
#   - a tile's z, x and y (tile_features reads them as Web Mercator):
#     integers, z in 0..30, x and y in 0..2^z-1; on a tile's path only (tipg
#     would take them from the query string too: /tiles/.../16/37307/18969?z=0
#     would read the whole map)
#   - items: the tile's z, x and y, as for tiles; limit in 1..MAX_ITEMS,
#     offset in 0..MAX_OFFSET; bbox four finite numbers on the earth;
#     simplify 0..MAX_SIMPLIFY degrees
#   - minzoom and maxzoom (tilejson.json, style.json): 0..30
# ---------------------------------------------------------------------------

MAX_ZOOM = 30  # trafficdb.tile_features refuses deeper zooms
MAX_FILTER = int(os.environ.get("TRAFFICDB_WEB_MAX_FILTER", "4096"))  # characters
MAX_FILTER_DEPTH = 32  # brackets ( [ { inside each other
MAX_FILTER_NOTS = 4  # NOT in a row
MAX_FILTER_CHAIN = 16  # operators in a row, between AND, OR, commas and brackets
MAX_FILTER_TREE = 100  # levels of the parsed filter's JSON (dicts and lists)
MAX_OFFSET = 100_000
MAX_SIMPLIFY = 1.0  # degrees
MAX_QUERY_STRING = 32768  # characters of a query string, before decoding
TILE_PATH = re.compile(r"/collections/[^/]+/tiles/[^/]+/([^/]+)/([^/]+)/([^/]+)")
ITEMS_PATH = re.compile(r"/collections/([^/]+)/items")
# collections whose items are the rows of one tile (function layers of z, x, y)
TILE_FUNCTIONS = {"trafficdb.tile_features"}

_OPERATOR_CHARS = frozenset("=<>!+-*/%^|")
_OPERATOR_WORDS = frozenset({"LIKE", "DIV", "IS", "IN", "BETWEEN"})


class BadRequest(Exception):
    """A value the client sent that the guard refuses: the message names it."""


def check_filter(text: str) -> None:
    """Refuse a CQL2 filter (cql2-text or cql2-json) that could take a parser
    deep or long: one pass over the raw text, no parser involved.

    cql2 reads a text that starts with "{" as cql2-json (strings in double
    quotes, backslash escapes), anything else as cql2-text (strings in single
    quotes, identifiers in double quotes, a quote doubled inside either; no
    backslash escapes).  Outside strings: the depth of ( [ {, the longest run
    of NOT, and the longest run of operators at one level (AND, OR, commas and
    a new level end a run; cql2 nests a run of binary operators one level per
    operator, AND and OR lists it flat).  A filter over MAX_FILTER characters
    is refused without the scan (which costs about 2 us a character in
    Python): its message counts, with regular expressions, what makes it
    dangerous."""
    if len(text) > MAX_FILTER:
        raise BadRequest(too_long(text))
    json_mode = text.startswith("{")
    n = len(text)
    i = depth = max_depth = nots = max_nots = chain = max_chain = 0
    outer: list[int] = []  # the chain of each enclosing level
    while i < n:
        c = text[i]
        if c == '"' or (c == "'" and not json_mode):
            i += 1
            while i < n:
                if json_mode and text[i] == "\\":
                    i += 2
                    continue
                if text[i] == c:
                    if not json_mode and i + 1 < n and text[i + 1] == c:  # a doubled quote
                        i += 2
                        continue
                    break
                i += 1
            i += 1
            nots = 0
            continue
        if c in "([{":
            depth += 1
            max_depth = max(max_depth, depth)
            outer.append(chain)
            chain = nots = 0
        elif c in ")]}":
            depth -= 1
            chain = outer.pop() if outer else 0
            nots = 0
        elif c in ",:":
            chain = nots = 0
        elif c in _OPERATOR_CHARS:
            while i + 1 < n and text[i + 1] in _OPERATOR_CHARS and text[i + 1] != "-":
                i += 1  # <=, <>, >=: one operator ("- -" and "--" are two)
            chain += 1
            max_chain = max(max_chain, chain)
            nots = 0
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j].upper()
            if word in ("AND", "OR"):
                chain = nots = 0
            elif word == "NOT":
                nots += 1
                max_nots = max(max_nots, nots)
            elif word in _OPERATOR_WORDS:
                chain += 1
                max_chain = max(max_chain, chain)
                nots = 0
            else:
                nots = 0
            i = j
            continue
        elif not c.isspace():
            nots = 0
        i += 1
    if max_depth > MAX_FILTER_DEPTH:
        raise BadRequest(f"filter nests brackets {max_depth} deep: expected at most {MAX_FILTER_DEPTH}")
    if max_nots > MAX_FILTER_NOTS:
        raise BadRequest(f"filter has {max_nots} NOT in a row: expected at most {MAX_FILTER_NOTS}")
    if max_chain > MAX_FILTER_CHAIN:
        raise BadRequest(f"filter has {max_chain} operators in a row: expected at most {MAX_FILTER_CHAIN} "
                         "between AND, OR, commas and brackets")


_NOT_RUN = re.compile(r"(?:\bNOT\b\s*)+", re.IGNORECASE)
_OPERATOR = re.compile(r"[=<>!+*/%^|]+|-")


def too_long(text: str) -> str:
    """The message for a filter over MAX_FILTER characters: its length, and
    its longest run of NOT, its opening brackets and its operators when they
    are past their limits (counted at C speed, strings included)."""
    msg = f"filter of {len(text)} characters is too long: expected at most {MAX_FILTER}"
    nots = max((m.group().upper().count("NOT") for m in _NOT_RUN.finditer(text)), default=0)
    if nots > MAX_FILTER_NOTS:
        msg += f"; it has {nots} NOT in a row (at most {MAX_FILTER_NOTS})"
    opening = text.count("(") + text.count("[") + text.count("{")
    if opening > MAX_FILTER_DEPTH:
        msg += f"; {opening} opening brackets"
    operators = len(_OPERATOR.findall(text))
    if operators > MAX_FILTER_CHAIN:
        msg += f"; {operators} operators"
    return msg


def tree_depth(node) -> int:
    """Levels of a parsed filter's JSON (iterative: no recursion on the client's input)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        if isinstance(n, (dict, list)):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in (n.values() if isinstance(n, dict) else n))
    return deepest


def _int(name: str, value: str, expected: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]{1,40}", value.strip()):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise BadRequest(f"{name} = {shown!r} is not an integer: expected {expected}")
    return int(value)


def check_tile(z: str, x: str, y: str) -> None:
    """z, x, y of a Web Mercator tile, with tile_features' own messages."""
    zi = _int("tile zoom", z, f"0 to {MAX_ZOOM}")
    if not 0 <= zi <= MAX_ZOOM:
        raise BadRequest(f"tile zoom {zi} is out of range: expected 0 to {MAX_ZOOM}")
    last = (1 << zi) - 1
    xi = _int("tile column x", x, f"0 to {last}")
    if not 0 <= xi <= last:
        raise BadRequest(f"tile column x = {xi} is outside the grid of zoom {zi}: expected 0 to {last}")
    yi = _int("tile row y", y, f"0 to {last}")
    if not 0 <= yi <= last:
        raise BadRequest(f"tile row y = {yi} is outside the grid of zoom {zi}: expected 0 to {last}")


def check_bbox(value: str) -> None:
    expected = "minlon,minlat,maxlon,maxlat with lon in -180..180, lat in -90..90, min <= max"
    shown = value if len(value) <= 80 else value[:80] + "..."
    parts = value.split(",")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = None
    if nums is None or len(nums) not in (4, 6) or not all(math.isfinite(v) for v in nums):
        raise BadRequest(f"bbox {shown!r} is not 4 (or 6) finite numbers: expected {expected}")
    if len(nums) == 6:  # with heights: minlon,minlat,minh,maxlon,maxlat,maxh
        nums = [nums[0], nums[1], nums[3], nums[4]]
    w, s_, e, n_ = nums
    if not (-180 <= w <= e <= 180 and -90 <= s_ <= n_ <= 90):
        raise BadRequest(f"bbox {shown!r} is not a box on the earth: expected {expected}")


def check_request(path: str, query: list[tuple[str, str]]) -> None:
    """Raise BadRequest for what the guard refuses."""
    values: dict[str, list[str]] = {}
    for k, v in query:
        values.setdefault(k, []).append(v)
    for v in values.get("filter", []):
        check_filter(v)
    for k in ("minzoom", "maxzoom"):  # tilejson.json, style.json, map.html
        for v in values.get(k, []):
            zoom = _int(k, v, f"0 to {MAX_ZOOM}")
            if not 0 <= zoom <= MAX_ZOOM:
                raise BadRequest(f"{k} {zoom} is out of range: expected 0 to {MAX_ZOOM}")
    for v in values.get("simplify", []):
        try:
            tolerance = float(v)
        except ValueError:
            tolerance = math.nan
        if not 0 <= tolerance <= MAX_SIMPLIFY:
            shown = v if len(v) <= 40 else v[:40] + "..."
            raise BadRequest(f"simplify {shown!r} is out of range: expected a number of degrees, 0 to {MAX_SIMPLIFY}")
    tile = TILE_PATH.fullmatch(path)
    if tile:
        if not {"z", "x", "y"}.isdisjoint(values):
            raise BadRequest("a tile's z, x and y are those of its path, not of the query string")
        check_tile(*tile.groups())
        return
    items = ITEMS_PATH.fullmatch(path)
    if not items:
        return
    for k in ("z", "x", "y", "limit", "offset", "bbox"):
        if len(values.get(k, [])) > 1:
            raise BadRequest(f"{k} is given {len(values[k])} times: expected once")
    zxy = [values.get(k, [None])[0] for k in ("z", "x", "y")]
    if items.group(1) in TILE_FUNCTIONS or any(v is not None for v in zxy):
        if any(v is None for v in zxy):
            raise BadRequest("items are the rows of one tile: expected its z, x and y "
                             f"(z in 0..{MAX_ZOOM}, x and y in 0..2^z-1)")
        check_tile(*zxy)
    if "limit" in values:
        limit = _int("limit", values["limit"][0], f"1 to {MAX_ITEMS}")
        if not 1 <= limit <= MAX_ITEMS:
            raise BadRequest(f"limit {limit} is out of range: expected 1 to {MAX_ITEMS}")
    if "offset" in values:
        offset = _int("offset", values["offset"][0], f"0 to {MAX_OFFSET}")
        if not 0 <= offset <= MAX_OFFSET:
            raise BadRequest(f"offset {offset} is out of range: expected 0 to {MAX_OFFSET}")
    if "bbox" in values:
        check_bbox(values["bbox"][0])


class RequestGuard:
    """A plain ASGI middleware (BaseHTTPMiddleware would sit in /live's stream too)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            raw = scope.get("query_string", b"")
            try:
                if len(raw) > MAX_QUERY_STRING:
                    raise BadRequest(f"query string of {len(raw)} characters is too long: "
                                     f"expected at most {MAX_QUERY_STRING}")
                check_request(scope["path"], parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
            except BadRequest as e:
                return await JSONResponse({"detail": str(e)}, status_code=400)(scope, receive, send)
        return await self.app(scope, receive, send)


app.add_middleware(RequestGuard)


@app.get("/map", include_in_schema=False)
def map_redirect():
    return RedirectResponse("/map/")


# ---------------------------------------------------------------------------
# Publications: one listener connection, one task turning notifications into
# events, one queue per connected page.
# ---------------------------------------------------------------------------

# The generation the statement read (REPEATABLE READ: every statement of the
# transaction reads that one), its publication time, and the boxes of the
# locations that changed after prev.  Past max_boxes, one box of them all.
STATE_SQL = """
SELECT (SELECT generation FROM trafficdb.locations LIMIT 1) AS generation,
       (SELECT published_at FROM trafficdb.daemon_state) AS published_at
"""
BOXES_SQL = """
WITH c AS (
  SELECT l.location_id, l.geom
    FROM trafficdb.changes_since($1) c
    JOIN trafficdb.locations l ON l.location_id = c.location_id
), n AS (SELECT count(*) AS n FROM c)
SELECT n.n,
       CASE WHEN n.n <= $2 THEN
         (SELECT json_agg(json_build_array(ST_XMin(c.geom), ST_YMin(c.geom), ST_XMax(c.geom), ST_YMax(c.geom))
                          ORDER BY c.location_id) FROM c)
       ELSE
         (SELECT json_build_array(json_build_array(ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e)))
            FROM (SELECT ST_Extent(c.geom)::geometry AS e FROM c) x)
       END AS boxes
  FROM n
"""


class Publications:
    """LISTEN trafficdb_publish and fan each publication out as an event."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn: asyncpg.Connection | None = None
        self.wake = asyncio.Event()
        self.clients: set[asyncio.Queue] = set()
        self.state: dict | None = None
        self.task: asyncio.Task | None = None
        self.wanted = 0

    async def start(self):
        self.conn = await asyncpg.connect(self.dsn)
        await self.conn.add_listener("trafficdb_publish", self._notified)
        await self._read_extent()
        self.state = await self._read(None)
        self.task = asyncio.create_task(self._run())

    async def stop(self):
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.conn:
            with contextlib.suppress(Exception):
                await self.conn.close()

    async def _read_extent(self):
        """The box of the loaded map, [[w, s], [e, n]] (the page opens on it)."""
        e = await self.conn.fetchrow(
            "SELECT ST_XMin(e) AS w, ST_YMin(e) AS s, ST_XMax(e) AS e, ST_YMax(e) AS n"
            " FROM (SELECT ST_Extent(geom)::geometry AS e FROM trafficdb.locations) x")
        self.extent = [[e["w"], e["s"]], [e["e"], e["n"]]] if e and e["w"] is not None else None

    def _notified(self, conn, pid, channel, payload):
        # the payload is the generation published; it may not be readable yet
        # (the notification goes out at the commit of the publishing
        # transaction, which can precede the switch in shared memory)
        with contextlib.suppress(ValueError):
            self.wanted = max(self.wanted, int(payload))
        self.wake.set()

    async def _read(self, prev: int | None) -> dict:
        """The current generation and what changed after prev."""
        async with self.conn.transaction(isolation="repeatable_read", readonly=True):
            row = await self.conn.fetchrow(STATE_SQL)
            state = {
                "generation": row["generation"],
                "published_at": row["published_at"].isoformat() if row["published_at"] else None,
                "boxes": [],
                "changed": 0,
                "all": False,
                "extent": self.extent,
            }
            if prev is None or row["generation"] is None:
                return state
            try:
                async with self.conn.transaction():  # a savepoint
                    b = await self.conn.fetchrow(BOXES_SQL, prev, MAX_BOXES)
                state["changed"] = b["n"]
                state["boxes"] = json.loads(b["boxes"]) if b["boxes"] else []
            except asyncpg.PostgresError as e:
                # the log no longer reaches back to prev (trimmed, a new map):
                # everything may have changed
                log.warning("changes_since(%s): %s; sending the whole world", prev, e)
                state["boxes"] = [[-180, -90, 180, 90]]
                state["all"] = True
                await self._read_extent()
                state["extent"] = self.extent
            if len(state["boxes"]) == 1 and state["changed"] > MAX_BOXES:
                state["all"] = True
            return state

    async def _connect(self):
        with contextlib.suppress(Exception):
            await self.conn.close()
        self.conn = await asyncpg.connect(self.dsn)
        await self.conn.add_listener("trafficdb_publish", self._notified)

    async def _run(self):
        while True:
            # A listener whose connection is gone (the server restarted)
            # hears nothing: read the state every POLL seconds too, which
            # finds a lost connection and what was published meanwhile.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=POLL)
            self.wake.clear()
            prev = self.state["generation"] if self.state else None
            try:
                if self.conn is None or self.conn.is_closed():
                    await self._connect()
                state = await self._read(prev)
                for _ in range(200):  # bounded: 2 s for the notified generation to be readable
                    if state["generation"] is None or state["generation"] >= self.wanted:
                        break
                    await asyncio.sleep(0.01)
                    state = await self._read(prev)
            except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as e:
                log.warning("reading the publication failed: %s; reconnecting", e)
                await asyncio.sleep(1)
                with contextlib.suppress(Exception):
                    await self._connect()
                self.wake.set()
                continue
            if prev is not None and state["generation"] == prev:
                continue  # a notification of a generation already sent
            self.state = state
            for q in list(self.clients):
                if q.full():  # a page that does not read: drop its oldest
                    with contextlib.suppress(asyncio.QueueEmpty):
                        q.get_nowait()
                q.put_nowait(state)


_lifespan = app.router.lifespan_context


@contextlib.asynccontextmanager
async def lifespan(a):
    async with _lifespan(a):
        dsn = os.environ.get("DATABASE_URL")
        if not dsn:
            raise SystemExit("DATABASE_URL is not set")
        a.state.publications = Publications(dsn)
        await a.state.publications.start()
        try:
            yield
        finally:
            await a.state.publications.stop()


app.router.lifespan_context = lifespan


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


@app.get("/live", tags=["trafficdb"], summary="Server-sent events: one per publication")
async def live(request: Request):
    pubs: Publications = request.app.state.publications
    if len(pubs.clients) >= MAX_STREAMS:
        # each stream holds a connection and a queue: bounded, so that one
        # client opening streams without end cannot take the app's memory
        # and descriptors (the tiles go on being served)
        return JSONResponse({"detail": f"{len(pubs.clients)} live streams are open: expected at most {MAX_STREAMS}; "
                                       "try again later"}, status_code=503, headers={"Retry-After": "5"})
    q: asyncio.Queue = asyncio.Queue(maxsize=64)
    pubs.clients.add(q)

    async def events():
        try:
            yield "retry: 1000\n\n"
            yield sse("hello", pubs.state or {})
            while True:
                try:
                    state = await asyncio.wait_for(q.get(), timeout=15)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield ": keep-alive\n\n"
                    continue
                yield sse("publish", state)
        finally:
            pubs.clients.discard(q)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@app.get("/config.json", tags=["trafficdb"], summary="What the page needs to know: where its tiles come from")
async def page_config(request: Request):
    """The page (web/static/app.js) reads this before it makes the map: the map's extent is its
    first view when the URL names none (so that no tile of another view is asked for first)."""
    pubs = getattr(request.app.state, "publications", None)
    tiles = f"{TILES_URL}/traffic/{{z}}/{{x}}/{{y}}" if TILES_URL else None
    return JSONResponse({"tiles": {"traffic": tiles, "source_layer": "traffic"}, "basemap": BASEMAP, "map_name": MAP_NAME,
                         "simulation": SIM_STATUS is not None,
                         "extent": getattr(pubs, "extent", None)},
                        headers={"Cache-Control": "no-store"})


@app.get("/live/state", tags=["trafficdb"], summary="The current generation and when it was published")
async def live_state(request: Request):
    return JSONResponse(request.app.state.publications.state or {}, headers={"Cache-Control": "no-store"})


# GET /sim.json: the simulated traffic's status (web/sumo_feeder.py --status FILE) without its
# per-way values: simulator, simulated clock, vehicles, halted, speedup, updated_at.  The file
# is TRAFFICDB_WEB_SIM_STATUS (read-only here; the feeder rewrites it atomically); 204 (no
# content) when that is unset or the file is missing or unreadable: no simulation is no
# error (a 404 would be one in every browser's console).  Parsed again only when it changed.
_sim_cache: dict = {}


@app.get("/sim.json", tags=["trafficdb"], summary="The traffic simulation's status (Eclipse SUMO), when one feeds the map")
async def sim_status():
    path = SIM_STATUS
    try:
        if not path:
            raise FileNotFoundError
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if _sim_cache.get("key") != key:
            with open(path, "rb") as f:
                doc = json.loads(f.read(64 << 20))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            doc.pop("ways", None)
            _sim_cache.update(key=key, doc=doc)
    except (OSError, ValueError):
        return Response(status_code=204, headers={"Cache-Control": "no-store"})
    return JSONResponse(_sim_cache["doc"], headers={"Cache-Control": "no-store"})


# ---------------------------------------------------------------------------
# One road as the popup shows it: what trafficdb.locations says of it now.
# ---------------------------------------------------------------------------

ROAD_SQL = """
SELECT json_build_object('location_id', location_id, 'name', name, 'road_class', road_class,
                         'length_m', length_m, 'speed_limit_kmh', speed_limit_kmh, 'speed_kmh', speed_kmh,
                         'free_flow_kmh', free_flow_kmh, 'congestion', congestion, 'incident', incident,
                         'updated_at', updated_at, 'generation', generation, 'changed_generation', changed_generation)
  FROM trafficdb.locations WHERE location_id = $1
"""


@app.get("/roads/{location_id}", tags=["trafficdb"], summary="One road and its live traffic, for the page's popup")
async def road(request: Request, location_id: str):
    if not re.fullmatch(r"-?[0-9]{1,19}", location_id) or not -2**63 <= int(location_id) < 2**63:
        raise HTTPException(400, f"location id {location_id[:40]!r} is not a 64-bit integer")
    async with request.app.state.pool.acquire() as conn:
        doc = await conn.fetchval(ROAD_SQL, int(location_id))
    if doc is None:
        raise HTTPException(404, f"no road {int(location_id)} in the published map")
    return JSONResponse(as_json(doc), headers={"Cache-Control": "no-store"})


# ---------------------------------------------------------------------------
# Vessels of the AIS day, through the trail FDW.
# ---------------------------------------------------------------------------

# Each vessel's last report in the 10 minutes up to the end of the minute,
# and its track over the 30 minutes before: one scan of the window
# [minute - 30 min, minute + 1 min), which the trail FDW prunes pages by.
POSITIONS_SQL = f"""
WITH w AS (
  SELECT mmsi, ts, geom FROM {TRAIL_TABLE}
   WHERE ts >= $1::timestamptz - interval '{TRAIL_TAIL_MINUTES} minutes' AND ts < $1::timestamptz + interval '1 minute'
), last AS (
  SELECT DISTINCT ON (mmsi) mmsi, ts, geom FROM w
   WHERE ts >= $1::timestamptz - interval '9 minutes'
   ORDER BY mmsi, ts DESC
), tails AS (
  SELECT mmsi, ST_MakeLine(geom ORDER BY ts) AS geom FROM w GROUP BY mmsi HAVING count(*) > 1
)
SELECT json_build_object('type', 'FeatureCollection', 'minute', $1::timestamptz, 'features',
         coalesce((SELECT json_agg(json_build_object('type', 'Feature', 'id', mmsi,
                     'geometry', ST_AsGeoJSON(geom, 6)::json,
                     'properties', json_build_object('kind', 'position', 'mmsi', mmsi, 'ts', ts)) ORDER BY mmsi)
                     FROM last), '[]'::json)::jsonb
         || coalesce((SELECT jsonb_agg(jsonb_build_object('type', 'Feature',
                     'geometry', ST_AsGeoJSON(geom, 6)::jsonb,
                     'properties', jsonb_build_object('kind', 'tail', 'mmsi', mmsi)) ORDER BY mmsi)
                     FROM tails), '[]'::jsonb))
"""


def as_json(v):
    """tipg's pool decodes json values; a plain connection gives text."""
    return json.loads(v) if isinstance(v, (str, bytes)) else v


@app.get("/trails/positions", tags=["trafficdb"], summary="Vessel positions at a minute of 2020-06-30 (UTC)")
async def trail_positions(
    request: Request,
    minute: int = Query(..., description="minute of the day 2020-06-30 UTC, 0 to 1439"),
):
    if not 0 <= minute <= 1439:
        raise HTTPException(400, f"minute {minute} is out of range: expected 0 to 1439")
    at = TRAIL_DAY + dt.timedelta(minutes=minute)
    async with request.app.state.pool.acquire() as conn:
        doc = await conn.fetchval(POSITIONS_SQL, at)
    return JSONResponse(as_json(doc), headers={"Cache-Control": "no-store"})


@app.get("/trails/extent", tags=["trafficdb"], summary="Where the vessels of the day are")
async def trail_extent(request: Request):
    sql = f"""SELECT json_build_array(ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e))
                FROM (SELECT ST_Extent(geom)::geometry AS e FROM {TRAIL_TABLE}
                       WHERE ts >= $1::timestamptz AND ts < $1::timestamptz + interval '10 minutes') s"""
    async with request.app.state.pool.acquire() as conn:
        doc = await conn.fetchval(sql, TRAIL_DAY + dt.timedelta(hours=12))
    return JSONResponse(as_json(doc) if doc else None)
