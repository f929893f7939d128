"""trafficdb: read live road traffic from trafficdb's shared memory, with no SQL.

A thin ctypes layer over libtrafficdb (include/trafficdb.h)::

    import trafficdb
    with trafficdb.Reader("/trafficdb.5432") as reader:
        with reader.snapshot() as snap:            # one generation, pinned without locks
            loc = snap.get(45314201)
            print(loc.name, loc.speed_kmh, snap.generation)
            for loc in snap.bbox(24.93, 60.16, 24.95, 60.17):
                ...
        reader.wait(after=snap.generation, timeout=5.0)   # sleeps until the next publish

    with trafficdb.Writer("/trafficdb.5432") as writer:   # local writes, no SQL
        writer.put(45314201, speed_kmh=37.5, confidence=90)          # in shared memory (~100 ns in C)
        writer.put(45314202, incident="lane closed", sync=True)      # returns once committed
        writer.sync(5000)                                            # every put so far committed

Locations are plain Python objects copied out of shared memory, so they stay
usable after the snapshot ends.  A Reader belongs to one thread at a time.

The library loaded is $TRAFFICDB_LIB when set, else the libtrafficdb.so.N
that ``make install-client`` installed with this package, else
libtrafficdb.so.N wherever the dynamic linker finds it (ldconfig's cache,
LD_LIBRARY_PATH).
"""
import ctypes
import datetime
import math
import numbers
import os
import threading
import time

__all__ = ["Reader", "Snapshot", "Location", "Writer", "TrafficDBError", "NotRunning", "Stale", "Empty", "Revoked",
           "Busy", "Lost", "BadArg", "NotFound", "Subscriber", "Request", "Timeout", "Gone"]

# include/trafficdb.h's TRAFFICDB_VERSION_STRING: make install-client refuses
# to install a package whose version differs.
__version__ = "0.2.0"


def _load_library():
    # The soname's major: these ctypes declarations follow that ABI.
    soname = "libtrafficdb.so." + __version__.split(".")[0]
    if os.environ.get("TRAFFICDB_LIB"):
        return ctypes.CDLL(os.environ["TRAFFICDB_LIB"])
    try:
        from . import _install     # written by make install-client: its LIBDIR
    except ImportError:
        pass
    else:
        installed = os.path.join(_install.LIBDIR, soname)
        if os.path.exists(installed):
            return ctypes.CDLL(installed)
    try:
        return ctypes.CDLL(soname)
    except OSError as e:
        raise ImportError(f"trafficdb: cannot load {soname} ({e}): install libtrafficdb (make install-client), "
                          "or add its directory to LD_LIBRARY_PATH, or name the file in TRAFFICDB_LIB") from e


_lib = _load_library()

OK, NOTFOUND, NOTRUNNING, PERMISSION, INVALID, NOSLOT, EMPTY, STALE, CORRUPT, SYSTEM, \
    NOSNAPSHOT, BADARG, TIMEOUT, NOMEM, REVOKED, BUSY, LOST, TRIMMED, GONE = 0, *range(-30700, -30718, -1)

# trafficdb_put's flags and trafficdb_update.has bits
ASYNC, SYNC, WAIT = 0x0, 0x1, 0x2
HAS_SPEED, HAS_FREE_FLOW, HAS_CONGESTION, HAS_CONFIDENCE, HAS_INCIDENT = 0x01, 0x02, 0x04, 0x08, 0x10


class _Traffic(ctypes.Structure):
    _fields_ = [("updated_at_us", ctypes.c_int64), ("changed_generation", ctypes.c_uint64),
                ("speed_kmh", ctypes.c_float), ("free_flow_kmh", ctypes.c_float),
                ("incident_offset", ctypes.c_uint32), ("congestion", ctypes.c_uint8),
                ("confidence", ctypes.c_uint8), ("flags", ctypes.c_uint16)]


class _Location(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("index", ctypes.c_uint64),
                ("name", ctypes.c_char_p), ("road_class", ctypes.c_char_p),
                ("length_m", ctypes.c_float), ("speed_limit_kmh", ctypes.c_uint16),
                ("oneway", ctypes.c_uint8), ("npoints", ctypes.c_uint32),
                ("traffic", ctypes.POINTER(_Traffic)),
                ("incident", ctypes.c_void_p), ("incident_len", ctypes.c_uint32)]


