"""scripts/sumo_edges.py NET.net.xml OUT.tsv: the edge -> OSM way map of a SUMO network.

netconvert (scripts/sumo.sh, without --geometry.remove) names the edges of an
OpenStreetMap way WAY#N (the way's direction) and -WAY#N (against it), and
with --output.original-names its lanes carry <param key="origId" value="WAY"/>;
--ramps.guess adds WAY#N-AddedOnRampEdge / -AddedOffRampEdge (the same way).
One line per edge (normal edges only: internal junction edges and edges
without a single way are left out), tab-separated, sorted by edge id:

    edge_id  way_id  length_m  speed_kmh

length_m and speed_kmh are those of the edge's first lane (SUMO's speed limit).
Prints a one-line summary.  Streams the file (Delaware's net is ~100 MB).
"""
import gzip
import re
import sys
import xml.etree.ElementTree as ET

EDGE_ID = re.compile(r"^-?([0-9]+)(#[0-9]+)?(-Added(On|Off)RampEdge)?$")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: sumo_edges.py NET.net.xml OUT.tsv")
    net, out = sys.argv[1:]
    rows, skipped = [], 0
    edge = lane = orig = None
    src = gzip.open(net) if net.endswith(".gz") else open(net, "rb")
    for event, el in ET.iterparse(src, events=("start", "end")):
        if event == "start":
            if el.tag == "edge":
                edge, lane, orig = el, None, set()
            elif el.tag == "lane" and edge is not None and lane is None:
                lane = (float(el.get("length")), float(el.get("speed")))
            elif el.tag == "param" and edge is not None and el.get("key") == "origId":
                orig.update(el.get("value", "").split())
            continue
        if el.tag != "edge":
            continue
        if edge.get("function") is None and lane is not None:
            m = EDGE_ID.match(edge.get("id"))
            # the way: from the id, checked against origId when netconvert wrote one
            if m and (not orig or orig == {m.group(1)}):
                rows.append((edge.get("id"), int(m.group(1)), lane[0], lane[1] * 3.6))
            else:
                skipped += 1
        edge = None
        el.clear()
    rows.sort()
    with open(out, "w") as f:
        for e, w, length, speed in rows:
            f.write(f"{e}\t{w}\t{length:.2f}\t{speed:.1f}\n")
    print(f"sumo_edges: {len(rows)} edges of {len({r[1] for r in rows})} OSM ways"
          f" ({skipped} edges without one way left out) -> {out}")


if __name__ == "__main__":
    main()
