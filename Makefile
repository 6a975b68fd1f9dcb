# Thin wrapper over CMake. `make demo` and `make test` are the two commands a
# newcomer needs; both install missing Debian packages first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# seconds per target for `make fuzz`; `make fuzz-smoke` (which CI runs after
# `make test`, .ci/run) runs each for FUZZ_SMOKE_SECONDS (libFuzzer runs a target's
# every seed before it looks at the time, so the smoke replays the whole seed corpus
# under the fuzz build, then mutates for what is left of the 5 s: a core busy that
# long a target; tests/README.md, "The seventh round")
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_TARGETS ?= fuzz_onnx fuzz_safetensors fuzz_spec fuzz_errmap fuzz_http fuzz_report fuzz_cli_flip fuzz_evalset fuzz_spec_kv fuzz_bind fuzz_external
MAKEFLAGS  += --no-print-directory
# expanded once, here: as a recursive variable its $(shell) ran in each
# recipe, through that step's shell (STEP_TIMES below)
ifeq ($(origin JOBS),undefined)
JOBS       := $(shell nproc 2>/dev/null || echo 2)
endif
CONFORMANCE_DIR ?= ../shared/conformance

.PHONY: pipe-deps pipe-build pipe-build-asan pipe-build-tsan pipe-release pipe-asan pipe-tsan pipe-done
.PHONY: test-unit test-ui test-references test-deps slurm-deps test-slurm all deps build build-asan build-tsan build-fuzz fuzz fuzz-smoke test test-release test-asan test-tsan demo conformance conformance-full bench bench-deps bench-campaigns bench-daemon bench-mitigations bench-sgemm bench-peak bench-conv bench-det bench-real zoo-check det-exports fixtures study-stutz clean

all: build

deps:
	@scripts/install-deps.sh

# What the tests need beyond a build (PyTorch, chromium, node, clang).
test-deps:
	@scripts/install-deps.sh --test

# The sanitizer builds' debug information (ASan, TSan, the fuzzers'): line tables only (-g1), all that a
# sanitizer's report needs (each frame's function, file and line), without the
# variables' descriptions that gdb needs; compiling with ASan + UBSan it took 29%
# less CPU than CMake's Debug -g, with TSan 18% (tests/README.md, "How long make
# test takes"). SAN_DEBUG=-DCMAKE_C_FLAGS_DEBUG=-g gives gdb its variables back.
SAN_DEBUG ?= -DCMAKE_C_FLAGS_DEBUG=-g1

# CMake's generator for a new build folder (the release, ASan, TSan and fuzz
# builds alike): Ninja where it is installed
# (scripts/install-deps.sh installs ninja-build), else CMake's default (make).
# Why: the make generator starts a `cmake -E` process for each object's and
# each link's message, each target's dependency scan and link script, ~0.07
# CPU-s each; with every compile replaced by a copy of its object, the
# release build took 131 CPU-s under make and 69 under Ninja (tests/README.md,
# "The eighteenth round"). The same compile and link commands
# (compile_commands.json alike), the same binaries. A folder keeps the
# generator it was made with (CMake refuses another): hence only when it has
# no CMakeCache.txt yet. Expanded once, here (as JOBS): a $(shell) in a
# recipe would run through STEP_TIMES's step shell.
NINJA := $(shell command -v ninja 2>/dev/null)
CMAKE_GEN = $(if $(NINJA),$(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja))

# Each build and each suite once, as the targets below and `make test` run them.
# MAKEFLAGS=...: cmake's make must not see make test's jobserver (-j3 below), and
# stays as quiet as before (no "Entering directory" lines).
# The release build's bench programs (bitflip-bench-*): built by `make build`,
# left out by make test's release build, where no test runs them (BENCH=OFF on
# pipe-build below; `make bench-*` builds its program through `build`).
BENCH ?= ON
BUILD_RELEASE = cmake -S . -B $(BUILD) $(call CMAKE_GEN,$(BUILD)) -DCMAKE_BUILD_TYPE=Release -DBF_BENCH=$(BENCH) >/dev/null && \
  MAKEFLAGS=--no-print-directory cmake --build $(BUILD) -j $(JOBS)
