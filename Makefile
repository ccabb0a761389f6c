# gpupool — `make test` and `make demo` do all set-up on a fresh Debian 12 machine.
#
#   make            build (build/gpupool)
#   make deps       install the Debian packages (idempotent; skipped when all are present)
#   make test       deps + configure + build + the whole test suite (ctest)
#   make test SANITIZE=address,undefined   the same in a sanitizer build (build-san/)
#   make demo       run a real sweep end to end on the embedded default (builds only the gpupool
#                   binary: build/gpupool when `make` built it before, else build-demo/gpupool, -O1)
#   make static     one fully static, stripped executable: dist/gpupool-VERSION-linux-ARCH (build-static/;
#                   curl, libarchive, prometheus-cpp, fmt and spdlog from Debian's source packages,
#                   cached in .cache/static-deps/)
#   make test-static   make static, then its checks (ctest -L static: tests/static/static_checks.sh)
#   make fuzz       libFuzzer on the recipe parser, the archive unpacker and the HTTP API, side by
#                   side, each for FUZZ_SECONDS (default 60); FUZZ_SEED=N repeats a run (0, the
#                   default, is a fresh random seed); make fuzz-build builds them only
#   make bench      benchmarks (print figures)
#   make soak       a pool of real processes under seeded faults for SOAK_MINUTES (default 30), then
#                   the checker's table (tests/soak/README.md); SOAK_SEED=N repeats a run (default:
#                   a random seed, printed); uses the gpupool already built ($(BUILD)/gpupool, or GPUPOOL);
#                   SOAK_STORE=postgres: two coordinators (active and standby) on one PostgreSQL 15;
#                   SOAK_WORKERS real workers (10; soak-short runs 8, the harness's default, for CI's 2 cores)
#   make soak-short the checker's self-test, then 5 minutes with a fixed seed (what CI runs)
#   make fmt        clang-format the tree

SANITIZE ?=
WERROR ?= OFF
JOBS ?= $(shell nproc)
BUILD ?= build$(if $(SANITIZE),-san,)
BUILD_TYPE ?= $(if $(SANITIZE),Debug,RelWithDebInfo)
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_SEED ?= 0
STATIC_BUILD ?= build-static
STATIC_DEPS_CACHE ?= .cache/static-deps
# The static build compiles in unity batches of 24 (the default build: 8): nobody edits in it, and
# from cold it took 385-402 CPU s instead of 502-526 (bench/README.md, "Build times").
STATIC_UNITY_BATCH ?= 24
CTEST_ARGS ?=
DEMO_BUILD ?= build-demo
DEMO_FLAGS ?= -O1
SOAK_MINUTES ?= 30
SOAK_SEED ?=
SOAK_ARGS ?=
SOAK_STORE ?=
SOAK_WORKERS ?= 10
SOAK_SHORT_SEED ?= 46
GPUPOOL ?= $(BUILD)/gpupool
# ctest's parallel tests: twice the cores. The suite mostly waits (on processes, containers, timers):
# at -j2 on 2 cores it kept 43% of them busy; -j4 took 228 s instead of 316 (bench/README.md).
TEST_JOBS ?= $(shell echo $$(($(JOBS) * 2)))

.PHONY: all deps containers configure build test demo static test-static fuzz fuzz-build fuzz-recipe fuzz-archive \
	fuzz-http bench soak soak-short fmt clean

all: build

# .ci/packages-build.txt: what building gpupool needs (all `make demo` installs);
# .ci/packages-test-build.txt: what building the tests needs beyond it (Catch2); .ci/packages.txt:
# what running them needs.
deps:
	@.ci/install-deps .ci/packages-build.txt .ci/packages-test-build.txt .ci/packages.txt

# podman + a private dockerd with the busybox test image (idempotent; says why and goes on when it can't).
containers: deps
	@.ci/setup-containers

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DGPUPOOL_SANITIZE=$(SANITIZE) -DGPUPOOL_WERROR=$(WERROR)

configure: $(BUILD)/CMakeCache.txt
	@cmake -S . -B $(BUILD) -DGPUPOOL_WERROR=$(WERROR) > /dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# On a new machine the packages the build needs come first; the test tools and the container engines
