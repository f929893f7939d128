#!/usr/bin/env python3
"""test/tiles_diff.py: trafficdb.tile_mvt against PostGIS, byte for byte.

The differential test of docs/design-tiles.md section 5.  For each tile it
calls trafficdb.tile_mvt and the reference, ST_AsMVT(ST_AsMVTGeom(...)) over
a heap copy of trafficdb.locations made in the same REPEATABLE READ
transaction (so both sides read one pinned generation), with the heap rows fed
in the order of the feature ids decoded from tile_mvt's own tile, and compares
the bytes.  On a mismatch it prints a decoded diff naming the tile, the first
differing feature and the part that differs (keys, a value, a geometry
vertex), and exits 1 at the end.

Tiles: 2/3 hold a random road vertex at a random zoom, 1/3 are uniform over
the grid (mostly empty); some get extent 256/512/8192 and buffer 0/256 (the
reference gets the same arguments).  The exactness pass asks for the largest
budget (16 MB); each tile at a low zoom (and each --at tile) is asked again
with the default budget: when that tile is smaller than the full one it must
be <= the budget, equal the reference restricted to its own ids, and keep the
top of the rank (class, length_m desc, location_id).

Connects with libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE) through
psycopg2 (Debian's python3-psycopg2, which scripts/deps.sh installs).
"""
import argparse
import math
import random
import struct
import sys
import time

import psycopg2

FULL_BUDGET = 16777216
DEFAULT_BUDGET = 512000
KEYS = ["name", "road_class", "speed_kmh", "free_flow_kmh", "congestion", "incident", "changed_generation"]
CLASS_ORDER = ["motorway", "trunk", "primary", "secondary", "tertiary",
               "motorway_link", "trunk_link", "primary_link", "secondary_link", "tertiary_link",
               "unclassified", "residential", "living_street", "service", "track"]
WORLD = 20037508.342789244


# ---------------------------------------------------------------- protobuf --

class DecodeError(Exception):
    pass


def varint(buf, i):
    v = shift = 0
    while True:
        if i >= len(buf):
            raise DecodeError("varint runs past the end at byte %d" % i)
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes at byte %d" % i)