class _Update(ctypes.Structure):
    _fields_ = [("location_id", ctypes.c_uint64), ("observed_at_us", ctypes.c_int64),
                ("speed_kmh", ctypes.c_float), ("free_flow_kmh", ctypes.c_float),
                ("congestion", ctypes.c_uint8), ("confidence", ctypes.c_uint8), ("has", ctypes.c_uint8),
                ("incident", ctypes.c_char_p), ("incident_len", ctypes.c_uint32)]


class _Filter(ctypes.Structure):
    _fields_ = [("area", ctypes.c_int), ("ids", ctypes.POINTER(ctypes.c_uint64)), ("nids", ctypes.c_uint32),
                ("box", ctypes.c_double * 4), ("lon", ctypes.c_double), ("lat", ctypes.c_double),
                ("radius_m", ctypes.c_double), ("polygon", ctypes.POINTER(ctypes.c_double)),
                ("npoints", ctypes.c_uint32), ("condition", ctypes.c_int), ("value", ctypes.c_double),
                ("events", ctypes.c_int)]


class _Event(ctypes.Structure):
    _fields_ = [("generation", ctypes.c_uint64), ("location_id", ctypes.c_uint64), ("seq", ctypes.c_uint64),
                ("published_us", ctypes.c_int64), ("subscriber", ctypes.c_uint32), ("kind", ctypes.c_uint16),
                ("flags", ctypes.c_uint16), ("old_speed_kmh", ctypes.c_float), ("new_speed_kmh", ctypes.c_float),
                ("old_free_flow_kmh", ctypes.c_float), ("new_free_flow_kmh", ctypes.c_float),
                ("old_congestion", ctypes.c_uint8), ("new_congestion", ctypes.c_uint8),
                ("old_confidence", ctypes.c_uint8), ("new_confidence", ctypes.c_uint8),
                ("old_incident", ctypes.c_uint8), ("new_incident", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8 * 2)]


assert ctypes.sizeof(_Event) == 64


class _Req(ctypes.Structure):
    _fields_ = [("cell", ctypes.c_uint32), ("len", ctypes.c_uint32), ("ticket", ctypes.c_uint64),
                ("requester_pid", ctypes.c_int32), ("reserved", ctypes.c_uint32)]


assert ctypes.sizeof(_Req) == 24
REQUEST_MAX = 4096
"""The largest request or reply, in bytes, that Subscriber.request() and reply() carry."""

_VISIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Location), ctypes.c_void_p)
_H = ctypes.c_void_p

