# burst: elastic cloud burst for Slurm. `make help` lists the targets.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
# go-nvml's header marks functions deprecated; burst does not call those
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
GO ?= go
BIN ?= bin
PREFIX ?= /usr/local
CMDS := resume suspend sizer agent slurm-conf
# the release stamped into every binary (burst-X --version)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/burst-hpc/burst/internal/version.Version=$(VERSION)
# the linters `make lint` runs, pinned (go run fetches them from the module proxy)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE ?= golang.org/x/tools/cmd/deadcode@v0.51.0
# the fuzz targets run briefly by `make test` (package:FuzzName)
FUZZTIME ?= 3s
# Slurm versions `make test` runs the real-Slurm tests on (22.05: the host's
# Debian 12 packages; 24.11, 26.05: Debian roots built by scripts/slurm-roots.sh)
SLURM_VERSIONS ?= 22.05 24.11 26.05
# the version `make demo` (and a plain `go test`) runs
BURST_SLURM ?= 22.05
export BURST_SLURM
# how burst talks to Slurm in `make demo` (and a plain `go test` of test/e2e):
# cli (scontrol, squeue, sinfo) or rest (slurmrestd with JWT)
BURST_SLURM_API ?= cli
export BURST_SLURM_API

comma := ,

.PHONY: help deps build test bench-smoke test-unit test-fuzz bench bench-scale demo screenshots install lint image test-gpu generate clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install the Debian packages and Slurm roots the demo and tests need (as root)
	@scripts/install-deps.sh $(DEPS_SLURM)

build: ## build the five burst binaries into bin/
	@mkdir -p $(BIN)
	@for c in $(CMDS); do \
	  CGO_ENABLED=$$( [ $$c = agent ] && echo 1 || echo 0 ) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/burst-$$c ./$$c || exit 1; \
	done
	@ls -1 $(BIN)

test: DEPS_SLURM = $(SLURM_VERSIONS)
test: deps ## install what is missing, then vet, build, run every test (real Slurm of each version, EC2 emulator) and fuzz briefly
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./internal/... ./resume/... ./suspend/... ./slurm-conf/... ./test/...
	$(MAKE) build
	BURST_REQUIRE_SLURM=1 BURST_REQUIRE_TOOLS=1 BURST_REQUIRE_DATA=1 BURST_BIN=$(CURDIR)/$(BIN) GO=$(GO) scripts/test-matrix.sh $(SLURM_VERSIONS)
	$(MAKE) bench-smoke
	$(MAKE) test-fuzz

bench-smoke: ## run every benchmark once at its smallest size (-short, -benchtime=1x; no timing judged), so a broken benchmark fails
	BURST_REQUIRE_SLURM=1 BURST_REQUIRE_DATA=1 BURST_BIN=$(CURDIR)/$(BIN) BURST_SLURM=22.05 $(GO) test -short -run='^$$' -bench=. -benchtime=1x -count=1 -timeout=20m ./...

test-unit: ## tests that need no root and start no daemon (fast; any user)
	env -u BURST_SLURM -u BURST_SLURM_API -u BURST_REQUIRE_SLURM $(GO) test -short ./...

test-fuzz: ## run every fuzz target for FUZZTIME (default 3s)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg >/tmp/burst-fuzz.log 2>&1 || \
	    { grep -q 'context deadline exceeded' /tmp/burst-fuzz.log && ! grep -q 'Failing input' /tmp/burst-fuzz.log && \
	      echo "  (go's fuzz engine missed its own deadline on a loaded machine, no failing input: once more)" && \
	      $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg >/tmp/burst-fuzz.log 2>&1; } || { cat /tmp/burst-fuzz.log; exit 1; }; \
	  done; \
	done

bench: DEPS_SLURM = $(SLURM_VERSIONS)
bench: deps build ## run the benchmarks and print their figures (the release benchmark on every Slurm version)
	BURST_BIN=$(CURDIR)/$(BIN) $(GO) test -run='^$$' -bench=. -benchtime=1x -count=1 -timeout=30m ./... | grep -E 'Benchmark|ok|FAIL|^[a-z]|^  '
	@for v in $(filter-out 22.05,$(SLURM_VERSIONS)); do \
	  BURST_SLURM=$$v BURST_BIN=$(CURDIR)/$(BIN) $(GO) test -run='^$$' -bench=ReleaseLatency -benchtime=1x -count=1 -timeout=30m ./test/e2e | grep -E 'Benchmark|ok|FAIL|^[a-z]|^  '; \
	done

