"""scripts/basemap_osm.py: the base map's features of an OpenStreetMap extract,
as GeoJSON text sequences for tippecanoe (scripts/basemap.sh build).

    python scripts/basemap_osm.py AREAS.geojsonseq WAYS.opl W S E N OUT.geojsonseq [LAND.json]

AREAS is `osmium export --geometry-types=point,polygon` of the extract (tags
filtered to what is used here), WAYS `osmium cat -f opl` of its highway,
railway, waterway and coastline ways with their nodes (scripts/basemap.sh
makes both); W S E N is the extract's bounding box.  The ways are read here
rather than exported: an extract cut at a box lacks the nodes of its ways
beyond the box, and osmium export drops such a way whole; here it keeps the
runs of nodes it has.  Each
output feature carries {"tippecanoe": {"layer": ..., "minzoom": ...}}; the
layers and attributes are those of /tmp/map-contract.md's MAP.pmtiles:
earth, water, waterway, landuse, building, road, rail, place.

Land and sea: the coastline (natural=coastline, land on its left) clipped to
the box, with the box's boundary, is polygonized; each face is classified by
points just left and right of the coastline's segments.  A face with land
and sea points both (an extract whose coastline is cut off) is left out; a
face with neither is left out too.  No coastline: the whole box is land.
An extract cut along a state's border (Delaware) has the coastline of its own
shore only: the sea face reaches over the other shore's land.  So with LAND
(world-atlas's land-10m.json, Natural Earth 1:10m), farther than NEAR_COAST
degrees from the extract's coastline Natural Earth decides: its land is taken
out of the sea faces and its sea out of the land faces; near the coastline
OSM's own is kept (Natural Earth's 1:10m shore is off by up to a few hundred
metres).
Prints a summary line on stderr.
"""

from __future__ import annotations

import json
import math
import sys

import shapely
from shapely.geometry import LineString, Point, box, mapping, shape
from shapely.ops import linemerge, polygonize, unary_union

ROAD_MINZOOM = {
    "motorway": 5, "trunk": 5, "motorway_link": 9, "trunk_link": 9,
    "primary": 8, "primary_link": 10, "secondary": 9, "secondary_link": 11,
    "tertiary": 10, "tertiary_link": 12,
    "unclassified": 12, "residential": 12, "living_street": 12, "road": 12, "busway": 12,
    "service": 14, "pedestrian": 14, "footway": 14, "cycleway": 14, "path": 14, "steps": 14,
    "track": 14, "bridleway": 14, "corridor": 14, "platform": 14,
}
RAIL = {"rail", "tram", "subway", "light_rail"}
WATERWAY_MINZOOM = {"river": 8, "canal": 10, "stream": 12, "ditch": 13, "drain": 13}
PLACE_MINZOOM = {"city": 6, "town": 8, "village": 10, "suburb": 11, "island": 11,
                 "quarter": 13, "hamlet": 13, "neighbourhood": 14}
LANDUSE = {  # (key, value) -> kind
    **{("landuse", v): v for v in ("forest", "grass", "meadow", "cemetery", "residential", "commercial",
                                   "retail", "industrial", "railway", "farmland", "military")},
    ("landuse", "recreation_ground"): "park", ("landuse", "village_green"): "grass",
    ("landuse", "allotments"): "garden", ("landuse", "orchard"): "farmland", ("landuse", "vineyard"): "farmland",
    **{("leisure", v): v for v in ("park", "pitch", "playground", "garden")},
    ("leisure", "nature_reserve"): "park", ("leisure", "dog_park"): "park", ("leisure", "golf_course"): "grass",
    **{("natural", v): v for v in ("wood", "scrub", "wetland", "beach", "sand")},
    ("natural", "grassland"): "grass", ("natural", "heath"): "scrub",
    ("amenity", "grave_yard"): "cemetery", ("amenity", "hospital"): "hospital", ("amenity", "school"): "school",
    ("amenity", "university"): "university", ("amenity", "college"): "university",
}
WATER_KIND = {"lake": "lake", "pond": "lake", "river": "river", "oxbow": "river", "canal": "river",
              "reservoir": "reservoir", "basin": "basin"}
