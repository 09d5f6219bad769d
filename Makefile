# Targets for spool. `make help` lists them.
GO ?= go
PKGS := ./...

.PHONY: help build install install-man uninstall test test-long test-race bench bench-river fuzz lint lab ci FORCE
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'

build: spool ## static binary ./spool
spool: FORCE
	CGO_ENABLED=0 $(GO) build -o spool ./cmd/spool

# Where install puts things, under $(DESTDIR) (a package's staging root).
# The unit in examples/ops runs /usr/local/bin/spool. SPOOL_BIN is the
# binary installed: ./spool, built, unless given.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man/man1
BASHDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHDIR ?= $(PREFIX)/share/zsh/site-functions
FISHDIR ?= $(PREFIX)/share/fish/vendor_completions.d
SPOOL_BIN ?= spool

install: $(SPOOL_BIN) ## the binary into $(PREFIX)/bin (/usr/local/bin), manual pages, bash/zsh/fish completion
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR) $(DESTDIR)$(BASHDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR)
	install -m 0755 $(SPOOL_BIN) $(DESTDIR)$(BINDIR)/spool
	$(abspath $(SPOOL_BIN)) man $(DESTDIR)$(MANDIR) >/dev/null
	$(abspath $(SPOOL_BIN)) completion bash > $(DESTDIR)$(BASHDIR)/spool
	$(abspath $(SPOOL_BIN)) completion zsh > $(DESTDIR)$(ZSHDIR)/_spool
	$(abspath $(SPOOL_BIN)) completion fish > $(DESTDIR)$(FISHDIR)/spool.fish
	chmod 0644 $(DESTDIR)$(MANDIR)/spool.1 $(DESTDIR)$(MANDIR)/spool-*.1 $(DESTDIR)$(BASHDIR)/spool $(DESTDIR)$(ZSHDIR)/_spool $(DESTDIR)$(FISHDIR)/spool.fish

install-man: $(SPOOL_BIN) ## only the manual pages, into $(PREFIX)/share/man/man1, from the help text
	install -d $(DESTDIR)$(MANDIR)
	$(abspath $(SPOOL_BIN)) man $(DESTDIR)$(MANDIR)

uninstall: ## remove what install put under $(PREFIX)
	rm -f $(DESTDIR)$(BINDIR)/spool $(DESTDIR)$(MANDIR)/spool.1 $(DESTDIR)$(MANDIR)/spool-*.1
	rm -f $(DESTDIR)$(BASHDIR)/spool $(DESTDIR)$(ZSHDIR)/_spool $(DESTDIR)$(FISHDIR)/spool.fish

test: ## the quick tests (offline; long and service tests skip, saying why)
	$(GO) test $(PKGS)

test-long: ## every test, long crash/soak/storm runs included
	SPOOL_TEST_LONG=1 $(GO) test -count=1 -timeout 20m $(PKGS)

test-race: ## every test under the race detector, as CI runs them
	SPOOL_TEST_LONG=1 $(GO) test -race -count=1 -timeout 25m $(PKGS)

bench: ## Go benchmarks of the hot parts
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

bench-river: ## spool's drain against River's benchmark on PostgreSQL, 3 alternated rounds (builds River in a temporary directory; minutes)
	scripts/bench-river.sh

fuzz: ## fuzz the message, spool.conf, --sql and batch record parsers for a minute each
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzScan -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzParseConfig -fuzztime 60s ./cmd/spool
	$(GO) test -run '^$$' -fuzz FuzzParseSQL -fuzztime 60s ./handler
	$(GO) test -run '^$$' -fuzz FuzzCSV -fuzztime 60s ./batch
	$(GO) test -run '^$$' -fuzz FuzzJSONL -fuzztime 60s ./batch
	$(GO) test -run '^$$' -fuzz FuzzXML -fuzztime 60s ./batch
	$(GO) test -run '^$$' -fuzz FuzzUTF16 -fuzztime 60s ./batch

lint: ## gofmt, go vet and staticcheck (the version go.mod pins as a tool)
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

lab: ## the lab's eight steps in a temporary queue
	examples/lab/run.sh

ci: ## what CI runs
	bash .ci/run
