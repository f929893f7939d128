#!/usr/bin/env python3
"""bench/failover_load.py: the load of bench/failover.sh and t/032_failover.pl.

Runs until the file --stop exists (or --seconds pass), writing to --out:
  writes.log   one line per write attempt and outcome, of every writer:
                 T <writer> <seq> <location> <tag> <time>          attempted
                 A <writer> <seq> <location> <tag> <time> <port>   acknowledged (committed)
                 E <writer> <seq> <location> <tag> <time>          failed (may or may not be in)
               writers s0..sN-1: SQL feed rows over the multi-host connection string
               (target_session_attrs=read-write), one committed transaction each,
               reconnecting after errors; writer p: TRAFFICDB_SYNC puts through
               libtrafficdb into the current primary's shared memory (found through
               the same connection string), reopened after a failover.
               Each write carries a tag (its incident text) naming it, so that the
               published state says which write a location holds.
  reads.log    samples of the published generation:
                 R <reader> <port> <generation> <daemon_pid> <role> <time>
               reader rw: SELECT generation FROM trafficdb.status over the
               read-write connection string (the current primary); readers n<port>:
               each node directly (a hot standby's readers go on through its
               promotion), and s<port>: libtrafficdb on each node's shared memory.
  regressions.log  a line per generation that went backwards for a reader.
Times are time.time() (seconds, float).  Each writer owns its locations.
"""
import argparse
import os
import threading
import time

import psycopg2

ap = argparse.ArgumentParser()
ap.add_argument("--dsn", required=True, help="multi-host connection string with target_session_attrs=read-write")
ap.add_argument("--nodes", required=True, help="port:shm_name,... of every node")
ap.add_argument("--db", required=True)
ap.add_argument("--writers", type=int, default=4)
ap.add_argument("--per-writer", type=int, default=200, help="locations each writer owns")
ap.add_argument("--puts", type=int, default=1, help="1: a TRAFFICDB_SYNC put writer too")
ap.add_argument("--pace", type=float, default=0.002, help="seconds between two writes of one writer")
ap.add_argument("--out", required=True)
ap.add_argument("--stop", required=True)
ap.add_argument("--seconds", type=float, default=3600)
args = ap.parse_args()

nodes = [(int(p), n) for p, n in (x.split(":", 1) for x in args.nodes.split(","))]
shm_of = dict(nodes)
deadline = time.time() + args.seconds
lock = threading.Lock()
wlog = open(os.path.join(args.out, "writes.log"), "a", buffering=1 << 16)
rlog = open(os.path.join(args.out, "reads.log"), "a", buffering=1 << 16)
glog = open(os.path.join(args.out, "regressions.log"), "a", buffering=1)


def running():
    return not os.path.exists(args.stop) and time.time() < deadline


def wrec(line):
    with lock:
        wlog.write(line + "\n")


def rrec(line):
    with lock:
        rlog.write(line + "\n")


def connect(dsn):
    """A connection, retried while running (every 50 ms); None once stopped."""
    while running():
        try:
            c = psycopg2.connect(dsn, connect_timeout=2)
            c.autocommit = True
            return c
        except psycopg2.Error:
            time.sleep(0.05)
    return None


def sql_writer(i):
    name = f"s{i}"
    base = 1 + i * args.per_writer
    conn = None
    seq = 0
    while running():
        if conn is None:
            conn = connect(args.dsn)
            if conn is None:
                break
        seq += 1
        loc = base + seq % args.per_writer
        tag = f"{name}-{seq}"
        wrec(f"T {name} {seq} {loc} {tag} {time.time():.6f}")
        try:
            with conn.cursor() as cur:
                cur.execute("INSERT INTO trafficdb.feed (location_id, speed_kmh, incident) VALUES (%s, %s, %s)",
                            (loc, seq % 400, tag))
            wrec(f"A {name} {seq} {loc} {tag} {time.time():.6f} {conn.info.port}")
        except psycopg2.Error:
            wrec(f"E {name} {seq} {loc} {tag} {time.time():.6f}")
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = None
            continue
        time.sleep(args.pace)


def put_writer():
    import trafficdb
    name = "p"
    base = 1 + args.writers * args.per_writer
    seq = 0
    w = None
    port = None
    while running():
        if w is None:
            conn = connect(args.dsn)
            if conn is None:
                break
            try:
                port = conn.info.port
                w = trafficdb.Writer(shm_of[port])
                w.set_timeout(2000)
            except (psycopg2.Error, trafficdb.TrafficDBError):
                w = None
                time.sleep(0.05)
                continue
            finally:
                conn.close()
        seq += 1
        loc = base + seq % args.per_writer
        tag = f"{name}-{seq}"
        wrec(f"T {name} {seq} {loc} {tag} {time.time():.6f}")
        try:
            w.put(loc, speed_kmh=seq % 400, incident=tag, sync=True)
            wrec(f"A {name} {seq} {loc} {tag} {time.time():.6f} {port}")
        except trafficdb.TrafficDBError:
            wrec(f"E {name} {seq} {loc} {tag} {time.time():.6f}")
            try:
                w.close()
            except trafficdb.TrafficDBError:
                pass
            w = None
            continue
        time.sleep(args.pace)


def check(reader, last, gen, port, t):
    """Record a generation that went backwards for this reader."""
    if gen is None or gen == 0:
        return last
    if last is not None and gen < last[0]:
        glog.write(f"{reader} {port} {gen} after {last[0]} (port {last[1]}) at {t:.6f}\n")
    return (gen, port) if last is None or gen >= last[0] else last


def sql_reader(name, dsn):
    conn = None
    last = None
    while running():
        if conn is None:
            conn = connect(dsn)
            if conn is None:
                break
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT generation, daemon_pid, role FROM trafficdb.status")
                gen, pid, role = cur.fetchone()
            t = time.time()
            rrec(f"R {name} {conn.info.port} {gen} {pid} {role} {t:.6f}")
            last = check(name, last, gen, conn.info.port, t)
        except psycopg2.Error:
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = None
        time.sleep(0.02)


def shm_reader(port):
    import trafficdb
    name = f"s{port}"
    r = None
    last = None
    while running():
        try:
            if r is None:
                r = trafficdb.Reader(shm_of[port])
            with r.snapshot() as snap:
                gen = snap.generation
            t = time.time()
            rrec(f"R {name} {port} {gen} - - {t:.6f}")
            last = check(name, last, gen, port, t)
        except trafficdb.TrafficDBError:
            if r is not None:
                r.close()
            r = None
        time.sleep(0.02)


threads = [threading.Thread(target=sql_writer, args=(i,)) for i in range(args.writers)]
if args.puts:
    threads.append(threading.Thread(target=put_writer))
threads.append(threading.Thread(target=sql_reader, args=("rw", args.dsn)))
for port, _ in nodes:
    threads.append(threading.Thread(target=sql_reader, args=(f"n{port}", f"host=127.0.0.1 port={port} dbname={args.db}")))
    threads.append(threading.Thread(target=shm_reader, args=(port,)))
for t in threads:
    t.daemon = True
    t.start()
for t in threads:
    t.join()
wlog.close()
rlog.close()
glog.close()
