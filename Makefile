# Aegis build, test and demo targets. `make run` and `make test` are the two
# set-up commands: each installs what it needs first.

GO       ?= go
BIN      := bin
OUT      := _out
FUZZTIME ?= 10s
BENCHTIME ?= 1s
QUICK    ?=
# Bound of one test package's run: the end-to-end package runs for about
# ten minutes on two cores, which is go test's own default bound.
TEST_TIMEOUT ?= 25m
# Tests of one package run at once when they call t.Parallel: the
# end-to-end tests that do each run a cluster of their own and spend most
# of their time waiting on it (certificate lifetimes, restarts), so four
# at once on two cores, not go test's default of one per core.
TEST_PARALLEL ?= 4
BENCHOUT := $(OUT)/bench
# Hollow workers `make scale` runs against three control planes.
N        ?= 10000
# Loopback range of the cluster `make conformance` creates.
CONFORMANCE_CIDR ?= 127.8.0.0/24
# Talos version whose API integration suite and talosctl `make talos-suite`
# builds (the proxy serves v1.11.5's dependencies; v1.13.9's suite needs one
# it does not), and the loopback range of that target's cluster.
TALOS_SUITE_VERSION ?= v1.11.5
TALOS_SUITE_CIDR    ?= 127.9.40.0/24
# Aegis's version stamped into every binary, always semver: the tag, or the
# nearest tag with commits since and the commit as build metadata,
# v0.1.0-dev+g<commit> without tags, v0.1.0-dev without git; see
# scripts/version.sh.
VERSION  ?= $(shell ./scripts/version.sh)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X github.com/aegis-os/aegis/internal/version.Tag=$(VERSION) \
	-X github.com/aegis-os/aegis/internal/version.Commit=$(COMMIT)
# Where `make install` puts the binaries: $(DESTDIR)$(PREFIX)/bin.
PREFIX   ?= /usr/local
DESTDIR  ?=
INSTALL_BINS := aegisctl machined apid trustd etcd

export CGO_ENABLED ?= 0

.PHONY: all build images install release release-deps test e2e conformance talos-suite skew run bench scale bench-deps microbench bench-profile fuzz deps lint generate docs clean

all: build

## build: compile every binary into bin/, stamped with VERSION, then the system images
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...
	@$(MAKE) --no-print-directory images

## images: OCI image archives of apid, trustd and etcd in bin/images/ (machined imports
## them into its containerd); the same binaries give the same archives
images:
	$(BIN)/aegis-image --bin-dir $(BIN) --out $(BIN)/images

