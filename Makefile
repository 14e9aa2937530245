# shardcron — the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      := bin
PKGS     := ./...
# Multi-process suites start real etcd and shardcron processes: they run one
# package at a time (-p 1) so they do not starve each other's renewals.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: build run test test-unit test-alerts promtool e2e bench lint etcd clean

# What `shardcron version`, shardcron_build_info and the member list say.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/shardcron ./cmd/shardcron

# A local cluster: embedded etcd plus three replicas running the example jobs.
# RUNFLAGS passes more flags, e.g. RUNFLAGS="--http-addr 127.0.0.1:0".
RUNFLAGS ?=
run: build
	$(BIN)/shardcron dev --replicas 3 --jobs examples/jobs.yaml $(RUNFLAGS)

# The whole suite against real etcd: embedded for in-process tests, a real
# etcd process (built from the module) for multi-process tests.
# It includes the alert rule tests and the Grafana query check (a test in
# cmd/shardcron), and the browser test of the dashboard, which drives
# Chromium (`apt-get install chromium`; with CI=true a missing one fails).
test: etcd test-alerts
	$(GO) vet $(PKGS)
	SHARDCRON_ETCD_BIN=$(CURDIR)/$(BIN)/etcd $(GO) test -p 1 $(TESTFLAGS) $(PKGS)

# Prometheus' own unit tests of deploy/prometheus/alerts.yaml.
test-alerts: promtool
	$(BIN)/promtool check rules deploy/prometheus/alerts.yaml
	$(BIN)/promtool test rules deploy/prometheus/alerts_test.yaml

# promtool, built from the Prometheus module pinned in tools/promtool (its
# own module: Prometheus' dependencies stay out of our go.mod). Rebuilt only
# when that pin changes; Go's module and build caches make a rebuild cheap.
# remove_all_sd leaves out the cloud service discoveries (the AWS, Azure and
# GCP SDKs), which rule tests never use: a cold build takes minutes, not an
# hour on two busy cores.
promtool: $(BIN)/promtool
$(BIN)/promtool: tools/promtool/go.mod tools/promtool/go.sum
	cd tools/promtool && $(GO) build -tags remove_all_sd -o $(CURDIR)/$(BIN)/promtool github.com/prometheus/prometheus/cmd/promtool

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

clean:
	rm -rf $(BIN)
