"""scripts/basemap_world.py: world land, country borders and country labels
from npm world-atlas (Natural Earth in TopoJSON), as a GeoJSON text sequence
for tippecanoe (scripts/basemap.sh world).

    python scripts/basemap_world.py LAND.json COUNTRIES.json OUT.geojsonseq

LAND is world-atlas's land-50m.json, COUNTRIES its countries-50m.json.  Layers
(/tmp/map-contract.md's world.pmtiles): earth (land polygons, kind 'land'),
boundary (the arcs two countries share: their borders, lines, kind
'country'), country (a label point inside each country's largest part,
name).  The TopoJSON is decoded here (quantized, delta-encoded arcs; an arc
index ~i is arc i reversed).  Natural Earth's rings cross the antimeridian
(Russia, Fiji) or go round the South Pole (Antarctica): they are unwrapped,
then cut at +-180 (d3 reads them on the sphere; here they are planar).
"""

from __future__ import annotations

import json
import sys

import shapely
from shapely.affinity import translate
from shapely.geometry import LineString, Polygon, box, mapping
from shapely.ops import linemerge


def arcs_of(topo: dict) -> list[list[tuple[float, float]]]:
    """The topology's arcs in longitude and latitude."""
    tr = topo.get("transform")
    out = []
    for arc in topo["arcs"]:  # bounded: the arcs
        if tr:
            (sx, sy), (tx, ty) = tr["scale"], tr["translate"]
            x = y = 0
            pts = []
            for dx, dy in arc:
                x += dx
                y += dy
                pts.append((x * sx + tx, y * sy + ty))
        else:
            pts = [(p[0], p[1]) for p in arc]
        out.append(pts)
    return out


def ring(arcs: list, indexes: list[int]) -> list[tuple[float, float]]:
    pts: list = []
    for i in indexes:
        a = arcs[i] if i >= 0 else arcs[~i][::-1]
        pts.extend(a[1:] if pts else a)  # an arc starts where the last ended
    return pts


def unwrap(pts: list) -> list:
    """A ring that crosses the antimeridian (a step of over 180 degrees of
    longitude) made continuous (longitudes past +-180); a ring round a pole
    (one such step: Antarctica) closed along the pole."""
    out = [pts[0]]
    shift = 0.0
    for (x0, _), (x1, y1) in zip(pts, pts[1:]):  # bounded: the ring's points
        if x1 - x0 > 180:
            shift -= 360
        elif x0 - x1 > 180:
            shift += 360
        out.append((x1 + shift, y1))
    if shift:  # round a pole: along it, back to the start
        pole = -90.0 if sum(y for _, y in pts) < 0 else 90.0
        out += [(out[-1][0], pole), (out[0][0], pole), out[0]]
    return out


WORLD = box(-180, -90, 180, 90)


def polygons(arcs: list, geom: dict) -> list[Polygon]:
    """The polygons of a TopoJSON geometry, valid, cut at the antimeridian."""
    t = geom.get("type")
    polys = [geom["arcs"]] if t == "Polygon" else geom.get("arcs", []) if t == "MultiPolygon" else []
    out = []
    for rings in polys:
        rs = [unwrap(r) for r in (ring(arcs, r) for r in rings) if len(r) >= 4]
        if not rs:
            continue
        p = shapely.make_valid(Polygon(rs[0]))
        for h in rs[1:]:  # a hole, where the exterior is (its longitudes may be shifted by 360)
            hp = shapely.make_valid(Polygon(h))
            for dx in (0, 360, -360):
                q = translate(hp, dx)
                if q.intersects(p):
                    p = p.difference(q)
                    break
        for dx in (0, 360, -360):  # the parts past +-180 back on the map
            part = p.intersection(translate(WORLD, -dx))
            if not part.is_empty:
                part = translate(part, dx)
                out += [g for g in getattr(part, "geoms", [part]) if g.geom_type == "Polygon" and g.area > 0]
    return out


def feature(layer: str, minzoom: int, geom, props: dict) -> str:
    return json.dumps({"type": "Feature", "tippecanoe": {"layer": layer, "minzoom": minzoom},
                       "properties": props, "geometry": mapping(geom)}, separators=(",", ":")) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    land = json.load(open(argv[1], encoding="utf-8"))
    countries = json.load(open(argv[2], encoding="utf-8"))
    n = {"earth": 0, "boundary": 0, "country": 0}
    with open(argv[3], "w", encoding="utf-8") as out:
        arcs = arcs_of(land)
        for g in land["objects"]["land"]["geometries"]:
            for p in polygons(arcs, g):
                out.write(feature("earth", 0, p, {"kind": "land"}))
                n["earth"] += 1
        arcs = arcs_of(countries)
        users: dict[int, set[int]] = {}
        for k, g in enumerate(countries["objects"]["countries"]["geometries"]):
            t = g.get("type")
            polys = [g["arcs"]] if t == "Polygon" else g.get("arcs", []) if t == "MultiPolygon" else []
            for rings in polys:
                for r in rings:
                    for i in r:
                        users.setdefault(i if i >= 0 else ~i, set()).add(k)
            parts = polygons(arcs, g)
            name = (g.get("properties") or {}).get("name")
            if parts and name:
                big = max(parts, key=lambda p: p.area)
                area = sum(p.area for p in parts)
                minzoom = 2 if area > 100 else 3 if area > 10 else 4 if area > 1 else 5
                out.write(feature("country", minzoom, big.representative_point(), {"name": name}))
                n["country"] += 1
        borders = [LineString(arcs[i]) for i, ks in sorted(users.items()) if len(ks) > 1 and len(arcs[i]) > 1
                   and all(abs(a[0] - b[0]) <= 180 for a, b in zip(arcs[i], arcs[i][1:]))]
        merged = linemerge(borders) if borders else None
        for line in (getattr(merged, "geoms", [merged]) if merged else []):
            out.write(feature("boundary", 0, line, {"kind": "country"}))
            n["boundary"] += 1
    print("basemap: world features " + ", ".join(f"{k} {v}" for k, v in n.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
