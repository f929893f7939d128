# src/trail/trail.mk: trail files (format, pager, caches), their CLI and tests.
# Included by the top-level Makefile; no PostgreSQL headers anywhere here.
#
#   make unit-trail              unit tests that need no server
#   make test-trail              all trail tests, MinIO and the fault proxy
#                                included (src/trail/tests/run.sh)
#   make unit-trail-asan         the unit tests under ASan + UBSan
#   make unit-trail-tsan         threads sharing a decoded footer under TSan
#   make fuzz-trail              libFuzzer over the footer and page decoders
#   make tools/trafficdb-trail   the CLI

TRAIL_CFLAGS = -std=gnu11 -O2 -g -Wall -Wextra -Werror -Isrc -Isrc/trail -Isrc/tests
TRAIL_LIBS = $(shell curl-config --libs 2>/dev/null || pkg-config --libs libcurl) -lcrypto -lm -lpthread
TRAIL_SRCS = $(wildcard src/trail/*.c) src/checksum.c
TRAIL_HDRS = $(wildcard src/trail/*.h) src/checksum.h
# the runner is src/tests/main.c, given this suite's list
TRAIL_TEST_SRCS = $(filter-out src/trail/tests/fuzz_decode.c,$(wildcard src/trail/tests/*.c)) src/tests/main.c
TRAIL_TEST_LIST = -DUNIT_TESTS_LIST='"../trail/tests/tests.list"'
TRAIL_TEST_DEPS = $(TRAIL_SRCS) $(TRAIL_HDRS) $(TRAIL_TEST_SRCS) $(wildcard src/trail/tests/*.h) src/tests/unit.h src/trail/tests/tests.list

# the harness of src/tests (main.c, unit.h) with our own tests.list
src/trail/tests/trail_tests: $(TRAIL_TEST_DEPS)
	$(CC) $(TRAIL_CFLAGS) $(TRAIL_TEST_LIST) -Isrc/trail/tests -o $@ $(TRAIL_SRCS) $(TRAIL_TEST_SRCS) $(TRAIL_LIBS)

src/trail/tests/trail_tests_asan: $(TRAIL_TEST_DEPS)
	$(CC) $(TRAIL_CFLAGS) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		$(TRAIL_TEST_LIST) -Isrc/trail/tests -o $@ $(TRAIL_SRCS) $(TRAIL_TEST_SRCS) $(TRAIL_LIBS)

# readers in threads sharing a version-3 footer, under ThreadSanitizer
src/trail/tests/trail_tests_tsan: $(TRAIL_TEST_DEPS)
	$(CC) $(TRAIL_CFLAGS) -O1 -fsanitize=thread $(TRAIL_TEST_LIST) -Isrc/trail/tests -o $@ $(TRAIL_SRCS) $(TRAIL_TEST_SRCS) $(TRAIL_LIBS)

tools/trafficdb-trail: tools/trafficdb-trail.c tools/trail_write.c tools/trail_write.h tools/csvtime.c tools/csvtime.h tools/csv_fields.c tools/csv_fields.h $(TRAIL_SRCS) $(TRAIL_HDRS)
	$(CC) $(TRAIL_CFLAGS) -Itools -o $@ tools/trafficdb-trail.c tools/trail_write.c tools/csvtime.c tools/csv_fields.c $(TRAIL_SRCS) $(TRAIL_LIBS)

bench/trailbench: bench/trailbench.c $(TRAIL_SRCS) $(TRAIL_HDRS)
	$(CC) $(TRAIL_CFLAGS) -o $@ bench/trailbench.c $(TRAIL_SRCS) $(TRAIL_LIBS)

# The fuzz target needs no network code: the decoders and the codec only.
TRAIL_FUZZ_SRCS = src/trail/format.c src/trail/fields.c src/trail/format2.c src/trail/footer3.c src/trail/footer3_load.c src/trail/page2.c src/trail/colenc.c src/trail/codec.c src/trail/spill.c src/trail/writer.c src/trail/writer2.c src/trail/writer2_spacetime.c src/trail/writer2_finish.c src/trail/colenc_patched.c src/checksum.c src/trail/tests/fuzz_decode.c
src/trail/tests/fuzz_decode: $(TRAIL_FUZZ_SRCS) $(TRAIL_HDRS) src/trail/tests/trail_memfile.h
	clang -std=gnu11 -O1 -g -Wall -Wextra -Werror -Isrc -Isrc/trail -DTRAIL_FUZZ_MAIN \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -o $@ $(TRAIL_FUZZ_SRCS) -lm

FUZZ_SECONDS ?= 30
fuzz-trail: src/trail/tests/fuzz_decode
	@mkdir -p src/trail/tests/fuzz-corpus
	src/trail/tests/fuzz_decode -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -print_final_stats=1 \
		src/trail/tests/fuzz-corpus >src/trail/tests/fuzz-last.log 2>&1 || { tail -n 40 src/trail/tests/fuzz-last.log; exit 1; }
	@grep -E '^Done|number_of_executed_units' src/trail/tests/fuzz-last.log

unit-trail: src/trail/tests/trail_tests
	src/trail/tests/trail_tests

unit-trail-asan: src/trail/tests/trail_tests_asan
	ASAN_OPTIONS=detect_leaks=1 src/trail/tests/trail_tests_asan

unit-trail-tsan: src/trail/tests/trail_tests_tsan
	src/trail/tests/trail_tests_tsan test_trail_v3_threads_share_a_footer

test-trail: src/trail/tests/trail_tests tools/trafficdb-trail
	src/trail/tests/run.sh

.PHONY: unit-trail unit-trail-asan unit-trail-tsan test-trail fuzz-trail
EXTRA_CLEAN += bench/trailbench src/trail/tests/trail_tests src/trail/tests/trail_tests_asan src/trail/tests/trail_tests_tsan src/trail/tests/fuzz_decode tools/trafficdb-trail
