# carryover: `make run` starts the server with its UI; `make test` runs every test.
# Both install what they need on a fresh Debian machine (as root) the first time.

SHELL := /bin/bash
GO ?= go
PYTHON ?= /usr/bin/python3
BIN := bin/carryover
BENCH := bin/carryover-bench
DEBS := python3-ipykernel python3-dill python3-xxhash python3-zstandard python3-numpy \
        python3-pandas python3-matplotlib python3-jupyter-client python3-jupyter-server \
        python3-pip python3-nbformat python3-websocket bubblewrap chromium sqlite3 procps
STAMP := .deps.stamp

.PHONY: all deps build run test bench vet fmt clean web-deps

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
# (@modelcontextprotocol/sdk, server/mcp/testdata/node).
MCP_NODE := server/mcp/testdata/node
web-deps:
	@if [ -f web/package.json ]; then cd web && { [ -d node_modules ] || npm install --no-audit --no-fund --silent; }; fi
	@cd $(MCP_NODE) && { [ -d node_modules/@modelcontextprotocol/sdk ] || npm install --no-audit --no-fund --silent; }
	@cd server/jupyter/testdata/node && { [ -d node_modules/@jupyterlab/services ] || npm install --no-audit --no-fund --silent; }

build: deps
	$(GO) build -o $(BIN) ./cmd/carryover

run: build
	./$(BIN) serve --data_dir ./data

test: deps web-deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 40m ./...

bench: deps
	$(GO) build -o $(BENCH) ./cmd/carryover-bench
	./$(BENCH)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin $(STAMP)
