# retryhttp: the commands the README and CI use.
GO ?= go
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT = golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCHCOUNT ?= 8
FUZZTIME ?= 30s

.PHONY: test demo lint bench bench-peers bench-check fuzz examples conformance conformance-update overhead-update charts

# test: the root module alone (it needs only the modules go.mod lists,
# which go mod download fetches, and nothing else: it runs with
# GOPROXY=off): formatting, vet, and every test of the library's packages
# (and retrytest's) under the race detector; the example programs under
# examples/ are make examples'; then the load tests, the simulator's full
# draw and the quota pacing's 15 seeds without it. Whether go.mod is tidy
# is make lint's: go mod tidy loads the tests of the dependencies too, and
# so fetches modules that only those tests import (klauspost/compress,
# testify, go-cmp, yaml), which go.sum lists but nothing here builds. The
# nested modules are tested by make examples, conformance and bench-check,
# and checked by make lint. (-load.full goes after the package: go test
# takes what follows a flag of the test binary's as the binary's, packages
# included.)
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt wants to reformat:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /examples/)
	$(GO) test -count=1 -run 'TestLoad|TestSimulator' . -load.full
	$(GO) test -count=1 -run 'TestQuotaPacing$$' ./internal/admission -load.full

demo:
	$(GO) run ./examples/demo

# examples: the examples in the root module, then those that wrap real
# SDKs, in their own module (examples/sdk) so that the library's go.mod
# never requires an SDK, the OpenTelemetry module (otelretry) and the
# YAML policy module (yamlpolicy).
examples:
	$(GO) test -race -count=1 ./examples/...
	cd examples/sdk && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd otelretry && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd yamlpolicy && $(GO) vet ./... && $(GO) test -race -count=1 ./...

# lint: tidy go.mod files, vet and staticcheck over the library and every
# nested module.
lint:
	$(GO) mod tidy -diff
	cd bench && $(GO) mod tidy -diff
	cd examples/sdk && $(GO) mod tidy -diff
	cd otelretry && $(GO) mod tidy -diff
	cd conformance && $(GO) mod tidy -diff
	cd yamlpolicy && $(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd examples/sdk && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd otelretry && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd conformance && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd yamlpolicy && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

# bench: the root benchmarks, each against the bare base transport in the
# same run, interleaved (one -count at a time, BENCHCOUNT times) so that
# the machine's drift hits every contender alike; benchstat compares them
# as ratios to bare. bench-peers does the same for the other libraries.
bench:
	rm -f bench.txt
	for i in $$(seq $(BENCHCOUNT)); do $(GO) test -run '^$$' -bench . -benchmem -count 1 . | tee -a bench.txt; done
	$(GO) run $(BENCHSTAT) -col /rt bench.txt

# overhead-update: the in-memory overhead benchmark, interleaved
# BENCHCOUNT times, into docs/data/overhead.txt, the data of the chart of
# docs/performance.md; charts redraws the charts of docs/ from their data
# (that file and conformance/results.md) without running anything.
overhead-update:
	rm -f docs/data/overhead.txt
	for i in $$(seq $(BENCHCOUNT)); do $(GO) test -run '^$$' -bench 'Overhead/seq' -benchmem -count 1 . >> docs/data/overhead.txt; done

charts:
	cd bench && $(GO) run ./charts -bench ../docs/data/overhead.txt -out ../docs/performance.png
	cd bench && $(GO) run ./charts -conformance ../conformance/results.md -out ../docs/conformance.png

bench-peers:
	rm -f bench/success.txt
	cd bench && for i in $$(seq $(BENCHCOUNT)); do $(GO) test -run '^$$' -bench . -benchmem -count 1 . | tee -a success.txt; done
	cd bench && $(GO) run $(BENCHSTAT) -col /rt success.txt

# fuzz: each fuzz target for FUZZTIME; the seed corpora are in testdata/fuzz.
# Minimizing a new input is bounded by a count of runs, not by time (the
# default, 60 s, let a worker sit at 0 execs/s past a short -fuzztime, and
# CI fail on the clock): what CI can fail on is a property, not the time.
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
fuzz:
	$(FUZZ) -fuzz '^FuzzParseRetryAfter$$' .
	$(FUZZ) -fuzz '^FuzzTransport$$' .
	$(FUZZ) -fuzz '^FuzzPolicy$$' .
	$(FUZZ) -fuzz '^FuzzPolicyShapes$$' .
	$(FUZZ) -fuzz '^FuzzQuotaPacing$$' .
	$(FUZZ) -fuzz '^FuzzRateLimitWait$$' ./internal/ratelimit
	$(FUZZ) -fuzz '^FuzzHintMillis$$' ./internal/ratelimit

# bench-check: the benchmark module builds, passes vet, and its tests pass.
bench-check:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

# conformance: the promises of docs/conformance.md against go-httpbin behind toxiproxy
# (in-process, HTTP/1.1 and HTTP/2 with TLS), in its own module; fails if
# conformance/results*.md or docs/conformance.md's tables differ from the run.
# conformance-update rewrites them from the run.
conformance:
	cd conformance && $(GO) test -race -count=1 ./...

conformance-update:
	cd conformance && $(GO) test -race -count=1 ./... -update