## install: build, then install aegisctl, machined, apid, trustd and etcd into
## $(DESTDIR)$(PREFIX)/bin and the image archives into $(DESTDIR)$(PREFIX)/lib/aegis/images
## (PREFIX=/usr/local by default)
install: build
	install -d '$(DESTDIR)$(PREFIX)/bin' '$(DESTDIR)$(PREFIX)/lib/aegis/images'
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_BINS)) '$(DESTDIR)$(PREFIX)/bin/'
	install -m 0644 $(BIN)/images/*.tar '$(DESTDIR)$(PREFIX)/lib/aegis/images/'

## release: Debian packages (aegisctl, aegis-node with machined's systemd unit), a
## tarball and the release bundle nodes upgrade from in $(OUT)/release, stamped with VERSION, with the man pages and completions; then
## installs them into a clean root and runs systemd-analyze verify on the units (fails, never
## skips, without dpkg-deb or systemd-analyze). Not part of make test: a build of everything
release: release-deps build
	@rm -rf $(OUT)/release && mkdir -p $(OUT)/release
	$(BIN)/aegis-release --bin-dir $(BIN) --man-dir docs/man --doc-root . --out $(OUT)/release \
		--version $(VERSION) --mtime "$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}" --verify

## release-deps: what make release needs beyond the tests' deps (dpkg-deb, systemd-analyze)
release-deps:
	@./scripts/deps.sh release

## deps: install on a Debian machine whatever the tests need and is missing
deps:
	@./scripts/deps.sh

## lint: formatting and vet
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## test: install deps, lint, run every test (slow end-to-end tests included; the whole output in
## _out/test.log, and a summary of the failures at its end), then the conformance suite
test: deps lint
	@GO='$(GO)' TEST_LOG=$(OUT)/test.log ./scripts/gotest.sh -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) ./...
	@$(MAKE) --no-print-directory conformance

## conformance: create a local cluster in CONFORMANCE_CIDR, run the conformance suite against it, destroy it
conformance: deps build
	$(BIN)/aegis-conformance --create --cidr $(CONFORMANCE_CIDR) --bin-dir $(BIN) --runtime $(RUNTIME)

## talos-suite: build Talos's API integration suite and talosctl from the Talos module
## (TALOS_SUITE_VERSION, cached under _out/talos-suite), create a cluster of 3 control planes and
## 2 workers in TALOS_SUITE_CIDR, run the tests e2e/talossuite/expect.txt serves and the talosctl
## table of docs/guide/talosctl.md, destroy it; prints a table per suite (docs/guide/talos-suite.md).
## Not part of make test: it takes minutes
talos-suite: deps build
	$(BIN)/aegis-talos-suite --create --cidr $(TALOS_SUITE_CIDR) --bin-dir $(BIN) --runtime $(RUNTIME) \
		--talos-version $(TALOS_SUITE_VERSION) --out $(OUT)/talos-suite -v

# The previous release `make skew` tests against: a git ref; empty: the
# newest v* tag reachable from HEAD, else HEAD^1 (scripts/skew.sh).
SKEW_FROM ?=

## skew: the version-skew policy tested with two real builds: SKEW_FROM's node binaries (the
## newest v* tag before HEAD, else HEAD^1; built once into $(OUT)/skew/<commit>/bin, stamped with
## the previous minor unless a tag) and this build, in one mixed cluster on 127.9.64.0/24
## (TestSkew in e2e/skew_test.go). Not part of make test: it takes minutes
skew: build
	@GO='$(GO)' SKEW_FROM='$(SKEW_FROM)' NEW_BIN='$(BIN)' NEW_VERSION='$(VERSION)' ./scripts/skew.sh

## e2e: run only the end-to-end tests (real processes on loopback addresses 127.0.x-127.9.x)
e2e:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) ./e2e/...

CLUSTER_NAME ?= aegis-local
# Loopback range and state folder of `make run`'s cluster, as aegisctl
# cluster create's --cidr and --state-dir; empty: aegisctl's defaults
# (127.5.0.0/24, ~/.aegis/clusters).
CIDR      ?=
STATE_DIR ?=
# NETWORK=netns puts each node in a network namespace of its own (root).
NETWORK   ?=
# METRICS=1 serves every node's Prometheus metrics (cluster create --metrics).
METRICS   ?=
# How the nodes of `make run` and `make conformance` run their services:
# containerd (confined containers; needs root, containerd and runc, which
# make deps installs) or process.
RUNTIME   ?= containerd
CLUSTER_FLAGS = --name $(CLUSTER_NAME)$(if $(STATE_DIR), --state-dir '$(STATE_DIR)')

## run: build, (re)create the local cluster (1 control plane, 2 workers on 127.5.0.x,
## or CIDR=; state under STATE_DIR= if given; METRICS=1 for metrics), show the memory of every node, and
## leave the cluster running (stop it with: bin/aegisctl cluster destroy)
run: deps build
	@if $(BIN)/aegisctl cluster show $(CLUSTER_FLAGS) >/dev/null 2>&1; then \
		echo "replacing the running cluster $(CLUSTER_NAME)"; \
		$(BIN)/aegisctl cluster destroy $(CLUSTER_FLAGS); \
	fi
	$(BIN)/aegisctl cluster create $(CLUSTER_FLAGS)$(if $(RUNTIME), --runtime '$(RUNTIME)')$(if $(CIDR), --cidr '$(CIDR)')$(if $(NETWORK), --network '$(NETWORK)')$(if $(filter 1 yes true,$(METRICS)), --metrics)
	$(BIN)/aegisctl --context $(CLUSTER_NAME) -n "$$($(BIN)/aegisctl cluster show $(CLUSTER_FLAGS) --addresses)" memory

## scale: N hollow workers (N=10000 by default; `make scale N=1000` for a quick run)
## against three control planes on 127.11.0.0/24, the workers on 127.64.0.0/16; prints
## the figures against the scale goals, writes $(OUT)/scale/results.json and destroys
## the cluster whatever happens; not part of `make test` (docs/scale.md)
scale: deps build
	@mkdir -p $(OUT)/scale
	$(BIN)/aegis-hollow --bin-dir $(BIN) -n $(N) --json $(OUT)/scale/results.json

## bench: the benchmark harness on real processes (127.7.0.0/16): prints a table and a line
## of the goals met and missed, writes $(BENCHOUT)/results.json with its goals chart
## (goals.svg) and the results of docs/benchmarks.md with docs/benchmarks/goals.svg;
## QUICK=1: a shorter run (under two minutes) whose Markdown and chart go to $(BENCHOUT) instead
bench: deps bench-deps build $(BIN)/cfssl $(BIN)/bareproxy
	@mkdir -p $(BENCHOUT)
	$(BIN)/aegisbench --bin-dir $(BIN) --json $(BENCHOUT)/results.json \
		--cfssl-migrations "$$($(GO) list -m -f '{{.Dir}}' github.com/cloudflare/cfssl)/certdb/sqlite/migrations" \
		--revision "$$(git describe --always --dirty 2>/dev/null)" \
		$(if $(filter 1 yes true,$(QUICK)),--quick --doc $(BENCHOUT)/benchmarks.md,--doc docs/benchmarks.md)

## bench-deps: what make bench needs beyond the tests' deps (gcc, libc6-dev, sqlite3)
bench-deps:
	@./scripts/deps.sh bench

## bin/cfssl: cfssl's own signing server, from the cfssl module pinned in go.mod; with cgo,
## for the sqlite driver of its certificate database (a C compiler: make deps installs one)
$(BIN)/cfssl: go.mod go.sum
	CGO_ENABLED=1 $(GO) build -o $@ github.com/cloudflare/cfssl/cmd/cfssl

## bin/bareproxy: the transparent proxy that is apid's floor in `make bench`; never shipped
$(BIN)/bareproxy: go.mod go.sum $(wildcard e2e/bench/bareproxy/*.go)
	$(GO) build -o $@ ./e2e/bench/bareproxy

## microbench: the Go micro-benchmarks of the packages
microbench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

# profile NAME,PACKAGE,BENCHMARK: a CPU profile of one Go benchmark and its top functions
define profile
	$(GO) test -run='^$$' -bench='$(3)' -benchtime=3s -o $(BENCHOUT)/profiles/$(1).test -cpuprofile $(BENCHOUT)/profiles/$(1).cpu $(2) > $(BENCHOUT)/profiles/$(1).txt
	$(GO) tool pprof -top -nodecount=40 $(BENCHOUT)/profiles/$(1).test $(BENCHOUT)/profiles/$(1).cpu > $(BENCHOUT)/profiles/$(1).top
endef

## bench-profile: CPU profiles of the slowest paths from the Go benchmarks (trustd over one
## connection, Version through apid, fan-out to 20 nodes) into $(BENCHOUT)/profiles
bench-profile:
	@mkdir -p $(BENCHOUT)/profiles
	$(call profile,trustd,./trustd,^BenchmarkCertificate$$/ed25519/one-connection)
	$(call profile,apid,./apid,^BenchmarkVersion$$/apid/serial)
	$(call profile,fanout,./apid,^BenchmarkFanOut$$/20-nodes)

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $$f); \
		for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
			echo "== $$dir $$t ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$dir; \
		done; \
	done

## generate: regenerate the Go code of api/*/*.proto (needs protoc)
generate:
	./api/generate.sh

## docs: regenerate the CLI reference in docs/cli from aegisctl's commands, and the man
## pages and the daemons' bash completions in docs/man from aegisctl's, machined's, apid's and
## trustd's command lines (the tests that fail when they are stale, run with -update)
docs:
	$(GO) test -count=1 -run '^(TestCLIDocs|TestManPages)$$' ./cmd/aegisctl ./cmd/machined ./cmd/apid ./cmd/trustd -update

clean:
	rm -rf $(BIN) $(OUT)