# (`make containers`: .ci/packages.txt and .ci/setup-containers, 112-120 s on a brand-new Debian 12,
# mostly the network and the disk) then install beside the build, which waits on the CPU; their
# output follows the build's. Interrupted, an install that had started is left to finish.
test:
	@.ci/install-deps .ci/packages-build.txt .ci/packages-test-build.txt
	@$(MAKE) --no-print-directory configure
	@.ci/build-estimate all $(BUILD) $(JOBS)
	@log=$(BUILD)/test-setup.log; \
	$(MAKE) --no-print-directory containers > $$log 2>&1 & setup=$$!; \
	$(MAKE) --no-print-directory build; built=$$?; \
	wait $$setup; ready=$$?; sed 's/^/test setup: /' $$log; \
	[ $$built -eq 0 ] || exit $$built; \
	[ $$ready -eq 0 ] || { echo "make test: installing the test packages failed (above; $$log)" >&2; exit $$ready; }
	CONTAINERS_CONF=$(CURDIR)/.ci/containers/containers.conf \
	GPUPOOL_TEST_DOCKER_HOST=unix:///run/gpupool-ci/docker.sock \
	ctest --test-dir $(BUILD) --output-on-failure -j$(TEST_JOBS) $(CTEST_ARGS)

# What the demo needs and nothing else: the gpupool binary. Where `make` or `make test` built one
# already, that build is brought up to date and runs the demo; otherwise $(DEMO_BUILD) compiles it
# the quickest way that runs it (DEMO_FLAGS, no debug info, unity batches of 24, no test suite;
# bench/README.md, "Build times").
demo:
	@.ci/install-deps .ci/packages-build.txt
	@if [ -x $(BUILD)/gpupool ]; then \
	  $(MAKE) --no-print-directory configure && b=$(BUILD) && what=gpupool; \
	else \
	  cmake -S . -B $(DEMO_BUILD) -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=$(DEMO_FLAGS)" \
	    -DGPUPOOL_UNITY_BATCH=24 -DGPUPOOL_BUILD_TESTS=OFF -DGPUPOOL_WERROR=$(WERROR) > /dev/null && \
	    b=$(DEMO_BUILD) && what=demo; \
	fi && .ci/build-estimate $$what $$b $(JOBS) && \
	echo "cmake --build $$b -j$(JOBS) --target gpupool" && cmake --build $$b -j$(JOBS) --target gpupool && \
	.ci/demo $$b/gpupool

# -O2 as the normal build, without -g (the shipped file is stripped; no 190 MB link). The dependency
# prefixes come from .ci/build-static-deps (cached); the link's post-build step strips into dist/.
static:
	@.ci/install-deps .ci/packages-build.txt .ci/packages.txt .ci/packages-static.txt
	@deps=$$(.ci/build-static-deps $(STATIC_DEPS_CACHE) | paste -sd';' -) && \
	  cmake -S . -B $(STATIC_BUILD) -DGPUPOOL_STATIC=ON "-DGPUPOOL_STATIC_DEPS=$$deps" \
	    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DGPUPOOL_WERROR=$(WERROR) \
	    -DGPUPOOL_UNITY_BATCH=$(STATIC_UNITY_BATCH) > /dev/null
	cmake --build $(STATIC_BUILD) -j$(JOBS) --target gpupool
	@echo "static: $$(ls -t dist/gpupool-*-linux-* | head -1)"

test-static: static containers
	CONTAINERS_CONF=$(CURDIR)/.ci/containers/containers.conf \
	ctest --test-dir $(STATIC_BUILD) -L static --no-tests=error --output-on-failure -j$(JOBS)

# The three fuzzers run side by side, each for FUZZ_SECONDS of wall time (on 2 cores each gets about
# two thirds of one), their outputs kept apart (--output-sync); fuzz-build builds them alone.
fuzz: fuzz-build
	@$(MAKE) --no-print-directory -j3 --output-sync=target fuzz-recipe fuzz-archive fuzz-http