BUILD_ASAN = cmake -S . -B $(ASAN_BUILD) $(call CMAKE_GEN,$(ASAN_BUILD)) -DCMAKE_BUILD_TYPE=Debug -DBF_SANITIZE=ON $(SAN_DEBUG) >/dev/null && \
  MAKEFLAGS=--no-print-directory cmake --build $(ASAN_BUILD) -j $(JOBS)
BUILD_TSAN = cmake -S . -B $(TSAN_BUILD) $(call CMAKE_GEN,$(TSAN_BUILD)) -DCMAKE_BUILD_TYPE=Debug -DBF_TSAN=ON $(SAN_DEBUG) >/dev/null && \
  MAKEFLAGS=--no-print-directory cmake --build $(TSAN_BUILD) -j $(JOBS) --target threaded-tests
BUILD_FUZZ = CC=clang cmake -S . -B $(FUZZ_BUILD) $(call CMAKE_GEN,$(FUZZ_BUILD)) -DCMAKE_BUILD_TYPE=Debug -DBF_FUZZ=ON $(SAN_DEBUG) >/dev/null && \
  MAKEFLAGS=--no-print-directory cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
RUN_RELEASE = cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(if $(RELEASE_SKIP),-E '$(RELEASE_SKIP)'); s=$$?; cd - >/dev/null; \
  [ -x /usr/bin/chromium ] || echo "test-release: ui_browser SKIPPED: no /usr/bin/chromium, so the web page was not tested in a browser (scripts/install-deps.sh installs it)"; \
  grep -h ': SKIP: ' $(BUILD)/Testing/Temporary/LastTest.log | sort -u; exit $$s
# ASan's quarantine at 16 MB (ASan's own default for low-memory targets; 256 MB
# here): a freed block waits there before its memory is used again, so a test
# that allocates and frees hundreds of MB touched that much fresh memory (page
# faults, system time: test_ckpt 270,000 faults at 256 MB, 145,000 at 16). A
# use after free is still reported while the block is among the last 16 MB
# freed (and, ASan's recycling being last in first out, mostly after); a use
# after more than 16 MB of later frees may read a block given out again and go
# unreported. tests/README.md, "The eighteenth round", has the measurements.
# handle_sigill=1: the ASan build's UBSan checks are traps (CMakeLists.txt,
# BF_UBSAN_TRAP): a failed one raises SIGILL, and ASan then prints the stack
# (function, file, line) as for its own errors; without it the test dies with
# "Illegal instruction" and no stack (tests/README.md, "The nineteenth round").
# allocator_release_to_os_interval_ms=-1: ASan's allocator keeps its free small
# blocks' pages (by default it hands them back every 5 s, madvise DONTNEED, and the
# next allocation faults them in again); clear_shadow_mmap_threshold=524288:
# the shadow of a region under 4 MB is cleared by memset, not by remapping it
# (at ASan's default, 64 KB of shadow, a block from 512 KB had its shadow remapped
# when given out, so its free faulted those pages in a second time); from 4 MB (thread
# stacks: 8 MB) it still remaps. Neither changes what ASan or LeakSanitizer report:
# the same poisoning, quarantine and leak scan, fewer page faults (test_diff
# -17%, test_mitigate -15%; their CPU-s -11%); tests/history/round23-h27-suite.md.
ASAN_RUN_OPTIONS ?= detect_leaks=1:abort_on_error=1:quarantine_size_mb=16:handle_sigill=1:allocator_release_to_os_interval_ms=-1:clear_shadow_mmap_threshold=524288
RUN_ASAN = cd $(ASAN_BUILD) && ASAN_OPTIONS=$(ASAN_RUN_OPTIONS) \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -E '$(ASAN_SKIP)'
RUN_TSAN = cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -L threads
FUZZ_SMOKE = if command -v clang >/dev/null 2>&1; then \
  FUZZ_JOBS=$(JOBS) tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS); \
  else echo "fuzz-smoke: no clang (scripts/install-deps.sh --test installs it); skipped"; fi

