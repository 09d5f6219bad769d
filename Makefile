# Targets for spool. `make help` lists them.
GO ?= go
PKGS := ./...

.PHONY: help build test test-race bench fuzz lint lab ci
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## static binary ./spool
	CGO_ENABLED=0 $(GO) build -o spool ./cmd/spool

test: ## the tests (offline; service tests skip without their env vars)
	$(GO) test $(PKGS)

test-race: ## the tests under the race detector, as CI runs them
	$(GO) test -race -count=1 $(PKGS)

bench: ## Go benchmarks of the hot parts
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz: ## fuzz the message and spool.conf parsers for a minute each
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzScan -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzParseConfig -fuzztime 60s ./cmd/spool

lint: ## gofmt, go vet and staticcheck (the version go.mod pins as a tool)
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

lab: ## the lab's eight steps in a temporary queue
	examples/lab/run.sh

ci: ## what CI runs
	bash .ci/run