for _name, _res, _args in [
        ("trafficdb_strerror", ctypes.c_char_p, [ctypes.c_int]),
        ("trafficdb_errmsg", ctypes.c_char_p, [_H]),
        ("trafficdb_open", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_H)]),
        ("trafficdb_close", None, [_H]),
        ("trafficdb_begin", ctypes.c_int, [_H, ctypes.POINTER(ctypes.c_uint64)]),
        ("trafficdb_end", ctypes.c_int, [_H]),
        ("trafficdb_get", ctypes.c_int, [_H, ctypes.c_uint64, ctypes.POINTER(_Location)]),
        ("trafficdb_shape", ctypes.c_int, [_H, ctypes.POINTER(_Location), ctypes.POINTER(ctypes.c_double)]),
        ("trafficdb_bbox", ctypes.c_int, [_H, ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_double, _VISIT, ctypes.c_void_p]),
        ("trafficdb_radius", ctypes.c_int, [_H, ctypes.c_double, ctypes.c_double, ctypes.c_double, _VISIT, ctypes.c_void_p]),
        ("trafficdb_knn", ctypes.c_int, [_H, ctypes.c_double, ctypes.c_double, ctypes.c_uint32, _VISIT, ctypes.c_void_p]),
        ("trafficdb_changes_since", ctypes.c_int, [_H, ctypes.c_uint64, _VISIT, ctypes.c_void_p]),
        ("trafficdb_wait", ctypes.c_int, [_H, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]),
        ("trafficdb_writer_open", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_H)]),
        ("trafficdb_writer_close", None, [_H]),
        ("trafficdb_writer_errmsg", ctypes.c_char_p, [_H]),
        ("trafficdb_put", ctypes.c_int, [_H, ctypes.POINTER(_Update), ctypes.c_int]),
        ("trafficdb_put_many", ctypes.c_int, [_H, ctypes.POINTER(_Update), ctypes.c_size_t, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_size_t)]),
        ("trafficdb_sync", ctypes.c_int, [_H, ctypes.c_int]),
        ("trafficdb_end_batch", ctypes.c_int, [_H, ctypes.c_int]),
        ("trafficdb_retry_after_us", ctypes.c_uint32, [_H]),
        ("trafficdb_writer_set_timeout", ctypes.c_int, [_H, ctypes.c_int]),
        ("trafficdb_subscribe", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_Filter), ctypes.c_char_p, ctypes.c_int,
                                               ctypes.POINTER(_H)]),
        ("trafficdb_receive", ctypes.c_int, [_H, ctypes.POINTER(_Event), ctypes.c_int, ctypes.c_int]),
        ("trafficdb_unsubscribe", None, [_H]),
        ("trafficdb_subscriber_errmsg", ctypes.c_char_p, [_H]),
        ("trafficdb_request", ctypes.c_int, [_H, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                             ctypes.c_size_t, ctypes.c_int]),
        ("trafficdb_take_request", ctypes.c_int, [_H, ctypes.POINTER(_Req), ctypes.c_char_p, ctypes.c_int]),
        ("trafficdb_answer", ctypes.c_int, [_H, ctypes.POINTER(_Req), ctypes.c_char_p, ctypes.c_size_t]),
]:
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args


class TrafficDBError(Exception):
    """A libtrafficdb error: .code is the library's code (include/trafficdb.h)."""

    def __init__(self, code, detail=""):
        self.code = code
        message = _lib.trafficdb_strerror(code).decode()
        super().__init__(f"{message}: {detail}" if detail else message)


class NotRunning(TrafficDBError):
    """No trafficdb shared memory under that name: the server is down or trafficdb is not preloaded."""


class Stale(TrafficDBError):
    """The server stopped: open a new Reader when it is back."""


class Empty(TrafficDBError):
    """Nothing is published yet (no map loaded)."""


class Revoked(TrafficDBError):
    """The snapshot was held past trafficdb.reader_pin_timeout and revoked (or rewritten): read again."""


class Busy(TrafficDBError):
    """A writer's lane is full (nothing was written): retry after .retry_after_us microseconds."""

    def __init__(self, code, detail="", retry_after_us=1000):
        super().__init__(code, detail)
        self.retry_after_us = retry_after_us


class Lost(TrafficDBError):
    """A crash of the server's daemon lost updates that were not committed yet: put them again."""


class Trimmed(TrafficDBError):
    """changes_since: the generation is older than the generation log keeps: read the current state."""


class Timeout(TrafficDBError, TimeoutError):
    """Not done within the timeout (Subscriber.request: the request was withdrawn)."""


class Gone(TrafficDBError):
    """Subscriber.answer: the requester gave up or left; the answer was dropped."""


class BadArg(TrafficDBError, ValueError):
    """An argument is out of range (for a put: the message names the field and its value)."""


class NotFound(TrafficDBError, KeyError):
    """No location with that id in the published map."""

    __str__ = Exception.__str__


_ERRORS = {NOTRUNNING: NotRunning, STALE: Stale, EMPTY: Empty, REVOKED: Revoked, BUSY: Busy, LOST: Lost,
           BADARG: BadArg, NOTFOUND: NotFound, TRIMMED: Trimmed, TIMEOUT: Timeout, GONE: Gone}


def _check(code, handle=None):
    if code < 0:
        # without a handle: why this thread's last trafficdb_open failed
        detail = _lib.trafficdb_errmsg(handle).decode(errors="replace")
        raise _ERRORS.get(code, TrafficDBError)(code, detail)
    return code