build: deps
	@$(BUILD_RELEASE)

build-asan: deps
	@$(BUILD_ASAN)

# Every test in the release build but those whose subject is C handling input,
# which make test runs under ASan only (ASAN_ONLY below says which and why;
# `make test-release` runs them too); under ASan + UBSan every test that runs C of
# ours (ASAN_SKIP below says which are left out and why); the threaded ones
# (label `threads`: evaluator, campaigns, the CLI's threaded campaigns, the
# daemon) under ThreadSanitizer too; left out there: the daemon's
# crash-and-restart test (six minutes under TSan), test_mitigate (three
# minutes; its threads are the campaign runner's, which test_campaign covers)
# and cli_test_shard (its campaigns' threads are cli_test_campaign's:
# tests/CMakeLists.txt says how).
# The sanitizers are there for memory errors, races and undefined behaviour,
# not to re-check statistics the release suite checks: in the sanitizer builds
# tests/CMakeLists.txt sets BF_SANITIZED (a define for the C tests that use it,
# an environment variable for every test of tests/, so a ctest run by hand in
# build-asan gets it too), and the heaviest (test_diff, test_mitigate,
# test_honesty, test_ckpt, cli_test_shard, daemon_test_resilience, daemon_test_workers,
# daemon_test_flow's adaptive campaign) run fewer trials there (or a smaller model where the model is not what is
# tested; test_diff's thread-count test four of its nine pairs; test_conv_exact three of its seven
# activations a case and path, test_reduce_torchsum 500 of its 2000 random shapes), every step and assertion kept; the release
# suite runs the full sizes (daemon_test_resilience's and daemon_test_workers':
# `make test-release`, as make test runs them under ASan only).
# The fuzz build and its smoke run are not part of `make test` (tests/README.md,
# "The seventeenth round": with them it took 2,590 CPU-s, 23.5 minutes on two
# quiet cores, where the rule is 15): `make fuzz-smoke` runs them, and CI runs it
# after `make test` (.ci/run). What stays in `make test`: every corpus replayed by
# ctest in the release and ASan suites (*_replay), and clang's warnings, which the
# fuzz build used to fail on: the release suite's clang_warnings
# (tests/arch/clang_gate.py: clang -fsyntax-only -Werror over every product .c and
# tests/fuzz/*.c with the fuzz build's sanitizer flags; about 60 CPU-s against the
# fuzz build's 220 and the smoke's 70).
# Where the time goes, and the rules for what runs under each sanitizer:
# tests/README.md, "How long make test takes".
#
# The steps overlap, as no suite keeps both cores busy on its own (about a fifth
# of each suite's time a core waits: daemons, Slurm, Python starting, the last
# long test): after the release build, the ASan and TSan builds run one
# after another beside the suites; each suite starts when its build is done,
# the TSan one after the release one, so at most one build and two suites run
# at a time (make -j3). Each step's output is printed
# whole when it ends (--output-sync), so the log reads as if they had run one
# after another.
# The build's packages are installed first (deps); what only the tests need
# (PyTorch, chromium, clang, qemu, Slurm: most of a fresh machine's download)
# is installed by pipe-deps beside the release and ASan builds, which do not
# use it; every suite waits for it.
#
# STEP_TIMES=1 prints each step's wall and CPU time when it ends (user +
# system of everything it waited for, /usr/bin/time through the step's
# shell): `make test STEP_TIMES=1` says where a run's core-seconds went
# (tests/README.md, "The eighth round").
PIPE_STEPS = pipe-deps pipe-build pipe-build-asan pipe-build-tsan pipe-release pipe-asan pipe-tsan
ifneq ($(STEP_TIMES),)
$(foreach s,$(PIPE_STEPS),$(eval $(s): SHELL = $(CURDIR)/scripts/step_time.sh)$(eval $(s): .SHELLFLAGS = $(s) -c))
endif
test: deps
	@$(MAKE) -j3 --output-sync=target pipe-done

