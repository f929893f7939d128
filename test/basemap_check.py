"""test/basemap_check.py: exact truths of the base map's archives and glyphs
(test/basemap.sh builds them and runs this in the base map's venv).

    python test/basemap_check.py HELSINKI.pmtiles WORLD.pmtiles GLYPHS_DIR

Reads tiles with the pmtiles package and decodes them with mapbox-vector-tile;
reads the glyph PBFs with a protobuf reader of its own.  Prints each check;
exits 1 if any failed.
"""

from __future__ import annotations

import gzip
import math
import os
import sys

import mapbox_vector_tile as mvt
from pmtiles.reader import MmapSource, Reader
from shapely.geometry import Point, shape

failures: list[str] = []


def check(ok: bool, what: str):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def tile_of(lon: float, lat: float, z: int) -> tuple[int, int, float, float]:
    """The tile of a point at z, and the point in the tile's coordinates (0..4096, y up as decoded)."""
    n = 2 ** z
    fx = (lon + 180) / 360 * n
    fy = (1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n
    x, y = int(fx), int(fy)
    return x, y, (fx - x) * 4096, (1 - (fy - y)) * 4096


def layers(reader: Reader, z: int, lon: float, lat: float) -> tuple[dict, Point]:
    x, y, px, py = tile_of(lon, lat, z)
    data = reader.get(z, x, y)
    if data is None:
        return {}, Point(px, py)
    return mvt.decode(gzip.decompress(data)), Point(px, py)


def kinds(d: dict, layer: str) -> set:
    return {f["properties"].get("kind") for f in d.get(layer, {}).get("features", [])}


def covers(d: dict, layer: str, kind: str, p: Point) -> bool:
    return any(f["properties"].get("kind") == kind and shape(f["geometry"]).buffer(0).contains(p)
               for f in d.get(layer, {}).get("features", []))


MINOR = {"residential", "unclassified", "service", "footway", "steps", "cycleway", "path", "pedestrian"}
PATHS = {"service", "footway", "steps", "cycleway", "path", "pedestrian"}


def helsinki(path: str):
    with open(path, "rb") as f:
        r = Reader(MmapSource(f))
        h = r.header()
        check(h["min_zoom"] == 0 and h["max_zoom"] == 15, f"helsinki: zooms {h['min_zoom']}..{h['max_zoom']}, expected 0..15")
        ids = sorted(v["id"] for v in r.metadata()["vector_layers"])
        check(ids == ["building", "earth", "landuse", "place", "rail", "road", "water", "waterway"],
              f"helsinki: layers {ids}")
        centre = (24.9440, 60.1717)  # near the railway station
        z14, p = layers(r, 14, *centre)
        mh = [f["properties"] for f in z14.get("road", {}).get("features", [])
              if f["properties"].get("name") == "Mannerheimintie"]
        check(bool(mh) and all(m["kind"] == "primary" for m in mh),
              f"z14: Mannerheimintie in road, kind primary ({len(mh)} pieces)")
        check(all(isinstance(m.get("oneway"), bool) and isinstance(m.get("bridge"), bool) for m in mh),
              "z14: road's oneway and bridge are booleans")
        check({"primary", "secondary", "residential", "footway", "service"} <= kinds(z14, "road"),
              f"z14: road kinds include primary, secondary, residential, footway, service: {sorted(kinds(z14, 'road'), key=str)}")
        check({"tram", "rail"} <= kinds(z14, "rail"), f"z14: rail kinds tram and rail: {kinds(z14, 'rail')}")
        check(len(z14.get("building", {}).get("features", [])) > 100, "z14: more than 100 buildings")
        check({"park", "grass"} <= kinds(z14, "landuse"), f"z14: landuse has park and grass: {kinds(z14, 'landuse')}")
        check(covers(z14, "earth", "land", p) and not covers(z14, "water", "sea", p),
              "z14: the railway station's square is land, not sea")
        places = {f["properties"].get("name"): f["properties"] for f in z14.get("place", {}).get("features", [])}
        check(places.get("Helsinki", {}).get("kind") == "city" and places["Helsinki"].get("population") == 629725,
              f"z14: place Helsinki, city, population 629725: {places.get('Helsinki')}")
        check(places.get("Kluuvi", {}).get("kind") == "suburb", "z14: place Kluuvi, suburb")
        # Kaisaniemenlahti, the bay north of the centre: sea
        bay, q = layers(r, 14, 24.9435, 60.17760)
        check(covers(bay, "water", "sea", q) and not covers(bay, "earth", "land", q),
              "z14: Kaisaniemenlahti (24.9435 E, 60.1776 N) is sea, not land")
        z12, _ = layers(r, 12, *centre)
        check("residential" in kinds(z12, "road") and not PATHS & kinds(z12, "road"),
              f"z12: residential roads, no service or paths: {sorted(kinds(z12, 'road'), key=str)}")
        check("building" not in z12, "z12: no buildings (from z13)")
        z13, _ = layers(r, 13, *centre)
        check("building" in z13, "z13: buildings")
        z11, _ = layers(r, 11, *centre)
        check(not MINOR & kinds(z11, "road") and "primary" in kinds(z11, "road") and "tram" in kinds(z11, "rail"),
              f"z11: primary roads and trams, no minor roads: {sorted(kinds(z11, 'road'), key=str)}")
        z10, _ = layers(r, 10, *centre)
        check("rail" not in z10 and kinds(z10, "road") <= {"primary", "primary_link", "secondary", "tertiary", "motorway", "trunk", "motorway_link", "trunk_link"},
              f"z10: no rail, major roads only: {sorted(kinds(z10, 'road'), key=str)}")
        z8, _ = layers(r, 8, *centre)
        check(kinds(z8, "road") == {"primary"} and "place" in z8, f"z8: primary roads and the city: {kinds(z8, 'road')}")
        z5, q5 = layers(r, 5, *centre)
        check(set(z5) == {"earth", "water"}, f"z5: earth and water only: {sorted(z5)}")


def world(path: str):
    with open(path, "rb") as f:
        r = Reader(MmapSource(f))
        h = r.header()
        check(h["min_zoom"] == 0 and h["max_zoom"] == 9, f"world: zooms {h['min_zoom']}..{h['max_zoom']}, expected 0..9")
        z0, p = layers(r, 0, 25.0, 62.0)
        check("earth" in z0 and covers(z0, "earth", "land", p), "world z0: earth, Finland's middle is land")
        _, atl = layers(r, 0, -40.0, 30.0)
        check(not covers(z0, "earth", "land", atl), "world z0: the Atlantic (40 W, 30 N) is not land")
        # Natural Earth's rings across the antimeridian (Russia) cut, not drawn across the map
        for name, lon, lat, land in (("Lapland", 25.0, 68.0, True), ("the Kola peninsula", 40.0, 68.0, True),
                                     ("Chukotka west of 180", 175.0, 66.0, True),
                                     ("Chukotka east of 180", -175.0, 66.0, True),
                                     ("the White Sea", 38.0, 65.5, False), ("the Black Sea", 34.0, 43.0, False),
                                     ("the Bering Sea", -178.0, 58.0, False)):
            for z in (2, 4, 6):
                d, q = layers(r, z, lon, lat)
                check(covers(d, "earth", "land", q) == land,
                      f"world z{z}: {name} ({lon} E, {lat} N) is {'land' if land else 'not land'}")
        z3, _ = layers(r, 3, 25.0, 62.0)
        names = {f["properties"].get("name") for f in z3.get("country", {}).get("features", [])}
        check("Finland" in names, f"world z3: country label Finland: {sorted(n for n in names if n)[:10]}")
        check(len(z3.get("boundary", {}).get("features", [])) > 0, "world z3: country borders")


def read_pb(buf: bytes):
    """(field number, wire type, value) of a protobuf message's fields."""
    i = 0

    def varint():
        nonlocal i
        n = shift = 0
        while True:  # bounded: the buffer
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n
    while i < len(buf):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 2:
            n = varint()
            yield num, wt, buf[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wt}")


def glyphs(root: str):
    fonts = sorted(os.listdir(root))
    check({"Open Sans Regular", "Open Sans Semibold", "Open Sans Italic"} <= set(fonts), f"glyphs: fonts {fonts}")
    for font in ("Open Sans Regular", "Open Sans Semibold", "Open Sans Italic"):
        n = len([x for x in os.listdir(os.path.join(root, font)) if x.endswith(".pbf")])
        check(n == 256, f"glyphs: {font}: {n} ranges, expected 256 (0-255 .. 65280-65535)")
    counts = {}
    for rng in ("0-255", "256-511", "768-1023", "1024-1279", "8192-8447", "65280-65535", "19968-20223"):
        data = open(os.path.join(root, "Open Sans Regular", rng + ".pbf"), "rb").read()
        stacks = [v for num, _, v in read_pb(data) if num == 1]
        fields = {}
        gl = []
        for num, _, v in read_pb(stacks[0]):
            if num == 3:
                gl.append({k: v2 for k, _, v2 in read_pb(v)})
            else:
                fields[num] = v
        check(len(stacks) == 1 and fields.get(1) == b"Open Sans Regular" and fields.get(2) == rng.encode(),
              f"glyphs {rng}: one font stack named Open Sans Regular, range {rng}")
        counts[rng] = gl
    # Debian 12's fonts-open-sans 1.11: exact counts of its coverage
    check(counts.pop("19968-20223") == [], "glyphs: 19968-20223 (CJK, not in the font): a valid PBF without glyphs")
    want = {"0-255": 191, "256-511": 140, "768-1023": 81, "1024-1279": 255, "8192-8447": 47, "65280-65535": 2}
    check({k: len(v) for k, v in counts.items()} == want,
          "glyphs: Latin 191 (0-255), Greek 81 (768-1023), Cyrillic 255 (1024-1279), 2 in 65280-65535: "
          + ", ".join(f"{k} {len(v)}" for k, v in counts.items()))
    a = next((g for g in counts["0-255"] if g.get(1) == 65), None)
    check(a is not None, "glyphs: 'A' (65) in 0-255")
    if a:
        w, h, adv = a.get(3, 0), a.get(4, 0), a.get(7, 0)
        left = (a.get(5, 0) >> 1) ^ -(a.get(5, 0) & 1)
        top = (a.get(6, 0) >> 1) ^ -(a.get(6, 0) & 1)
        bm = a.get(2, b"")
        print(f"     'A': width {w} height {h} left {left} top {top} advance {adv}, bitmap {len(bm)} bytes")
        check(12 <= w <= 18 and 15 <= h <= 19 and 13 <= adv <= 18 and -2 <= left <= 2 and -10 <= top <= 0,
              "glyphs: 'A' has sane metrics at 24 px (width 12-18, height 15-19, advance 13-18)")
        check(len(bm) == (w + 6) * (h + 6), "glyphs: 'A''s bitmap is (width+6) x (height+6) bytes (3 px buffer)")
        check(bm and max(bm) > 192 and min(bm) < 100, "glyphs: 'A''s SDF spans inside (>192) and outside (<100)")
    sp = next((g for g in counts["0-255"] if g.get(1) == 32), None)
    check(sp is not None and not sp.get(2) and sp.get(7, 0) > 3, "glyphs: space (32): no bitmap, an advance")


def main(argv: list[str]) -> int:
    helsinki(argv[1])
    world(argv[2])
    glyphs(argv[3])
    print(f"basemap_check: {len(failures)} failed" if failures else "basemap_check: all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
