# Thin wrapper over CMake. `make demo` and `make test` are the two commands a
# newcomer needs; both install missing Debian packages first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
MAKEFLAGS  += --no-print-directory
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CONFORMANCE_DIR ?= ../shared/conformance

.PHONY: all deps build build-asan test test-release test-asan demo conformance bench bench-deps fixtures clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBF_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# Every test twice: the release build, then under ASan + UBSan.
test: test-release test-asan

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)/bitflip

conformance: build
	$(BUILD)/tests/bitflip-conformance $(CONFORMANCE_DIR)

bench-deps:
	@scripts/install-deps.sh --bench

bench: build bench-deps
	/usr/bin/python3 bench/run.py --bitflip $(BUILD)/bitflip

fixtures: bench-deps
	/usr/bin/python3 tests/fixtures/make_fixtures.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