pipe-deps:
	@scripts/install-deps.sh --test
pipe-build: BENCH = OFF
pipe-build:
	@$(BUILD_RELEASE)
pipe-build-asan: pipe-build
	@$(BUILD_ASAN)
pipe-build-tsan: pipe-build-asan
	@$(BUILD_TSAN)
pipe-release: RELEASE_SKIP = ^($(ASAN_ONLY))$$
pipe-release: pipe-build pipe-deps
	@echo "== test-release"; $(RUN_RELEASE)
pipe-asan: pipe-build-asan pipe-deps
	@echo "== test-asan"; $(RUN_ASAN)
pipe-tsan: pipe-build-tsan pipe-release
	@echo "== test-tsan"; $(RUN_TSAN)
pipe-done: pipe-release pipe-asan pipe-tsan
	@true

# the tests that skip (exit 77: not root for the Slurm cluster, no node for
# ONNX Runtime, ...) say why in their output; the last line repeats their reasons
test-release: build test-deps
	@$(RUN_RELEASE)

# The unit tests alone (cmocka over core, api, report and the daemon's modules,
# and the header and layering checks): ctest -L unit, under two minutes on two
# cores (tests/README.md). Needs only `make build`, no test-deps.
test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# ONNX Runtime on every quantized fixture (quant/, nbits/, ops/quant_*), on this CPU and
# on qemu's Haswell, each case against its committed reference: when all agree, their
# hashes go into tests/conformance/ort_verified.json (commit it), and ctest ort_quant and
# ort_quant_avx2 then run only the cases whose bytes differ from it (ort_quant.js says
# why). Run it after changing a quantized fixture, ort_quant.js, ort_probe.js or the
# pinned ONNX Runtime (bench/package-lock.json). A missing tool fails it (no SKIP).
test-references: test-deps
	@for cpu in "" haswell; do BF_ORT_RECORD=1 bash tests/conformance/ort_quant.sh $(CURDIR) $(abspath $(BUILD))/tests/ort $$cpu; \
	  s=$$?; [ $$s -eq 0 ] || { echo "test-references: ort_quant.sh $$cpu exited $$s, nothing recorded for it"; exit 1; }; done

# Slurm and munge alone (test-deps includes them), for tests/slurm (docs/SCALE.md)
slurm-deps:
	@scripts/install-deps.sh --slurm

# Campaigns as Slurm array jobs on a real single-node cluster each test starts
# and stops, from the CLI and from bitflipd (about 80 s); skipped, saying why,
# where it cannot run (not root).
test-slurm: slurm-deps build
	cd $(BUILD) && ctest --output-on-failure -R '^slurm_'
	@grep -h ': SKIP: ' $(BUILD)/Testing/Temporary/LastTest.log | sort -u || true

# bitflipd's web page (docs/UI.md): its schema validator, and the page in
# headless Chromium; screenshots in $(BUILD)/tests/ui/artifacts
test-ui: build test-deps
	cd $(BUILD) && ctest --output-on-failure -R '^ui_'