TRUE = {"yes", "true", "1", "-1"}


def area_km2(g) -> float:
    lat = (g.bounds[1] + g.bounds[3]) / 2
    return g.area * 111.32 * 111.32 * math.cos(math.radians(lat))


def area_minzoom(g, big: int) -> int:
    a = area_km2(g)
    return big if a > 10 else big + 2 if a > 1 else big + 4 if a > 0.05 else big + 6


def feature(layer: str, minzoom: int, geom, props: dict) -> str:
    geom = shapely.set_precision(geom, 1e-7) if geom.geom_type != "Point" else geom
    if geom.is_empty:
        return ""
    return json.dumps({"type": "Feature", "tippecanoe": {"layer": layer, "minzoom": minzoom},
                       "properties": {k: v for k, v in props.items() if v is not None},
                       "geometry": mapping(geom)}, separators=(",", ":")) + "\n"


def named(tags: dict, **more) -> dict:
    return {"name": tags.get("name"), **more}


def classify(tags: dict, geom) -> list[tuple[str, int, object, dict]]:
    """The layers a feature of the export goes to: (layer, minzoom, geometry, attributes)."""
    t = geom.geom_type
    out = []
    line = t in ("LineString", "MultiLineString")
    poly = t in ("Polygon", "MultiPolygon")
    if t == "Point":
        place = tags.get("place")
        if place in PLACE_MINZOOM and tags.get("name"):
            pop = tags.get("population", "").replace(",", "").replace(" ", "")
            out.append(("place", PLACE_MINZOOM[place], geom,
                        named(tags, kind=place, population=int(pop) if pop.isdigit() else None)))
        return out
    hw = tags.get("highway")
    if line and hw in ROAD_MINZOOM:
        out.append(("road", ROAD_MINZOOM[hw], geom, named(
            tags, kind=hw, ref=tags.get("ref"), oneway=tags.get("oneway") in TRUE,
            bridge=tags.get("bridge", "no") not in ("no", "false"),
            tunnel=tags.get("tunnel", "no") not in ("no", "false"))))
    rw = tags.get("railway")
    if line and rw in RAIL:
        out.append(("rail", 11, geom, named(tags, kind=rw)))
    ww = tags.get("waterway")
    if line and ww in WATERWAY_MINZOOM:
        out.append(("waterway", WATERWAY_MINZOOM[ww], geom, named(tags, kind=ww)))
    if not poly:
        return out
    if tags.get("place") in ("island", "islet") and tags.get("name"):
        out.append(("place", 11 if area_km2(geom) > 0.5 else 13, geom.representative_point(),
                    named(tags, kind="island")))
    if tags.get("building") and tags["building"] != "no":
        out.append(("building", 13, geom, {}))
        return out
    water = None
    if tags.get("natural") == "water":
        water = WATER_KIND.get(tags.get("water", ""), "water")
    elif ww == "riverbank":
        water = "river"
    elif tags.get("landuse") in ("reservoir", "basin"):
        water = tags["landuse"]
    if water:
        out.append(("water", area_minzoom(geom, 6), geom, named(tags, kind=water)))
        return out
    for key in ("leisure", "landuse", "natural", "amenity"):
        kind = LANDUSE.get((key, tags.get(key)))
        if kind:
            out.append(("landuse", area_minzoom(geom, 8), geom, named(tags, kind=kind)))
            break
    return out