def fields(buf):
    """(field number, wire type, value) of one message; value is an int or bytes."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            ln, i = varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise DecodeError("wire type %d (field %d)" % (wt, num))
        if i > n:
            raise DecodeError("field %d runs past the end" % num)
        yield num, wt, v


def packed(buf):
    out, i = [], 0
    while i < len(buf):
        v, i = varint(buf, i)
        out.append(v)
    return out


def unzig(v):
    return (v >> 1) ^ -(v & 1)


def decode_value(buf):
    kinds = []
    for num, _wt, v in fields(buf):
        if num == 1:
            kinds.append(("string", bytes(v).decode("utf-8", "backslashreplace")))
        elif num == 2:
            kinds.append(("float", struct.unpack("<f", v)[0], bytes(v).hex()))
        elif num == 3:
            kinds.append(("double", struct.unpack("<d", v)[0], bytes(v).hex()))
        elif num == 4:
            kinds.append(("int", v - (1 << 64) if v >= 1 << 63 else v))
        elif num == 5:
            kinds.append(("uint", v))
        elif num == 6:
            kinds.append(("sint", unzig(v)))
        elif num == 7:
            kinds.append(("bool", bool(v)))
        else:
            kinds.append(("field%d" % num, v))
    if len(kinds) != 1:
        raise DecodeError("a value with %d fields (MVT 4.1: exactly one)" % len(kinds))
    return kinds[0]


def decode_geometry(cmds):
    """Absolute integer parts of a line geometry: [[(x, y), ...], ...]."""
    parts, x, y, i = [], 0, 0, 0
    while i < len(cmds):
        cid, count = cmds[i] & 7, cmds[i] >> 3
        i += 1
        if cid == 7:
            parts.append("ClosePath")
            continue
        if cid not in (1, 2):
            raise DecodeError("command id %d" % cid)
        for _ in range(count):
            if i + 1 >= len(cmds):
                raise DecodeError("command parameters run past the end")
            dx, dy = unzig(cmds[i]), unzig(cmds[i + 1])
            i += 2
            if cid == 2 and dx == 0 and dy == 0:
                raise DecodeError("a LineTo of (0, 0) (MVT 4.3.3.2)")
            x, y = x + dx, y + dy
            if cid == 1:
                parts.append([(x, y)])
            else:
                if not parts or parts[-1] == "ClosePath":
                    raise DecodeError("LineTo before MoveTo")
                parts[-1].append((x, y))
    return parts


def decode_tile(buf):
    """{'layers': [layer...]} with each feature's tags resolved to (key, value)."""
    buf = bytes(buf)
    layers = []
    for num, wt, v in fields(buf):
        if num != 3 or wt != 2:
            raise DecodeError("tile field %d" % num)
        lay = {"name": None, "features": [], "keys": [], "values": [], "extent": None, "version": None,
               "order": []}
        raw_features = []
        for lnum, _lwt, lv in fields(v):
            lay["order"].append(lnum)
            if lnum == 1:
                lay["name"] = bytes(lv).decode("utf-8", "backslashreplace")
            elif lnum == 2:
                raw_features.append(lv)
            elif lnum == 3:
                lay["keys"].append(bytes(lv).decode("utf-8", "backslashreplace"))
            elif lnum == 4:
                lay["values"].append(decode_value(lv))
            elif lnum == 5:
                lay["extent"] = lv
            elif lnum == 15:
                lay["version"] = lv
            else:
                raise DecodeError("layer field %d" % lnum)
        for fv in raw_features:
            f = {"id": None, "tags": [], "type": None, "geometry": None}
            for fnum, _fwt, x in fields(fv):
                if fnum == 1:
                    f["id"] = x
                elif fnum == 2:
                    f["tags"] = packed(x)
                elif fnum == 3:
                    f["type"] = x
                elif fnum == 4:
                    f["geometry"] = decode_geometry(packed(x))
                else:
                    raise DecodeError("feature field %d" % fnum)
            t = f["tags"]
            if len(t) % 2:
                raise DecodeError("an odd number of tags")
            if any(k >= len(lay["keys"]) for k in t[0::2]) or any(v >= len(lay["values"]) for v in t[1::2]):
                raise DecodeError("a tag index out of range")
            f["resolved"] = [(lay["keys"][k], lay["values"][v]) for k, v in zip(t[0::2], t[1::2])]
            lay["features"].append(f)
        layers.append(lay)
    return {"layers": layers}


def feature_ids(mvt):
    """The feature ids of tile_mvt's tile in order (None: a feature without id).

    Reads only each feature's first field: the full decode is for the diff."""
    if not mvt:
        return []
    mvt = bytes(mvt)
    layers = list(fields(mvt))
    if len(layers) != 1 or layers[0][0] != 3:
        raise DecodeError("%d fields in the tile, expected one layer" % len(layers))
    ids = []
    lay = layers[0][2]
    i, n = 0, len(lay)
    while i < n:
        key, i = varint(lay, i)
        wt = key & 7
        if wt == 0:
            _, i = varint(lay, i)
        elif wt == 2:
            ln, i = varint(lay, i)
            if key >> 3 == 2:
                ids.append(varint(lay, i + 1)[0] if ln and lay[i] == 0x08 else None)
            i += ln
        elif wt in (1, 5):
            i += 8 if wt == 1 else 4
        else:
            raise DecodeError("wire type %d in the layer" % wt)
    return ids


