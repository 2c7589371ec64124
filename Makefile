# The plain entry points. `make test` is the README's test command and what CI runs.
SWIFT ?= swift
# libxxhash-dev: xxhash.h, compiled into the core for its payload checksum (XXH3).
# poppler-utils (pdfinfo, pdftocairo) reads and draws PDFs in a child process when
# `vips.pdf` is on; nothing else needs it at run time.
APT_PACKAGES := libvips-dev libvips-tools libcurl4-openssl-dev libssl-dev liblmdb-dev libhiredis-dev libjpeg62-turbo-dev liblcms2-dev libwebp-dev libavif-dev libjemalloc2 libxxhash-dev poppler-utils
# The tests start their own Redis servers (standalone and a 3-primary cluster) on
# free loopback ports; the ThumbnailServer example's gallery test drives a real
# browser. Nothing here is ever needed running beforehand.
# GNU time measures the tool's peak memory in its tests; avifenc (libavif-bin)
# writes the AVIF fixtures with rotation, mirror, crop and sequences. gdb prints a
# hung test bundle's threads before .ci/swift-test stops it.
EXAMPLE_APT_PACKAGES := chromium redis-server redis-tools time libavif-bin gdb

.PHONY: deps example-deps s3-peer apt-install test build demo release-tool conformance link-order serve soak soak-mixed soak-mixed-ci bench bench-suite bench-build docs fuzz fuzz-ci tsan asan clean

# Installs the system libraries the plugins link, if any is missing (Debian/Ubuntu).
deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

# What the tests need beyond the libraries (Redis servers they start, a headless browser).
example-deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(EXAMPLE_APT_PACKAGES)"

# The S3 tests' endpoint: moto's server (PyPI `moto[server]`) in a venv of the
# build's own, which the tests start on loopback with its access control on.
# The venv sees the system's packages, so a machine that has moto installs nothing.
S3_VENV := .build/s3-venv
s3-peer:
	@$(S3_VENV)/bin/python3 -c "import moto.server, boto3" 2>/dev/null || { \
		echo "making $(S3_VENV) with moto[server]"; \
		python3 -m venv --system-site-packages $(S3_VENV) && $(S3_VENV)/bin/python3 -m pip install -q 'moto[server]'; }

apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

