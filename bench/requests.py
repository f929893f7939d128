#!/usr/bin/env python3
"""bench/requests.py: request-response round trips, one requester and one member
(a worker answering each request with its bytes), in Python on both sides:

  requests.py trafficdb SHM_NAME N   trafficdb.Subscriber.request / .requests (shared memory, futex)
  requests.py redis PORT N PID       the usual Redis work queue: LPUSH a request, the worker BRPOPs it
                                     and LPUSHes the answer to the requester's list, which BRPOPs it

Prints one CSV line: mode,n,p50_us,p99_us,mean_us,cpu_us_per_request (user+system of the two
processes over the measured requests, and of redis-server, PID, for Redis).  The first 200 requests warm up and are not counted.
"""
import os
import resource
import socket
import sys
import time

WARMUP = 200


def resp_cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Redis:
    """The smallest RESP client that BRPOP and LPUSH need."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def call(self, *args):
        self.s.sendall(resp_cmd(*args))
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def cpu_us(who):
    r = resource.getrusage(who)
    return (r.ru_utime + r.ru_stime) * 1e6


def member_trafficdb(name, ready_w):
    import trafficdb
    with trafficdb.Subscriber(name, none=True, group="bench", timeout_ms=5000) as s:
        os.write(ready_w, b"r")
        for r in s.requests():
            r.answer(r.data)


def member_redis(port, ready_w):
    r = Redis(port)
    os.write(ready_w, b"r")
    while True:
        got = r.call("BRPOP", "bench:req", 5)
        if got is None:
            return
        rid, _, data = got[1].partition(b" ")
        r.call("LPUSH", b"bench:resp:" + rid, data)


def main():
    mode, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if mode == "trafficdb":
                member_trafficdb(target, ready_w)
            else:
                member_redis(int(target), ready_w)
        finally:
            os._exit(0)
    os.read(ready_r, 1)
    if mode == "trafficdb":
        import trafficdb
        sub = trafficdb.Subscriber(target, none=True, timeout_ms=5000)

        def call(i, payload):
            return sub.request("bench", payload)
    else:
        r = Redis(int(target))
        r.call("DEL", "bench:req", "bench:resp:1")

        def call(i, payload):
            r.call("LPUSH", "bench:req", b"1 " + payload)
            return r.call("BRPOP", "bench:resp:1", 5)[1]

    payload = b"route from 4243036 to 4243050 avoiding congestion >= 3"
    lat = []
    for i in range(WARMUP):
        call(i, payload)
    c0 = cpu_us(resource.RUSAGE_SELF)
    # the member's CPU (and redis-server's): /proc/PID/stat utime + stime (clock ticks)
    def proc_cpu(p):
        with open("/proc/%d/stat" % p) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")

    others = [pid] + ([int(sys.argv[4])] if mode == "redis" else [])

    def child_cpu():
        return sum(proc_cpu(p) for p in others)
    m0 = child_cpu()
    for i in range(n):
        t0 = time.perf_counter_ns()
        got = call(i, payload)
        lat.append((time.perf_counter_ns() - t0) / 1000)
        if got != payload:
            sys.exit("bench/requests.py: a wrong answer %r" % got)
    cpu = cpu_us(resource.RUSAGE_SELF) - c0 + child_cpu() - m0
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    lat.sort()
    print("%s,%d,%.1f,%.1f,%.1f,%.1f" % (mode, n, lat[len(lat) // 2], lat[int(len(lat) * 0.99)],
                                         sum(lat) / len(lat), cpu / n))


if __name__ == "__main__":
    main()