def describe_diff(got, want):
    """Lines naming the first difference of two tiles (bytes), decoded."""
    if bytes(got) == bytes(want):
        return []
    out = ["bytes: tile_mvt %d, reference %d; first differing byte at offset %d" %
           (len(got), len(want), next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))))]
    try:
        g, w = decode_tile(got), decode_tile(want)
    except DecodeError as e:
        return out + ["decode error: %s" % e]
    if len(g["layers"]) != len(w["layers"]):
        return out + ["layers: tile_mvt %d, reference %d (an empty tile has none)" % (len(g["layers"]), len(w["layers"]))]
    for gl, wl in zip(g["layers"], w["layers"]):
        for k in ("name", "extent", "version", "order"):
            if k != "order" and gl[k] != wl[k]:
                out.append("layer %s: tile_mvt %r, reference %r" % (k, gl[k], wl[k]))
        if gl["keys"] != wl["keys"]:
            out.append("keys: tile_mvt %r, reference %r" % (gl["keys"], wl["keys"]))
        gids = [f["id"] for f in gl["features"]]
        wids = [f["id"] for f in wl["features"]]
        extra = [i for i in gids if i not in set(wids)]
        missing = [i for i in wids if i not in set(gids)]
        if extra:
            out.append("features only in tile_mvt (ids): %s%s" % (extra[:20], " ..." if len(extra) > 20 else ""))
        if missing:
            out.append("features only in the reference (ids): %s%s" % (missing[:20], " ..." if len(missing) > 20 else ""))
        for n, (gf, wf) in enumerate(zip(gl["features"], wl["features"])):
            what = feature_diff(gf, wf)
            if what:
                out.append("first differing feature: #%d id %s: %s" % (n, gf["id"], what))
                break
        else:
            if len(gl["features"]) != len(wl["features"]):
                out.append("feature count: tile_mvt %d, reference %d" % (len(gl["features"]), len(wl["features"])))
        if gl["values"] != wl["values"]:
            for i, (a, b) in enumerate(zip(gl["values"], wl["values"])):
                if a != b:
                    out.append("value table: index %d is %r in tile_mvt, %r in the reference" % (i, a, b))
                    break
            else:
                out.append("value table: %d values in tile_mvt, %d in the reference" % (len(gl["values"]), len(wl["values"])))
        go, wo = runs(gl["order"]), runs(wl["order"])
        if [n for n, _ in go] != [n for n, _ in wo]:
            out.append("layer field order (field number x count): tile_mvt %s, reference %s" % (go, wo))
    if len(out) == 1:
        out.append("decoded tiles equal: the difference is in the encoding (field order, varint lengths, packing)")
    return out


def runs(seq):
    out = []
    for v in seq:
        if out and out[-1][0] == v:
            out[-1] = (v, out[-1][1] + 1)
        else:
            out.append((v, 1))
    return out


def feature_diff(gf, wf):
    if gf["id"] != wf["id"]:
        return "id: tile_mvt %s, reference %s" % (gf["id"], wf["id"])
    if gf["type"] != wf["type"]:
        return "type: tile_mvt %s, reference %s" % (gf["type"], wf["type"])
    if gf["resolved"] != wf["resolved"]:
        gk, wk = [k for k, _ in gf["resolved"]], [k for k, _ in wf["resolved"]]
        if gk != wk:
            return "tag keys: tile_mvt %s, reference %s" % (gk, wk)
        for (k, a), (_, b) in zip(gf["resolved"], wf["resolved"]):
            if a != b:
                return "value of %s: tile_mvt %r, reference %r (value table rule)" % (k, a, b)
    if gf["tags"] != wf["tags"]:
        return "tag indexes: tile_mvt %s, reference %s (value ids: first-occurrence order)" % (gf["tags"][:16], wf["tags"][:16])
    gg, wg = gf["geometry"], wf["geometry"]
    if gg != wg:
        if len(gg) != len(wg):
            return "geometry: %d parts in tile_mvt, %d in the reference: %s | %s" % (len(gg), len(wg), short(gg), short(wg))
        for p, (a, b) in enumerate(zip(gg, wg)):
            if a != b:
                for v, (pa, pb) in enumerate(zip(a, b)):
                    if pa != pb:
                        return "geometry part %d vertex %d: tile_mvt %s, reference %s (part tile_mvt %s | reference %s)" % (
                            p, v, pa, pb, short([a]), short([b]))
                return "geometry part %d: %d vertices in tile_mvt, %d in the reference: %s | %s" % (
                    p, len(a), len(b), short([a]), short([b]))
    return None


def short(parts, n=12):
    s = []
    for p in parts:
        s.append(str(p[:n]) + (" ...+%d" % (len(p) - n) if len(p) > n else ""))
    return "; ".join(s)


# ------------------------------------------------------------------ tiles --

def lonlat_tile(lon, lat, z):
    n = 1 << z
    x = int(math.floor((lon + 180.0) / 360.0 * n))
    if lat >= 89.999999:
        y = 0
    elif lat <= -89.999999:
        y = n - 1
    else:
        r = math.radians(lat)
        y = int(math.floor((1.0 - math.asinh(math.tan(r)) / math.pi) / 2.0 * n))
    return z, min(max(x, 0), n - 1), min(max(y, 0), n - 1)