# The sanitizer suite leaves out the tests that run no C of ours: Python and node
# over the sources and the contracts (core_layers, public_headers: the compiler
# on the public headers, test_index, size_rules, openapi_contract,
# openapi_check_catches, openapi_redocly_lint, ui_validate, ui_sse, the DRS
# study's TSV converter drs_criteo_tsv and its renderer's test drs_render, which
# gives render.py a made-up study and a --bitflip that does not exist). They are
# given the source tree, never a binary, so a sanitized build cannot change what
# they see; they run in test-release (25 s of the sanitizer run's test time).
# clang_warnings too: clang over the sources, no program of ours run.
ASAN_NO_C = core_layers|public_headers|clang_warnings|test_index|size_rules|openapi_contract|openapi_check_catches|openapi_redocly_lint|ui_validate|ui_sse|drs_criteo_tsv|drs_render
# It also leaves out four tests whose time goes to Python, Chromium or Slurm
# rather than to our C: training the DRS zoo in PyTorch, the page in a browser, the k8s
# manifests' rendering and the Slurm scripts' cluster run. The C they reach is under ASan
# through daemon_test_ui_routes, cli_test_shard, slurm_daemon and the cli_/daemon_ tests;
# they run in test-release. Together they were 104 s of the sanitizer run.
# simd_levels too: it runs the conformance and op fixtures that the sanitizer
# suite runs once, twice more (once per CPU path) to compare their bits, which
# a sanitizer build does not change.
# ort_quant and ort_quant_avx2 run ONNX Runtime in node on the fixtures: no C of ours.
# And the script tests that re-run statistics or whole campaigns through the CLI
# or the daemon (against PyTorch, numpy, records counted by hand, `bitflip run
# --local`, --exact), whose C the C tests drive under ASan: none feeds hostile or
# malformed input (those stay: uploads, HTTP, limits, security, error maps, eval
# set layouts, specs, CLI arguments, reports of bad files) and none is the only
# ASan test of a subsystem (every CLI command and daemon route they reach is
# reached by a script that stays). They run in test-release. tests/README.md,
# "The seventeenth round", lists each with its ASan CPU-s and the ASan tests that
# still cover its C; together ~180 of the ASan suite's ~700 CPU-s.
ASAN_RELEASE_ONLY = cli_computed_operands|cli_default_batch_torch|cli_test_shard|cli_test_campaign|cli_test_lm_diff|cli_test_lm_task|cli_test_tie_record|cli_test_campaign_generate|cli_test_names|cli_test_fuse|cli_fault_group_rows|daemon_test_flow|daemon_test_report|daemon_test_sse_docs|daemon_test_lm|conformance_kv_campaign|conformance_fault_groups_torch|conformance_det_ties|conformance_det_tolerance|conformance_seg_tolerance|conformance_nms_ties|stutz_quant|stutz_torch|stutz_ber|stutz_map|ops_torch_order|k8s_jobs_local|ci_templates
# Which build runs which test in `make test` (tests/README.md, "The twentieth
# round", has the rule, and each shared test's kind and seconds in both builds):
# - a test whose subject is C handling input (the daemon's routes, limits,
#   uploads, storage, TLS, connections and crash handling; the CLI's options,
#   errors, limits, reports and Slurm commands; the file parsers' unit tests and
#   the fuzz corpora's replays; the schemas of what the C writes; the daemon's
#   Slurm executor) runs under ASan + UBSan only (ASAN_ONLY): there every
#   assertion it makes is made as in the release build, plus the memory and
#   UB checks; the release build adds nothing to them. `make test-release` and
#   `make test-unit` still run them (only make test's release suite leaves them
#   out), and the release suite keeps its end-to-end runs of the shipped
#   binaries (daemon_test_flow, _report, _sse_docs, _lm, _upload_paths,
#   cli_test_campaign and the other CLI campaigns, python_*, ui_browser,
#   ci_templates, slurm_cluster, conformance_*): bitflip, bitflipd with its
#   forked workers, and bitflip-conformance are each still run optimized.
# - a test whose subject is numbers (kernels' and differential trials'
#   exactness, numerics, conformance against PyTorch, campaign statistics) runs
#   in the release build at full size, and under ASan at a size BF_SANITIZED
#   trims, or not at all where other ASan tests reach its C (ASAN_RELEASE_ONLY
#   above, with its evidence).
# - a test whose C makes threads: release and TSan (label `threads`), and ASan
#   by the rules above (daemon_test_security: ASan and TSan).
# Left in both though its subject is input: daemon_test_upload_paths, whose
# release run sends every corpus file as every kind (114 uploads) where ASan's
# sends each as its own kind (66), so the release run has checks ASan's has not.
ASAN_ONLY = daemon_test_workers|daemon_test_resilience|daemon_test_storage|daemon_test_tls|daemon_test_connections|daemon_test_ui_routes|daemon_test_error_maps|daemon_test_limits|daemon_test_security|cli_test_options|cli_test_cli|cli_test_limits|cli_test_slurm_cli|cli_test_report|cli_test_report_pictures|cli_test_onesample|slurm_daemon|spec_schema|junit_schema|fuzz_.*_replay|fuzz_onnx_replay_fixtures|server_test_.*|test_dataset|test_errmap|test_limits|test_model|test_spec|test_spec_groups|test_spec_rules|test_api_limits|test_atomic_file|test_per_call|test_report
ASAN_SKIP = ^(drs_zoo|ui_browser|k8s_manifests|slurm_cluster|simd_levels|ort_quant|ort_quant_avx2|$(ASAN_NO_C)|$(ASAN_RELEASE_ONLY))$$

