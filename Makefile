# shardcron — the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      := bin
PKGS     := ./...
# `make test` runs the packages in two phases (see the test target):
# the in-process packages under -race, two packages at a time (-p 2), then
# the multi-process suites (PROC_PKGS) one package at a time (-p 1), with
# no other clock-bound test beside them, so nothing starves their lease
# renewals (TTLs of 2-3 s); inside cmd/shardcron, the tests whose clusters
# mostly wait on ticks (besideOthers) then run PROC_PARALLEL at a time,
# after the serial ones. The multi-process suites run their test binary
# without -race but with -tags racebin, which builds the shardcron binary
# they start with -race: the concurrency of a process test is in the
# replicas; the test binary only starts, signals and polls them.
# What reads no wall clock and talks to no etcd (CLOCKFREE_PKGS: pure code
# and testing/synctest bubbles; cmd/shardcron's in-process tests,
# PROC_INPROC_TESTS, under -race; go vet; the Kubernetes check) runs
# beside the multi-process suites at the lowest priority (nice 19), in the
# CPU their serial tests leave idle: half to nine tenths of two cores. Times in
# docs/development.md.
TESTFLAGS ?= -race -count=1 -timeout 20m
PROCFLAGS ?= -tags racebin -count=1 -timeout 20m
MODULE    := github.com/shardcron/shardcron
PROC_PKGS := ./cmd/shardcron ./docs
PROC_INPROC_TESTS := ^(TestUnknownEnvIsNamed|TestHistoryTableTraceColumn|TestLogWriterNeverBlocksAndCountsDrops)$$
CLOCKFREE_PKGS := ./sim ./config ./config/settings ./cronspec ./rebalance
# How many besideOthers tests run at once, after the serial ones. At 6,
# CI once failed three: the jitter test read ledger order as tick order
# (79c3977), and a race-built supervisor slower to start than its first
# allowance refused trigger --wait's runs (07bf2cf); docs/development.md.
PROC_PARALLEL ?= 6
# The longest in-process packages, named first (go list keeps the order
# it is given and names a package once): go test starts test binaries in
# that order, and with shard last (the alphabet's order) the phase ended
# on it alone for about a minute.
SLOW_PKGS := ./jobstore ./shard ./lease ./runner ./scheduler
# make itself, named through a variable where a recipe line also runs the
# suites: a line that names $(MAKE) directly runs even under `make -n`.
SUBMAKE = $(MAKE) --no-print-directory

.PHONY: build run test test-clockfree test-unit test-alerts promtool e2e bench bench-cluster bench-soak lint vulncheck etcd clean image etcd-image static k8s-check k8s-rules e2e-images fuzz sim chaos

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
# etcd process (built from the module) for multi-process tests; then the
# static check of the Kubernetes manifests (its own module, see k8s-check).
# It includes the alert rule tests and the Grafana query check (a test in
# cmd/shardcron), and the browser test of the dashboard, which drives
# Chromium (`apt-get install chromium`; with CI=true a missing one fails).
WITH_ETCD := SHARDCRON_ETCD_BIN=$(CURDIR)/$(BIN)/etcd
PROC_TEST  = $(WITH_ETCD) $(GO) test -p 1 -parallel $(PROC_PARALLEL) $(PROCFLAGS) $(PROC_PKGS)

test: etcd test-alerts
	pkgs=$$($(GO) list $(SLOW_PKGS) $(PKGS) | grep -v -x $(foreach p,$(PROC_PKGS) $(CLOCKFREE_PKGS),-e '$(MODULE)/$(patsubst ./%,%,$(p))')) && \
	$(WITH_ETCD) $(GO) test -p 2 $(TESTFLAGS) $$pkgs
	@echo "make test-clockfree runs at nice 19 beside the suites below; its output follows theirs"
	@echo '$(PROC_TEST)'
	@log=$$(mktemp) || exit 1; \
	nice -n 19 $(SUBMAKE) test-clockfree >"$$log" 2>&1 & bg=$$!; \
	$(PROC_TEST); proc=$$?; \
	wait $$bg; clockfree=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$proc -eq 0 ] || echo "make test: the multi-process suites failed" >&2; \
	[ $$clockfree -eq 0 ] || echo "make test: make test-clockfree failed" >&2; \
	[ $$proc -eq 0 ] && [ $$clockfree -eq 0 ]