def _check_writer(code, handle=None):
    if code < 0:
        # without a handle: why this thread's last trafficdb_writer_open failed
        detail = _lib.trafficdb_writer_errmsg(handle).decode(errors="replace")
        if code == BUSY:
            raise Busy(code, detail, _lib.trafficdb_retry_after_us(handle) if handle else 1000)
        raise _ERRORS.get(code, TrafficDBError)(code, detail)
    return code


class Location:
    """A location and its traffic, copied out of a snapshot."""

    __slots__ = ("id", "name", "road_class", "length_m", "speed_limit_kmh", "oneway", "speed_kmh",
                 "free_flow_kmh", "congestion", "confidence", "incident", "updated_at",
                 "changed_generation", "shape")

    def __init__(self, handle, c):
        t = c.traffic.contents
        self.id = c.id
        self.name = c.name.decode() or None
        self.road_class = c.road_class.decode() or None
        self.length_m = c.length_m
        self.speed_limit_kmh = c.speed_limit_kmh or None
        self.oneway = bool(c.oneway)
        self.speed_kmh = None if math.isnan(t.speed_kmh) else t.speed_kmh
        self.free_flow_kmh = None if math.isnan(t.free_flow_kmh) else t.free_flow_kmh
        self.congestion = None if t.congestion == 255 else t.congestion
        self.confidence = t.confidence if t.updated_at_us and t.confidence != 255 else None
        self.incident = ctypes.string_at(c.incident, c.incident_len).decode() if c.incident else None
        self.updated_at = (datetime.datetime.fromtimestamp(t.updated_at_us / 1e6, datetime.timezone.utc)
                           if t.updated_at_us else None)
        self.changed_generation = t.changed_generation or None
        xy = (ctypes.c_double * (2 * c.npoints))()
        _check(_lib.trafficdb_shape(handle, ctypes.byref(c), xy), handle)
        self.shape = [(xy[2 * i], xy[2 * i + 1]) for i in range(c.npoints)]

    def __repr__(self):
        return f"Location(id={self.id}, name={self.name!r}, speed_kmh={self.speed_kmh})"


class Snapshot:
    """One pinned generation of the map and its traffic; use as a context manager."""

    def __init__(self, reader):
        self._reader = reader
        self._h = reader._h
        self.generation = None

    def __enter__(self):
        gen = ctypes.c_uint64()
        _check(_lib.trafficdb_begin(self._h, ctypes.byref(gen)), self._h)
        self.generation = gen.value
        return self

    def __exit__(self, exc_type, exc, tb):
        h, self._h = self._h, None
        rc = _lib.trafficdb_end(h)
        if rc == REVOKED and exc_type is None:
            _check(rc, h)

    def _handle(self):
        if self._h is None:
            raise TrafficDBError(NOSNAPSHOT, "the snapshot has ended")
        return self._h

    def get(self, location_id):
        """The location with that id, or None."""
        h = self._handle()
        c = _Location()
        rc = _lib.trafficdb_get(h, location_id, ctypes.byref(c))
        if rc == NOTFOUND:
            return None
        _check(rc, h)
        return Location(h, c)

    def _collect(self, call, *args):
        h = self._handle()
        out = []

        def visit(cloc, _arg):
            out.append(Location(h, cloc.contents))
            return 0
        _check(call(h, *args, _VISIT(visit), None), h)
        return out

    def bbox(self, xmin, ymin, xmax, ymax):
        """Locations whose bounding box meets the box (degrees)."""
        return self._collect(_lib.trafficdb_bbox, xmin, ymin, xmax, ymax)

    def radius(self, lon, lat, metres):
        """Locations within metres of the point."""
        return self._collect(_lib.trafficdb_radius, lon, lat, metres)

    def knn(self, lon, lat, k):
        """The k nearest locations, nearest first."""
        return self._collect(_lib.trafficdb_knn, lon, lat, k)

    def changes_since(self, generation):
        """Locations whose traffic changed after that generation."""
        return self._collect(_lib.trafficdb_changes_since, generation)