def candidate_box(z, x, y, extent, buffer):
    """A generous lon/lat box of the buffered tile, +-90 on edge rows.

    Wider than section 4.3's by a pixel: ST_AsMVTGeom snaps before it clips, so
    a vertex up to half a pixel beyond the buffer lands on its edge and stays
    (found on Delaware, tile 9/148/194 at extent 256)."""
    n = 1 << z
    size = 2 * WORLD / n
    pad = size * (buffer + 1) / extent
    x1, x2 = -WORLD + size * x - pad, -WORLD + size * (x + 1) + pad
    y1, y2 = WORLD - size * (y + 1) - pad, WORLD - size * y + pad
    a = 6378137.0

    def lat(v):
        return math.degrees(math.atan(math.sinh(v / a)))
    lon1, lon2 = math.degrees(x1 / a) - 1e-6, math.degrees(x2 / a) + 1e-6
    lat1, lat2 = lat(y1) - 1e-6, lat(y2) + 1e-6
    if y == 0:
        lat2 = 90.0
    if y == n - 1:
        lat1 = -90.0
    return max(lon1, -180.0), max(lat1, -90.0), min(lon2, 180.0), min(lat2, 90.0)


REF_SQL = """
SELECT coalesce(ST_AsMVT(t, 'traffic', %(extent)s, 'geom', 'location_id' ORDER BY s.ord, s.rec), ''::bytea),
       count(*), array_agg(s.location_id ORDER BY s.ord, s.rec)
  FROM (SELECT h.*, coalesce(o.ord, ns.ord) AS ord
          FROM (SELECT h.*, CASE WHEN h.location_id < 0
                                 THEN row_number() OVER (PARTITION BY h.location_id < 0 ORDER BY h.rec) END AS nk
                  FROM (SELECT h.*, ST_AsMVTGeom(ST_Transform(h.geom, 3857), ST_TileEnvelope(%(z)s, %(x)s, %(y)s),
                                                 %(extent)s, %(buffer)s, true) AS mvtgeom
                          FROM heap h WHERE {where}) h
                 WHERE h.mvtgeom IS NOT NULL) h
          LEFT JOIN unnest(%(ids)s::bigint[], %(idpos)s::bigint[]) AS o(id, ord) ON o.id = h.location_id
          LEFT JOIN unnest(%(nullslots)s::bigint[]) WITH ORDINALITY AS ns(ord, k) ON ns.k = h.nk) s,
       LATERAL (SELECT s.location_id, s.name, s.road_class, s.speed_kmh, s.free_flow_kmh, s.congestion,
                       s.incident, s.changed_generation, s.mvtgeom AS geom) t
"""