# What `make test` runs beside the multi-process suites: nothing here reads
# the wall clock or talks to etcd, so a starved run is slower, never wrong.
test-clockfree:
	$(GO) vet $(PKGS)
	$(GO) test -p 2 $(TESTFLAGS) $(CLOCKFREE_PKGS)
	$(GO) test -race -count=1 -run '$(PROC_INPROC_TESTS)' ./cmd/shardcron
	$(MAKE) k8s-check

# The fast loop, a minute or two: the packages whose tests run in this
# process (pure code, fakes, embedded etcd), under -short and without the
# race detector. Left to `make test`: the multi-process suites
# (cmd/shardcron, the docs quick start), the etcd test helpers, and the
# slow real-etcd packages (internal/etcdembed, jobstore, shard: a minute
# or more each).
UNIT_PKGS := ./cronspec ./rebalance ./config ./config/settings ./httpauth ./internal/baddata \
	./internal/keyspace ./internal/ledger ./internal/poll ./internal/gcpace \
	./scheduler ./runner ./lease ./control ./dashboard ./replica
test-unit:
	$(GO) test -short -count=1 $(UNIT_PKGS)

# Renders deploy/kubernetes with kustomize (krusty) and decodes every object
# strictly into its typed API. Its heavy dependencies (k8s.io/api, kustomize,
# prometheus-operator) live in deploy/kubernetes/check/go.mod, never in ours.
k8s-check:
	cd deploy/kubernetes/check && $(GO) vet ./... && $(GO) test -count=1 ./...

# Regenerates the monitoring component's PrometheusRule from
# deploy/prometheus/alerts.yaml (k8s-check fails while they differ).
k8s-rules:
	cd deploy/kubernetes/check && $(GO) test -count=1 ./... -args -update

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

# Images: FROM scratch around static binaries built here (no base image is
# pulled). Names are overridable, e.g. IMAGE=registry.example/shardcron:1.0.
IMAGE      ?= shardcron:latest
ETCD_IMAGE ?= shardcron-etcd:$(ETCD_VERSION)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" {print $$2}' go.mod)
# Images run Linux whatever the host (Docker Desktop on macOS runs a Linux
# VM): their binaries are built for linux and the host's architecture, or
# GOARCH when set (GOARCH=arm64 make image).
IMAGE_GOARCH ?= $(shell $(GO) env GOARCH)
IMAGE_GOENV  = CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_GOARCH)
STATIC_BUILD = $(IMAGE_GOENV) $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)'
# The first CA bundle found: Debian/Ubuntu/Alpine, macOS, Fedora/RHEL.
CA_BUNDLE ?= $(firstword $(wildcard /etc/ssl/certs/ca-certificates.crt /etc/ssl/cert.pem /etc/pki/tls/certs/ca-bundle.crt) /etc/ssl/certs/ca-certificates.crt)

static:
	$(STATIC_BUILD) -o $(BIN)/static/shardcron ./cmd/shardcron

image: static
	deploy/docker/build.sh deploy/docker/shardcron.Dockerfile $(IMAGE) $(BIN)/static/shardcron $(CA_BUNDLE)

etcd-image:
	$(IMAGE_GOENV) $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/static/etcd go.etcd.io/etcd/server/v3
	deploy/docker/build.sh deploy/docker/etcd.Dockerfile $(ETCD_IMAGE) $(BIN)/static/etcd $(CA_BUNDLE)

