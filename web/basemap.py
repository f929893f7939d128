"""The base map's files, served by the live map's app (web/app.py calls install).

  GET /basemap/map.pmtiles     TRAFFICDB_WEB_BASEMAP (scripts/basemap.sh build MAP PBF)
  GET /basemap/world.pmtiles   TRAFFICDB_WEB_WORLD (scripts/basemap.sh world)
  GET /fonts/{fontstack}/{start}-{end}.pbf
                               TRAFFICDB_WEB_GLYPHS/{font}/{start}-{end}.pbf (scripts/basemap.sh glyphs);
                               a fontstack is a comma-separated list of font names (MapLibre's
                               text-font): the first of them the directory has answers
  GET /vendor/pmtiles/...      the npm pmtiles package's dist/ (the page's PMTiles reader)

Each with GET and HEAD (a client or cache asking for the size or the ETag
only), HTTP Range (PMTiles reads its archive in ranges), ETag and
Last-Modified, Cache-Control: public, max-age=3600; 404 for what is unset or
not there.  No path of the client's reaches the file system: the archives are
fixed paths, a font must be one of the directories found at start, a range one
of the 256 of 0-255 .. 65280-65535.
"""

from __future__ import annotations

import logging
import os
import pathlib
import re

from fastapi import HTTPException, Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

log = logging.getLogger("trafficdb.web")

CACHE = "public, max-age=3600"
RANGE = re.compile(r"(\d{1,5})-(\d{1,5})")
ATTRIBUTION = ('<a href="https://www.openstreetmap.org/copyright">© OpenStreetMap contributors</a>, '
               'Natural Earth')


def _file(env: str) -> pathlib.Path | None:
    p = os.environ.get(env, "")
    if not p:
        return None
    path = pathlib.Path(p)
    if not path.is_file():
        raise SystemExit(f"{env}={p!r}: expected a file (scripts/basemap.sh makes it)")
    return path


def _glyph_fonts(env: str) -> tuple[pathlib.Path | None, dict[str, pathlib.Path]]:
    p = os.environ.get(env, "")
    if not p:
        return None, {}
    root = pathlib.Path(p)
    if not root.is_dir():
        raise SystemExit(f"{env}={p!r}: expected the glyphs directory of scripts/basemap.sh glyphs")
    fonts = {d.name: d for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")}
    if not fonts:
        raise SystemExit(f"{env}={p!r}: no font directories in it")
    return root, fonts


def send_file(request: Request, path: pathlib.Path, media_type: str) -> Response:
    """The file, with Range (FileResponse's), ETag and Last-Modified; 304 when the
    client's If-None-Match names its ETag (FileResponse answers 200 again)."""
    r = FileResponse(path, media_type=media_type, headers={"Cache-Control": CACHE})
    r.set_stat_headers(path.stat())
    tags = {t.strip() for t in request.headers.get("if-none-match", "").split(",")}
    if r.headers["etag"] in tags or "*" in tags:
        return Response(status_code=304, headers={"ETag": r.headers["etag"], "Cache-Control": CACHE,
                                                  "Last-Modified": r.headers["last-modified"]})
    return r


def install(app, here: pathlib.Path) -> dict:
    """Add the routes; returns /config.json's "basemap" object."""
    map_path = _file("TRAFFICDB_WEB_BASEMAP")
    world_path = _file("TRAFFICDB_WEB_WORLD")
    glyphs, fonts = _glyph_fonts("TRAFFICDB_WEB_GLYPHS")

    def archive(request: Request, path: pathlib.Path | None, what: str) -> Response:
        if path is None:
            raise HTTPException(404, f"no {what}: the server was started without it")
        return send_file(request, path, "application/octet-stream")

    @app.api_route("/basemap/map.pmtiles", methods=["GET", "HEAD"], include_in_schema=False)
    def basemap_map(request: Request):
        return archive(request, map_path, "base map (TRAFFICDB_WEB_BASEMAP)")

    @app.api_route("/basemap/world.pmtiles", methods=["GET", "HEAD"], include_in_schema=False)
    def basemap_world(request: Request):
        return archive(request, world_path, "world map (TRAFFICDB_WEB_WORLD)")

    @app.api_route("/fonts/{fontstack}/{glyph_range}.pbf", methods=["GET", "HEAD"], include_in_schema=False)
    def glyph_range(request: Request, fontstack: str, glyph_range: str):
        if not fonts:
            raise HTTPException(404, "no glyphs: the server was started without TRAFFICDB_WEB_GLYPHS")
        m = RANGE.fullmatch(glyph_range)
        if not m or int(m.group(1)) % 256 or int(m.group(2)) != int(m.group(1)) + 255 or int(m.group(2)) > 65535:
            shown = glyph_range[:40]
            raise HTTPException(404, f"glyph range {shown!r}: expected START-END, START a multiple of 256, "
                                     "END = START+255, up to 65535")
        for name in fontstack.split(",")[:8]:  # bounded: a few fonts a stack
            d = fonts.get(name.strip())
            if d is not None:
                f = d / f"{m.group(1)}-{m.group(2)}.pbf"
                if f.is_file():
                    return send_file(request, f, "application/x-protobuf")
        raise HTTPException(404, f"no font of {fontstack[:80]!r}: expected one of {sorted(fonts)}")

    dist = here / "node_modules" / "pmtiles" / "dist"
    if dist.is_dir():
        app.mount("/vendor/pmtiles", StaticFiles(directory=dist), name="pmtiles")
    else:
        log.warning("%s is missing: run npm ci in web/", dist)

    return {
        "map": "/basemap/map.pmtiles" if map_path else None,
        "world": "/basemap/world.pmtiles" if world_path else None,
        "glyphs": "/fonts/{fontstack}/{range}.pbf" if glyphs else None,
        "fonts": sorted(fonts),
        "attribution": ATTRIBUTION,
    }