test-asan: build-asan test-deps
	@$(RUN_ASAN)

build-tsan: deps
	@$(BUILD_TSAN)

# The tests labelled `threads` (tests/CMakeLists.txt says which and why), and
# only the programs they run are built (target threaded-tests).
test-tsan: build-tsan test-deps
	@$(RUN_TSAN)

# libFuzzer targets (tests/fuzz, docs/FUZZING.md): clang with ASan + UBSan.
build-fuzz: deps
	@$(BUILD_FUZZ)

# Each target for FUZZ_SECONDS (default 60): "TARGET: N executions, no crash".
fuzz: build-fuzz
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# A short run of each (the corpora are also replayed by ctest in every build),
# JOBS targets at a time (one per core: each still gets FUZZ_SMOKE_SECONDS);
# skipped with a note where clang is missing. Not part of `make test` (see
# there); CI runs it after `make test` (.ci/run).
fuzz-smoke: test-deps
	@if command -v clang >/dev/null 2>&1; then $(MAKE) build-fuzz; fi
	@$(FUZZ_SMOKE)

demo: build
	@scripts/demo.sh $(BUILD)/bitflip $(BUILD)/bitflipd

conformance: build
	$(BUILD)/tests/bitflip-conformance $(CONFORMANCE_DIR)

# torchvision's constructors at full size (weights=None), nn.Transformer at its
# defaults, LSTM/GRU 512 wide: built under $(FULL_DIR) (several GiB, never
# committed) and checked; not part of `make test` (tens of minutes on 2 cores).
# FULL_MODELS=resnet18,vit_b_16 picks some (make_real_models.py --full --list).
FULL_DIR ?= $(BUILD)/conformance-full
FULL_MODELS ?=
conformance-full: build bench-deps
	/usr/bin/python3 tests/fixtures/make_real_models.py --full --out $(FULL_DIR) $(if $(FULL_MODELS),--only $(FULL_MODELS))
	@$(BUILD)/tests/bitflip-conformance $(if $(FULL_MODELS),--only $(FULL_MODELS)) $(FULL_DIR) > $(FULL_DIR)/conformance.log; \
	  s=$$?; cat $(FULL_DIR)/conformance.log; exit $$s

bench-deps:
	@scripts/install-deps.sh --bench

# Rewrites docs/BENCHMARKS.md; about 7 minutes on a quiet machine.
bench: build bench-deps
	@[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm ci --ignore-scripts)
	/usr/bin/python3 bench/run.py --bitflip $(BUILD)/bitflip --write-doc docs/BENCHMARKS.md