class Checker:
    def __init__(self, conn, args):
        self.conn = conn
        self.cur = conn.cursor()
        self.args = args
        self.failures = 0
        self.checked = 0
        self.budget_checked = 0
        self.trimmed = 0
        self.next_fits = 0
        self.noprefilter = 0
        self.nonempty = 0
        self.features = 0

    def tile_mvt(self, z, x, y, opts):
        self.cur.execute("SELECT trafficdb.tile_mvt(%s, %s, %s, %s::jsonb)", (z, x, y, jsonb(opts)))
        return bytes(self.cur.fetchone()[0])

    def reference(self, z, x, y, extent, buffer, ids, prefilter=True, only=None):
        # rows are fed in the order of tile_mvt's features: a row with an id at
        # its feature's position, the rows without id (location_id < 0) at the
        # positions of the features without id, in record order; rows missing
        # from tile_mvt's tile last, in record order
        where = ["true"]
        p = {"z": z, "x": x, "y": y, "extent": extent, "buffer": buffer,
             "ids": [to_bigint(i) for i in ids if i is not None],
             "idpos": [n + 1 for n, i in enumerate(ids) if i is not None],
             "nullslots": [n + 1 for n, i in enumerate(ids) if i is None]}
        if prefilter:
            b = candidate_box(z, x, y, extent, buffer)
            where.append("h.geom && ST_MakeEnvelope(%(b0)s, %(b1)s, %(b2)s, %(b3)s, 4326)")
            p.update(b0=b[0], b1=b[1], b2=b[2], b3=b[3])
        if only is not None:
            where.append("h.location_id IN (SELECT unnest(%(only)s::bigint[]))")
            p["only"] = [to_bigint(i) for i in only]
        sql = REF_SQL.format(where=" AND ".join(where))
        self.cur.execute(sql, p)
        mvt, n, order = self.cur.fetchone()
        return bytes(mvt), n, order or []

    def check(self, z, x, y, opts, label):
        extent, buffer = opts.get("extent", 4096), opts.get("buffer", 64)
        full = dict(opts, budget=FULL_BUDGET)
        got = self.tile_mvt(z, x, y, full)
        ids = feature_ids(got)
        prefilter = True
        if self.args.noprefilter_every and self.checked % self.args.noprefilter_every == 0:
            prefilter = False
            self.noprefilter += 1
        want, _n, _order = self.reference(z, x, y, extent, buffer, ids, prefilter)
        self.checked += 1
        if got:
            self.nonempty += 1
            self.features += len(ids)
        if got != want:
            self.fail(z, x, y, full, label, describe_diff(got, want))
        if z <= self.args.budget_zoom or label in ("at", "near") or self.args.budget_all:
            self.check_budget(z, x, y, opts, got, label)

    def check_budget(self, z, x, y, opts, full_tile, label):
        if self.args.budget:
            opts = dict(opts, budget=self.args.budget)
        budget = opts.get("budget", DEFAULT_BUDGET)
        got = self.tile_mvt(z, x, y, opts)
        self.budget_checked += 1
        if len(full_tile) <= budget:
            if got != full_tile:
                self.fail(z, x, y, opts, label, ["a tile of %d bytes (<= budget %d) differs under the default budget" %
                                                 (len(full_tile), budget)] + describe_diff(got, full_tile))
            return
        self.trimmed += 1
        problems = []
        if len(got) > budget:
            problems.append("(a) %d bytes > budget %d" % (len(got), budget))
        kept = feature_ids(got)
        if None in kept:
            problems.append("a kept feature without id: the rank check needs ids")
        extent, buffer = opts.get("extent", 4096), opts.get("buffer", 64)
        want, _n, _o = self.reference(z, x, y, extent, buffer, kept, True, only=[i for i in kept if i is not None])
        if got != want:
            problems.append("(b) differs from the reference restricted to its %d ids:" % len(kept))
            problems += ["    " + s for s in describe_diff(got, want)]
        rank_problems, nxt = self.check_rank(z, x, y, extent, buffer, kept)
        problems += rank_problems
        if problems:
            self.fail(z, x, y, opts, label + " budget", problems)
            return
        note = ""
        if nxt is not None:
            # (d) the prefix is the longest that fits: the tile of the kept
            # roads and the next-ranked one (in record order) is over the budget
            more, _n, _o = self.reference(z, x, y, extent, buffer, [], True,
                                          only=[i for i in kept if i is not None] + [nxt])
            if len(more) <= budget:
                self.next_fits += 1
                self.fail(z, x, y, opts, label + " budget",
                          ["(d) with the next-ranked id %d the tile would be %d bytes, within the budget %d" %
                           (nxt, len(more), budget)])
                return
            note = "; with the next-ranked id %d: %d bytes" % (nxt, len(more))
        if self.args.verbose or note.endswith("budget"):
            print("  budget %d/%d/%d %s: %d of %d bytes, %d features kept%s" % (
                z, x, y, jsonb(opts), len(got), len(full_tile), len(kept), note))

    def check_rank(self, z, x, y, extent, buffer, kept):
        """(c) the kept ids are the top of the rank of the tile's non-NULL features.

        Returns the problems and the next-ranked id (None when all are kept)."""
        box = candidate_box(z, x, y, extent, buffer)
        self.cur.execute("""
            SELECT location_id, road_class, length_m FROM heap h
             WHERE h.geom && ST_MakeEnvelope(%s, %s, %s, %s, 4326)
               AND ST_AsMVTGeom(ST_Transform(h.geom, 3857), ST_TileEnvelope(%s, %s, %s), %s, %s, true) IS NOT NULL""",
                         box + (z, x, y, extent, buffer))
        rows = self.cur.fetchall()
        rows.sort(key=lambda r: (class_rank(r[1]), -(r[2] if r[2] is not None else -math.inf), r[0]))
        keptset = {to_bigint(i) for i in kept if i is not None}
        top = [r[0] for r in rows[:len(keptset)]]
        if set(top) == keptset:
            return [], rows[len(keptset)][0] if len(rows) > len(keptset) else None
        first_out = next((n for n, r in enumerate(rows) if r[0] not in keptset), None)
        bad = [r for r in rows[len(keptset):] if r[0] in keptset][:1]
        msg = ["(c) the kept %d ids are not the top of the rank of %d features:" % (len(keptset), len(rows))]
        if first_out is not None:
            r = rows[first_out]
            msg.append("    rank %d (id %s, class %s, length_m %r) is omitted" % (first_out, r[0], r[1], r[2]))
        if bad:
            r = bad[0]
            msg.append("    while id %s (rank %d, class %s, length_m %r) is kept" % (r[0], rows.index(r), r[1], r[2]))
        return msg, None

    def fail(self, z, x, y, opts, label, lines):
        self.failures += 1
        print("MISMATCH %s tile %d/%d/%d options %s (%s)" % (self.args.map_name, z, x, y, jsonb(opts), label))
        for s in lines:
            print("  " + s)
        sys.stdout.flush()


