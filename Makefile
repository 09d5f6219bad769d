# Targets for spool. `make help` lists them.
GO ?= go
PKGS := ./...

.PHONY: help build install-man test test-long test-race bench fuzz lint lab ci
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## static binary ./spool
	CGO_ENABLED=0 $(GO) build -o spool ./cmd/spool

PREFIX ?= /usr/local
install-man: ## write the manual pages into $(PREFIX)/share/man/man1 from the help text
	mkdir -p $(DESTDIR)$(PREFIX)/share/man/man1
	$(GO) run ./cmd/spool man $(DESTDIR)$(PREFIX)/share/man/man1

test: ## the quick tests (offline; long and service tests skip, saying why)
	$(GO) test $(PKGS)

test-long: ## every test, long crash/soak/storm runs included
	SPOOL_TEST_LONG=1 $(GO) test -count=1 -timeout 20m $(PKGS)

test-race: ## every test under the race detector, as CI runs them
	SPOOL_TEST_LONG=1 $(GO) test -race -count=1 -timeout 20m $(PKGS)

bench: ## Go benchmarks of the hot parts
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz: ## fuzz the message, spool.conf, --sql and batch record parsers for a minute each
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzScan -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzParseConfig -fuzztime 60s ./cmd/spool
	$(GO) test -run '^$$' -fuzz FuzzParseSQL -fuzztime 60s ./handler
	$(GO) test -run '^$$' -fuzz FuzzCSV -fuzztime 60s ./batch
	$(GO) test -run '^$$' -fuzz FuzzJSONL -fuzztime 60s ./batch
	$(GO) test -run '^$$' -fuzz FuzzXML -fuzztime 60s ./batch

lint: ## gofmt, go vet and staticcheck (the version go.mod pins as a tool)
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

lab: ## the lab's eight steps in a temporary queue
	examples/lab/run.sh

ci: ## what CI runs
	bash .ci/run
