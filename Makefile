# custos — build and test entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
NPM     ?= npm
PKGS    := ./...
RACE_PKGS := ./audit/... ./server/... ./policy/...

.PHONY: all build test deps vet unit race e2e bench fuzz demo clean

all: build

build:
	$(GO) build -o bin/custos ./cmd/custos

## test: install what the tests need, then vet and run every test (unit, race, Rego, e2e).
test: deps vet unit race

## deps: the TypeScript SDK client for the e2e tests (lockfile pinned).
deps:
	@command -v node >/dev/null || { echo "make: node is required for the e2e tests (TypeScript MCP SDK client)"; exit 1; }
	@command -v $(NPM) >/dev/null || { echo "make: npm is required for the e2e tests"; exit 1; }
	$(NPM) ci --prefix e2e/tsclient --no-audit --no-fund --loglevel=error

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/tsclient/*'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)

unit:
	$(GO) test -count=1 $(PKGS)

## race: the concurrent packages again under the race detector.
race:
	$(GO) test -count=1 -race $(RACE_PKGS)

e2e:
	$(GO) test -count=1 -v ./e2e/

## bench: the benchmarks behind docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./policy/ ./audit/ ./server/ ./minimize/ ./store/

## fuzz: a short run of every fuzz target (seed corpora run in `make test` anyway).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseURI -fuzztime 30s ./store/
	$(GO) test -run '^$$' -fuzz FuzzOpenCursor -fuzztime 30s ./server/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./audit/

demo:
	$(GO) run ./cmd/custos demo

clean:
	rm -rf bin e2e/tsclient/node_modules