def extend_to_box(line, bbox):
    """A coastline that ends inside the box (its next node lay beyond the
    extract's box and is missing), carried on in the direction of its last
    segment to the box's boundary, at both ends."""
    if line.is_ring:
        return line
    xy = list(line.coords)
    far = 4 * math.hypot(bbox.bounds[2] - bbox.bounds[0], bbox.bounds[3] - bbox.bounds[1])
    for end, prev, at in ((xy[-1], xy[-2], len(xy)), (xy[0], xy[1], 0)):
        if not bbox.contains(Point(end)):
            continue  # on the boundary or beyond: the clip takes care of it
        dx, dy = end[0] - prev[0], end[1] - prev[1]
        d = math.hypot(dx, dy)
        if d == 0:
            continue
        ray = LineString([end, (end[0] + dx / d * far, end[1] + dy / d * far)])
        hit = ray.intersection(bbox.exterior)
        if hit.is_empty:
            continue
        pts = [hit] if hit.geom_type == "Point" else [g for g in getattr(hit, "geoms", []) if g.geom_type == "Point"]
        if not pts:
            continue
        p = min(pts, key=lambda q: q.distance(Point(end)))
        xy.insert(at, (p.x, p.y))
    return LineString(xy)


def land_and_sea(coast: list, bbox) -> tuple[list, list, int]:
    """(land faces, sea faces, faces left out) of the coastline within bbox."""
    if not coast:
        return [bbox], [], 0
    coast = [extend_to_box(c, bbox) for c in coast]
    lines = unary_union([c.intersection(bbox) for c in coast])
    noded = unary_union([lines, bbox.exterior])
    faces = list(polygonize(noded))
    if not faces:
        return [bbox], [], 0
    tree = shapely.STRtree(faces)
    land, sea = [0] * len(faces), [0] * len(faces)
    for c in coast:
        xy = list(c.coords)
        for (x0, y0), (x1, y1) in zip(xy, xy[1:]):  # bounded: the coastline's segments
            dx, dy = x1 - x0, y1 - y0
            n = math.hypot(dx, dy)
            if n == 0:
                continue
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            if not bbox.contains(Point(mx, my)):
                continue
            eps = min(1e-6, n / 4)
            nx, ny = -dy / n * eps, dx / n * eps  # to the left
            for votes, px, py in ((land, mx + nx, my + ny), (sea, mx - nx, my - ny)):
                for i in tree.query(Point(px, py), predicate="within"):
                    votes[i] += 1
    lf, sf, left_out = [], [], 0
    for i, f in enumerate(faces):
        if land[i] and not sea[i]:
            lf.append(f)
        elif sea[i] and not land[i]:
            sf.append(f)
        else:
            left_out += 1
    return lf, sf, left_out


def opl_unescape(text: str) -> str:
    """OPL's %XXXX% escapes (a code point in hex between percent signs)."""
    if "%" not in text:
        return text
    parts = text.split("%")
    out = [parts[0]]
    for i in range(1, len(parts) - 1, 2):  # bounded: the escapes
        out.append(chr(int(parts[i], 16)) if parts[i] else "%")
        out.append(parts[i + 1])
    if len(parts) % 2 == 0:
        out.append("%" + parts[-1])
    return "".join(out)


