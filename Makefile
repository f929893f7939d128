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

EXTENSION = trafficdb
MODULE_big = trafficdb

# Engine code (no PostgreSQL headers), then the PostgreSQL-side components.
ENGINE_SRCS = $(wildcard src/*.c)
PG_SRCS = $(wildcard module/*.c bgworker/*.c fdw/*.c)
OBJS = $(ENGINE_SRCS:.c=.o) $(PG_SRCS:.c=.o)

DATA = extension/trafficdb--0.1.0.sql
PGFILEDESC = "trafficdb - live road traffic in shared memory"

# pg_regress: tests in sql/ + expected/, against a temporary instance that
# preloads the library (scripts/test.sh runs it as an unprivileged user).
REGRESS = create_drop settings
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=./test/regress.conf

WARNINGS = -Wall -Wextra -Werror
# Server headers as system headers: our warnings are errors, theirs are not ours.
PG_CPPFLAGS = -I$(srcdir) -I$(srcdir)/src -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CFLAGS = $(WARNINGS)

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

.DEFAULT_GOAL := all

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else
all:
	@echo "PostgreSQL 15 server headers not found ($(PG_CONFIG))." >&2
	@echo "Run 'make test' or 'make demo' (they install what is missing), or scripts/deps.sh." >&2
	@exit 1
endif

# --- C unit tests of src/ (built without PostgreSQL) -----------------------
UNIT_CFLAGS = -std=gnu11 -O2 -g $(WARNINGS) -Isrc -Isrc/tests -Iinclude
CLIENT_SRCS = $(wildcard src/client/*.c)
UNIT_SRCS = $(ENGINE_SRCS) $(CLIENT_SRCS) $(wildcard src/tests/*.c)

src/tests/unit_tests: $(UNIT_SRCS) $(wildcard src/*.h src/tests/*.h include/*.h) src/tests/tests.list
	$(CC) $(UNIT_CFLAGS) -o $@ $(UNIT_SRCS) -lm -lpthread

# tdbread: an external reader of the shared memory (operators, TAP tests).
tools/tdbread: tools/tdbread.c $(ENGINE_SRCS) $(wildcard src/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ tools/tdbread.c $(ENGINE_SRCS) -lm

all: tools/tdbread

# Publishing benchmarks (bench/README.md): objects alone, and through the daemon.
SEGMENTS ?= 1000000
bench/objbench: bench/objbench.c $(ENGINE_SRCS) $(wildcard src/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ bench/objbench.c $(ENGINE_SRCS) -lm

bench-objects: bench/objbench
	bench/objbench $(SEGMENTS)

bench-daemon: all
	bench/daemon.sh $(SEGMENTS)

bench/accessor: bench/accessor.c lib/libtrafficdb.a include/trafficdb.h
	$(CC) $(UNIT_CFLAGS) -o $@ bench/accessor.c lib/libtrafficdb.a -lm -lpthread

bench-accessor: all bench/accessor
	bench/accessor.sh $(SEGMENTS)

SECONDS ?= 5
bench-locations: all
	bench/locations.sh $(SEGMENTS) $(SECONDS)

# libtrafficdb (include/trafficdb.h): shared and static, only tdb_* of the
# public header exported.  Installed under PREFIX with a pkg-config file.
PREFIX ?= /usr/local
LIB_SRCS = $(ENGINE_SRCS) $(CLIENT_SRCS)
LIB_OBJS = $(patsubst %.c,lib/obj/%.o,$(LIB_SRCS))
LIB_CFLAGS = -std=gnu11 -O2 -g $(WARNINGS) -fPIC -fvisibility=hidden -Isrc -Iinclude

lib/obj/%.o: %.c $(wildcard src/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) -c -o $@ $<

lib/libtrafficdb.so: $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libtrafficdb.so.0 -o $@ $(LIB_OBJS) -lm

lib/libtrafficdb.a: $(LIB_OBJS)
	$(AR) rcs $@ $(LIB_OBJS)

lib/trafficdb.pc: Makefile
	@mkdir -p lib
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: trafficdb\nDescription: read trafficdb road traffic from shared memory\nVersion: 0.1.0\nLibs: -L$${libdir} -ltrafficdb\nLibs.private: -lm\nCflags: -I$${includedir}\n' '$(PREFIX)' > $@

all: lib/libtrafficdb.so lib/libtrafficdb.a lib/trafficdb.pc

install: install-lib
install-lib: lib/libtrafficdb.so lib/libtrafficdb.a lib/trafficdb.pc tools/tdbread
	install -d '$(DESTDIR)$(PREFIX)/lib/pkgconfig' '$(DESTDIR)$(PREFIX)/include' '$(DESTDIR)$(PREFIX)/bin'
	install -m 644 include/trafficdb.h '$(DESTDIR)$(PREFIX)/include/'
	install -m 755 lib/libtrafficdb.so '$(DESTDIR)$(PREFIX)/lib/libtrafficdb.so.0.1.0'
	ln -sf libtrafficdb.so.0.1.0 '$(DESTDIR)$(PREFIX)/lib/libtrafficdb.so.0'
	ln -sf libtrafficdb.so.0 '$(DESTDIR)$(PREFIX)/lib/libtrafficdb.so'
	install -m 644 lib/libtrafficdb.a '$(DESTDIR)$(PREFIX)/lib/'
	install -m 644 lib/trafficdb.pc '$(DESTDIR)$(PREFIX)/lib/pkgconfig/'
	install -m 755 tools/tdbread '$(DESTDIR)$(PREFIX)/bin/'
	-[ -z '$(DESTDIR)' ] && ldconfig

# TAP tests of t/ (PostgreSQL::Test::Cluster) against the installed server.
tap:
	$(prove_installcheck)

# The protocol and the client's threads under ThreadSanitizer.
src/tests/unit_tests_tsan: $(UNIT_SRCS) $(wildcard src/*.h src/tests/*.h include/*.h) src/tests/tests.list
	$(CC) $(UNIT_CFLAGS) -O1 -fsanitize=thread -o $@ $(UNIT_SRCS) -lm -lpthread

unit-tsan: src/tests/unit_tests_tsan
	TSAN_OPTIONS=halt_on_error=1 src/tests/unit_tests_tsan test_client_threads test_client_wait_is_woken test_shm_readers_see_consistent_versions

.PHONY: unit-tsan unit tap test demo demo-stop demo-clean deps bench-objects bench-daemon bench-locations bench-accessor install-lib
unit: src/tests/unit_tests
	src/tests/unit_tests

deps:
	scripts/deps.sh

test:
	scripts/test.sh

demo:
	scripts/demo.sh $(MAP)

demo-stop:
	scripts/demo.sh --stop

demo-clean:
	scripts/demo.sh --clean

EXTRA_CLEAN = src/tests/unit_tests src/tests/unit_tests_tsan tools/tdbread bench/objbench bench/accessor lib tmp_check results regression.diffs regression.out

# Trail files on S3 (src/trail/): their targets and tests.
include src/trail/trail.mk
