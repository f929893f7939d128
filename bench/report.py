#!/usr/bin/env python3
"""bench/report.py RESULTS.csv: the report and plots of one `make bench` run.

Reads the CSV that bench/lib.sh's bench_emit writes (section, measure, x,
value, unit, baseline, baseline_value, ratio) and writes beside it
RESULTS.md (machine, versions, commands, headline ratios, every table) and
RESULTS-*.png (gnuplot, when it is installed).  Standard library only.

Environment: BENCH_COMMAND (the command that ran), BENCH_SECONDS (its
runtime), PG_PORT (the cluster, for the PostgreSQL and PostGIS versions).
"""
import csv
import os
import platform
import shutil
import subprocess
import sys
from collections import defaultdict


def sh(cmd):
    """A command's first output line, or 'unknown'."""
    try:
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine():
    port = os.environ.get("PG_PORT", "5433")
    psql = f"/usr/lib/postgresql/15/bin/psql -X -At -h 127.0.0.1 -p {port} -U postgres -d trafficdb_demo -c"
    mem_kb = sh("awk '/MemTotal/ { print $2 }' /proc/meminfo")
    return [
        ("host", platform.node()),
        ("CPU", sh("lscpu | sed -n 's/^Model name: *//p'")),
        ("cores", str(os.cpu_count())),
        ("memory", f"{int(mem_kb) / 1048576:.1f} GiB" if mem_kb.isdigit() else mem_kb),
        ("kernel", platform.release()),
        ("PostgreSQL", sh(f"{psql} 'SELECT version()'")),
        ("PostGIS", sh(f"{psql} 'SELECT postgis_lib_version()'")),
        ("Redis", sh("redis-server --version")),
        ("trafficdb", sh("git rev-parse --short HEAD")),
    ]


def fmt(v):
    try:
        f = float(v)
    except ValueError:
        return v
    if f >= 1e6:
        return f"{f / 1e6:.2f} M"
    if f >= 1e4:
        return f"{f / 1e3:.1f} k"
    if f >= 100 or f == int(f):
        return f"{f:,.0f}"
    return f"{f:.3g}"


def table(rows, with_baseline):
    head = "| measure | x | value | unit |" + (" baseline | baseline value | ratio |" if with_baseline else "")
    sep = "|---|---:|---:|---|" + ("---|---:|---:|" if with_baseline else "")
    out = [head, sep]
    for r in rows:
        line = f"| {r['measure']} | {r['x']} | {fmt(r['value'])} | {r['unit']} |"
        if with_baseline:
            ratio = f"{float(r['ratio']):.3g}x" if r["ratio"] else ""
            line += f" {r['baseline']} | {fmt(r['baseline_value'])} | {ratio} |"
        out.append(line)
    return "\n".join(out)


