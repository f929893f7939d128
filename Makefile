# trafficdb: a PostgreSQL 15 extension built with PGXS.
#
#   make demo    install what is missing, build, start a local cluster with
#                real roads and run example queries (scripts/demo.sh)
#   make test    install what is missing, build with warnings as errors and
#                run every test (scripts/test.sh)
#   make         build the module (needs the PostgreSQL 15 server headers)
#   make unit    build and run the C unit tests of src/
#   make installcheck / make tap
#                pg_regress suite / TAP tests against the installed build
#                (as a user that may run PostgreSQL, i.e. not root)
#   make security-test
#                the hostile suite alone (test/security.sh): roles, OS users
#                and a web client attack; nothing may crash or escalate
#   make crash-test
#                kill -9 loop against the installed build (CRASH_CYCLES,
#                default 100; about 2 minutes; not part of make test)

EXTENSION = trafficdb
MODULE_big = trafficdb

# Engine code (no PostgreSQL headers), then the PostgreSQL-side components.
ENGINE_SRCS = $(wildcard src/*.c)
STREAM_SRCS = $(wildcard src/stream/*.c)
TRAIL_LIB_SRCS = $(wildcard src/trail/*.c)
GENLOG_LIB_SRCS = $(wildcard src/genlog/*.c)
# the writers' ring (src/ring/): the daemon drains it, libtrafficdb's writers fill it
# src/ring/: the writers' ring; src/subring/: the subscribers' event rings (docs/subscriptions-rings.md)
RING_SRCS = $(wildcard src/ring/*.c) $(wildcard src/subring/*.c)
# src/tile/: vector tiles encoded from the shared-memory objects (docs/tiles.md)
TILE_SRCS = $(wildcard src/tile/*.c)
PG_SRCS = $(wildcard module/*.c bgworker/*.c fdw/*.c)
OBJS = $(ENGINE_SRCS:.c=.o) $(TILE_SRCS:.c=.o) $(STREAM_SRCS:.c=.o) $(TRAIL_LIB_SRCS:.c=.o) $(GENLOG_LIB_SRCS:.c=.o) $(RING_SRCS:.c=.o) $(PG_SRCS:.c=.o)
# trail files reach HTTP and S3 through libcurl (src/trail/http.c only) and
# hash with OpenSSL's libcrypto (src/trail/sha256.c only)
SHLIB_LINK = $(shell curl-config --libs 2>/dev/null || echo -lcurl) -lcrypto

DATA = extension/trafficdb--0.1.0.sql
PGFILEDESC = "trafficdb - live road traffic in shared memory"

# pg_regress: tests in sql/ + expected/, against a temporary instance that
# preloads the library (scripts/test.sh runs it as an unprivileged user).
# --encoding=UTF8: contrib_regression is created UTF8 whatever the
# environment's locale (the extension refuses other encodings; with no LANG
# the temporary instance's initdb would make it SQL_ASCII).
REGRESS = create_drop settings wrong_args
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=./test/regress.conf --encoding=UTF8
# The temporary instance's initdb takes its locale from the environment (not
# LC_ALL, which pg_regress unsets): C.UTF-8 (in every glibc), so that the
# whole instance is UTF8 too.
installcheck: export LANG = C.UTF-8
installcheck: export LC_CTYPE = C.UTF-8
installcheck: export LC_COLLATE = C.UTF-8

WARNINGS = -Wall -Wextra -Werror
# Server headers as system headers: our warnings are errors, theirs are not ours.
PG_CPPFLAGS = -I$(srcdir) -I$(srcdir)/src -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CFLAGS = $(WARNINGS)
# The tile encoder rounds as PostGIS does only without fused multiply-adds
# (src/tile/mvt.h); the unit tests build everything that way.
$(TILE_SRCS:.c=.o): override CFLAGS += -ffp-contract=off
$(TILE_SRCS:.c=.bc): override BITCODE_CFLAGS += -ffp-contract=off

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

# The server module is linked as lib/trafficdb-server.so and installed as
# $(pkglibdir)/trafficdb.so, the name shared_preload_libraries loads.  Not
# as ./trafficdb.so: Python imports a trafficdb.so of the working directory
# (sys.path[0]) as the module "trafficdb", so `import trafficdb` in the
# repository root loaded the server module instead of the Python package
# ("undefined symbol: XactLastCommitEnd").  No file the build makes is one
# Python would import as trafficdb, whatever the directory.  (shlib is
# PGXS's name of the file: set before PGXS's Makefile.shlib, which makes the
# rules from it; the install and uninstall rules name the installed file.)
override shlib = lib/trafficdb-server$(DLSUFFIX)
install-lib-shared uninstall-lib: override shlib = trafficdb$(DLSUFFIX)

.DEFAULT_GOAL := all

# PGXS tracks no header dependencies unless the server was configured with
# --enable-depend: rebuild every object when a header of ours changes.
$(OBJS): $(wildcard src/*.h src/tile/*.h src/stream/*.h src/trail/*.h src/genlog/*.h src/ring/*.h src/subring/*.h module/*.h bgworker/*.h fdw/*.h)

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
$(shlib): | lib-dir
# a ./trafficdb.so an older build left (see shlib above) would still shadow
# the Python package in the repository root
all-shared-lib:
	@rm -f trafficdb$(DLSUFFIX)
else
all:
	@echo "PostgreSQL 15 server headers not found ($(PG_CONFIG))." >&2
	@echo "Run 'make test' or 'make demo' (they install what is missing), or scripts/deps.sh." >&2
	@exit 1
endif

# --- C unit tests of src/ (built without PostgreSQL) -----------------------
UNIT_CFLAGS = -std=gnu11 -O2 -g -ffp-contract=off $(WARNINGS) -Isrc -Isrc/tests -Iinclude -Itools
CLIENT_SRCS = $(wildcard src/client/*.c)
# tools/csvtime.c: the CLIs' shared time rule (reading integers with tools/csv_fields.c), unit-tested here too
# src/genlog/: the generation log's record codec (bgworker/genlog_store.c writes and replays it), on the trail varints
GENLOG_SRCS = $(wildcard src/genlog/*.c) src/trail/codec.c
UNIT_SRCS = $(ENGINE_SRCS) $(TILE_SRCS) $(CLIENT_SRCS) $(RING_SRCS) $(STREAM_SRCS) $(GENLOG_SRCS) tools/csvtime.c tools/csv_fields.c $(wildcard src/tests/*.c)
UNIT_HDRS = $(wildcard src/*.h src/tile/*.h src/stream/*.h src/ring/*.h src/subring/*.h src/client/*.h src/tests/*.h include/*.h)

src/tests/unit_tests: $(UNIT_SRCS) $(UNIT_HDRS) tools/csvtime.h tools/csv_fields.h src/tests/tests.list
	$(CC) $(UNIT_CFLAGS) -o $@ $(UNIT_SRCS) -lm -lpthread

# tdbread: an external reader of the shared memory (operators, TAP tests).
tools/tdbread: tools/tdbread.c $(ENGINE_SRCS) $(wildcard src/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ tools/tdbread.c $(ENGINE_SRCS) -lm

all: tools/tdbread

# tdbsub: a subscriber printing live traffic events (tests, operators)
tools/tdbsub: tools/tdbsub.c $(ENGINE_SRCS) $(CLIENT_SRCS) $(RING_SRCS) $(wildcard src/*.h src/subring/*.h src/client/*.h include/*.h) tools/slice.h
	$(CC) $(UNIT_CFLAGS) -Iinclude -o $@ tools/tdbsub.c $(ENGINE_SRCS) $(CLIENT_SRCS) $(RING_SRCS) -lm -lpthread

all: tools/tdbsub

# trafficdb-stream: the stream-file CLI (src/stream/, no PostgreSQL).
tools/trafficdb-stream: tools/trafficdb-stream.c tools/csvtime.c tools/csvtime.h tools/csv_fields.c tools/csv_fields.h $(STREAM_SRCS) src/checksum.c $(wildcard src/stream/*.h src/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ tools/trafficdb-stream.c tools/csvtime.c tools/csv_fields.c $(STREAM_SRCS) src/checksum.c -lm

all: tools/trafficdb-stream

# Publishing benchmarks (bench/README.md): objects alone, and through the daemon.
SEGMENTS ?= 1000000
bench/objbench: bench/objbench.c $(ENGINE_SRCS) $(wildcard src/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ bench/objbench.c $(ENGINE_SRCS) -lm

bench-objects: bench/objbench
	bench/objbench $(SEGMENTS)

# the core at scale (bench/objects.sh): publication by changes, updates, GETs, bytes per location
bench-scale: bench/objbench
	bench/objects.sh

bench-planet: bench/objbench
	bench/objects.sh "1000000 10000000 40000000 100000000"

bench-daemon: all
	bench/daemon.sh $(SEGMENTS)

# An idle daemon's wake-ups and CPU, and trafficdb_put's latency, beside the build before it slept.
IDLE_SEGMENTS ?= 100000
bench-idle: all
	bench/idle.sh $(IDLE_SEGMENTS)

bench/streamgen: bench/streamgen.c $(STREAM_SRCS) src/checksum.c $(wildcard src/stream/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ bench/streamgen.c $(STREAM_SRCS) src/checksum.c

bench-streams: all
	bench/streams.sh

# Trail files on S3 (MinIO on 127.0.0.1) vs downloading the whole object.
bench-trails:
	bench/trails.sh

# trafficdb-trail write in bounded memory against all in memory, same run (bench/trail_write.sh)
bench-trail-write:
	bench/trail_write.sh

# Trail files through the trail FDW vs DuckDB on sorted Parquet, same MinIO.
bench-parquet:
	bench/trails_parquet.sh

bench/accessor: bench/accessor.c lib/libtrafficdb.a include/trafficdb.h tools/slice.h
	$(CC) $(UNIT_CFLAGS) -o $@ bench/accessor.c lib/libtrafficdb.a -lm -lpthread

# trafficdb_put ASYNC from one producer with a draining thread (no server; not in make test).
# trafficdb_put through a running server's daemon (bench/put.sh), public API only
bench/put_server: bench/put_server.c lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(UNIT_CFLAGS) -o $@ bench/put_server.c lib/libtrafficdb.a -lm -lpthread

# TippyDB's geo-placement experiment (bench/tippy.sh): a libpq client in region A
bench/tippy_client: bench/tippy_client.c
	$(CC) -std=gnu11 -O2 -g $(WARNINGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ bench/tippy_client.c -lpq -lpthread

bench-tippy:
	bench/tippy.sh

# Subscription baselines (bench/sub_baselines.sh): Redis pub-sub and LISTEN/NOTIFY
bench/sub_baselines: bench/sub_baselines.c bench/sub_proc.c bench/sub_proc.h bench/sub_workload.h
	$(CC) -std=gnu11 -O2 -g $(WARNINGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ bench/sub_baselines.c bench/sub_proc.c -lpq -lm

# trafficdb's side fed by trafficdb_put (bench/sub_baselines.sh, side put): public API only
bench/sub_put: bench/sub_put.c bench/sub_proc.c bench/sub_proc.h bench/sub_workload.h lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(UNIT_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ bench/sub_put.c bench/sub_proc.c lib/libtrafficdb.a -lpq -lm -lpthread

bench-sub-baselines: bench/sub_baselines
	bench/sub_baselines.sh

bench/put: bench/put.c $(ENGINE_SRCS) $(CLIENT_SRCS) $(RING_SRCS) $(wildcard src/*.h src/ring/*.h src/client/*.h include/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ bench/put.c $(ENGINE_SRCS) $(CLIENT_SRCS) $(RING_SRCS) -lm -lpthread

bench-accessor: all bench/accessor
	bench/accessor.sh $(SEGMENTS)

SECONDS_PER_TEST ?= 3
bench-locations: all
	bench/pgbench.sh $(SEGMENTS) $(SECONDS_PER_TEST) 2

# Everything, beside its baselines, into bench/results/<date>-<host>.{md,csv,png}.
SCALE ?= 1M
CLIENTS ?= 1 2 4 8
bench:
	SCALE=$(SCALE) SECONDS_PER_TEST=$(SECONDS_PER_TEST) CLIENTS="$(CLIENTS)" bench/run.sh

# libtrafficdb (include/trafficdb.h): shared and static, only the
# trafficdb_* functions of the public header exported.
#
# Its version is the header's TRAFFICDB_VERSION_STRING, and only there: the
# shared library's file name, its soname (the major), trafficdb.pc and the
# Python package follow it (python/trafficdb/__init__.py's __version__ is
# checked against it at install).  TDB_VERSION, not VERSION: PGXS has that.
# Read when a recipe needs it: make tap and installcheck run this Makefile in
# a copy without include/.
TDB_VERSION = $(shell sed -n 's/^.define TRAFFICDB_VERSION_STRING[[:space:]]*"\([0-9.]*\)"$$/\1/p' include/trafficdb.h 2>/dev/null)
TDB_SOVERSION = $(firstword $(subst ., ,$(TDB_VERSION)))
check_version = @[ -n '$(TDB_VERSION)' ] || { echo "include/trafficdb.h: no TRAFFICDB_VERSION_STRING" >&2; exit 1; }

LIB_SRCS = $(ENGINE_SRCS) $(CLIENT_SRCS) $(RING_SRCS)
LIB_OBJS = $(patsubst %.c,lib/obj/%.o,$(LIB_SRCS))
LIB_CFLAGS = -std=gnu11 -O2 -g $(WARNINGS) -fPIC -fvisibility=hidden -Isrc -Iinclude

lib/obj/%.o: %.c $(wildcard src/*.h src/ring/*.h src/client/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

lib/libtrafficdb.so: $(LIB_OBJS)
	$(check_version)
	$(CC) -shared -Wl,-soname,libtrafficdb.so.$(TDB_SOVERSION) -o $@ $(LIB_OBJS) -lm

# The static library holds one relocatable object of all of LIB_OBJS whose
# hidden (non-public) names are made local, as the shared library hides
# them: a program linking it statically sees only trafficdb_*, so its own
# tdb_* functions cannot clash with ours, nor ours be replaced by them.
# (Makefile: an archive made by an older recipe is remade.)
OBJCOPY ?= objcopy
lib/libtrafficdb.a: $(LIB_OBJS) Makefile
	$(LD) -r -o lib/obj/libtrafficdb.o $(LIB_OBJS)
	$(OBJCOPY) --localize-hidden lib/obj/libtrafficdb.o
	rm -f $@
	$(AR) rcs $@ lib/obj/libtrafficdb.o

all: lib/libtrafficdb.so lib/libtrafficdb.a examples/live_traffic

# A C reader of live traffic through the public API only (make demo runs it).
examples/live_traffic: examples/live_traffic.c lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(UNIT_CFLAGS) -o $@ examples/live_traffic.c lib/libtrafficdb.a -lm

# make install-client [PREFIX=...] [DESTDIR=...]: the client side alone -
# header, both libraries, trafficdb.pc, the CLI tools and the Python
# bindings - under PREFIX (default /usr/local).  It needs no PostgreSQL and
# no root when PREFIX is writable (e.g. PREFIX=$HOME/.local).  make install
# installs it too, beside the extension.  (Not "install-lib": PGXS has one.)
# trafficdb.pc is written at install, so it names that install's PREFIX.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
# trafficdb.pc says ${prefix}/lib rather than the path when it is under PREFIX
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))

install: install-client
install-client: lib/libtrafficdb.so lib/libtrafficdb.a tools/tdbread tools/trafficdb-stream tools/trafficdb-trail
	$(check_version)
	install -d '$(DESTDIR)$(LIBDIR)/pkgconfig' '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(BINDIR)'
	install -m 644 include/trafficdb.h '$(DESTDIR)$(INCLUDEDIR)/'
	install -m 755 lib/libtrafficdb.so '$(DESTDIR)$(LIBDIR)/libtrafficdb.so.$(TDB_VERSION)'
	ln -sf libtrafficdb.so.$(TDB_VERSION) '$(DESTDIR)$(LIBDIR)/libtrafficdb.so.$(TDB_SOVERSION)'
	ln -sf libtrafficdb.so.$(TDB_SOVERSION) '$(DESTDIR)$(LIBDIR)/libtrafficdb.so'
	install -m 644 lib/libtrafficdb.a '$(DESTDIR)$(LIBDIR)/'
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(call pc_dir,$(LIBDIR))' 'includedir=$(call pc_dir,$(INCLUDEDIR))' '' \
		'Name: trafficdb' 'Description: read trafficdb road traffic from shared memory' 'Version: $(TDB_VERSION)' \
		'Libs: -L$${libdir} -ltrafficdb' 'Libs.private: -lm' 'Cflags: -I$${includedir}' \
		> '$(DESTDIR)$(LIBDIR)/pkgconfig/trafficdb.pc'
	install -m 755 tools/tdbread tools/trafficdb-stream tools/trafficdb-trail '$(DESTDIR)$(BINDIR)/'
	@if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# The Python bindings (python/, pure Python) go with the library, built by
# pip offline (no index; the build backend is python/build_backend/, the
# standard library only: no setuptools or wheel needed) from a copy that
# records LIBDIR, so the package loads the library
# installed with it even when LIBDIR is not in the dynamic linker's path.
# PYTHONDIR, where they go: the interpreter's own directory under PREFIX when
# it has one (/usr/local/lib/python3.X/dist-packages on Debian, the user site
# for PREFIX=$HOME/.local, a venv), else PREFIX/lib/python3.X/site-packages,
# to add to PYTHONPATH.  pip --target writes only there, so Debian's
# EXTERNALLY-MANAGED guard (PEP 668) is not involved.  PYTHON= skips them.
PYTHON ?= python3
PYTHONDIR ?= $(shell $(PYTHON) -c 'import sys, sysconfig; p = sys.argv[1].rstrip("/") + "/lib/python"; \
	print(next((d for d in sys.path if d.startswith(p) and d.endswith("-packages")), \
	sysconfig.get_path("purelib", "posix_prefix", vars={"base": sys.argv[1], "platbase": sys.argv[1]})))' '$(PREFIX)')

install-client: install-python
install-python:
ifeq ($(PYTHON),)
	@echo "PYTHON is empty: the Python bindings are not installed"
else
	@v=$$(sed -n 's/^__version__ = "\(.*\)"$$/\1/p' python/trafficdb/__init__.py); [ "$$v" = '$(TDB_VERSION)' ] || \
		{ echo "python/trafficdb/__init__.py has version '$$v', include/trafficdb.h $(TDB_VERSION)" >&2; exit 1; }
	@$(PYTHON) -m pip --version >/dev/null 2>&1 || \
		{ echo "$(PYTHON) has no pip: install python3-pip (scripts/deps.sh), or make PYTHON= to skip the Python bindings" >&2; exit 1; }
	@[ -n '$(PYTHONDIR)' ] || { echo "$(PYTHON) did not tell where to install the Python bindings: set PYTHONDIR" >&2; exit 1; }
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	cp -R python/pyproject.toml python/build_backend python/trafficdb "$$tmp/" && rm -rf "$$tmp"/*/__pycache__ && \
	$(PYTHON) -c 'import sys; print("# written by make install-client: where libtrafficdb is\nLIBDIR = " + repr(sys.argv[1]))' \
		'$(LIBDIR)' > "$$tmp/trafficdb/_install.py" && \
	$(PYTHON) -m pip install --quiet --no-index --no-build-isolation --no-deps --no-cache-dir --disable-pip-version-check \
		--root-user-action=ignore --upgrade --target '$(DESTDIR)$(PYTHONDIR)' "$$tmp"
	@$(PYTHON) -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' '$(PYTHONDIR)' || [ -n '$(DESTDIR)' ] || \
		echo "note: $(PYTHON) does not search $(PYTHONDIR): add it to PYTHONPATH to import trafficdb"
endif

.PHONY: install-client install-python

lib-dir:
	@mkdir -p lib
.PHONY: lib-dir

# The live map (web/) in headless chromium against the installed build: a
# cluster, the tipg app, Martin (its tiles) and MinIO of its own (test/livemap.sh;
# part of make test).
test-livemap:
	test/livemap.sh

# The live map's app and Martin against hostile unauthenticated GETs (deep
# filters, tiles and items off the grid, junk tile options, kill -9 of the
# app): a cluster, the app and Martin of its own, no browser
# (test/web_hostile.sh; part of make test); the feeder's SUMO reachable by no
# one else and dying with it (test/sumo_feeder_hostile.sh).
test-web-hostile:
	test/web_hostile.sh
	test/sumo_feeder_hostile.sh

# The live map's benchmark: tiles/s through tipg from trafficdb.tile_features
# vs a heap table with GiST, and publish() to repainted tile (bench/livemap.sh).
bench-livemap:
	bench/livemap.sh

# Vector tiles: Martin + trafficdb.tile_mvt vs Martin + ST_AsMVT over a heap
# with GiST vs tipg, SQL alone, the 304 check, publish to repainted tile
# (bench/tiles.sh; QUICK=1 for a smoke run of a few minutes).
bench-tiles:
	bench/tiles.sh $(if $(QUICK),--quick)

# trafficdb.tile_mvt against PostGIS's ST_AsMVT, byte for byte, on Helsinki,
# Delaware, a synthetic 1 M map and the edge-case maps: a cluster of its own
# (test/tiles_diff.sh; part of make test).  test-tiles-full adds zooms 0-10 and
# more tiles on the 1 M map.
test-tiles:
	test/tiles_diff.sh

test-tiles-full:
	test/tiles_diff.sh --full

.PHONY: test-livemap test-web-hostile bench-livemap bench-tiles test-tiles test-tiles-full

# TAP tests of t/ (PostgreSQL::Test::Cluster) against the installed server.
# prove -j starts them in this order: the files of a minute or more first
# (mostly waiting: failovers, stalled GETs, bounded fault loops), so that
# none of them starts late and runs alone at the end.
TAP_FIRST = t/032_failover.pl t/094_review_evening.pl t/029_write_path_review.pl t/088_review_today.pl t/102_trail_v6_hostile.pl
PROVE_TESTS ?= $(TAP_FIRST) $(filter-out $(TAP_FIRST),$(sort $(wildcard t/*.pl)))
tap:
	$(prove_installcheck)

# The protocol and the client's threads under ThreadSanitizer.
src/tests/unit_tests_tsan: $(UNIT_SRCS) $(UNIT_HDRS) tools/csvtime.h tools/csv_fields.h src/tests/tests.list
	$(CC) $(UNIT_CFLAGS) -O1 -fsanitize=thread -o $@ $(UNIT_SRCS) -lm -lpthread

# Stream files' damage tests under AddressSanitizer and UBSan: bad files
# must give an error, never a bad read.
src/tests/unit_tests_asan: $(UNIT_SRCS) $(UNIT_HDRS) tools/csvtime.h tools/csv_fields.h src/tests/tests.list
	$(CC) $(UNIT_CFLAGS) -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ $(UNIT_SRCS) -lm -lpthread

# the writers' ring: every test under ASan; those with threads under TSan too
RING_TESTS = $(shell sed -n 's/^X(\(test_ring_[a-z0-9_]*\))$$/\1/p' src/tests/tests.list)
RING_THREAD_TESTS = test_ring_protocol_threads test_ring_bell_no_lost_wakeup test_ring_busy_when_full test_ring_spsc_threads test_ring_producers_on_lanes \
	test_ring_sync_put_returns_after_commit test_ring_adoption_after_restart test_ring_waiters_see_orderly_stop
# the subscribers' rings: the same (their thread tests share the producer's mapping, as above)
SUBRING_TESTS = $(shell sed -n 's/^X(\(test_sub\(ring\|req\)_[a-z0-9_]*\))$$/\1/p' src/tests/tests.list)
SUBRING_THREAD_TESTS = test_subring_threads_spsc test_subring_threads_spsc_deferred test_subring_threads_overrun test_subring_threads_group_handover \
	test_subring_wake_latency test_subring_stop_wakes_receiver test_subreq_threads_load_sharing test_subreq_member_leaves_with_request \
	test_subreq_dead_member_bell_no_lost_wakeup

unit-asan: src/tests/unit_tests_asan
	src/tests/unit_tests_asan test_genlog_roundtrip test_genlog_hostile_bytes test_genlog_encode_from_slice_edges test_genlog_encode_from_refusal_one_slice test_csvtime_rule test_stream_rdl_errors test_stream_bit_flips test_stream_codecs test_stream_power_loss_at_every_write test_stream_refresh test_stream_window_reads_bounded \
		test_submatch_equals_brute_force test_submatch_index_bounded test_submatch_refuses_bad_filters test_subfilter_roundtrip test_subfilter_decode_hostile \
		test_busguard_truncated_mapping_reads_zeros test_busguard_other_faults_still_kill test_mvt_large_tile_without_features_is_empty $(RING_TESTS) $(SUBRING_TESTS)

# libFuzzer over stream file images (clang from Debian; scripts/deps.sh installs it).
FUZZ_SECONDS ?= 20
src/tests/fuzz/fuzz_stream_open: src/tests/fuzz/fuzz_stream_open.c $(STREAM_SRCS) src/checksum.c $(wildcard src/stream/*.h)
	clang -g -O1 -Isrc -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ \
		src/tests/fuzz/fuzz_stream_open.c $(STREAM_SRCS) src/checksum.c

# libFuzzer over generation-log records (src/genlog/).
src/tests/fuzz/fuzz_genlog: src/tests/fuzz/fuzz_genlog.c $(GENLOG_SRCS) $(wildcard src/genlog/*.h)
	clang -g -O1 -Isrc -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ \
		src/tests/fuzz/fuzz_genlog.c $(GENLOG_SRCS) -lm

fuzz-genlog: src/tests/fuzz/fuzz_genlog
	@mkdir -p src/tests/fuzz/corpus-genlog
	src/tests/fuzz/fuzz_genlog -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 \
		src/tests/fuzz/corpus-genlog >src/tests/fuzz/last-genlog.log 2>&1 || { tail -n 40 src/tests/fuzz/last-genlog.log; exit 1; }
	@grep -E '^Done|number_of_executed_units' src/tests/fuzz/last-genlog.log

# The tile encoder (src/tile/) under ASan and UBSan: random, degenerate maps
# and random tiles z0-30 (src/tests/fuzz/mvt_random.c); MVT_SEED repeats a run.
MVT_SEED ?= $(shell date +%s)
src/tests/fuzz/mvt_random: src/tests/fuzz/mvt_random.c $(TILE_SRCS) src/object.c src/object_build.c src/rtree.c src/geo.c src/knn.c src/checksum.c $(wildcard src/tile/*.h)
	$(CC) -std=gnu11 -O1 -g -ffp-contract=off $(WARNINGS) -Isrc -Iinclude -fsanitize=address,undefined -fno-sanitize-recover=all -o $@ \
		src/tests/fuzz/mvt_random.c $(TILE_SRCS) src/object.c src/object_build.c src/rtree.c src/geo.c src/knn.c src/checksum.c -lm

fuzz-mvt: src/tests/fuzz/mvt_random
	src/tests/fuzz/mvt_random $(FUZZ_SECONDS) $(MVT_SEED)

fuzz-stream: src/tests/fuzz/fuzz_stream_open
	@mkdir -p src/tests/fuzz/corpus
	src/tests/fuzz/fuzz_stream_open -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -print_final_stats=1 \
		src/tests/fuzz/corpus >src/tests/fuzz/last.log 2>&1 || { tail -n 40 src/tests/fuzz/last.log; exit 1; }
	@grep -E '^Done|number_of_executed_units' src/tests/fuzz/last.log

# Random SQL (sqlsmith) against a cluster with the extension, a map, a stream
# and a trail table; fails on any server crash.  make test runs 60 s of it.
FUZZ_SQL_SECONDS ?= 1200
fuzz-sql: all tools/trafficdb-trail
	test/sqlsmith.sh $(FUZZ_SQL_SECONDS)

# The kill -9 loop (test/crash_loop.pl): a libpq feed writer, an external
# reader and writers putting through the ring, the last two through the
# public libtrafficdb API only (no -Isrc: they must not see the engine's
# internals).
CRASH_CFLAGS = -std=gnu11 -O2 -g $(WARNINGS) -Iinclude
test/crash_writer: test/crash_writer.c test/crash_batch.h
	$(CC) $(CRASH_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ test/crash_writer.c -lpq

test/crash_reader: test/crash_reader.c test/crash_batch.h lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(CRASH_CFLAGS) -o $@ test/crash_reader.c lib/libtrafficdb.a -lm

# writes through the writers' ring (trafficdb_put), public API only
test/crash_putter: test/crash_putter.c lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(CRASH_CFLAGS) -o $@ test/crash_putter.c lib/libtrafficdb.a -lm

CRASH_CYCLES ?= 100
crash-test: all test/crash_writer test/crash_reader test/crash_putter
	CRASH_CYCLES=$(CRASH_CYCLES) test/crash_loop.sh

unit-tsan: src/tests/unit_tests_tsan
	TSAN_OPTIONS=halt_on_error=1 src/tests/unit_tests_tsan test_client_threads test_client_wait_is_woken test_shm_readers_see_consistent_versions test_shm_pin_timeout_revokes test_shm_liveness_by_lock \
		$(RING_THREAD_TESTS) $(SUBRING_THREAD_TESTS)

.PHONY: fleet fleet-stop crash-test fuzz-sql fuzz-genlog fuzz-mvt bench bench-idle bench-tippy bench-streams bench-trails bench-parquet bench-trail-write fuzz-stream unit-asan unit-tsan unit tap test security-test demo demo-stop demo-clean deps bench-objects bench-scale bench-planet bench-daemon bench-locations bench-accessor bench-sub-baselines
unit: src/tests/unit_tests
	src/tests/unit_tests

deps:
	scripts/deps.sh

test:
	scripts/test.sh

# The hostile suite alone (test/security.sh, docs/security.md): SQL roles,
# OS users (as root) and a web client attack the server; nothing may crash,
# escalate, stall publication or read another user's data.
security-test:
	scripts/deps.sh
	test/security.sh

demo:
	scripts/demo.sh $(MAP)

demo-stop:
	scripts/demo.sh --stop

demo-clean:
	scripts/demo.sh --clean

# three regions of Helsinki under pg_auto_failover, the global table and a failover (docs/fleet.md)
fleet:
	scripts/fleet.sh

fleet-stop:
	scripts/fleet.sh --stop

# the documentation site: docs/ by MkDocs + Material (pinned, in a venv under
# ~/.cache/trafficdb) into site/, --strict: a broken link or anchor fails it
.PHONY: docs
docs:
	scripts/docs.sh

EXTRA_CLEAN = test/crash_writer test/crash_reader test/crash_putter src/tests/fuzz/fuzz_stream_open src/tests/fuzz/corpus src/tests/fuzz/last.log bench/streamgen src/tests/unit_tests_asan tools/trafficdb-stream examples/live_traffic src/tests/unit_tests src/tests/unit_tests_tsan tools/tdbread tools/tdbsub bench/objbench bench/accessor bench/put bench/tippy_client bench/sub_baselines bench/sub_put lib tmp_check results regression.diffs regression.out

# Trail files on S3 (src/trail/): their targets and tests.
-include src/trail/trail.mk
