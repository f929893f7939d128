"""bench/livemap_load.py: vector tiles per second through the tile server.

    python3 bench/livemap_load.py BASE_URL COLLECTION SECONDS THREADS z/x/y ...

Requests the given tiles round robin from THREADS threads (one keep-alive
HTTP connection each) for SECONDS, checks every answer (200, a vector tile),
and prints one line: tiles, seconds, tiles/s, bytes per tile, p50 and p99 ms.
Only 127.0.0.1 is contacted.
"""

import http.client
import statistics
import sys
import threading
import time
import urllib.parse


def main():
    base, coll, seconds, threads, *tiles = sys.argv[1:]
    u = urllib.parse.urlsplit(base)
    if u.hostname not in ("127.0.0.1", "localhost"):
        sys.exit(f"{base}: only a server on 127.0.0.1 is measured")
    seconds, threads = float(seconds), int(threads)
    paths = [f"/collections/{coll}/tiles/WebMercatorQuad/{t}" for t in tiles]
    lat, nbytes, errors = [], [0], []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def worker(k):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        i = k
        mine, b = [], 0
        while time.monotonic() < end:
            t0 = time.perf_counter()
            c.request("GET", paths[i % len(paths)])
            r = c.getresponse()
            body = r.read()
            dt = time.perf_counter() - t0
            if r.status != 200 or r.getheader("content-type") != "application/vnd.mapbox-vector-tile":
                errors.append(f"{paths[i % len(paths)]}: HTTP {r.status} {body[:200]!r}")
                break
            mine.append(dt)
            b += len(body)
            i += threads
        c.close()
        with lock:
            lat.extend(mine)
            nbytes[0] += b

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        sys.exit("; ".join(errors[:3]))
    lat.sort()
    n = len(lat)
    print(n, round(wall, 2), round(n / wall, 1), round(nbytes[0] / max(n, 1)),
          round(statistics.median(lat) * 1000, 2), round(lat[min(n - 1, int(n * 0.99))] * 1000, 2))


if __name__ == "__main__":
    main()