# Rewrites the campaign section of docs/BENCHMARKS.md (bitflip run vs PyTorch fault
# injection); about 10 minutes on a quiet machine.
# bf__sgemm's time per row against the product's rows (docs/BENCHMARKS.md,
# "Rows per product"); under a minute.
bench-sgemm: build
	$(BUILD)/bitflip-bench-sgemm

# The core's fp32 peak against bf__sgemm's (AVX2, AVX-512) and OpenBLAS's GFLOP/s on
# resnet18's conv shapes (docs/BENCHMARKS.md, "How close to the machine's limit"); about
# a minute. OpenBLAS is timed if libopenblas.so.0 is installed.
bench-peak: build
	$(BUILD)/bitflip-bench-peak

bench-conv: build
	$(BUILD)/bitflip-bench-conv

bench-campaigns: build bench-deps
	/usr/bin/python3 bench/campaign_bench.py --bitflip $(BUILD)/bitflip --write-doc docs/BENCHMARKS.md

# Detectors and segmenters (issue 31): SSDlite 320 and LRASPP 256, 1 thread, golden eval vs
# PyTorch and ONNX Runtime, a uniform weight-fault campaign vs PyTorch's flip-and-rerun loop;
# rewrites the det-bench section of docs/BENCHMARKS.md (about 10 minutes). BITFLIP=path
# runs another build (e.g. a merged one) on the same models.
BITFLIP ?= $(BUILD)/bitflip
bench-det: build bench-deps
	@[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm ci --ignore-scripts)
	/usr/bin/python3 bench/det_bench.py --bitflip $(BITFLIP) --write-doc docs/BENCHMARKS.md

# Real networks at real sizes (issue 33): resnet18, mobilenet_v2, ViT-S/16 and an LSTM at 1
# and 2 threads, bitflip beside PyTorch (threads pinned, OMP_WAIT_POLICY=PASSIVE) and ONNX
# Runtime on the same files in one run: eval samples/s and percent of this core's measured
# peak, campaign trials/s with and without setup, the share of a pass a trial re-runs, and
# issue 33's aims worked from the rows; rewrites the real-bench section of docs/BENCHMARKS.md
# (about 22 minutes on a Zen 5 core, 29 on a Zen 2 one; wants a quiet machine: each run
# waits for one). BITFLIP=path as above.
bench-real: build bench-deps
	@[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm ci --ignore-scripts)
	/usr/bin/python3 bench/real_bench.py --bitflip $(BITFLIP) --threads 1,2 --write-doc docs/BENCHMARKS.md

# The full-size torchvision zoo (10 detectors and segmenters, weights=None, opset 13) through
# bitflip eval --outputs, ONNX Runtime and PyTorch, compared per image; rewrites the
# zoo-check section of docs/OPS.md (about 20 minutes, 3 GB of memory at most).
zoo-check: build bench-deps
	@[ -d bench/node_modules/onnxruntime-node ] || (cd bench && npm ci --ignore-scripts)
	/usr/bin/python3 bench/zoo_check.py --bitflip $(BITFLIP) --write-doc docs/OPS.md

# Detectors and segmenters as users export them (issue 31): the zoo at small sizes through
# bitflip.export and plain torch.onnx.export around the usual wrapper (opsets 11, 13, 17,
# static and dynamic axes), each through bitflip info, eval against PyTorch (and ONNX Runtime
# where node is installed), a short campaign and bitflip-conformance; rewrites the
# det-exports section of docs/OPS.md (the cases took 90 minutes at load 7-17 on 2 cores, most
# of it in torch.onnx.export: SSDlite's 90 per-class selections, 5-8 minutes an export, under
# load). Its conformance dir,
# DET_EXPORTS_DIR, is what `make conformance CONFORMANCE_DIR=...` runs.
DET_EXPORTS_DIR ?= $(BUILD)/det-exports
det-exports: build bench-deps
	/usr/bin/python3 bench/det_exports.py --bin $(BUILD) --out $(DET_EXPORTS_DIR) --write-doc docs/OPS.md