# The end-to-end suite on Docker (e2e/, build tag e2e): the current image,
# etcd, the ledger sink, and for the rolling upgrade an image of the last
# landed main, E2E_OLD_COMMIT (UPGRADING.md says how the two read each
# other's data).
E2E_OLD_COMMIT ?= 9f5807a
E2E_OLD_IMAGE  ?= shardcron:e2e-old-$(E2E_OLD_COMMIT)
E2E_LEDGER_IMAGE ?= shardcron-e2e-ledger:latest
E2E_FLAGS ?= -count=1 -timeout 18m -v

e2e-images: image etcd-image
	$(IMAGE_GOENV) $(GO) build -trimpath -o $(BIN)/static/ledger ./e2e/ledger
	deploy/docker/build.sh deploy/docker/ledger.Dockerfile $(E2E_LEDGER_IMAGE) $(BIN)/static/ledger $(CA_BUNDLE)
	@git cat-file -e $(E2E_OLD_COMMIT)^{commit} || { echo "E2E_OLD_COMMIT $(E2E_OLD_COMMIT) is not in this clone's history (git fetch --unshallow)" >&2; exit 1; }
	@old=$$(mktemp -d) && trap 'rm -rf "$$old"' EXIT && \
	git archive $(E2E_OLD_COMMIT) | tar -x -C "$$old" && \
	(cd "$$old" && $(IMAGE_GOENV) $(GO) build -trimpath -ldflags '-s -w -X main.version=$(E2E_OLD_COMMIT) -X main.commit=$(E2E_OLD_COMMIT)' -o shardcron ./cmd/shardcron) && \
	deploy/docker/build.sh deploy/docker/shardcron.Dockerfile $(E2E_OLD_IMAGE) "$$old/shardcron" $(CA_BUNDLE)

e2e: e2e-images
	$(GO) vet -tags e2e ./e2e/...
	SHARDCRON_E2E_IMAGE=$(IMAGE) SHARDCRON_E2E_OLD_IMAGE=$(E2E_OLD_IMAGE) \
	SHARDCRON_E2E_ETCD_IMAGE=$(ETCD_IMAGE) SHARDCRON_E2E_LEDGER_IMAGE=$(E2E_LEDGER_IMAGE) \
	SHARDCRON_E2E_LOGS=$(CURDIR)/$(BIN)/e2e-logs \
	$(GO) test -tags e2e $(E2E_FLAGS) ./e2e/

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The deterministic simulator (sim/doc.go) over SIMSEEDS seeds from
# SIMSTART, GOMAXPROCS bubbles side by side; every failing seed is listed
# with its properties (replay one with -sim.seed=N). `make test` runs the
# CI seeds and sim/testdata/seeds.txt anyway. About 0.15 s of CPU a seed.
# SIMSLOTS=8 gives each node 8 run slots, so bursts wait in line and their
# completions go to the completion journal (TestSimJournalSeeds' mode).
# SIMFLAGS passes more, e.g. another cluster size: -sim.nodes=5
# -sim.shards=8 -sim.jobs=12.
SIMSEEDS ?= 100000
SIMSTART ?= 1
SIMSLOTS ?= 0
SIMFLAGS ?=
sim:
	$(GO) test -count=1 -timeout 0 -run '^TestSimSeeds$$' ./sim -sim.seeds=$(SIMSEEDS) -sim.start=$(SIMSTART) -sim.slots=$(SIMSLOTS) $(SIMFLAGS)