# The main job on sample images: build the tool, write samples, load them twice
# into the default LMDB cache (~/.cache/webimage); the second run is all cache hits.
SAMPLES ?= .build/demo-samples
# The tool without `serve` (WEBIMAGE_TOOL_WITHOUT_SERVE, see Package.swift): the
# demo does not serve, and the server's Hummingbird, SwiftNIO and Prometheus are a
# third of a first build. `swift build --product webimage` then adds `serve`,
# recompiling only the tool's own module.
demo: deps
	WEBIMAGE_TOOL_WITHOUT_SERVE=1 $(SWIFT) build --product webimage
	$$($(SWIFT) build --show-bin-path)/webimage samples $(SAMPLES) > /dev/null
	@echo "== first run: every image is loaded, decoded and stored"
	$$($(SWIFT) build --show-bin-path)/webimage load $(SAMPLES)/*
	@echo "== second run: every image comes from the disk cache"
	$$($(SWIFT) build --show-bin-path)/webimage load $(SAMPLES)/*
	$$($(SWIFT) build --show-bin-path)/webimage cache stats

# The release tool as `swift build -c release` links it (statically, see
# Package.swift), built and run: samples, two loads into an LMDB cache, `serve`.
release-tool: deps
	SWIFT=$(SWIFT) .ci/release-tool

# Decoder conformance: every file of DIR through `info`, `load` and `serve` (the
# release tool), checked against what it must do (Tests/Conformance/run.py says
# how); one summary line, non-zero on any failure. CI runs it over the shared
# corpus when the machine has it.
CONFORMANCE_DIR ?= ../shared/corpus/conformance
conformance: deps
	@$(MAKE) --no-print-directory apt-install PACKAGES="libvips-tools"
	$(SWIFT) build -c release --product webimage
	python3 Tests/Conformance/run.py --tool $$($(SWIFT) build -c release --show-bin-path)/webimage $(if $(DIR),$(DIR),$(CONFORMANCE_DIR))

# Rewrites Linking/webimage.order, the functions the release tool's batch runs
# execute, which its link places together (Linking/make-order.py says why).
link-order: deps
	@$(MAKE) --no-print-directory apt-install PACKAGES="valgrind"
	python3 Linking/make-order.py

# The package's tests, then each example's (examples are packages of their own).
# .ci/swift-test repeats what failed at the end of the output.
# The examples and the benchmarks build in the root's .build (SHARED_SCRATCH):
# they depend on this package by path with the same versions of everything, so
# its modules, compiled once, serve all three. Each in a folder of its own would
# compile the package again (about 13 of a fresh CI's minutes).
SHARED_SCRATCH := --scratch-path $(CURDIR)/.build
test: deps example-deps s3-peer
	.ci/check-docs
	SWIFT=$(SWIFT) .ci/swift-test
	cd Examples/CustomCoder && SWIFT=$(SWIFT) ../../.ci/swift-test $(SHARED_SCRATCH)
	cd Examples/ThumbnailServer && SWIFT=$(SWIFT) ../../.ci/swift-test $(SHARED_SCRATCH)

# The long soak: 20 000 cold thumbnails through the example server's process (a
# release build), 4 clients, every request a new photo URL and size; every answer
# must be 200 and the server alive at the end. `make test` runs 240 of them.
SOAK_REQUESTS ?= 20000
soak: deps example-deps
	cd Examples/ThumbnailServer && WEBIMAGE_SOAK_REQUESTS=$(SOAK_REQUESTS) $(SWIFT) test -c release --filter soak

# A day of mixed traffic, shortened: the release `webimage serve` under 20 000
# requests of every kind (photos, PNG, WebP, AVIF, animated GIF, 4000x3000
# images; random boxes, formats and steps; repeats; deliberate mistakes; failing
# origins), its memory recorded every 1 000 requests and after 60 s idle. Fails
# on a 5xx that is not an origin's, a mistake not answered 4xx, or memory over
# its bound (Benchmarks/soak/soak_mixed.py says which). CI runs 2 000, and
# waits 20 s idle, not 60: serve's jemalloc purges pages freed 5 s before
# (dirty_decay_ms, with its background thread), so 20 s shows the same.
SOAK_MIXED_REQUESTS ?= 20000
soak-mixed: deps
	$(SWIFT) build -c release --product webimage
	python3 Benchmarks/soak/soak_mixed.py --requests $(SOAK_MIXED_REQUESTS) --tool $$($(SWIFT) build -c release --show-bin-path)/webimage

soak-mixed-ci: deps
	$(SWIFT) build -c release --product webimage
	python3 Benchmarks/soak/soak_mixed.py --requests 2000 --idle 20 --tool $$($(SWIFT) build -c release --show-bin-path)/webimage

# The thumbnail server example on http://127.0.0.1:8080/ (gallery at /).
serve: deps
	cd Examples/ThumbnailServer && $(SWIFT) run ThumbnailServer

# The benchmark suite, then the peer comparisons and their plots (release builds;
# installs gcc, nginx, curl, GNU time, libjpeg-turbo-progs, Pillow, pyvips and
# matplotlib if missing). About 15 minutes.
# Figures and method: docs/performance.md.
bench: deps bench-suite
	python3 Benchmarks/compare/compare.py cache-hits
	python3 Benchmarks/compare/compare.py downloads
	python3 Benchmarks/compare/compare.py thumbnails
	python3 Benchmarks/compare/compare.py scaling
	python3 Benchmarks/compare/compare.py plots

# The package-benchmark suite (time, mallocs, peak memory per benchmark), as a
# Markdown table in Benchmarks/results/suite.md.
bench-suite: deps
	cd Benchmarks && $(SWIFT) package --disable-sandbox benchmark --no-progress --format markdown > results/suite.md
	@cat Benchmarks/results/suite.md

# CI keeps the benchmarks compiling without running them (in the root's .build,
# as the examples' tests are).
bench-build: deps
	$(SWIFT) build --package-path Benchmarks $(SHARED_SCRATCH)

# DocC for each public module; fails on any warning (broken links, undocumented
# parameters) but SwiftPM's note that swift-distributed-tracing 1.7.3 ships
# CMakeLists.txt files in its source folders, which no package depending on it can silence.
DEPENDENCY_LAYOUT_WARNING := which are unhandled; explicitly declare them as resources
DOC_TARGETS := WebImage WebImageVips WebImageLMDB WebImageCurl WebImageRedis WebImageS3 WebImageTurboJPEG WebImageHTTP WebImageHummingbird
# One plugin run for every target: a run per target costs about 10 s more each.
docs: deps
	@out=$$($(SWIFT) package generate-documentation $(addprefix --target ,$(DOC_TARGETS)) 2>&1) || { echo "$$out"; exit 1; }; \
	ours=$$(echo "$$out" | grep -v "$(DEPENDENCY_LAYOUT_WARNING)" | grep -v "/.build/checkouts/"); \
	if echo "$$ours" | grep -q "warning:"; then echo "$$ours" | grep -A2 "warning:"; echo "DocC warnings (the paths say which target)"; exit 1; fi; \
	for t in $(DOC_TARGETS); do \
		echo "$$out" | grep -q "Finished building documentation for '$$t'" || { echo "$$out" | tail -20; echo "docs: no archive for $$t"; exit 1; }; \
	done; \
	echo "docs: $(DOC_TARGETS) ok"

# libFuzzer over the parsers and decoders (Fuzz/, docs/testing.md): builds the
# targets with coverage and AddressSanitizer in .build-fuzz, makes the seed
# corpora, then runs each target for FUZZ_SECONDS. A finding stops with its input
# in .build-fuzz/artifacts. CI runs `fuzz-ci` (4 s each: enough to build every
# target and pass every seed; finding things takes `make fuzz`).
FUZZ_SECONDS ?= 120
FUZZ_TARGETS := sniff header config cachekey decode turbojpeg negotiate transform s3 svg
FUZZ_BUILD := $(SWIFT) build --package-path Fuzz --scratch-path .build-fuzz --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer,address
fuzz: deps
	$(FUZZ_BUILD)
	$(SWIFT) build --product webimage
	rm -rf .build-fuzz/seeds && $$($(SWIFT) build --show-bin-path)/webimage samples .build-fuzz/seeds/images > /dev/null
	python3 Fuzz/seeds.py .build-fuzz/seeds .build-fuzz/seeds/images
	@mkdir -p .build-fuzz/artifacts
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p .build-fuzz/corpus/$$t; \
		extra=""; [ "$$t" = transform ] && extra="-malloc_limit_mb=64"; \
		echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
		SWIFT_BACKTRACE=enable=no LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/sanitizers/lsan.supp FUZZ_TARGET=$$t .build-fuzz/debug/webimage-fuzz .build-fuzz/corpus/$$t .build-fuzz/seeds/$$t \
			-max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 $$extra \
			-artifact_prefix=.build-fuzz/artifacts/$$t- > .build-fuzz/$$t.log 2>&1 \
			|| { tail -40 .build-fuzz/$$t.log; echo "fuzz $$t: finding in .build-fuzz/artifacts"; exit 1; }; \
		grep -E "^stat::number_of_executed_units|^Done|cov:.*DONE" .build-fuzz/$$t.log | tail -2; \
	done

fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=4

# The package's tests under ThreadSanitizer and AddressSanitizer (separate build
# folders; suppressions and their reasons in Tests/sanitizers/). Under TSan every
# module's lock (WebImage's Lock) is a pthread mutex (WEBIMAGE_TSAN_LOCKS), which
# TSan sees, unlike the standard library's. Tests run in parallel: the suites
# whose bodies block in libvips or libjpeg run off the cooperative pool
# (.offCooperativePool, docs/testing.md).
tsan: deps
	TEST_TIME_SCALE=4 TEST_BLOCKING_THREADS=1 VIPS_CONCURRENCY=1 TSAN_OPTIONS="suppressions=$(CURDIR)/Tests/sanitizers/tsan.supp halt_on_error=1" \
		$(SWIFT) test --scratch-path .build-tsan --sanitize thread -Xswiftc -DWEBIMAGE_TSAN_LOCKS

asan: deps
	ASAN_OPTIONS="detect_leaks=0 halt_on_error=1" \
		$(SWIFT) test --scratch-path .build-asan --sanitize address

clean:
	rm -rf .build .build-fuzz .build-tsan .build-asan Examples/*/.build Benchmarks/.build
