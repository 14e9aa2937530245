# shardcron — the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      := bin
PKGS     := ./...
# Multi-process suites start real etcd and shardcron processes: they run one
# package at a time (-p 1) so they do not starve each other's renewals.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: build run test test-unit e2e bench lint vulncheck etcd clean

build:
	$(GO) build -o $(BIN)/shardcron ./cmd/shardcron

# A local cluster: embedded etcd plus three replicas running the example jobs.
# RUNFLAGS passes more flags, e.g. RUNFLAGS="--http-addr 127.0.0.1:0".
RUNFLAGS ?=
run: build
	$(BIN)/shardcron dev --replicas 3 --jobs examples/jobs.yaml $(RUNFLAGS)

# The whole suite against real etcd: embedded for in-process tests, a real
# etcd process (built from the module) for multi-process tests.
test: etcd
	$(GO) vet $(PKGS)
	SHARDCRON_ETCD_BIN=$(CURDIR)/$(BIN)/etcd $(GO) test -p 1 $(TESTFLAGS) $(PKGS)

# A real etcd binary, built from the same module as the embedded server.
etcd: $(BIN)/etcd
$(BIN)/etcd: go.mod go.sum
	$(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3

e2e:
	@echo "no end-to-end suite yet" >&2; exit 1

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	tools/vuln/vulncheck.sh

# govulncheck against a local vulnerability database built from the
# golang.org/x/vulndb module (tools/vuln, its own module; cached per vulndb
# version): fails when a known vulnerable symbol is reachable. The standard
# library is checked at the version of the toolchain that runs it, which
# go.mod's toolchain line selects where GOTOOLCHAIN allows it.
vulncheck:
	tools/vuln/vulncheck.sh

clean:
	rm -rf $(BIN)
