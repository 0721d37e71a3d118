# Aegis build, test and demo targets. `make run` and `make test` are the two
# set-up commands: each installs what it needs first.

GO       ?= go
BIN      := bin
OUT      := _out
FUZZTIME ?= 10s
BENCHTIME ?= 1s
# Loopback range of the cluster `make conformance` creates.
CONFORMANCE_CIDR ?= 127.8.0.0/24

export CGO_ENABLED ?= 0

.PHONY: all build test e2e conformance run bench fuzz deps lint generate clean

all: build

## build: compile every binary into bin/
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## deps: install on a Debian machine whatever the tests need and is missing
deps:
	@./scripts/deps.sh

## lint: formatting and vet
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## test: install deps, lint, run every test (slow end-to-end tests included), then the conformance suite
test: deps lint
	$(GO) test -count=1 ./...
	@$(MAKE) --no-print-directory conformance

## conformance: create a local cluster in CONFORMANCE_CIDR, run the conformance suite against it, destroy it
conformance: build
	$(BIN)/aegis-conformance --create --cidr $(CONFORMANCE_CIDR) --bin-dir $(BIN)

## e2e: run only the end-to-end tests (real processes on 127.0.2.x)
e2e:
	$(GO) test -count=1 ./e2e/...

## run: generate a secrets bundle and configs into _out/demo and show them
run: build
	@rm -rf $(OUT)/demo
	$(BIN)/aegisctl gen secrets -o $(OUT)/demo/secrets.yaml
	$(BIN)/aegisctl gen config demo 127.5.0.2 --with-secrets $(OUT)/demo/secrets.yaml -o $(OUT)/demo --trust-host-clock

## bench: run the benchmarks
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

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

clean:
	rm -rf $(BIN) $(OUT)
