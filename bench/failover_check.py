#!/usr/bin/env python3
"""bench/failover_check.py OUT: the verdict of bench/failover.sh and t/032_failover.pl.

Reads OUT/writes.log, OUT/reads.log, OUT/regressions.log (bench/failover_load.py),
OUT/kills.log (one line a kill: K <time of the kill> <old primary's port> <new
primary's port> <no rebuild: 1|0> <the generation the new primary took over at>
<what showed it>) and OUT/final.txt (location_id|incident
of the final primary after a last publication), and prints:
  - per kill: (i) the last acknowledged write on the old primary -> the first
    acknowledged write on the new one, (ii) -> the first generation newer than
    any the old primary published, visible to a reader of the new one;
  - summary lines key=value (kills, writes_acked, lost, regressions, rebuilds,
    t1_median_s, t1_max_s, t2_median_s, t2_max_s) for the caller.
A location's published write must be its last acknowledged one, or one
attempted after it whose outcome the writer never learnt (in flight at a kill).
Exits 1 if a write was lost, a generation went backwards, or a daemon rebuilt.
"""
import collections
import os
import statistics
import sys

out = sys.argv[1]


def lines(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [ln.split() for ln in f if ln.strip()]


# writes: per location, the attempts in order (one writer owns a location)
attempts = collections.defaultdict(dict)     # loc -> seq -> [tag, outcome]
acks = []                                    # (time, port)
for w in lines("writes.log"):
    kind, writer, seq, loc, tag, t = w[:6]
    key = (writer, int(seq))
    a = attempts[int(loc)].setdefault(key, [tag, None])
    if kind == "A":
        a[1] = "A"
        acks.append((float(t), int(w[6])))
    elif kind == "E":
        a[1] = "E"
acks.sort()

final = {}
for row in lines("final.txt"):
    loc, _, tag = row[0].partition("|")
    final[int(loc)] = tag or None

lost = []
for loc, att in attempts.items():
    order = sorted(att)
    last_acked = max((i for i, k in enumerate(order) if att[k][1] == "A"), default=None)
    # the last acknowledged write or any attempted after it (none of them was acknowledged)
    allowed = {att[k][0] for k in order[(last_acked or 0):]}
    if last_acked is None:
        allowed.add(None)
    if final.get(loc) not in allowed:
        lost.append((loc, final.get(loc), att[order[last_acked]][0] if last_acked is not None else None))

# reads: samples per port
samples = collections.defaultdict(list)      # port -> [(time, generation)]
for r in lines("reads.log"):
    if r[3] in ("None", "0"):
        continue
    samples[int(r[2])].append((float(r[6]), int(r[3])))
for s in samples.values():
    s.sort()

regressions = lines("regressions.log")
kills = lines("kills.log")
t1s, t2s = [], []
rebuilds = 0
print(f"{'kill':>4} {'old':>5} {'new':>5} {'(i) write->write s':>19} {'(ii) write->generation s':>25}  daemon")
for n, k in enumerate(kills, 1):
    tk, old, new, norebuild = float(k[1]), int(k[2]), int(k[3]), k[4] == "1"
    nxt = float(kills[n][1]) if n < len(kills) else float("inf")
    last_old = max((t for t, p in acks if p == old and t <= tk), default=None)
    first_new = min((t for t, p in acks if p == new and tk < t < nxt), default=None)
    gpromo = int(k[5])
    first_gen = min((t for t, g in samples[new] if tk < t < nxt and g > gpromo), default=None)
    t1 = first_new - last_old if last_old is not None and first_new is not None else None
    t2 = first_gen - last_old if last_old is not None and first_gen is not None else None
    if t1 is not None:
        t1s.append(t1)
    if t2 is not None:
        t2s.append(t2)
    if not norebuild:
        rebuilds += 1
    f = lambda v: f"{v:.3f}" if v is not None else "n/a"
    print(f"{n:>4} {old:>5} {new:>5} {f(t1):>19} {f(t2):>25}  after {gpromo}: {' '.join(k[6:])}")

for loc, got, want in lost[:20]:
    print(f"LOST: location {loc} publishes {got}, its last acknowledged write is {want}")
for r in regressions[:20]:
    print("REGRESSION: " + " ".join(r))

med = lambda v: statistics.median(v) if v else float("nan")
mx = lambda v: max(v) if v else float("nan")
print(f"kills={len(kills)}")
print(f"measured={min(len(t1s), len(t2s))}")
print(f"writes_acked={len(acks)}")
print(f"writes_attempted={sum(len(a) for a in attempts.values())}")
print(f"lost={len(lost)}")
print(f"regressions={len(regressions)}")
print(f"rebuilds={rebuilds}")
print(f"t1_median_s={med(t1s):.3f}")
print(f"t1_max_s={mx(t1s):.3f}")
print(f"t2_median_s={med(t2s):.3f}")
print(f"t2_max_s={mx(t2s):.3f}")
sys.exit(1 if lost or regressions or rebuilds or len(t1s) < len(kills) or len(t2s) < len(kills) else 0)