def trails_summary(rows):
    """Query x block size: first row and total, ours against downloading first; bytes fetched."""
    out = ["| file | query | events | block | first row ms: ours / download | speedup | "
           "total ms: ours / download | speedup | bytes fetched / object | requests |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    files = []
    for r in rows:
        if r["section"] == "trails" and r["measure"].endswith("_events"):
            f, q = r["measure"][:-len("_events")].split("_", 1)
            files.append((f, q, r["value"]))
    if not files:
        return ""

    def speed(r):
        return f"{float(r['baseline_value']) / float(r['value']):.3g}x" if r and float(r["value"]) > 0 else ""

    for f, q, events in files:
        for bs in ("16384", "1048576", "16777216"):
            first = find(rows, "trails", f"{f}_{q}_first_ms", bs, "download_whole")
            total = find(rows, "trails", f"{f}_{q}_total_ms", bs, "download_whole")
            byt = find(rows, "trails", f"{f}_{q}_bytes", bs, "object")
            req = find(rows, "trails", f"{f}_{q}_requests", bs)
            if not (first and total and byt):
                continue
            label = {"16384": "16 kB", "1048576": "1 MB", "16777216": "16 MB"}[bs]
            out.append(f"| {f} | {q} | {fmt(events)} | {label} | {fmt(first['value'])} / "
                       f"{fmt(first['baseline_value'])} | {speed(first)} | {fmt(total['value'])} / "
                       f"{fmt(total['baseline_value'])} | {speed(total)} | {fmt(byt['value'])} / "
                       f"{fmt(byt['baseline_value'])} ({100 * float(byt['ratio']):.3g} %) | "
                       f"{fmt(req['value']) if req else ''} |")
    out += ["", "| file | full scan, 1 MB blocks: warm disk cache | local file | overhead | "
            "cold (filling the cache) | download first, then scan |", "|---|---:|---:|---:|---:|---:|"]
    for f in dict.fromkeys(f for f, _, _ in files):
        warm = find(rows, "trails", f"{f}_all_warm_cache_ms", None, "local_file")
        fill = find(rows, "trails", f"{f}_all_fill_cache_ms", None, "local_file")
        whole = find(rows, "trails", f"{f}_all_total_ms", 1048576, "download_whole")
        if warm:
            out.append(f"| {f} | {fmt(warm['value'])} ms | {fmt(warm['baseline_value'])} ms | "
                       f"{100 * (float(warm['ratio']) - 1):+.1f} % | {fmt(fill['value']) + ' ms' if fill else ''} | "
                       f"{fmt(whole['baseline_value']) + ' ms' if whole else ''} |")
    return "\n".join(out)


def find(rows, section, measure, x=None, baseline=None):
    for r in rows:
        if (r["section"] == section and r["measure"] == measure and (x is None or r["x"] == str(x))
                and (baseline is None or r["baseline"] == baseline)):
            return r
    return None


SECTIONS = [
    ("publish_objects", "Publishing: the objects alone (bench/objbench)",
     "Map build (R-tree, hash, layout), validation and traffic publication without PostgreSQL; x is "
     "the number of segments of a synthetic network shaped like OpenStreetMap's."),
    ("publish_sql", "Publishing through SQL (bench/daemon.sh)",
     "`trafficdb.load_map()` of a synthetic table, then feeds of 1 % and 100 % of locations consumed "
     "and published by `trafficdb.publish()`."),
    ("publish_delaware", "Publishing the real Delaware network (OpenStreetMap)", ""),
    ("sql", "Queries through SQL (bench/pgbench.sh): the locations table vs a heap",
     "pgbench, prepared, x = clients (-j up to the cores). Baseline: the same query on a heap table "
     "with a btree on id and GiST on geom and geom::geography; at 2 clients also on a copy "
     "CLUSTERed on its GiST index."),
    ("knn_forms", "Nearest first from geography lines and polygons, and within id ranges (bench/knn_forms.sh)",
     "The real Delaware network; one client. `geog_line`: `ORDER BY geom::geography <-> line LIMIT 3`; "
     "`geog_poly`: 5 roads of four classes nearest a small polygon; `id_between`: `WHERE location_id "
     "BETWEEN a AND a + 500000 ORDER BY geom <-> p LIMIT 10`; `id_above_max`: `location_id > max` (no "
     "row). Plain measures: pgbench, literals (the heap planned for the values), a statement each; "
     "`_exec`: the mean Execution Time of EXPLAIN ANALYZE over 100 of those statements (a statement's "
     "own work, without the parse, plan and round trip both sides pay), as queries per second; "
     "`_all`: 200 of them in one statement (a LATERAL join); `_examined` and `_rows`: mean Locations "
     "Examined and rows over 100 queries. Baseline: a heap with a btree on the id and GiST on geom and "
     "geom::geography."),
    ("mixed", "Mixed run: readers while the daemon publishes every 100 ms",
     "A feed writer inserts 10,000 rows/s; baseline: the same readers without publishing. At one "
     "client a busier machine can run faster: on an idle virtual machine each round trip pays the "
     "wake-up of an idle core, which the writer's load avoids (the heap shows the same effect)."),
    ("accessor", "The C accessor (bench/accessor.sh)",
     "x = threads (a handle each). Baselines: a bare open-addressing probe over 1 GiB (one cache "
     "miss per lookup) at the same thread count, and Redis GET on 127.0.0.1 (2 clients, 2 threads)."),
    ("redis", "Redis (redis-benchmark, 1 M keys of 100 bytes, 2 clients on 2 threads)", ""),
    ("streams", "Stream files on RealDB's workload (bench/streams.sh)",
     "A vehicle's 8 sensor streams, x records in time order, loaded in batches of 100,000 (a flush, "
     "a COPY or a transaction each); `all` keeps everything, `managed` about the newest quarter (a "
     "smaller file that reuses its oldest blocks; DELETE after each batch for the baselines). The "
     "value is trafficdb's; ratio < 1 means less than the baseline. CPU is every process's (from "
     "/proc/stat), bytes written are the disks' (after a sync); a stream file is preallocated, so its "
     "final size is its configured size. RealDB's claims: 95-96 % less load time than InnoDB, 75-81 % "
     "smaller, 93-99 % less CPU."),
    ("trails", "Trail files on S3 (bench/trails.sh)",
     "MinIO on 127.0.0.1. `ais` is real AIS vessel trails (US coastal waters, 2020-06-30), `nyh` real "
     "AIS in New York Harbor (first week of December 2020), one trail per vessel; `syn` a synthetic "
     "file of vehicles (about 1 GB). Queries: 1, 10 and 100 trails spread over the index (ids), a "
     "0.02 x 0.01 degree box around a real event, a 10-minute window, all. x is the block size in "
     "bytes; each run is a fresh process with no disk cache (cold), the median of 3. Baseline: "
     "download the whole object first (16 MB range GETs, four at a time, through the same pager, "
     "into a local file), then the same query on the local copy; time to first row "
     "of the baseline includes the download. The ratio column is ours / baseline (< 1: faster or "
     "fewer bytes); the summary shows the speedup, baseline / ours. `all_warm_cache` is the full scan "
     "with a warm disk cache (1 MB blocks) against the same scan of a local file; `all_fill_cache` "
     "the cold scan that filled it. TrailDB's figures: 16x faster to the first results for small "
     "queries, 10-15 % full-scan overhead."),
    ("subscriptions", "Subscriptions: matching, delivery and wake-up (bench/subscriptions.sh, bench/sub_latency.sh)",
     "A synthetic map of N segments on a 1000 x 1000 grid; x = 100,000 box subscriptions of about 25 "
     "locations each (half with congestion_at_least 3); a feed changing every location, then "
     "trafficdb.publish(), timed from the client, with and without the subscriptions in the same run. "
     "match_ms is the daemon's matching of that publication; index_and_empty_publish_ms loading and "
     "indexing the subscriptions once. Delivery: SUB_TAPS (2) tdbsub --all-subscriptions taps in a "
     "round-robin group receive one more publication's events: publish_ms_with_delivery, "
     "finish_publication_ms (the daemon making it visible and pushing the events), delivered_ms (from "
     "the start of publish() to the last event received, against the default publish_interval) and "
     "delivered_after_visible_ms, events_received against last_events, events_overrun. wakeup_* are "
     "bench/sub_latency.sh's publish to wake-up of one subscriber beside a trafficdb_wait waiter "
     "(trafficdb_wait_*), same publications. Measures starting "
     "with redis_, notify_, notify_stmt_, update_only_ and expected_events are from bench/sub_baselines.sh "
     "(x = its subscriptions, 1,000 by default): Redis pub-sub and LISTEN/NOTIFY with the filtering done "
     "by consumers, events/s and CPU us per event, every run checked against the expected count; "
     "trafficdb_ is our side fed by SQL (a feed transaction and trafficdb.publish() per round), put_ our "
     "side fed by trafficdb_put_many (bench/sub_put.c: one producer, trafficdb_sync after each round), "
     "put_batch_ the same with each round ended by trafficdb_end_batch (no wait: the daemon publishes it "
     "while the next is put), "
     "both delivering through the rings to 2 consumers, ratios against Redis in the same run."),
    ("livemap", "The live map (bench/livemap.sh)",
     "Vector tiles of zooms 12-16 (x = zoom; the tiles that hold roads, at most 400 a zoom; medians of 3 "
     "rounds, the two sides taking turns), through tipg "
     "(web/app.py, one uvicorn worker, 4 client threads with keep-alive) from the function layer "
     "trafficdb.tile_features (the R-tree in shared memory); baseline: the same function over a heap "
     "copy of trafficdb.locations with a GiST index, same server and run. sql_tiles_per_s: the same "
     "tiles by ST_AsMVT in SQL alone (pgbench, 2 clients). publish_to_*: from just before the feed "
     "rows and trafficdb.publish() (one psql session) to the page's event and to its repainted tile "
     "(the map's next idle after the refetched tiles), headless chromium, x = runs."),
    ("livemap_delaware", "The live map on the real Delaware network (bench/livemap.sh)",
     "The tiles measured as above, with the Delaware network (52,585 OpenStreetMap ways) loaded as the map."),
    ("tiles_helsinki", "Vector tiles, Helsinki (bench/tiles.sh)",
     "Vector tiles through HTTP (oha, x = concurrent keep-alive connections; the tiles that hold roads, at most 400 a zoom, "
     "one URL file per server and zoom; medians of the rounds, the servers taking turns). value: Martin + "
     "trafficdb.tile_mvt (encoded in C from shared memory); baselines in the same run: martin_heap, Martin + "
     "bench.tile_heap (ST_AsMVT over a heap copy with GiST: same layer, attributes, extent 4096 and buffer 64), and "
     "tipg (web/app.py, trafficdb.tile_features, one uvicorn worker). bytes_per_tile: x = zoom, the exact mean "
     "length of the zoom's tiles, tile_mvt vs tile_heap in SQL; http_bytes_per_tile: the mean of the tiles oha drew "
     "at random (tipg's tiles have its own buffer and attributes). sql_batch_tiles_per_s: x = zoom, every tile of the list in one "
     "statement (the server's own time per tile). sql_tiles_per_s: x = zoom, pgbench with 2 clients, tile_mvt vs tile_heap, a "
     "random tile of the same list a transaction."),
    ("tiles_delaware", "Vector tiles, the real Delaware network (bench/tiles.sh)",
     "As above, with the Delaware network (OpenStreetMap) loaded as the map."),
    ("tiles_synthetic", "Vector tiles, the synthetic network (bench/tiles.sh)",
     "As above, with the synthetic network of TILES_SEGMENTS segments (1 M; 100,000 with --quick) over 10 x 10 degrees."),
    ("tiles_etag", "Vector tiles: 304 after a publication (bench/tiles.sh)",
     "Every tile of the Helsinki lists (and the tiles of one road) fetched from Martin + tile_mvt with their "
     "ETags; a feed row for that road and trafficdb.publish(); every tile fetched again with If-None-Match. "
     "expected_200: the tiles where ST_AsMVTGeom keeps a piece of the road; wrong: tiles holding it answered "
     "304, or others answered 200 (must be 0)."),
    ("tiles_repaint", "Vector tiles: publish() to the repainted tile (bench/tiles.sh)",
     "web/bench/repaint.mjs in headless chromium with web/feeder.py running, x = runs a side; value: the page "
     "taking its tiles from Martin + tile_mvt; baselines: tipg + the heap copy (public.bench_heap_tile_features, "
     "whose tiles do not change: the same event, refetch and draw) and tipg + tile_features."),
    ("tippydb", "TippyDB's geo-placement experiment (bench/tippy.sh)",
     "Three clusters (regions A, B, C) each own a third of a 30,000-segment map; clients in region A "
     "reach A through Toxiproxy with 1 ms of added round trip and B and C with 100 ms. 80 % of the "
     "operations pick a location in A's part of the map, 20 % in the others' (the same seeded picks "
     "for both placements); each goes to the node owning the location: `geo` places a location in "
     "the region of its part of the map, `hash` by hash(location_id) % 3. Writes are autocommit "
     "INSERTs into trafficdb.feed, reads key lookups in trafficdb.locations; x = client threads. "
     "Ratio: geo / hash. Measures ending in `_replicated` (TIPPY_REPLICAS=1): each region's commits "
     "wait for a synchronous standby in the next region, behind a 100 ms link. `tippydb_paper_insert_mean_ms` is TippyDB's figure against MongoDB's, "
     "from their paper, not this run."),
    ("parquet", "Trail files vs DuckDB on sorted Parquet (bench/trails_parquet.sh)",
     "The same data as a trail file (read through the trail FDW) and as Parquet sorted by (id, time) "
     "(written and read by DuckDB with httpfs and spatial, its defaults), in the same MinIO on 127.0.0.1 "
     "behind a counting proxy. Sets: real AIS (`ais_us`, `ais_nyh_week`, `ais_nyh_1h`) and generated "
     "flights around Paris. q1 one trail, q2 a 5-minute window, q3 a 0.2 x 0.2 degree box, q4 a 3 km "
     "radius, q5 max per id, q6 count(*), q7 id, time and position in q2's window. Each run cold (a fresh "
     "backend and cache_dir; a fresh DuckDB database), median of 3; measures end in the trail layout "
     "(`trail`: version 2 by trail, `st`: space-time 600 s, `stN`: N s buckets); x is our block size "
     "(0: DuckDB's own figure); `_nocache`: cache_dir 'none'. Rows and their checksum must match "
     "DuckDB's. Ratio < 1: fewer bytes or faster than DuckDB."),
]


def gnuplot(base, name, script, files=None):
    if not shutil.which("gnuplot"):
        return None
    if files is not None and not any(os.path.getsize(f) for f in files):
        return None     # nothing measured for this plot in this run
    png = f"{base}-{name}.png"
    full = f"set terminal pngcairo size 900,600 font 'sans,11' noenhanced\nset output '{png}'\n" \
           "set key below\nset grid\n" + script
    subprocess.run(["gnuplot"], input=full, text=True, check=True)
    return png


def series_file(base, name, points):
    path = f"{base}-{name}.dat"
    with open(path, "w") as f:
        for x, y in points:
            f.write(f"{x} {y}\n")
    return path


def plots(base, rows):
    made = []
    by = defaultdict(list)
    for r in rows:
        by[(r["section"], r["measure"], r["baseline"])].append(r)
    tmp = []

    def pts(section, measure, baseline, value="value"):
        return sorted((float(r["x"]), float(r[value])) for r in by[(section, measure, baseline)]
                      if r[value])

    # SQL throughput over clients, fdw (solid) against heap (dashed)
    lines = []
    for i, q in enumerate(["id", "bbox2", "bbox10", "knn", "join"]):
        f = series_file(base, f"sql-{q}", pts("sql", q, "heap"))
        h = series_file(base, f"sql-{q}-heap", pts("sql", q, "heap", "baseline_value"))
        tmp += [f, h]
        lines.append(f"'{f}' w lp lw 2 lc {i + 1} pt 7 t '{q} trafficdb'")
        lines.append(f"'{h}' w lp lw 1 dt 2 lc {i + 1} pt 6 t '{q} heap'")
    made.append(gnuplot(base, "sql-clients",
                        "set title 'Queries through SQL over clients (pgbench)'\nset xlabel 'clients'\n"
                        "set ylabel 'queries per second'\nset logscale xy\nset xtics (1,2,4,8,16)\n"
                        "plot " + ", ".join(lines), tmp[-10:]))

    # box size, as the TrafficDB paper's figures: 2 clients, fdw vs heap
    fdw, heap = [], []
    for km in [2, 5, 10, 20, 50]:
        r = find(rows, "sql", f"bbox{km}", 2, "heap")
        if r:
            fdw.append((km, r["value"]))
            heap.append((km, r["baseline_value"]))
    f, h = series_file(base, "box-fdw", fdw), series_file(base, "box-heap", heap)
    tmp += [f, h]
    made.append(gnuplot(base, "sql-boxes",
                        "set title 'Box queries by size, 2 clients'\nset xlabel 'box side (km)'\n"
                        "set ylabel 'queries per second'\nset logscale xy\nset xtics (2,5,10,20,50)\n"
                        f"plot '{f}' w lp lw 2 pt 7 t 'trafficdb.locations', '{h}' w lp lw 2 pt 6 t 'heap + GiST'", [f, h]))

    # the accessor over threads against the bare probe
    lines = []
    for i, (m, title) in enumerate([("bare_probe", "bare 1 GiB probe"), ("get", "trafficdb_get"),
                                    ("get_traffic", "trafficdb_get_traffic"), ("get_batched64", "trafficdb_get_many (64)")]):
        p = pts("accessor", m, "" if m == "bare_probe" else "bare_probe")
        f = series_file(base, f"acc-{m}", p)
        tmp.append(f)
        lines.append(f"'{f}' w lp lw 2 pt 7 lc {i + 1} t '{title}'")
    redis = [(2, r["value"]) for r in rows if r["section"] == "redis"]
    if redis:
        f = series_file(base, "acc-redis", redis)
        tmp.append(f)
        lines.append(f"'{f}' w p pt 5 ps 1.5 lc 7 t 'Redis GET, plain and pipelined (2 threads)'")
    made.append(gnuplot(base, "accessor-threads",
                        "set title 'Lookups per second over threads (libtrafficdb)'\nset xlabel 'threads'\n"
                        "set ylabel 'lookups per second'\nset logscale y\nset xtics 1\nset xrange [0.5:*]\n"
                        "plot " + ", ".join(lines), [f for f in tmp if "-acc-" in f]))

    # scale-up of publishing (objects alone)
    b = series_file(base, "pub-build", pts("publish_objects", "map_build_s", ""))
    u = series_file(base, "pub-1pct", pts("publish_objects", "update_1pct_publish_s", ""))
    a = series_file(base, "pub-100pct", pts("publish_objects", "update_100pct_publish_s", ""))
    tmp += [b, u, a]
    made.append(gnuplot(base, "publish-scale",
                        "set title 'Publishing over network size (objects alone)'\nset xlabel 'segments'\n"
                        "set ylabel 'seconds'\nset logscale xy\n"
                        f"plot '{b}' w lp lw 2 pt 7 t 'map build', '{a}' w lp lw 2 pt 7 t 'traffic, 100 % updated', "
                        f"'{u}' w lp lw 2 pt 7 t 'traffic, 1 % updated'", [b, u, a]))
    tiles_plots(base, rows, by, made, tmp)
    for t in tmp:
        os.remove(t)
    return [m for m in made if m]


TILE_SERVERS = (("martin_mvt", "Martin + tile_mvt", 1), ("martin_heap", "Martin + ST_AsMVT heap", 2), ("tipg", "tipg", 3))


def tiles_plots(base, rows, by, made, tmp):
    """bench/tiles.sh: per map, tiles/s over clients for each zoom (one panel a zoom), and p50/p99 over zooms at 2 clients."""
    for section in sorted({r["section"] for r in rows if r["section"].startswith("tiles_")} - {"tiles_etag", "tiles_repaint"}):
        m = section[len("tiles_"):]
        zooms = sorted({int(r["measure"][1:].split("_")[0]) for r in rows
                        if r["section"] == section and r["measure"].endswith("_tiles_per_s") and r["measure"][1].isdigit()})
        if not zooms:
            continue
        panels, files = [], []
        for z in zooms:
            lines = []
            for server, title, lc in TILE_SERVERS:
                base_of = "martin_heap" if server == "martin_mvt" else server
                value = "value" if server == "martin_mvt" else "baseline_value"
                p = sorted((float(r["x"]), float(r[value])) for r in by[(section, f"z{z}_tiles_per_s", base_of)] if r[value])
                f = series_file(base, f"{section}-z{z}-{server}", p)
                tmp.append(f)
                files.append(f)
                lines.append(f"'{f}' w lp lw 2 pt 7 lc {lc} t '{title}'")
            panels.append(f"set title 'z{z}'\nplot " + ", ".join(lines))
        cols = min(4, len(zooms))
        made.append(gnuplot(base, f"{section}-clients",
                            f"set terminal pngcairo size {300 * cols + 100},{330 * ((len(zooms) + cols - 1) // cols) + 60} "
                            f"font 'sans,9' noenhanced\nset output '{base}-{section}-clients.png'\n"
                            "set logscale y\nset xtics (1,2,4,8)\nset logscale x\nset xlabel 'clients'\n"
                            "set ylabel 'tiles/s'\nset key below\n"
                            f"set multiplot layout {(len(zooms) + cols - 1) // cols},{cols} title 'Tiles per second over "
                            f"clients, {m} (bench/tiles.sh)'\n" + "\n".join(panels) + "\nunset multiplot", files))
        lines, files = [], []
        for q, dt in (("p50", 1), ("p99", 2)):
            for server, title, lc in TILE_SERVERS:
                base_of = "martin_heap" if server == "martin_mvt" else server
                value = "value" if server == "martin_mvt" else "baseline_value"
                p = []
                for z in zooms:
                    r = find(rows, section, f"z{z}_{q}_ms", 2, base_of)
                    if r and r[value]:
                        p.append((z, float(r[value])))
                f = series_file(base, f"{section}-{q}-{server}", p)
                tmp.append(f)
                files.append(f)
                lines.append(f"'{f}' w lp lw 2 dt {dt} pt 7 lc {lc} t '{title} {q}'")
        made.append(gnuplot(base, f"{section}-latency",
                            f"set title 'Tile latency p50 / p99 over zoom, 2 clients, {m}'\nset xlabel 'zoom'\n"
                            "set ylabel 'ms'\nset logscale y\nset xtics 1\nplot " + ", ".join(lines), files))


def headline(rows):
    out = []

    def line(text, r):
        if r and r["ratio"]:
            out.append(f"- {text}: {fmt(r['value'])} vs {fmt(r['baseline_value'])} {r['unit']}, "
                       f"**{float(r['ratio']):.3g}x**")

    line("SQL id lookup, locations table vs heap btree (2 clients)", find(rows, "sql", "id", 2, "heap"))
    line("SQL 2 km box, locations table vs heap GiST (2 clients)", find(rows, "sql", "bbox2", 2, "heap"))
    line("SQL 10 km box, locations table vs heap GiST (2 clients)", find(rows, "sql", "bbox10", 2, "heap"))
    line("SQL 10 nearest, locations table vs heap GiST (2 clients)", find(rows, "sql", "knn", 2, "heap"))
    line("SQL route join, locations table vs heap (2 clients)", find(rows, "sql", "join", 2, "heap"))
    line("SQL id lookup while publishing every 100 ms vs without (2 clients)", find(rows, "mixed", "id", 2))
    line("C accessor GET vs Redis GET (both cores)", find(rows, "accessor", "get", 2, "redis_get"))
    line("C accessor batched GET vs pipelined Redis GET (both cores)",
         find(rows, "accessor", "get_batched64", 2, "redis_get_pipeline16"))
    line("C accessor GET vs a bare 1 GiB hash probe (1 thread)", find(rows, "accessor", "get", 1, "bare_probe"))
    line("stream file load time vs a PostgreSQL heap with a primary key",
         find(rows, "streams", "all_load_s", None, "postgres_heap_pk"))
    line("stream file CPU time vs a PostgreSQL heap with a primary key",
         find(rows, "streams", "all_cpu_s", None, "postgres_heap_pk"))
    line("stream file load time vs SQLite", find(rows, "streams", "all_load_s", None, "sqlite"))
    line("stream file size vs a PostgreSQL heap, size managed",
         find(rows, "streams", "managed_final_bytes", None, "postgres_heap_pk"))
    for q, text in (("ids1", "one trail"), ("ids10", "10 trails"), ("box", "a small box")):
        line(f"trail file on S3, time to first row for {text}, 16 kB blocks vs downloading the object (synthetic)",
             find(rows, "trails", f"syn_{q}_first_ms", 16384, "download_whole"))
    line("trail file on S3, bytes fetched for one trail, 16 kB blocks vs the object (synthetic)",
         find(rows, "trails", "syn_ids1_bytes", 16384, "object"))
    line("trail file on S3, full scan with a warm disk cache vs a local file (synthetic)",
         find(rows, "trails", "syn_all_warm_cache_ms", None, "local_file"))
    line("mean write latency, clients in region A, geo vs hash placement (Toxiproxy, 1 / 100 ms RTT)",
         find(rows, "tippydb", "write_mean_ms_geo", None, "write_mean_ms_hash"))
    line("mean read latency, clients in region A, geo vs hash placement (Toxiproxy, 1 / 100 ms RTT)",
         find(rows, "tippydb", "read_mean_ms_geo", None, "read_mean_ms_hash"))
    line("mean write latency with a synchronous standby in the next region, geo vs hash placement",
         find(rows, "tippydb", "write_mean_ms_geo_replicated", None, "write_mean_ms_hash_replicated"))
    for z in (10, 12, 13, 14, 16):
        line(f"vector tiles in SQL alone, one statement, tile_mvt vs ST_AsMVT over the heap with GiST, z{z}, Helsinki (goal: "
             f"{'10x' if z >= 14 else '5x' if z <= 12 else 'none'})", find(rows, "tiles_helsinki", "sql_batch_tiles_per_s", z, "tile_heap"))
        line(f"vector tiles in SQL alone, pgbench, tile_mvt vs ST_AsMVT over the heap with GiST, z{z}, Helsinki (goal: "
             f"{'10x' if z >= 14 else '5x' if z <= 12 else 'none'})", find(rows, "tiles_helsinki", "sql_tiles_per_s", z, "tile_heap"))
    for m in ("helsinki", "delaware", "synthetic"):
        for z in (10, 13, 14, 16):
            line(f"vector tiles through Martin, tile_mvt vs the heap, z{z}, 2 clients, {m} (goal: 5x)",
                 find(rows, f"tiles_{m}", f"z{z}_tiles_per_s", 2, "martin_heap"))
    line("vector tile p50 at z14 through Martin, Helsinki, 2 clients, tile_mvt vs the heap (goal: <= 2 ms)",
         find(rows, "tiles_helsinki", "z14_p50_ms", 2, "martin_heap"))
    for z in (13, 14):
        line(f"vector tiles through Martin + tile_mvt vs tipg as before, z{z}, 2 clients, Helsinki",
             find(rows, "tiles_helsinki", f"z{z}_tiles_per_s", 2, "tipg"))
    line("bytes per tile, tile_mvt vs ST_AsMVT over the heap, z14, Helsinki (goal: within 1.1x)",
         find(rows, "tiles_helsinki", "bytes_per_tile", 14, "tile_heap"))
    line("tiles answered 200 after a publication vs the tiles holding the changed road (the rest: 304)",
         find(rows, "tiles_etag", "answered_200", None, "expected_200"))
    line("publish() to repainted tile p50, Martin + tile_mvt vs tipg + heap (goal: <= 150 ms)",
         find(rows, "tiles_repaint", "publish_to_repaint_p50_ms", None, "tipg_heap"))
    line("publish() to repainted tile p90, Martin + tile_mvt vs tipg + heap (goal: <= 300 ms)",
         find(rows, "tiles_repaint", "publish_to_repaint_p90_ms", None, "tipg_heap"))
    return "\n".join(out)


def main():
    path = sys.argv[1]
    base = path[:-4] if path.endswith(".csv") else path
    with open(path) as f:
        rows = list(csv.DictReader(f))
    pngs = plots(base, rows)
    md = [f"# trafficdb benchmark: {os.path.basename(base)}", ""]
    md.append("Every figure beside its baseline measured in the same run (ratios are what count: "
              "the machine is shared and noisy). Reproduce with:")
    md += ["", "```sh", os.environ.get("BENCH_COMMAND", "make bench"), "```", ""]
    secs = os.environ.get("BENCH_SECONDS")
    if secs:
        md.append(f"Runtime: {int(secs) // 60} min {int(secs) % 60} s.")
        md.append("")
    md += ["## Machine", "", "| | |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in machine()]
    md += ["", "## Headline ratios", "", headline(rows), ""]
    for png in pngs:
        md.append(f"![{os.path.basename(png)}]({os.path.basename(png)})")
    md.append("")
    for section, title, text in SECTIONS:
        rs = [r for r in rows if r["section"] == section]
        if not rs:
            continue
        md += [f"## {title}", ""]
        if text:
            md += [text, ""]
        if section == "trails":
            md += [trails_summary(rows), ""]
        md += [table(rs, any(r["baseline"] for r in rs)), ""]
    others = sorted({r["section"] for r in rows} - {s for s, _, _ in SECTIONS})
    for section in others:
        rs = [r for r in rows if r["section"] == section]
        md += [f"## {section}", "", table(rs, any(r["baseline"] for r in rs)), ""]
    with open(base + ".md", "w") as f:
        f.write("\n".join(md))
    print(base + ".md")
    for png in pngs:
        print(png)


if __name__ == "__main__":
    main()