def class_rank(c):
    if c is None or c == "":
        return (len(CLASS_ORDER) + 1, "")
    if c in CLASS_ORDER:
        return (CLASS_ORDER.index(c), "")
    return (len(CLASS_ORDER), c)


def to_bigint(i):
    return i - (1 << 64) if i >= 1 << 63 else i


def jsonb(d):
    return "{" + ", ".join('"%s": %d' % (k, v) for k, v in sorted(d.items())) + "}"


def random_options(rng):
    r = rng.random()
    if r < 0.80:
        return {}
    opts = {}
    if rng.random() < 0.6:
        opts["extent"] = rng.choice([256, 512, 8192])
    if rng.random() < 0.6 or not opts:
        opts["buffer"] = rng.choice([0, 256])
    return opts


def option_variants():
    return [{}, {"extent": 256}, {"extent": 512}, {"extent": 8192}, {"buffer": 0}, {"buffer": 256},
            {"extent": 256, "buffer": 256}, {"extent": 8192, "buffer": 0}]


def parse_zooms(s):
    a, _, b = s.partition("-")
    lo, hi = int(a), int(b or a)
    if not 0 <= lo <= hi <= 30:
        raise argparse.ArgumentTypeError("zooms: expected LO-HI within 0-30")
    return lo, hi


def sample_tiles(cur, rng, seed, n, zooms):
    """n distinct tiles: 2/3 through a random road vertex at a random zoom, 1/3 uniform."""
    lo, hi = zooms
    n_road = (2 * n + 2) // 3
    cur.execute("SELECT setseed(%s)", ((seed % 2000000) / 1000000.0 - 1.0,))
    cur.execute("""SELECT array_agg(ARRAY[ST_X(p.geom), ST_Y(p.geom)] ORDER BY p.path) FROM (
                     SELECT rec, geom FROM heap ORDER BY random() LIMIT %s) s, LATERAL ST_DumpPoints(s.geom) p
                    GROUP BY s.rec ORDER BY s.rec""", (n_road,))
    roads = [r[0] for r in cur.fetchall()]
    tiles, seen = [], set()
    for _ in range(20 * n):  # bounded: distinct tiles, as many as 20 n draws give
        if len(tiles) == n:
            break
        z = rng.randint(lo, hi)
        if len(tiles) % 3 != 2 and roads:
            lon, lat = rng.choice(rng.choice(roads))
            t = lonlat_tile(lon, lat, z) + ("road",)
        else:
            m = 1 << z
            t = (z, rng.randrange(m), rng.randrange(m), "uniform")
        if t[:3] not in seen:
            seen.add(t[:3])
            tiles.append(t)
    return tiles