# the 100,000-job store the dashboard and HTTP benchmarks share (filled
# once, about 15 min here; delete it to fill again)
BENCH_STATE ?= /tmp/burst-bench-state-100k
bench-scale: DEPS_SLURM = $(SLURM_VERSIONS)
bench-scale: deps build ## Slurm traffic per resumed node and per spot notice at 1,000, 10,000 and 100,000 held jobs (every Slurm version, both backends), burst-resume of 10 to 10,000 nodes through the emulator's token bucket with a reconciler pass (22.05), the launch lock alone, every dashboard page at 100,000 jobs and 10,000 nodes, budgets, ledger, rank and route over HTTP and the sizer's memory at 100,000 jobs (long: 100,000 sbatch per version)
	@for v in $(SLURM_VERSIONS); do \
	  BURST_SLURM=$$v BURST_BENCH_QUEUED=$(or $(QUEUED),1000$(comma)10000$(comma)100000) BURST_BIN=$(CURDIR)/$(BIN) $(GO) test -run='^$$' -bench=SlurmPerResumedNode -benchtime=1x -count=1 -timeout=120m ./internal/slurm | grep -E '^slurm-traffic|ok|FAIL' || exit 1; \
	done
	BURST_SLURM=22.05 BURST_BENCH_NODES=$(or $(NODES),10$(comma)100$(comma)1000$(comma)10000) BURST_BIN=$(CURDIR)/$(BIN) $(GO) test -run='^$$' -bench=ResumeScale -benchtime=1x -count=1 -timeout=60m ./test/e2e | grep -E '^resume-scale|^reconcile-scale|ok|FAIL' || exit 1
	$(GO) test -run='^$$' -bench=LaunchLock -benchtime=1x -count=1 ./internal/cloud/ec2 | grep -E '^launch-lock|ok|FAIL' || exit 1
	BURST_BENCH_STATE=$(BENCH_STATE) BURST_BENCH_JOBS=100000 BURST_BENCH_NODES=10000 $(GO) test -run='^$$' -bench=Pages -benchtime=1x -count=1 -timeout=60m ./sizer/ui | grep -E '^dashboard|ok|FAIL' || exit 1
	BURST_BENCH_STATE=$(BENCH_STATE) BURST_BENCH_JOBS=100000 $(GO) test -run='^$$' -bench=HTTPFilled -benchtime=1x -count=1 -timeout=30m ./sizer/server | grep -E '^sizer-scale|ok|FAIL'

demo: DEPS_SLURM = $(BURST_SLURM)
demo: deps build ## run the local demo cluster: real Slurm (BURST_SLURM=22.05|24.11|26.05, BURST_SLURM_API=cli|rest), burst, the EC2 emulator (as root); KEEP=1 keeps it and the dashboard up until Ctrl-C
	$(GO) run ./test/demo -bin $(CURDIR)/$(BIN) $(if $(KEEP),-stay)

screenshots: deps build ## refresh the dashboard screenshots in docs/img (the browser end-to-end test, as root)
	BURST_SCREENSHOTS=docs/img BURST_REQUIRE_SLURM=1 BURST_REQUIRE_TOOLS=1 BURST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -run TestDashboard -v ./test/e2e

# where `make package` writes: the packages in DIST, what the binaries
# generate (man pages, completions) in DIST/gen
DIST ?= dist
.PHONY: package
package: build ## build the .deb (Debian 12/13, Ubuntu 22.04/24.04) and .rpm (Rocky/RHEL 9) into DIST (default dist/)
	@rm -rf $(DIST)/gen && mkdir -p $(DIST)/gen/man $(DIST)/gen/bash $(DIST)/gen/zsh $(DIST)/gen/fish
	@for c in $(CMDS); do p=$(BIN)/burst-$$c; \
	  $$p man | gzip -n -9 > $(DIST)/gen/man/burst-$$c.1.gz && \
	  $$p completion bash > $(DIST)/gen/bash/burst-$$c && \
	  $$p completion zsh > $(DIST)/gen/zsh/_burst-$$c && \
	  $$p completion fish > $(DIST)/gen/fish/burst-$$c.fish || exit 1; \
	done
	$(GO) run ./scripts/package -version '$(VERSION)' -bin $(BIN) -gen $(DIST)/gen -out $(DIST)

install: build ## install the binaries into PREFIX/bin (default /usr/local/bin)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(addprefix $(BIN)/burst-,$(CMDS)) $(DESTDIR)$(PREFIX)/bin/

lint: ## gofmt, go vet, staticcheck, deadcode, shellcheck, packer fmt
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) run $(STATICCHECK) ./...
	@scripts/deadcode.sh $(GO) $(DEADCODE)
	shellcheck $$(git ls-files '*.sh' | grep -v /testdata/)  # testdata: golden outputs, not scripts
	packer fmt -check packer/

image: build ## build the node image with Packer (needs AWS credentials; VARS=path/to/vars.pkrvars.hcl)
	cd packer && packer build -var burst_agent_binary=$(CURDIR)/$(BIN)/burst-agent $(if $(VARS),-var-file=$(abspath $(VARS)),) .

test-gpu: ## sample the machine's NVIDIA GPUs, register the health event sets, read every health counter and run the boot gate through NVML (skips, saying so, without a driver; BURST_REQUIRE_GPU=1 fails instead)
	CGO_ENABLED=1 $(GO) test -count=1 -v -run 'TestRealNVML|TestRealGPUGate' ./agent/gpu/... ./agent/

generate: ## regenerate the embedded catalog (from ../shared/data) and the slurmrestd clients (from internal/slurm/rest/openapi)
	$(GO) generate ./internal/catalog ./internal/slurm/rest

clean: ## remove build output
	rm -rf $(BIN) $(DIST)
