"""web/feeder.py: moving traffic for the demo's live map.

Every few seconds, a few roads cars use get a new congestion level one step
from their current one (with the matching speed); the daemon publishes them
at its next cycle and the page repaints the tiles they are in.  Stops by
itself after --minutes (default 480) or when killed (make demo-stop).

    .venv-web/bin/python web/feeder.py postgresql://postgres@127.0.0.1:5433/trafficdb_demo
"""

import argparse
import asyncio
import random
import time

import asyncpg

CAR = ("motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential",
       "living_street", "service", "motorway_link", "trunk_link", "primary_link", "secondary_link",
       "tertiary_link")
FACTOR = (0.95, 0.75, 0.5, 0.3, 0.1)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dsn")
    ap.add_argument("--every", type=float, default=3.0, help="seconds between updates")
    ap.add_argument("--roads", type=int, default=25, help="roads changed per update")
    ap.add_argument("--minutes", type=float, default=480, help="stop after this long")
    a = ap.parse_args()
    conn = await asyncpg.connect(a.dsn)
    rng = random.Random(1)
    end = time.monotonic() + a.minutes * 60
    while time.monotonic() < end:
        rows = await conn.fetch(
            "SELECT location_id, coalesce(congestion, 0) AS c, coalesce(speed_limit_kmh, 30) AS ff"
            " FROM trafficdb.locations WHERE road_class = ANY($1::text[])", list(CAR))
        batch = []
        for r in rng.sample(rows, min(a.roads, len(rows))):
            c = max(0, min(4, r["c"] + rng.choice((-1, 1))))
            batch.append((r["location_id"], float(round(r["ff"] * FACTOR[c])), float(r["ff"]), c))
        async with conn.transaction():  # one transaction: published in one generation
            await conn.executemany(
                "INSERT INTO trafficdb.feed (location_id, speed_kmh, free_flow_kmh, congestion, confidence)"
                " VALUES ($1, $2, $3, $4, 80)", batch)
        await asyncio.sleep(a.every)
    await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
