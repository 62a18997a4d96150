# carryover: `make run` starts the server with its UI; `make test` runs every test.
# Both install what they need on a fresh Debian machine (as root) the first time.

SHELL := /bin/bash
GO ?= go
PYTHON ?= /usr/bin/python3
BIN := bin/carryover
BENCH := bin/carryover-bench
DEBS := python3-ipykernel python3-dill python3-xxhash python3-zstandard python3-numpy \
        python3-pandas python3-matplotlib python3-jupyter-client python3-jupyter-server \
        python3-pip python3-nbformat python3-websocket bubblewrap e2fsprogs mount chromium sqlite3 procps \
        postgresql
# The checkpoint engine's fidelity tests (persistence/agent/test_fidelity.py) restore these libraries' objects.
DEBS += python3-sklearn python3-torch python3-scipy python3-networkx python3-sympy python3-pil \
        python3-statsmodels python3-astropy
# The browser UI's data-science test draws these libraries' charts and widgets (web/e2e/datasci.mjs).
DEBS += python3-plotly python3-altair python3-ipywidgets python3-tqdm
# Live figures (persistence/agent/test_figures.py, the bench's figure rows) are drawn with seaborn.
DEBS += python3-seaborn
STAMP := .deps.stamp

.PHONY: all deps build run test chaos bench vet fmt clean web-deps web-bundle tools

all: build

# deps installs Debian packages once (apt-get update first, as a fresh machine needs).
deps: $(STAMP)
$(STAMP): Makefile
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(PYTHON) -c "import ipykernel, dill, numpy, pandas, matplotlib" || { echo "python deps missing"; exit 1; }
	@touch $@

# web-deps installs the npm packages of the tests: web/'s (playwright-core) and the MCP client test's
# (@modelcontextprotocol/sdk, server/mcp/testdata/node), and the pinned TypeScript that compiles the Node
# client's typings (clients/js/typecheck).
MCP_NODE := server/mcp/testdata/node
web-deps:
	@if [ -f web/package.json ]; then cd web && { cmp -s package-lock.json node_modules/.carryover-lock || \
	  { npm ci --no-audit --no-fund --silent && cp package-lock.json node_modules/.carryover-lock; }; \
	  [ -f node_modules/go.mod ] || npm run --silent postinstall; }; fi
	@cd $(MCP_NODE) && { [ -d node_modules/@modelcontextprotocol/sdk ] || npm install --no-audit --no-fund --silent; }
	@cd server/jupyter/testdata/node && { [ -d node_modules/@jupyterlab/services ] || npm install --no-audit --no-fund --silent; }
	@cd clients/js/typecheck && { cmp -s package-lock.json node_modules/.carryover-lock || \
	  { npm ci --no-audit --no-fund --silent && cp package-lock.json node_modules/.carryover-lock; }; }

# web-bundle rebuilds the UI's committed bundle (web/static/dist) from web/src after an edit there.
web-bundle: web-deps
	cd web && node build.mjs

# tools builds the test-only programs that are no Debian package into a cache outside the repo and
# outside carryover's go.mod: Versity Gateway, the S3 server of the object-store tests (the first
# build takes minutes; later runs find the binary). internal/s3test looks for it there.
TOOLS := $(HOME)/.cache/carryover-tools/bin
VERSITYGW_VERSION := v1.8.0
tools:
	@[ -x $(TOOLS)/versitygw ] || { echo "building versitygw $(VERSITYGW_VERSION) into $(TOOLS) (once)"; \
	  mkdir -p $(TOOLS) && cd / && GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); }

build: deps
	$(GO) build -o $(BIN) ./cmd/carryover

run: build
	./$(BIN) serve --data_dir ./data

# The tests mostly wait (kernels, servers, timeouts), so they run wider than the 2 cores: the
# end-to-end tests that may run side by side call t.Parallel, -parallel 4 lets four of them at a
# time, and -p 3 three packages. The packages are named longest first, so the long ones never start
# last: named in the order of ./..., persistence and clustertest once started after 20-odd short
# packages and the run ended with one package going and a core idle (727 s, 1.55 cores busy on
# average). internal/bench (its smoke test runs every benchmark section in quick mode, -parallel of
# them at a time, each in a process of its own) is minutes long too. The order is by the packages'
# wall time in a clean-clone run (2026-11-29: server 487 s, persistence 379, web 294, bench 276,
# clustertest 273, js 99, kernel 79, postgres 57, chaos 44, sandbox 41, python 36, sqlite 17,
# backup 16, ...): chaos and sandbox, last in ./... order, had made the run's last 70 s.
LONGEST = ./server/ ./persistence/ ./web/ ./internal/bench/ ./server/clustertest/ ./clients/js/ ./kernel/ \
	./persistence/postgres/ ./internal/chaos/ ./kernel/sandbox/ ./clients/python/ ./persistence/sqlite/ \
	./persistence/backup/ ./persistence/archive/ ./cmd/carryover/ ./client/ ./kernel/template/
# -trimpath keys the build cache by content, not by the clone's path: a second clone (a worktree, CI's
# fresh clone on a machine that built the same code) reuses the race-built packages instead of
# compiling them again (~2 min of CPU for the whole tree).
test: export GOFLAGS += -trimpath
test: deps web-deps tools
	$(GO) vet ./...
	CARRYOVER_TEST_SANDBOX_REQUIRED=1 $(GO) test -race -count=1 -timeout 70m -p 3 -parallel 4 $(LONGEST) ./...

# chaos runs the fault tests at full length (docs/chaos.md): 100 power cuts with the durable setting,
# 20 with normal for the record, a full disk, 1,000 faults of the chaos harness (500 on one SQLite
# node, 500 on a 2-node cluster on PostgreSQL + S3; its tables in chaos-table.md) and the rolling
# restart under 4 clients; CARRYOVER_CHAOS_SEED picks the faults and their moments.
chaos: deps tools
	rm -f chaos-table.md
	CARRYOVER_TEST_SANDBOX_REQUIRED=1 CARRYOVER_POWERCUT_ROUNDS=100 CARRYOVER_POWERCUT_NORMAL=20 \
		CARRYOVER_CHAOS_FAULTS=500 CARRYOVER_CHAOS_TABLE=chaos-table.md \
		$(GO) test -count=1 -timeout 480m -p 1 -v -run 'TestPowerCut|TestChaos|TestFullDisk|TestRollingRestart' ./persistence/sqlite/ ./internal/chaos/

bench: deps
	$(GO) build -o $(BENCH) ./cmd/carryover-bench
	./$(BENCH)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin $(STAMP)
