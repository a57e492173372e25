# Each target installs what it needs into .venv first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8080
# The Events API's own listener, where Socket.IO clients connect (0: off, the main port only).
GATEWAY_PORT ?= 8081

.PHONY: serve demo test fuzz lint format docs docs-serve bench bench-hold clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[test]'
	touch $@

$(VENV)/.installed-lint: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[lint]'
	touch $@

serve: $(VENV)/.installed
	$(VENV)/bin/volthub serve --host $(HOST) --port $(PORT) --gateway-port $(GATEWAY_PORT)

# Everything the docs' guides use at once (config/demo.toml): the Events API gateway, a
# media-server hook secret, webhooks to a local receiver (a throw-away CA in var/demo),
# sandbox payments. PORT and GATEWAY_PORT move it as they move `make serve`.
demo: $(VENV)/.installed
	docs/examples/demo_certs.sh var/demo
	$(VENV)/bin/volthub serve --config config/demo.toml --host $(HOST) --port $(PORT) --gateway-port $(GATEWAY_PORT)

$(VENV)/.installed-docs: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[docs]'
	touch $@

# The documentation site (mkdocs-material) into site/, warnings as errors; the API reference
# page is generated from the code's OpenAPI document (docs/hooks.py). `make docs-serve`
# serves it with live reload at http://127.0.0.1:8000.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# The suite runs in TEST_WORKERS processes (pytest-xdist): most slow tests wait on servers and
# child processes, so three overlap well even on two cores. Whole modules are dealt out
# (--dist loadfile) in the order of collection, where modules with slow tests come first
# (tests/conftest.py; xdist would order them by test count): a module's fixtures are set up
# once, in one worker, and no long module is left for the end. Each worker draws server
# ports from a block of its own (tests/ports.py) and migrates its own PostgreSQL template.
# `make test TEST_WORKERS=0` (or PYTEST_ARGS="-n 0") runs everything in one process.
# Bytecode is cached even where the environment says PYTHONDONTWRITEBYTECODE: otherwise each
# worker rewrites and compiles every test module (~8 s of CPU each) and every child process
# that imports volthub (servers, CLI runs, load generators) compiles the package again
# (~0.5 s of CPU each).
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test
	@# The official socket.io-client for tests/http/events/test_socketio.py (needs Node.js + npm).
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/js --no-audit --no-fund --silent; fi
	@# The AsyncAPI CLI for tests/http/test_asyncapi.py: about 1,300 packages, so installed again
	@# only when its lock file is newer than the installed tree. Its install scripts (shell
	@# completion written into ~/.bashrc) are not needed to validate.
	@if command -v npm >/dev/null 2>&1 && [ ! tests/asyncapi/node_modules/.package-lock.json -nt tests/asyncapi/package-lock.json ]; then \
		npm ci --prefix tests/asyncapi --no-audit --no-fund --silent --ignore-scripts; fi
	@# Redocly CLI, Spectral, openapi-typescript and TypeScript for tests/http/test_openapi_tools.py.
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/contract --no-audit --no-fund --silent; fi
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# schemathesis over the whole OpenAPI document, every operation on both backends, many more
# examples per operation than the few `make test` runs (which deals the operations out
# between SQLite and PostgreSQL: tests/fuzz/test_schemathesis.py).
FUZZ_EXAMPLES ?= 300
fuzz: $(VENV)/.installed-test
	VOLTHUB_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) VOLTHUB_FUZZ_EVERY_BACKEND=1 $(PY) -m pytest tests/fuzz $(PYTEST_ARGS)

# Style (ruff lint + format check), types (mypy; strict on volthub/protocol) and the layer
# contracts (import-linter, see docs/architecture.md). `make format` applies ruff's fixes and format.
lint: $(VENV)/.installed-lint
	$(VENV)/bin/ruff check volthub tests
	$(VENV)/bin/ruff format --check volthub tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(VENV)/.installed-lint
	$(VENV)/bin/ruff check --fix volthub tests
	$(VENV)/bin/ruff format volthub tests