# The chaos run (TestChaos in cmd/shardcron, docs/development.md): for
# CHAOSDURATION a seeded nemesis kills, pauses, terminates, adds and
# removes replicas, stalls etcd, cuts a replica off from etcd, signals
# exec supervisors and slows the receiver, one fault on the heels of the
# last, triggers manual runs ahead of some faults and suspends and
# resumes a job across several; the ledger, the exec jobs' file and the
# replicas' logs are then held to the contract (every tick and every
# accepted trigger ran or a log decided it, no unmarked repeat, no start
# past the starting deadline, no run of a tick due while suspended). `make test` runs it for
# 30 s, CI for 5 minutes; CHAOSSEED=N replays a run's choices (not its
# timing).
CHAOSDURATION ?= 10m
CHAOSSEED ?= 0
chaos: etcd
	$(WITH_ETCD) $(GO) test -tags racebin -count=1 -timeout 0 -run '^TestChaos$$' ./cmd/shardcron -chaos.duration=$(CHAOSDURATION) -chaos.seed=$(CHAOSSEED) -v

# Every fuzz target for FUZZTIME each (their kept corpora, testdata/fuzz,
# run with every `make test` anyway). A failure leaves the failing input in
# that package's testdata/fuzz/<target>/: commit it with the fix. Go 1.26's
# fuzz coordinator can report its own -fuzztime deadline as a failure
# ("context deadline exceeded" and no failing input; go.dev/issue/75804,
# fixed in Go 1.27): that one outcome is run once more, any other fails.
FUZZTIME ?= 10s
FUZZ_TARGETS := ./config:FuzzParseJobs ./cronspec:FuzzParse \
	./dashboard:FuzzJobsQuery ./dashboard:FuzzRunsQuery \
	./scheduler:FuzzDecodeRecord ./scheduler:FuzzPorts ./history:FuzzDecodeSegment \
	./lease:FuzzParseMarker ./jobstore:FuzzDecodeChunk
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		for try in 1 2; do \
			out=$$(mktemp); \
			rc=0; $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s $$pkg > $$out 2>&1 || rc=$$?; \
			cat $$out; \
			if [ $$rc = 0 ]; then rm -f $$out; break; fi; \
			if [ $$try = 1 ] && grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written' $$out; then \
				rm -f $$out; echo "fuzz $$name: the coordinator's own deadline, no input failed (go.dev/issue/75804): once more"; continue; \
			fi; \
			rm -f $$out; exit 1; \
		done; \
	done

# The cluster benchmark: a real etcd, shardcron replicas, the single-leader
# peer (gocron v2 + etcd elector, its own module in bench/leader) and the
# floor system (bench/floor: the same requests at each tick, nothing else)
# as processes on loopback; prints a table and JSON, writes bench/cluster.svg.
# About 25 minutes; BENCHFLAGS="-quick" for a short run (see BENCHMARKS.md).
BENCHFLAGS ?=
bench-cluster: build etcd
	cd bench/leader && $(GO) build -o $(CURDIR)/$(BIN)/shardcron-leader .
	$(GO) build -o $(BIN)/shardcron-floor ./bench/floor
	$(GO) run ./bench/cluster -shardcron $(BIN)/shardcron -etcd $(BIN)/etcd -leader $(BIN)/shardcron-leader -floor $(BIN)/shardcron-floor $(BENCHFLAGS)

# The 30-minute soak (bench/soak): one replica on the embedded default
# firing 5,000 jobs every second into an in-process sink; every 15 s the
# etcd database's size against its quota, NOSPACE, the heap, fires and lag;
# at the end missed ticks and duplicates. SOAKFLAGS="-jobs 500 -duration 2m"
# for a short run (see BENCHMARKS.md, "Soak").
SOAKFLAGS ?=
bench-soak: build
	$(GO) run ./bench/soak -shardcron $(BIN)/shardcron $(SOAKFLAGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	@# Imports in three groups: the standard library, others, this module.
	@out="$$($(GO) run golang.org/x/tools/cmd/goimports@v0.51.0 -local github.com/shardcron/shardcron -l $$(git ls-files '*.go'))" || exit 1; \
		test -z "$$out" || { echo "imports not grouped (goimports -local github.com/shardcron/shardcron -w):"; echo "$$out"; exit 1; }
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