fuzz-build:
	@.ci/install-deps .ci/packages-build.txt .ci/packages-fuzz.txt
	CC=clang-16 CXX=clang++-16 cmake -S . -B $(FUZZ_BUILD) -DGPUPOOL_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target recipe_fuzzer archive_fuzzer http_fuzzer

fuzz-recipe:
	@mkdir -p $(FUZZ_BUILD)/corpus
	@for f in recipes/*/recipe.toml; do cp "$$f" "$(FUZZ_BUILD)/corpus/$$(basename "$$(dirname "$$f")").toml"; done
	@cp recipes/builtin/*.toml tests/data/recipes/*.toml tests/fuzz/regressions/*.toml \
	  $(FUZZ_BUILD)/corpus/ 2>/dev/null || true
	$(FUZZ_BUILD)/recipe_fuzzer -seed=$(FUZZ_SEED) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -dict=tests/fuzz/recipe.dict -print_final_stats=1 $(FUZZ_BUILD)/corpus

fuzz-archive:
	@tests/fuzz/make_archive_seeds.sh $(FUZZ_BUILD)/archive-corpus
	@cp tests/fuzz/archive_regressions/* $(FUZZ_BUILD)/archive-corpus/
	$(FUZZ_BUILD)/archive_fuzzer -seed=$(FUZZ_SEED) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 $(FUZZ_BUILD)/archive-corpus

fuzz-http:
	@mkdir -p $(FUZZ_BUILD)/http-corpus
	@cp tests/fuzz/http_seeds/* $(FUZZ_BUILD)/http-corpus/
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp \
	$(FUZZ_BUILD)/http_fuzzer -seed=$(FUZZ_SEED) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=512 \
	  -max_len=65536 -dict=tests/fuzz/http.dict -print_final_stats=1 $(FUZZ_BUILD)/http-corpus

bench: build
	cmake --build $(BUILD) -j$(JOBS) --target coordinator_bench coordinator_loadgen store_commit_bench body_bench \
	  listing_bench
	@bench/sim_bench.sh $(BUILD)/gpupool
	@echo "== coordinator hot paths against the pool's history (bench/coordinator_bench.cpp)"
	@$(BUILD)/coordinator_bench --history 0,10000,50000
	@$(BUILD)/store_commit_bench --commits 1000
	@echo "== listing an outputs archive beside its SHA-256 (bench/listing_bench.cpp)"
	@$(BUILD)/listing_bench
	@bench/pg_bench.sh $(BUILD) 0,10000
	@CONTAINERS_CONF=$(CURDIR)/.ci/containers/containers.conf bench/worker_bench.sh $(BUILD)/gpupool
	@bench/backup_bench.sh $(BUILD)/gpupool
	@bench/load_bench.sh $(BUILD)   # 200 workers for 10 s; WORKERS=10000 DURATION=60s SUBMIT_RATE=200: the full size
	@bench/body_bench.sh $(BUILD)
	@N=100 ROUNDS=1 bench/cpu_per_job.sh $(BUILD)/gpupool
	@N=40 PODMAN_N=10 CONTAINERS_CONF=$(CURDIR)/.ci/containers/containers.conf bench/vs_slurm.sh $(BUILD)/gpupool

# Nothing is built here: the soak runs the binary that is there (tests/soak/README.md).
soak:
	python3 tests/soak/soak.py --gpupool $(GPUPOOL) --minutes $(SOAK_MINUTES) $(if $(SOAK_SEED),--seed $(SOAK_SEED),) \
		--workers $(SOAK_WORKERS) $(if $(SOAK_STORE),--store $(SOAK_STORE),) $(SOAK_ARGS)

soak-short:
	python3 tests/soak/soak.py --self-test
	python3 tests/soak/soak.py --gpupool $(GPUPOOL) --minutes 5 --seed $(SOAK_SHORT_SEED) $(SOAK_ARGS)

fmt:
	find cmd core worker tests bench -name '*.cpp' -o -name '*.hpp' | xargs clang-format -i

clean:
	rm -rf build build-san $(DEMO_BUILD) $(FUZZ_BUILD) $(STATIC_BUILD) dist