def opl_ways(path: str):
    """(tags, LineString) of each run of located nodes of each way of an OPL file
    (nodes first, then ways: osmium's order)."""
    loc: dict[str, tuple[float, float]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:  # bounded: the file's lines
            fields = line.rstrip("\n").split(" ")
            if fields[0].startswith("n"):
                x = y = None
                for fl in fields[1:]:
                    if fl.startswith("x") and len(fl) > 1:
                        x = float(fl[1:])
                    elif fl.startswith("y") and len(fl) > 1:
                        y = float(fl[1:])
                if x is not None and y is not None:
                    loc[fields[0][1:]] = (x, y)
            elif fields[0].startswith("w"):
                tags, refs = {}, []
                for fl in fields[1:]:
                    if fl.startswith("T") and len(fl) > 1:
                        for kv in fl[1:].split(","):
                            k, _, v = kv.partition("=")
                            tags[opl_unescape(k)] = opl_unescape(v)
                    elif fl.startswith("N") and len(fl) > 1:
                        refs = [r[1:] for r in fl[1:].split(",")]
                run: list = []
                for r in refs + [None]:  # bounded: the way's nodes
                    p = loc.get(r) if r is not None else None
                    if p is not None:
                        if not run or run[-1] != p:
                            run.append(p)
                        continue
                    if len(run) >= 2:
                        yield tags, LineString(run)
                    run = []


NEAR_COAST = 0.01  # degrees: about 1 km of latitude


def natural_earth_land(path: str, bbox):
    """Natural Earth's land within bbox (a TopoJSON of world-atlas)."""
    from basemap_world import arcs_of, polygons
    topo = json.load(open(path, encoding="utf-8"))
    arcs = arcs_of(topo)
    parts = [p.intersection(bbox) for g in topo["objects"]["land"]["geometries"]
             for p in polygons(arcs, g) if p.intersects(bbox)]
    return unary_union(parts) if parts else shapely.Polygon()


def refine(land: list, sea: list, coast: list, bbox, ne_land) -> tuple[list, list]:
    """Land and sea faces, Natural Earth deciding far from the coastline."""
    near = unary_union(coast).buffer(NEAR_COAST)
    far_land = ne_land.difference(near)
    far_sea = bbox.difference(ne_land).difference(near)

    def polys(gs):
        out = []
        for g in gs:
            out += [q for q in getattr(g, "geoms", [g]) if q.geom_type == "Polygon" and not q.is_empty]
        return out
    return polys(f.difference(far_sea) for f in land), polys(f.difference(far_land) for f in sea)


def main(argv: list[str]) -> int:
    if len(argv) not in (8, 9):
        print(__doc__, file=sys.stderr)
        return 2
    src, ways, w, s, e, n, dst = argv[1], argv[2], *map(float, argv[3:7]), argv[7]
    ne_path = argv[8] if len(argv) == 9 else None
    bbox = box(w, s, e, n)
    counts: dict[str, int] = {}
    coast = []
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        for raw in fin:  # bounded: the export's lines
            raw = raw.strip("\x1e \n")
            if not raw:
                continue
            f = json.loads(raw)
            if not f.get("geometry"):
                continue
            tags = f.get("properties") or {}
            try:
                geom = shape(f["geometry"])
            except (ValueError, TypeError, shapely.errors.GEOSException):
                continue
            if geom.is_empty:
                continue
            if geom.geom_type in ("Polygon", "MultiPolygon") and not geom.is_valid:
                geom = shapely.make_valid(geom)
            for layer, minzoom, g, props in classify(tags, geom):
                text = feature(layer, minzoom, g, props)
                if text:
                    fout.write(text)
                    counts[layer] = counts.get(layer, 0) + 1
        for tags, geom in opl_ways(ways):
            if tags.get("natural") == "coastline":
                coast.append(geom)
            for layer, minzoom, g, props in classify(tags, geom):
                text = feature(layer, minzoom, g, props)
                if text:
                    fout.write(text)
                    counts[layer] = counts.get(layer, 0) + 1
        coast = [linemerge(coast)] if coast else []
        if coast and coast[0].geom_type == "MultiLineString":
            coast = list(coast[0].geoms)
        land, sea, left_out = land_and_sea(coast, bbox)
        if coast and ne_path:
            land, sea = refine(land, sea, coast, bbox, natural_earth_land(ne_path, bbox))
        for g in land:
            fout.write(feature("earth", 0, g, {"kind": "land"}))
        for g in sea:
            fout.write(feature("water", 0, g, {"kind": "sea"}))
    counts["earth"] = len(land)
    counts["sea"] = len(sea)
    print("basemap: features " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; coastline ways {len(coast)}, faces left out (land and sea both) {left_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