# Rewrites the daemon section of docs/BENCHMARKS.md (bitflipd under wrk, RSS, 200 event
# streams, while a campaign keeps both workers busy); about 2 minutes.
bench-daemon: build bench-deps
	/usr/bin/python3 bench/daemon_bench.py --bitflipd $(BUILD)/bitflipd --write-doc docs/BENCHMARKS.md

# Rewrites the results section of docs/MITIGATIONS.md (between its mitigation-bench
# markers): what each protection recovers and costs, on the DRS BER sweep (DLRM, AUC), the
# digits CNN (accuracy) and single-bit faults by bit position; about 1 minute of campaigns
# (2 minutes on a busy machine). Standard-library Python only: no bench-deps.
bench-mitigations: build
	/usr/bin/python3 bench/mitigation_bench.py --bitflip $(BUILD)/bitflip --write-doc docs/MITIGATIONS.md

# Stutz et al.'s study (docs/study/stutz.md): trains a small ResNet on digits in
# PyTorch, runs random and profiled bit errors at 8..2 bits with and without weight
# clipping, rewrites the page and its figure; about 15 minutes on an idle machine.
study-stutz: build bench-deps
	/usr/bin/python3 study/stutz/stutz.py --bitflip $(BUILD)/bitflip --work $(BUILD)/study-stutz --doc docs/study/stutz.md

fixtures: bench-deps
	/usr/bin/python3 tests/fixtures/make_fixtures.py

# The DRS study (docs/STUDY.md): builds the zoo (a synthetic Criteo-shaped log; DLRM,
# DCN-v2, DeepFM, Wide&Deep, FM trained in PyTorch, tables capped at 200,000 rows) under
# $(BUILD)/study/drs, runs its campaigns and rewrites docs/STUDY.md's DRS section and
# docs/study/drs/*.png. QUICK=1: tables capped at 2,000 rows, 3 repeats (minutes), under
# $(BUILD)/study/drs-quick. The models are kept between runs (make_zoo.py --force rebuilds).
.PHONY: study study-drs study-llm
STUDY_DRS   = $(BUILD)/study/drs$(if $(QUICK),-quick)
STUDY_ZOO   = $(if $(QUICK),--cap 2000 --train 100000 --batch 256 --eval 2048 --scale 0.65,)
STUDY_RUN   = $(if $(QUICK),--repeats 3,--repeats 10)
study-drs: build bench-deps
	/usr/bin/python3 study/drs/make_zoo.py --out $(STUDY_DRS)/zoo $(STUDY_ZOO)
	/usr/bin/python3 study/drs/run_study.py --zoo $(STUDY_DRS)/zoo --out $(STUDY_DRS) --bitflip $(BUILD)/bitflip $(STUDY_RUN)
	/usr/bin/python3 study/drs/render.py --study $(STUDY_DRS)/study.json --doc docs/STUDY.md --figures docs/study/drs

# The language-model study of issue 30 (docs/study/llm.md): trains a small Llama-style
# decoder on the project's synthetic language (a few minutes), exports it with and
# without a KV cache, runs the BER sweeps per storage format, the per-bit and
# per-tensor campaigns, KV-cache against weight faults and the protections, and writes
# the page. QUICK=1: a short training and few trials, the page under $(BUILD)/study/llm-quick.
study-llm: build bench-deps
	/usr/bin/python3 study/llm/run_study.py --bitflip $(BUILD)/bitflip --work $(BUILD)/study/llm$(if $(QUICK),-quick) \
	  $(if $(QUICK),--quick --doc $(BUILD)/study/llm-quick/llm.md,--doc docs/study/llm.md)

# The studies: docs/STUDY.md (DRS), docs/study/stutz.md and docs/study/llm.md.
study: study-drs study-stutz study-llm

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