class Reader:
    """A connection to trafficdb's shared memory under name (e.g. "/trafficdb.5432")."""

    def __init__(self, name):
        h = _H()
        _check(_lib.trafficdb_open(name.encode(), ctypes.byref(h)))
        self._h = h

    def snapshot(self):
        """Pin the current generation: a Snapshot, to use in a with block (released at its end)."""
        return Snapshot(self)

    def wait(self, after, timeout=None):
        """Sleep until a generation newer than after is published; return it, or None on timeout."""
        gen = ctypes.c_uint64()
        rc = _lib.trafficdb_wait(self._h, after, int((timeout if timeout is not None else 86400) * 1000),
                           ctypes.byref(gen))
        if rc == TIMEOUT:
            return None
        _check(rc, self._h)
        return gen.value

    def close(self):
        """Detach from the shared memory; the Reader cannot be used after. Closing twice is harmless."""
        if self._h:
            _lib.trafficdb_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _update(location_id, speed_kmh=None, free_flow_kmh=None, congestion=None, confidence=None, incident=None,
            observed_at_us=0):
    """A trafficdb_update; the incident's bytes are kept alive by the struct's c_char_p."""
    u = _Update()
    u.location_id = location_id
    u.observed_at_us = observed_at_us
    has = 0
    if speed_kmh is not None:
        u.speed_kmh = speed_kmh
        has |= HAS_SPEED
    if free_flow_kmh is not None:
        u.free_flow_kmh = free_flow_kmh
        has |= HAS_FREE_FLOW
    # out-of-range levels go to the library as 255, which its validation names
    if congestion is not None:
        u.congestion = congestion if 0 <= congestion <= 255 else 255
        has |= HAS_CONGESTION
    if confidence is not None:
        u.confidence = confidence if 0 <= confidence <= 255 else 255
        has |= HAS_CONFIDENCE
    if incident is not None:
        data = incident.encode() if isinstance(incident, str) else bytes(incident)
        u.incident = data
        u.incident_len = len(data)
        has |= HAS_INCIDENT
    u.has = has
    return u


class Writer:
    """Local writes to the server under name (e.g. "/trafficdb.5432") through its shared memory ring.

    One Writer per thread (it owns a lane of the ring).  put() and put_many() are acknowledged once
    the updates are in shared memory, or with sync=True once the generation holding them has
    committed.  Errors: BadArg (the message names the field), NotFound (id not in the published
    map), Busy (the lane is full: .retry_after_us), Lost (sync: a crash lost updates: put them
    again), Stale (the server stopped: open a new Writer).
    """

    def __init__(self, name):
        h = _H()
        _check_writer(_lib.trafficdb_writer_open(name.encode(), ctypes.byref(h)))
        self._h = h

    def _handle(self):
        if not self._h:
            raise TrafficDBError(BADARG, "the writer is closed")
        return self._h

    def put(self, location_id, speed_kmh=None, free_flow_kmh=None, congestion=None, confidence=None,
            incident=None, observed_at_us=0, sync=False, wait=False):
        """Put one update; fields left None are unknown (NULL in SQL).  observed_at_us 0 = now."""
        h = self._handle()
        u = _update(location_id, speed_kmh, free_flow_kmh, congestion, confidence, incident, observed_at_us)
        _check_writer(_lib.trafficdb_put(h, ctypes.byref(u), (SYNC if sync else ASYNC) | (WAIT if wait else 0)), h)

    def put_many(self, rows, sync=False, wait=False):
        """Put updates in order: rows of dicts (put's keywords) or tuples (put's positional order).

        Returns how many went in; on an error the exception's .accepted says so too.
        """
        h = self._handle()
        ups = [_update(**r) if isinstance(r, dict) else _update(*r) for r in rows]
        arr = (_Update * len(ups))(*ups)
        accepted = ctypes.c_size_t()
        rc = _lib.trafficdb_put_many(h, arr, len(ups), (SYNC if sync else ASYNC) | (WAIT if wait else 0),
                                     ctypes.byref(accepted))
        try:
            _check_writer(rc, h)
        except TrafficDBError as e:
            e.accepted = accepted.value
            raise
        return accepted.value

    def sync(self, timeout_ms=10000):
        """Wait until every put so far is committed; False on timeout; Lost if a crash lost some."""
        h = self._handle()
        rc = _lib.trafficdb_sync(h, int(timeout_ms))
        if rc == TIMEOUT:
            return False
        _check_writer(rc, h)
        return True

    def end_batch(self, sync=False, wait=False):
        """End a batch: what this writer put so far is published at once, in generations
        holding none of its later puts, without waiting (sync=True: and wait until committed;
        wait=True: wait for space in a full lane instead of raising Busy)."""
        h = self._handle()
        _check_writer(_lib.trafficdb_end_batch(h, (SYNC if sync else ASYNC) | (WAIT if wait else 0)), h)

    def set_timeout(self, timeout_ms):
        """The timeout of sync puts and of wait=True (default 10 s)."""
        _check_writer(_lib.trafficdb_writer_set_timeout(self._handle(), int(timeout_ms)), self._h)

    @property
    def retry_after_us(self):
        """After Busy: how long, in microseconds, the daemon suggests waiting before putting again."""
        return _lib.trafficdb_retry_after_us(self._handle())

    def close(self):
        """Release the writer and its lane (call sync() first to know every put so far is committed). Closing twice is harmless."""
        if self._h:
            _lib.trafficdb_writer_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_KINDS = {1: "change", 2: "enter", 3: "exit", 4: "overrun"}