# `make bench`: volthub on both Events API paths (the single-port mount, and its own listener
# with [events] gateway_port: target volthub-gateway), python-socketio (uvicorn) and Node
# socket.io under the same load, one after another; prints a table per server, all side by
# side, each volthub path's ratios to the references, a hold of BENCH_HOLD sockets per volthub
# path, and BENCH_CHECKS (met / NOT met / too few samples); writes the JSON summary, the
# checks as JUnit XML and a plot to BENCH_OUT, and fails when a check does not hold. The
# default load: 2,000 sockets on one channel at 5 msg/s. Scale it with BENCH_ARGS and
# BENCH_HOLD (see `volthub loadtest --help`), e.g.
#   make bench BENCH_ARGS="--clients 5000 --channels 10 --rate 20 --duration 60" BENCH_HOLD="--hold 5000 --hold-seconds 30"
BENCH_ARGS ?= --clients 2000 --channels 1 --rate 5 --duration 20 --connect-concurrency 128
# One process holds at most its open-file limit less what it keeps for itself (19,728 on a
# machine limited to 20,000 per process); `make bench-hold` goes past it with workers.
BENCH_HOLD ?= --hold 19000 --hold-seconds 60
# The checks gate one server, BENCH_GATED: the gateway (what `make serve` serves Socket.IO
# on), or the single-port mount when the gateway does not run. The others run under the
# same load to be compared with, side by side, and are not gated: Node's own RSS per socket
# (about 26 KiB) is above the 25 KiB the gateway is held to, and the mount's limits on
# Hypercorn are on the load-testing page.
BENCH_GATE ?= delivery.ratio>=0.999 send.errors==0 delivery.latency_ms.p99<200 \
	server.rss_growth_kib_per_connection<=25 connect.per_second>=1500 clients.disconnects==0 \
	hold.connected>=19000 hold.disconnects==0
BENCH_CHECKS ?= $(if $(BENCH_GATED),$(foreach check,$(BENCH_GATE),--check '$(BENCH_GATED):$(check)')) $(BENCH_RATIO_CHECKS)
BENCH_TARGETS ?= volthub,volthub-gateway,python-socketio,node
_BENCH_TARGET_LIST = $(subst $(COMMA), ,$(BENCH_TARGETS))
BENCH_GATED ?= $(firstword $(filter volthub-gateway,$(_BENCH_TARGET_LIST)) $(filter volthub,$(_BENCH_TARGET_LIST)))
COMMA := ,
# The gateway against Node's socket.io, when both run: at most 0.4 times its CPU per delivery.
BENCH_RATIO_CHECKS ?= $(if $(and $(findstring volthub-gateway,$(BENCH_TARGETS)),$(findstring node,$(BENCH_TARGETS))),\
	--check 'volthub-gateway:vs.node.server.cpu_seconds_per_1000_deliveries<=0.4')
# Chat send end to end after the side-by-side runs, on the main port and on the gateway:
# SQLite, and PostgreSQL when BENCH_DATABASE names a database (e.g.
# postgresql://postgres@127.0.0.1:5432/bench). The gateway, the bots' path, is held to
# 1,000 sends/s with a p99 of 100 ms; every send, on either port, answered and delivered.
# On PostgreSQL the gateway runs once more with rate limits on, as a deployment has them
# (budgets stored in the database): reported, and held to every send answered and delivered.
BENCH_DATABASE ?=
CHAT_BENCH_CHECKS ?= --check 'gateway:sends_per_second>=1000' --check 'gateway:latency_ms.p99<=100' \
	--check 'errors==0' --check 'undelivered==0'
