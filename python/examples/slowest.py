"""Print the slowest segments in a box, relative to free flow, straight from shared memory.

    python3 python/examples/slowest.py /trafficdb.5433 24.93 60.16 24.95 60.17
"""
import sys

import trafficdb

name = sys.argv[1] if len(sys.argv) > 1 else "/trafficdb.5432"
box = [float(v) for v in sys.argv[2:6]] if len(sys.argv) >= 6 else [24.93, 60.16, 24.95, 60.17]
with trafficdb.Reader(name) as reader, reader.snapshot() as snap:
    rows = [loc for loc in snap.bbox(*box) if loc.speed_kmh is not None and loc.free_flow_kmh]
    rows.sort(key=lambda loc: loc.speed_kmh / loc.free_flow_kmh)
    print(f"generation {snap.generation}: {len(rows)} segments with traffic in the box")
    for loc in rows[:10]:
        print(f"{loc.id:>12} {loc.name or '':<28} {loc.speed_kmh:5.1f} / {loc.free_flow_kmh:5.1f} km/h"
              f"  congestion {loc.congestion}{'  ' + loc.incident if loc.incident else ''}")