_CONDITIONS = {None: 0, "congestion_at_least": 1, "speed_below": 2, "speed_below_pct": 3, "incident": 4}


class Event:
    """One subscription event: kind ("change", "enter", "exit", "overrun"), generation, location_id,
    old and new values (speeds NaN and levels None when unknown), published_us, handed_over."""

    __slots__ = ("kind", "generation", "location_id", "seq", "published_us", "handed_over", "subscription",
                 "old_speed_kmh", "new_speed_kmh", "old_congestion", "new_congestion",
                 "old_incident", "new_incident")

    def __init__(self, e):
        self.kind = _KINDS.get(e.kind, str(e.kind))
        self.generation = e.generation
        self.location_id = e.location_id
        self.seq = e.seq
        self.published_us = e.published_us
        self.handed_over = bool(e.flags & 1)
        self.subscription = e.subscriber
        self.old_speed_kmh = e.old_speed_kmh
        self.new_speed_kmh = e.new_speed_kmh
        self.old_congestion = None if e.old_congestion == 255 else e.old_congestion
        self.new_congestion = None if e.new_congestion == 255 else e.new_congestion
        self.old_incident = bool(e.old_incident)
        self.new_incident = bool(e.new_incident)

    def __repr__(self):
        return "Event(%s, generation=%d, location_id=%d)" % (self.kind, self.generation, self.location_id)


_INT_MAX = 2 ** 31 - 1


def _ms(timeout_ms):
    """A timeout for a C int: ctypes wraps larger ints silently (2**32 + 5 ms became 5 ms, 2**31 no wait).
    A number of milliseconds (negative: no wait; above _INT_MAX, infinity included: _INT_MAX); anything else
    is a TypeError naming it (int("100") took a string, int("abc") said "invalid literal for int()")."""
    if not isinstance(timeout_ms, numbers.Real):
        raise TypeError("timeout_ms must be a number of milliseconds, not %r" % (timeout_ms,))
    if math.isnan(timeout_ms):
        raise ValueError("timeout_ms must be a number of milliseconds, not NaN")
    return _INT_MAX if timeout_ms >= _INT_MAX else 0 if timeout_ms <= 0 else int(timeout_ms)


class Request:
    """A request a member took: .data (bytes), .requester_pid; answer it once with .answer(bytes)."""

    __slots__ = ("_sub", "_r", "data", "requester_pid")

    def __init__(self, sub, r, data):
        self._sub = sub
        self._r = r
        self.data = data
        self.requester_pid = r.requester_pid

    def answer(self, data):
        """Send the answer; raises Gone when the requester gave up or left (the answer is dropped)."""
        data = bytes(data)
        with self._sub._using() as h:
            rc = _lib.trafficdb_answer(h, ctypes.byref(self._r), data, len(data))
            if rc < 0:
                self._sub._fail(rc, h)


