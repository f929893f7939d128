"""web/sumo_feeder.py: live traffic for the map from Eclipse SUMO, written through shared memory.

    python web/sumo_feeder.py --shm /trafficdb.5433 --sim ~/.cache/trafficdb/sumo/helsinki \\
        [--speedup 4] [--every 3] [--status FILE] [--jam WAY_ID ...] [--minutes N] [--steps N]

--sim is a directory scripts/sumo.sh built (net, routes of a compressed day,
edges.tsv: edge -> OSM way, sim.json).  The feeder starts `sumo` and drives
it through TraCI (SUMO's Python client from /usr/share/sumo/tools), with one
edge subscription per road edge (mean speed, halting vehicles, vehicles): one
round trip per SUMO step.  Every --every s of wall time it advances SUMO by
every * speedup seconds, then, for each OSM way with SUMO edges:

  speed_kmh      the length-weighted mean speed of its edges over those seconds,
                 in its slower direction
  free_flow_kmh  the length-weighted speed limit of those edges
  congestion     from speed / free flow: >= 0.8 0 (free), >= 0.6 1, >= 0.4 2,
                 >= 0.2 3, else 4 (standstill)
  confidence     90 when cars were on it, 60 when it was empty (speed = limit)

and puts the ways whose values changed with trafficdb.Writer.put_many
(trafficdb_put through the server's shared memory; no SQL).  Ways the
published map does not have are skipped and counted once.  The simulated day
(sim.json's day_seconds of SUMO time = 24 h of clock time) runs in a loop, so
the morning peak recurs.  --jam WAY_ID sets the speed limit of that way's
edges to 0.1 m/s in SUMO: its cars stop, a queue spreads upstream, and the
way reports congestion 4 (against its original free flow).

Who may write: the writer opens <shm>.writers (e.g. /dev/shm/trafficdb.5433.writers),
which the server creates 0600 for its OS user (postgres), or 0660 for the group
trafficdb.writer_group (plus trafficdb.shm_group to read the map).  So run the
feeder as the server's OS user, as root (the demo), or as a member of both groups.

--status FILE is rewritten atomically at each step:
  {"simulator": "Eclipse SUMO 1.15", "sim_time": <s of the clock day>, "clock": "07:42",
   "sumo_time": <SUMO s>, "vehicles": N, "halted": N, "speedup": x, "updated_at": ISO time,
   "ways_sent": N, "ways_missing": N, "ways": {"<way id>": {"speed_kmh", "free_flow_kmh",
   "congestion", "confidence", "halted"}}}
The values in "ways" are exactly those put (speeds rounded to 0.1 km/h).

--steps N: N feeder steps as fast as SUMO goes (no pacing), then exit 0: the
tests' mode; given the seed of the build the values are the same every run.
SUMO starts --warmup (300) SUMO seconds before --start (06:30) so that the
roads have cars at the first update.
SIGTERM/SIGINT: closes SUMO and the writer and exits 0.  A log line every
minute: clock, vehicles, halted, ways sent.
"""

import argparse
import ctypes
import datetime
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

TDB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMO_HOME = os.environ.setdefault("SUMO_HOME", "/usr/share/sumo")
sys.path.append(os.path.join(SUMO_HOME, "tools"))
try:
    import trafficdb
except ImportError:  # the repository's package and library (make builds lib/libtrafficdb.so)
    sys.path.insert(0, os.path.join(TDB_ROOT, "python"))
    lib = os.path.join(TDB_ROOT, "lib", "libtrafficdb.so")
    if "TRAFFICDB_LIB" not in os.environ and os.path.exists(lib):
        os.environ["TRAFFICDB_LIB"] = lib
    import trafficdb
import traci  # noqa: E402
import traci.constants as tc  # noqa: E402
import sumolib.miscutils  # noqa: E402

JAM_SPEED = 0.1  # m/s: what --jam sets a way's edges to
LOG_EVERY = 60.0  # s of wall time


PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """In SUMO's child process before exec: SIGKILL when the feeder dies, even by SIGKILL."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def private_network():
    """As root: a network namespace of this process's own with its loopback up (SUMO's
    TraCI port is then reachable from here only).  False when that is not possible."""
    if os.geteuid() != 0 or _libc.unshare(CLONE_NEWNET) != 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
    return True


def congestion_of(speed, free_flow):
    r = speed / free_flow if free_flow > 0 else 1.0
    return 0 if r >= 0.8 else 1 if r >= 0.6 else 2 if r >= 0.4 else 3 if r >= 0.2 else 4


def clock_of(sumo_time, meta):
    s = int(sumo_time * meta["clock_seconds"] / meta["day_seconds"]) % 86400
    return s, "%02d:%02d" % (s // 3600, s % 3600 // 60)


def load_edges(path):
    """edges.tsv -> {edge: (way, length, limit km/h)}"""
    edges = {}
    with open(path) as f:
        for line in f:
            e, w, length, speed = line.rstrip("\n").split("\t")
            edges[e] = (int(w), float(length), float(speed))
    return edges


class Feeder:
    def __init__(self, a):
        self.a = a
        with open(os.path.join(a.sim, "sim.json")) as f:
            self.meta = json.load(f)
        for k in ("day_seconds", "clock_seconds", "seed"):
            if not isinstance(self.meta.get(k), (int, float)) or self.meta[k] <= 0:
                raise ValueError(f"sim.json's {k} is {self.meta.get(k)!r}: expected a positive number")
        self.edges = load_edges(os.path.join(a.sim, "edges.tsv"))
        self.ways = {}  # way -> {direction: [(edge, length, limit)]}
        for e, (w, length, limit) in self.edges.items():
            self.ways.setdefault(w, {}).setdefault(e.startswith("-"), []).append((e, length, limit))
        for w in a.jam:
            if w not in self.ways:
                sys.exit(f"sumo_feeder: --jam {w}: no SUMO edge of that OSM way in {a.sim}/edges.tsv "
                         "(expected the id of a way cars use, e.g. a line of edges.tsv's second column)")
        self.sent = {}  # way -> the values last put
        self.missing = set()  # ways the published map lacks
        self.writer = None
        self.down = False  # the last put found no server
        self.sumo_seconds = 0  # simulated so far (for the speed in the log)
        self.stop = False
        self.ways_sent = 0
        self.status = {}

    # --- SUMO ---------------------------------------------------------------
    # SUMO's TraCI server listens on every interface (0.0.0.0, no option for
    # another) and takes the first client that connects: until the feeder's
    # connect succeeds (traci retries once a second) anyone who reaches the
    # port drives SUMO as the feeder's user (root in the demo), e.g. saves
    # its state to any file.  And a SUMO whose feeder dies before connecting
    # waits for a client for ever.  So SUMO dies with the feeder
    # (PR_SET_PDEATHSIG), and as root the feeder (with SUMO) moves into a
    # network namespace of its own, whose loopback only they reach (the
    # writer is shared memory: no network).
    def sumo_args(self, begin):
        return ["-c", os.path.join(self.a.sim, "sim.sumocfg"), "--begin", str(begin),
                "--seed", str(self.meta["seed"]), "--no-step-log", "true", "--no-warnings", "true"]

    def start_sumo(self, begin, first):
        if first:
            port = self.a.traci_port or sumolib.miscutils.getFreeSocketPort()
            proc = subprocess.Popen(["sumo"] + self.sumo_args(begin) + ["--remote-port", str(port)],
                                    stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
            try:
                traci.init(port, proc=proc)
            except BaseException:
                proc.kill()
                raise
        else:
            traci.load(self.sumo_args(begin))
        for e in self.edges:
            traci.edge.subscribe(e, (tc.LAST_STEP_MEAN_SPEED, tc.LAST_STEP_VEHICLE_HALTING_NUMBER,
                                     tc.LAST_STEP_VEHICLE_NUMBER))
        for w in self.a.jam:
            for edges in self.ways[w].values():
                for e, _, _ in edges:
                    traci.edge.setMaxSpeed(e, JAM_SPEED)
        self.t = float(begin)

    def advance(self, seconds):
        """Step SUMO by seconds, sampling the edges every --sample s: per edge the mean speed summed
        over the samples, the last halting number, the cars seen."""
        acc = {e: [0.0, 0, 0] for e in self.edges}
        n = 0
        end = self.t + seconds
        day = self.meta["day_seconds"]
        while self.t < end and not self.stop:
            if self.t >= day:  # the day is over: midnight again
                self.start_sumo(0, False)
                end -= day
            dt = min(self.a.sample, end - self.t, day - self.t)
            traci.simulationStep(self.t + dt)  # SUMO runs dt steps of 1 s; the subscriptions answer for the last
            self.t += dt
            self.sumo_seconds += dt
            n += 1
            for e, r in traci.edge.getAllSubscriptionResults().items():
                a = acc.get(e)
                if a is not None:
                    a[0] += r[tc.LAST_STEP_MEAN_SPEED]
                    a[1] = r[tc.LAST_STEP_VEHICLE_HALTING_NUMBER]
                    a[2] += r[tc.LAST_STEP_VEHICLE_NUMBER]
        return acc, n

    # --- values -------------------------------------------------------------
    def values(self, acc, n):
        out = {}
        for w, dirs in self.ways.items():
            best = None
            halted = 0
            cars = 0
            for edges in dirs.values():
                total = sum(length for _, length, _ in edges) or 1.0
                speed = sum(acc[e][0] / max(n, 1) * length for e, length, _ in edges) / total * 3.6
                limit = sum(lim * length for _, length, lim in edges) / total
                halted += sum(acc[e][1] for e, _, _ in edges)
                cars += sum(acc[e][2] for e, _, _ in edges)
                if best is None or speed / limit < best[0] / best[1]:
                    best = (speed, limit)
            speed, limit = round(best[0], 1), round(best[1], 1)
            out[w] = {"speed_kmh": speed, "free_flow_kmh": limit, "congestion": congestion_of(speed, limit),
                      "confidence": 90 if cars else 60, "halted": halted}
        return out

    # --- trafficdb ----------------------------------------------------------
    def put(self, rows):
        """put_many, skipping ways the map lacks (counted once); returns how many went in."""
        done = 0
        tries = 0
        while rows and tries < 1000:  # bounded: each round takes at least one row or waits for the lane
            tries += 1
            try:
                if self.writer is None:
                    self.writer = trafficdb.Writer(self.a.shm)
                done += self.writer.put_many(rows)
                if self.down:
                    print("sumo_feeder: the writer is open again", flush=True)
                    self.down = False
                return done
            except trafficdb.NotFound as e:
                done += e.accepted
                bad = rows[e.accepted]["location_id"]
                self.missing.add(bad)
                rows = rows[e.accepted + 1:]
            except trafficdb.Busy as e:
                done += e.accepted
                rows = rows[e.accepted:]
                time.sleep(max(e.retry_after_us, 100) / 1e6)
            except (trafficdb.Stale, trafficdb.NotRunning, trafficdb.Lost) as e:
                if not self.down:  # once per outage
                    print(f"sumo_feeder: {type(e).__name__}: {e}: opening the writer again each step", flush=True)
                self.down = True
                if self.writer is not None:
                    self.writer.close()
                self.writer = None
                raise
        return done

    def step(self, acc, n):
        vals = self.values(acc, n)
        rows, keys = [], []
        for w, v in sorted(vals.items()):
            if w in self.missing:
                continue
            key = (v["speed_kmh"], v["free_flow_kmh"], v["congestion"], v["confidence"])
            if self.sent.get(w) == key:
                continue
            rows.append({"location_id": w, "speed_kmh": v["speed_kmh"], "free_flow_kmh": v["free_flow_kmh"],
                         "congestion": v["congestion"], "confidence": v["confidence"]})
            keys.append((w, key))
        try:
            self.put(rows)
            for w, key in keys:
                if w not in self.missing:
                    self.sent[w] = key
                    self.ways_sent += 1
        except (trafficdb.Stale, trafficdb.NotRunning, trafficdb.Lost):
            self.sent.clear()  # the server restarted: everything again next step
        for w in self.missing:
            vals.pop(w, None)
        sim_time, clock = clock_of(self.t, self.meta)
        self.status = {
            "simulator": "Eclipse SUMO 1.15", "map": self.meta.get("map"), "sim_time": sim_time, "clock": clock,
            "sumo_time": self.t, "vehicles": traci.vehicle.getIDCount(),
            "halted": sum(v["halted"] for v in vals.values()), "speedup": self.a.speedup,
            "updated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ways_sent": self.ways_sent, "ways_missing": len(self.missing), "jam": self.a.jam,
            "ways": {str(w): v for w, v in sorted(vals.items())}}
        if self.a.status:
            # a new file of a name no one else chose (not FILE.tmp: in a directory others may write,
            # theirs could be a symlink to any file, which the feeder, root in the demo, would overwrite)
            fd, tmp = tempfile.mkstemp(prefix=os.path.basename(self.a.status) + ".",
                                       dir=os.path.dirname(os.path.abspath(self.a.status)))
            try:
                os.fchmod(fd, 0o644)  # the app reads it, as its own user
                with os.fdopen(fd, "w") as f:
                    json.dump(self.status, f, separators=(",", ":"))
                os.replace(tmp, self.a.status)
            except BaseException:
                os.unlink(tmp)
                raise

    def log(self):
        s = self.status
        now = time.monotonic()
        done = self.sumo_seconds - self.logged[1]
        rate = f", {done / (now - self.logged[0]):.1f} SUMO s per s" if now > self.logged[0] and done > 0 else ""
        self.logged = (now, self.sumo_seconds)
        print(f"sumo_feeder: {s['clock']} simulated, {s['vehicles']} vehicles, {s['halted']} halted, "
              f"{s['ways_sent']} way updates sent, {s['ways_missing']} ways not in the map{rate}", flush=True)

    def run(self):
        a = self.a
        hh, mm = a.start.split(":")
        begin = int((int(hh) * 3600 + int(mm) * 60) * self.meta["day_seconds"] / self.meta["clock_seconds"])
        warmup = min(a.warmup, begin)
        self.start_sumo(begin - warmup, True)
        self.advance(warmup)  # cars on the roads before the first update
        self.logged = (time.monotonic(), self.sumo_seconds)
        print(f"sumo_feeder: {len(self.edges)} SUMO edges of {len(self.ways)} OSM ways ({a.sim}), "
              f"starting at {a.start} simulated, speedup {a.speedup}, every {a.every} s -> {a.shm}", flush=True)
        sim_per_step = max(1, round(a.every * a.speedup))  # whole SUMO steps of 1 s
        deadline = time.monotonic() + a.minutes * 60 if a.minutes else None
        next_at = time.monotonic()
        next_log = next_at
        steps = 0
        try:
            while not self.stop:
                acc, n = self.advance(sim_per_step)
                if self.stop:
                    break
                self.step(acc, n)
                steps += 1
                now = time.monotonic()
                if now >= next_log or (a.steps and steps == a.steps):
                    self.log()
                    next_log = now + LOG_EVERY
                if a.steps and steps >= a.steps:
                    break
                if deadline and now >= deadline:
                    print(f"sumo_feeder: --minutes {a.minutes} reached", flush=True)
                    break
                if not a.steps:  # paced: every --every s of wall time
                    next_at += a.every
                    if next_at > now:
                        time.sleep(next_at - now)
                    else:
                        next_at = now  # SUMO is slower than speedup: run as fast as it goes
        finally:
            try:
                traci.close(False)
            except (traci.exceptions.TraCIException, traci.exceptions.FatalTraCIError, OSError):
                pass  # SUMO is gone already (a signal to the whole process group)
            if self.writer is not None:
                self.writer.sync(5000)
                self.writer.close()
        print(f"sumo_feeder: stopped after {steps} steps", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shm", required=True, help="the server's shared memory name, /trafficdb.PORT")
    ap.add_argument("--sim", required=True, help="a directory scripts/sumo.sh build made")
    ap.add_argument("--speedup", type=float, default=4.0, help="SUMO seconds per wall second (default 4)")
    ap.add_argument("--every", type=float, default=3.0, help="wall seconds between updates (default 3)")
    ap.add_argument("--status", help="JSON status file, rewritten atomically each step")
    ap.add_argument("--jam", type=int, action="append", default=[], help="OSM way id to stop (repeatable)")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this many minutes (default: never)")
    ap.add_argument("--steps", type=int, default=0, help="run this many steps unpaced, then exit (tests)")
    ap.add_argument("--start", default="06:30", help="clock time the simulation starts at (default 06:30)")
    ap.add_argument("--warmup", type=int, default=300,
                    help="SUMO seconds simulated before --start, unfed, so the roads have cars (default 300)")
    ap.add_argument("--sample", type=int, default=0,
                    help="SUMO seconds between two samples of the edges (default: 1 for up to 5000 edges, "
                         "else 5: decoding every edge every second costs more than SUMO's own step)")
    ap.add_argument("--traci-port", type=int, default=0, help="TCP port of 127.0.0.1 for TraCI (default: a free one)")
    a = ap.parse_args()
    if not (0 < a.speedup <= 1000 and 0 < a.every <= 3600 and a.steps >= 0 and a.minutes >= 0
            and 0 <= a.warmup <= 86400 and 0 <= a.sample <= 3600):
        ap.error("expected 0 < --speedup <= 1000, 0 < --every <= 3600, --steps >= 0, --minutes >= 0, "
                 "0 <= --warmup <= 86400, 0 <= --sample <= 3600")
    try:
        hh, mm = a.start.split(":")
        assert 0 <= int(hh) < 24 and 0 <= int(mm) < 60
    except (ValueError, AssertionError):
        ap.error(f"--start {a.start!r}: expected HH:MM, 00:00 to 23:59")
    for f in ("sim.json", "edges.tsv", "sim.sumocfg"):
        if not os.path.exists(os.path.join(a.sim, f)):
            ap.error(f"--sim {a.sim}: no {f}: expected a directory scripts/sumo.sh build MAP PBF printed")
    if a.status:
        d = os.path.dirname(os.path.abspath(a.status))
        if not (os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)):
            ap.error(f"--status {a.status}: {d} is not a directory this user may write: expected a file "
                     "in one (it is rewritten through a new file beside it at each step)")
    try:
        feeder = Feeder(a)
    except (OSError, ValueError, AttributeError) as e:
        ap.error(f"--sim {a.sim}: {type(e).__name__}: {str(e)[:200]}: expected a directory scripts/sumo.sh "
                 "build MAP PBF made (build it again)")
    if not private_network():
        print("sumo_feeder: no network namespace of its own (not root, or unshare refused): SUMO's TraCI port "
              "listens on every interface until the feeder connects", flush=True)
    if not a.sample:
        a.sample = 1 if len(feeder.edges) <= 5000 else 5

    def on_signal(signum, frame):
        feeder.stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    feeder.run()


if __name__ == "__main__":
    main()