CHAT_BENCH_ARGS ?= --seconds 10 --concurrency 32 $(CHAT_BENCH_CHECKS)
CHAT_BENCH_LIMITED_ARGS ?= --seconds 10 --concurrency 32 --listener gateway --rate-limits
BENCH_OUT ?= bench-results
NODE_REF := bench/reference_node
# On two or more cores the servers get core 0 and the generator core 1, so neither
# measures the other's work.
PIN_GENERATOR := $(shell [ "$$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null && echo "taskset -c 1")
PIN_SERVER := $(if $(PIN_GENERATOR),--server-cpus 0,)

$(VENV)/.installed-bench: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[bench]'
	touch $@

$(NODE_REF)/node_modules/.installed: $(NODE_REF)/package.json $(NODE_REF)/package-lock.json
	@command -v npm >/dev/null || { echo "make bench needs node and npm (e.g. apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix $(NODE_REF) --no-audit --no-fund --loglevel=error
	touch $@

bench: $(VENV)/.installed-bench $(NODE_REF)/node_modules/.installed
	mkdir -p $(BENCH_OUT)
	@# Every part runs; make fails at the end when one of them failed.
	status=0; \
	$(PIN_GENERATOR) $(VENV)/bin/volthub loadtest --spawn --target $(BENCH_TARGETS) $(PIN_SERVER) \
		--workdir $(BENCH_OUT)/servers --json $(BENCH_OUT)/bench.json --junit $(BENCH_OUT)/checks.xml \
		--plot $(BENCH_OUT)/bench.png $(BENCH_ARGS) $(BENCH_HOLD) $(BENCH_CHECKS) || status=1; \
	$(PY) -m volthub.loadtest.chat_bench $(CHAT_BENCH_ARGS) || status=1; \
	$(if $(BENCH_DATABASE),$(PY) -m volthub.loadtest.chat_bench $(CHAT_BENCH_ARGS) --database $(BENCH_DATABASE) || status=1;) \
	$(if $(BENCH_DATABASE),$(PY) -m volthub.loadtest.chat_bench $(CHAT_BENCH_LIMITED_ARGS) --database $(BENCH_DATABASE) || status=1;) \
	exit $$status

# `make bench-hold`: the large holds on the gateway of `serve --workers` on PostgreSQL
# (HOLD_DATABASE; create it first): 250,000 sockets for 60 s with a broadcast every 10 s,
# then 100,000 with a restart (SIGTERM, start again) timed until every client is back.
# Sockets are spread over generator processes and source addresses 127.0.0.x by the
# harness itself; about 15 minutes on a 2-core machine. Fails when a check does not hold.
HOLD_DATABASE ?= postgresql://postgres@127.0.0.1:5432/hold
HOLD_COMMON = --spawn --target volthub-gateway --database $(HOLD_DATABASE) --clients 0 --hold-seconds 60 \
	--hold-broadcast-every 10 --connect-concurrency 1024 --check 'hold.disconnects==0' --check 'hold.broadcasts.missed==0'
bench-hold: $(VENV)/.installed-bench
	mkdir -p $(BENCH_OUT)
	status=0; \
	$(VENV)/bin/volthub loadtest $(HOLD_COMMON) --server-workers 14 --server-env VOLTHUB_DATABASE__POOL_SIZE=4 \
		--hold 250000 --ramp-timeout 900 --json $(BENCH_OUT)/hold-250k.json --check 'hold.connected>=250000' \
		--check 'hold.connect_failures==0' \
		--check 'hold.server.cpu_ms_per_connect<=0.5' --check 'hold.server.rss_growth_kib_per_connection<=8' || status=1; \
	$(VENV)/bin/volthub loadtest $(HOLD_COMMON) --server-workers 8 --hold 100000 --ramp-timeout 600 \
		--hold-restart --hold-restart-timeout 180 --json $(BENCH_OUT)/hold-100k.json --check 'hold.connected>=100000' \
		--check 'hold.broadcasts.latency_ms.p99<1000' --check 'hold.restart.not_back==0' \
		--check 'hold.restart.seconds_until_all_back<=60' || status=1; \
	exit $$status

clean:
	rm -rf $(VENV) var site .pytest_cache $(BENCH_OUT) $(NODE_REF)/node_modules