def at_tiles(points, zooms):
    """The tiles of each LON,LAT at each zoom and their 8 neighbours (x wraps)."""
    out = []
    for lon, lat in points:
        for z in zooms:
            _, tx, ty = lonlat_tile(lon, lat, z)
            m = 1 << z
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy = ty + dy
                    if 0 <= yy < m:
                        t = (z, (tx + dx) % m, yy, "at" if dx == dy == 0 else "near")
                        if t not in out:
                            out.append(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="random seed (printed; default: from the clock)")
    ap.add_argument("--tiles", type=int, default=1000, help="random tiles to check (default 1000)")
    ap.add_argument("--zooms", type=parse_zooms, default=(0, 18), help="zoom range of the random tiles, LO-HI (default 0-18)")
    ap.add_argument("--map-name", default="map", help="the map's name in the report")
    ap.add_argument("--at", action="append", default=[], metavar="LON,LAT",
                    help="also check the tile of this point at each of --at-zooms with every option variant, and its 8 neighbours"
                         " (x wraps); write --at=LON,LAT for a negative LON")
    ap.add_argument("--at-zooms", default="0,1,5,14,18", help="zooms of the --at tiles (default 0,1,5,14,18)")
    ap.add_argument("--tile", action="append", default=[], metavar="Z/X/Y",
                    help="also check this tile with every option variant and the default budget")
    ap.add_argument("--variants", type=int, default=len(option_variants()),
                    help="how many option sets the chosen tiles get (default all %d: %s)" % (
                        len(option_variants()), " ".join(jsonb(o) for o in option_variants())))
    ap.add_argument("--budget-zoom", type=int, default=6,
                    help="tiles at this zoom or lower are also checked under the default budget (default 6)")
    ap.add_argument("--budget", type=int, default=0,
                    help="the budget of the budget checks (default: none given, tile_mvt's default of %d)" % DEFAULT_BUDGET)
    ap.add_argument("--budget-all", action="store_true", help="check every tile under the default budget too")
    ap.add_argument("--noprefilter-every", type=int, default=0, metavar="N",
                    help="every Nth tile's reference reads the whole heap, without the candidate box")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 1000000007
    rng = random.Random(seed)
    print("tiles_diff: map %s, seed %d, %d random tiles at z%d-%d" % (args.map_name, seed, args.tiles, *args.zooms))
    sys.stdout.flush()
    started = time.time()

    conn = psycopg2.connect("")
    conn.set_session(isolation_level="REPEATABLE READ")
    cur = conn.cursor()
    cur.execute("SET client_min_messages = warning")
    # one pinned generation for the heap copy and every tile_mvt call
    cur.execute("""CREATE TEMP TABLE heap AS
                     SELECT location_id, name, road_class, speed_kmh, free_flow_kmh, congestion, incident,
                            changed_generation, length_m, geom, row_number() OVER () AS rec
                       FROM trafficdb.locations""")
    cur.execute("CREATE INDEX ON heap USING gist (geom)")
    cur.execute("CREATE INDEX ON heap (location_id)")
    cur.execute("ANALYZE heap")
    cur.execute("SELECT count(*) FROM heap")
    rows = cur.fetchone()[0]
    print("tiles_diff: heap copy of %d locations in %.1f s" % (rows, time.time() - started))

    ck = Checker(conn, args)
    tiles = sample_tiles(cur, rng, seed, args.tiles, args.zooms) if args.tiles else []
    for z, x, y, label in tiles:
        ck.check(z, x, y, random_options(rng), label)
    extra = []
    if args.at:
        pts = [tuple(float(v) for v in a.split(",")) for a in args.at]
        extra += at_tiles(pts, [int(v) for v in args.at_zooms.split(",")])
    for t in args.tile:
        z, x, y = (int(v) for v in t.split("/"))
        extra.append((z, x, y, "at"))
    n_extra = 0
    for z, x, y, label in extra:
        for opts in option_variants()[:args.variants] if label == "at" else [{}]:
            ck.check(z, x, y, opts, label)
            n_extra += 1
    conn.rollback()
    conn.close()
    print("tiles_diff: map %s: %d tiles (%d random, %d chosen with their options), %d not empty, %d features, "
          "%d without the prefilter, %d under the default budget (%d trimmed, %d of them leaving out a next-ranked road that fits), "
          "%d mismatches, %.1f s, seed %d" %
          (args.map_name, ck.checked, len(tiles), n_extra, ck.nonempty, ck.features,
           ck.noprefilter, ck.budget_checked, ck.trimmed, ck.next_fits, ck.failures, time.time() - started, seed))
    return 1 if ck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