class Subscriber:
    """Events of the locations in an area whose traffic changes, pushed by the server at each publication
    into this process's ring in shared memory.

    Exactly one of ids=[...], box=(xmin, ymin, xmax, ymax), radius=(lon, lat, metres), polygon=[(x, y), ...],
    none=True (no events: to make requests, or to answer them as a member of a group),
    or subscriptions=True (the events of every row of trafficdb.subscriptions; Event.subscription is the row's id);
    condition one of "congestion_at_least", "speed_below", "speed_below_pct" (with value) or "incident";
    enter_exit=True for events when the condition starts or stops holding.  group="name" shares the events
    with the other subscribers of that group (sticky=True: a location to the same member).

    `for e in sub:` waits for events for as long as the subscriber is open: quiet traffic does not end it,
    close() (from another thread, or a with block's end) does.  events(timeout_ms=...) ends instead
    (StopIteration, no exception) after timeout_ms without an event.  timeout_ms of the constructor is the
    wait of one receive(), request() or take_request() call, not of the iteration.

    Threads: one thread at a time makes calls on a Subscriber (open one per thread); close() may come
    from another thread, and a call blocked then ends at its timeout.
    """

    def __init__(self, name, ids=None, box=None, radius=None, polygon=None, condition=None, value=None,
                 enter_exit=False, group=None, sticky=False, timeout_ms=10000, subscriptions=False, none=False):
        f = _Filter()
        self._keep = []
        if sum(x is not None for x in (ids, box, radius, polygon)) + bool(subscriptions) + bool(none) != 1:
            raise BadArg(BADARG, "give exactly one of ids, box, radius, polygon, subscriptions=True, none=True")
        if none:
            f.area = 5                  # no events: requests only
        elif subscriptions:
            f.area = 4                  # every row of trafficdb.subscriptions: Event.subscription names it
        elif ids is not None:
            arr = (ctypes.c_uint64 * len(ids))(*ids)
            self._keep.append(arr)
            f.area, f.ids, f.nids = 0, arr, len(ids)
        elif box is not None:
            f.area = 1
            f.box[:] = [float(v) for v in box]
        elif radius is not None:
            f.area, (f.lon, f.lat, f.radius_m) = 2, [float(v) for v in radius]
        else:
            flat = [float(c) for pt in polygon for c in pt]
            arr = (ctypes.c_double * len(flat))(*flat)
            self._keep.append(arr)
            f.area, f.polygon, f.npoints = 3, arr, len(polygon)
        if condition not in _CONDITIONS:
            raise BadArg(BADARG, "condition %r: expected one of %s" % (condition, sorted(k for k in _CONDITIONS if k)))
        f.condition = _CONDITIONS[condition]
        f.value = float(value) if value is not None else 0.0
        f.events = 1 if enter_exit else 0
        h = _H()
        rc = _lib.trafficdb_subscribe(name.encode(), ctypes.byref(f), group.encode() if group else None,
                                      2 if sticky else 1, ctypes.byref(h))
        if rc < 0:
            raise _ERRORS.get(rc, TrafficDBError)(rc, _lib.trafficdb_subscriber_errmsg(None).decode(errors="replace"))
        self._h = h
        self._timeout_ms = _ms(timeout_ms)
        self._buf = (_Event * 256)()
        # calls in flight: close() from another thread (to stop a worker blocked in take_request, say)
        # must not free the handle and unmap the segment under them; the last one out frees it
        self._lock = threading.Lock()
        self._users = 0
        self._closing = False

    class _Use:
        __slots__ = ("sub",)

        def __init__(self, sub):
            self.sub = sub

        def __enter__(self):
            sub = self.sub
            with sub._lock:
                if not sub._h or sub._closing:
                    raise TrafficDBError(BADARG, "the subscriber is closed")
                sub._users += 1
                return sub._h

        def __exit__(self, *exc):
            sub = self.sub
            with sub._lock:
                sub._users -= 1
                h = sub._h if sub._closing and sub._users == 0 else None
                if h:
                    sub._h = None
            if h:
                _lib.trafficdb_unsubscribe(h)

    def _using(self):
        return Subscriber._Use(self)

    def receive(self, timeout_ms=None, max_events=256):
        """Up to max_events events, waiting up to timeout_ms for the first; [] on timeout."""
        with self._using() as h:
            n = _lib.trafficdb_receive(h, self._buf, min(int(max_events), 256),
                                       self._timeout_ms if timeout_ms is None else _ms(timeout_ms))
            if n < 0:
                self._fail(n, h)
            return [Event(self._buf[i]) for i in range(n)]

    def _fail(self, rc, h):
        raise _ERRORS.get(rc, TrafficDBError)(rc, _lib.trafficdb_subscriber_errmsg(h).decode(errors="replace"))

    def request(self, group, data, timeout_ms=None):
        """Post data (bytes, at most REQUEST_MAX) to the members of group and return the answer (bytes) of the
        member that took it.  A member that dies with it has it posted again for the others.  Raises Timeout
        (the request is withdrawn) or NotFound (the group has no member)."""
        data = bytes(data)
        buf = ctypes.create_string_buffer(REQUEST_MAX)
        with self._using() as h:
            n = _lib.trafficdb_request(h, group.encode(), data, len(data), buf, REQUEST_MAX,
                                       self._timeout_ms if timeout_ms is None else _ms(timeout_ms))
            if n < 0:
                self._fail(n, h)
        return buf.raw[:n]

    def take_request(self, timeout_ms=None):
        """As a member of a group: the next request of the group (a Request: .data, .answer(bytes)),
        or None after timeout_ms without one."""
        r = _Req()
        buf = ctypes.create_string_buffer(REQUEST_MAX)
        with self._using() as h:
            rc = _lib.trafficdb_take_request(h, ctypes.byref(r), buf,
                                             self._timeout_ms if timeout_ms is None else _ms(timeout_ms))
            if rc < 0:
                self._fail(rc, h)
        return Request(self, r, buf.raw[:r.len]) if rc == 1 else None

    def requests(self, timeout_ms=None):
        """Iterate over the group's requests until a wait of timeout_ms brings none."""
        while True:
            r = self.take_request(timeout_ms)
            if r is None:
                return
            yield r

    # the longest wait of one receive() in an iteration: a close() from another thread, or Ctrl-C, is noticed
    # within it (the C call does not wake when the subscriber is closed)
    _ITER_WAIT_MS = 500

    def events(self, timeout_ms=None):
        """Iterate over the events as they come.  timeout_ms=None (what `for e in sub` does): until the
        subscriber is closed, however long traffic stays quiet.  timeout_ms=N: the iteration ends (returns;
        no exception) after N ms without an event, or when the subscriber is closed; 0: the events already
        there, without waiting.  A timeout_ms that is not a number raises TypeError here, not at the first
        event."""
        return self._events(None if timeout_ms is None else _ms(timeout_ms))

    def _events(self, quiet_ms):
        deadline = None if quiet_ms is None else time.monotonic() + quiet_ms / 1000.0
        while True:
            wait = self._ITER_WAIT_MS
            last = False
            if deadline is not None:
                left_ms = (deadline - time.monotonic()) * 1000.0
                if left_ms <= 0:        # one more look, without waiting: what came meanwhile is not lost
                    wait, last = 0, True
                else:
                    wait = min(wait, max(1, int(left_ms)))
            with self._lock:
                if not self._h or self._closing:
                    return
            try:
                events = self.receive(wait)
            except TrafficDBError:
                if not self._h or self._closing:     # closed while it waited
                    return
                raise
            if events:
                if deadline is not None:
                    deadline = time.monotonic() + quiet_ms / 1000.0
                yield from events
            elif last:
                return

    def __iter__(self):
        return self.events()

    def close(self):
        """Unsubscribe.  A call waiting in another thread ends at its timeout, and the handle is freed then."""
        with self._lock:
            if not self._h or self._closing:
                return
            self._closing = True
            h = self._h if self._users == 0 else None
            if h:
                self._h = None
        if h:
            _lib.trafficdb_unsubscribe(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
