# transmirror — make demo runs it, make test proves it.
GO          ?= go
BIN         ?= bin
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Fuzz smoke runs count executions, never wall-clock time: a -fuzztime
# duration races Go's fuzz coordinator at its deadline on a busy machine
# (golang/go#75804, "context deadline exceeded" with no input written), a
# count has no deadline, so only a real finding fails. FUZZ_EXECS is the
# default count (about 2 s at 10k executions/s on 2 cores); FUZZ_EXECS_BY
# sizes targets that are much faster or slower than that, so that each one
# runs for a few seconds.
FUZZ_EXECS    ?= 20000
FUZZ_EXECS_BY ?= FuzzReadRows=60000 FuzzClientPrefix=60000 FuzzParseTrace=60000 \
	FuzzAddMember=4000 FuzzPushLoad=4000 FuzzPushRedirects=4000 \
	FuzzDecodeIndex=30000 FuzzDecodeChanges=30000 FuzzSketch=60000
# fuzz-long gives every target FUZZ_LONG_TIME, a -fuzztime value: a duration
# (an interactive run; see above for why smoke runs never use one) or a count
# such as 2000000x. FUZZ_ONLY limits fuzz and fuzz-long to the targets it
# names, e.g. make fuzz-long FUZZ_ONLY=FuzzRecvConn FUZZ_LONG_TIME=30m.
FUZZ_LONG_TIME ?= 1m
FUZZ_ONLY      ?=
# Smoke runs also bound the minimizing of each new input to a count:
# minimizing runs outside -fuzztime, for up to 60 s an input by default.
FUZZ_MINIMIZE_EXECS ?= 1000
# What the tests execute, as what:package, what being a command looked up
# in PATH or, for a package with no command, a file it installs: dig (e2e),
# unbound and unbound-checkconf (e2e), headless chromium (e2e dashboard),
# curl (TestDemo runs the printed curl), gcc and the C headers (-race
# needs cgo), etcd (the NS set's shared store: dnsd/cluster and e2e),
# apt-get (e2e: apt update from a mirror, flat and dists/ repositories),
# mount and umount (e2e: a read-only and a full state directory; these
# need root, which the test says when it is missing), xmllint (probe/api:
# the Metalink mirror list against RFC 5854's RELAX NG schema), pebble (e2e:
# the ACME CA that issues the mirrors' certificates by DNS-01 through dnsd),
# lintian, dpkg-deb and systemd (e2e: the packages checked, then installed
# into a system of the test's own that systemd boots in namespaces; the
# units checked by systemd-analyze verify), promtool (e2e: the alert rules
# checked, unit-tested, and their metrics found on live daemons), etcdctl
# (dnsd/cluster/etcdtest: a TLS etcd's users and roles; e2e).
TEST_DEPS ?= dig:dnsutils delv:bind9-dnsutils dnsviz:dnsviz unbound:unbound unbound-checkconf:unbound \
	chromium:chromium curl:curl gcc:gcc /usr/include/stdio.h:libc6-dev \
	etcd:etcd-server apt-get:apt mount:mount umount:mount xmllint:libxml2-utils \
	pebble:pebble zonemaster-cli:zonemaster-cli ip:iproute2 unshare:util-linux nsenter:util-linux \
	lintian:lintian dpkg-deb:dpkg /lib/systemd/systemd:systemd systemd-analyze:systemd adduser:adduser \
	promtool:prometheus etcdctl:etcd-client
# What bench-dns executes besides dnsd, in the same form (gdnsd by its
# path: /usr/sbin is not in every user's PATH).
BENCH_DNS_DEPS ?= dnsperf:dnsperf /usr/sbin/gdnsd:gdnsd /usr/sbin/knotd:knot dig:dnsutils taskset:util-linux
# What bench-http executes besides the mirror, in the same form (haproxy
# and nginx by their paths, in /usr/sbin).
BENCH_HTTP_DEPS ?= /usr/sbin/haproxy:haproxy /usr/sbin/nginx:nginx wrk:wrk curl:curl taskset:util-linux

export CGO_ENABLED ?= 1

.PHONY: all build deb install test unit e2e race lint fuzz fuzz-long bench bench-site bench-dns bench-http skew soak sim deps demo clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

# Packages. make deb builds the Debian packages of dnsd, mirror and
# groupctl into dist/ with goreleaser's nfpm, run at a pinned version (a
# tool, not a module dependency), from docs/packaging/nfpm-*.yaml: the
# binaries in /usr/bin, the units, the example configs as conffiles in
# /etc/transmirror, /var/lib/transmirror, and the scripts that make the
# transmirror user and the secrets. make install copies the same into
# $(DESTDIR)$(PREFIX) for systems without dpkg, the units' binaries moved
# to $(PREFIX)/bin; existing configs are kept.
PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= $(PREFIX)/lib/systemd/system
NFPM ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0
VERSION ?= $(shell git log -1 --format=0.1.0~git%cd.%h --date=format:%Y%m%d 2>/dev/null || echo 0.1.0)
PACKAGES = dnsd mirror groupctl
# The packages' binaries, built as Debian's Go packages are: position
# independent, full RELRO, stripped, linked against libc (cgo: the
# system's resolver and user lookups), paths trimmed, the commit stamped
# where git can tell it (-version, build_info).
RELEASE_FLAGS = -trimpath -buildvcs=auto -buildmode=pie -ldflags='-s -w -linkmode=external -extldflags=-Wl,-z,relro,-z,now'

deb:
	@mkdir -p dist/bin dist/changelog && rm -f dist/*.deb
	CGO_ENABLED=1 $(GO) build $(RELEASE_FLAGS) -o dist/bin/ $(addprefix ./cmd/,$(PACKAGES))
	@for p in $(PACKAGES); do \
	  printf 'transmirror-%s (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- transmirror developers <developers@transmirror.invalid>  %s\n' \
	    $$p "$(VERSION)" "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" "$$(git log -1 --format=%aD 2>/dev/null || date -R)" \
	    | gzip -9n > dist/changelog/transmirror-$$p.gz; \
	  echo "nfpm: transmirror-$$p $(VERSION)"; \
	  VERSION="$(VERSION)" $(NFPM) package --packager deb --config docs/packaging/nfpm-$$p.yaml --target dist/ || exit 1; \
	done

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)/etc/transmirror
	install -d -m 0750 $(DESTDIR)/var/lib/transmirror
	install -m 0755 $(BIN)/dnsd $(BIN)/mirror $(BIN)/groupctl $(DESTDIR)$(PREFIX)/bin/
	for u in dnsd mirror; do \
	  sed 's|/usr/bin/|$(PREFIX)/bin/|g' docs/systemd/transmirror-$$u.service > $(DESTDIR)$(UNITDIR)/transmirror-$$u.service; \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/transmirror-$$u.service; \
	done
	for f in examples/dnsd.yaml:dnsd.yaml examples/example.org.zone:example.org.zone packaging/mirror.yaml:mirror.yaml; do \
	  [ -e $(DESTDIR)/etc/transmirror/$${f#*:} ] || install -m 0644 docs/$${f%%:*} $(DESTDIR)/etc/transmirror/$${f#*:}; \
	done
	@echo "installed; as root: adduser --system --group transmirror, chown transmirror: /var/lib/transmirror, and write the secrets (docs/operating.md)"

## test: everything CI runs — install what tests need, lint, unit tests with
## the race detector, short fuzz runs, end-to-end tests with the real binaries.
test: deps lint unit fuzz e2e

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)
	@# Allocation counts: the race detector makes sync.Pool drop items.
	$(GO) test -count=1 -run 'Allocs' $$($(GO) list ./... | grep -v /e2e)

# E2E_TIMEOUT: one whole run of the e2e package took 375 s of wall time
# on 2 cores shared with two other builds, when TestSkew ran six phases
# (about 255 s of it, three rounds of two; it runs four now, two rounds);
# 20m leaves more than 3x that.
E2E_TIMEOUT ?= 20m

e2e: build deb
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./e2e/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@cp go.mod go.mod.lintbak; cp go.sum go.sum.lintbak; \
	  $(GO) mod tidy; \
	  if ! cmp -s go.mod go.mod.lintbak || ! cmp -s go.sum go.sum.lintbak; then \
	    mv go.mod.lintbak go.mod; mv go.sum.lintbak go.sum; \
	    echo "go mod tidy changes go.mod/go.sum: run it and commit"; exit 1; fi; \
	  rm -f go.mod.lintbak go.sum.lintbak

## fuzz: every native fuzz target for a short while (seed corpora are
## committed under testdata/fuzz and also run by the unit tests).
fuzz:
	@$(call fuzz_each,)

## fuzz-long: every native fuzz target for FUZZ_LONG_TIME each (1m: about
## 20 minutes in all), on past a failure, naming the failed ones at the end.
## A finding is written to the package's testdata/fuzz/FuzzXxx.
fuzz-long:
	@$(call fuzz_each,$(FUZZ_LONG_TIME))

# fuzz_each runs go test -fuzz for every Fuzz function of every package, or
# those FUZZ_ONLY names: with -fuzztime=$(1), or when $(1) is empty with the
# target's count of executions (FUZZ_EXECS, FUZZ_EXECS_BY), stopping at the
# first failure.
define fuzz_each
failed=""; for pkg in $$($(GO) list ./...); do \
  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
    if [ -n "$(FUZZ_ONLY)" ]; then case " $(FUZZ_ONLY) " in *" $$f "*) ;; *) continue;; esac; fi; \
    n=$(FUZZ_EXECS); \
    for kv in $(FUZZ_EXECS_BY); do [ "$${kv%%=*}" != "$$f" ] || n=$${kv#*=}; done; \
    t="$(1)"; [ -n "$$t" ] || t=$${n}x; \
    echo "fuzz $$pkg $$f (-fuzztime=$$t)"; \
    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$$t $(if $(1),,-fuzzminimizetime=$(FUZZ_MINIMIZE_EXECS)x) $$pkg && continue; \
    [ -n "$(1)" ] || exit 1; \
    failed="$$failed $$pkg.$$f"; \
  done; \
done; \
if [ -n "$$failed" ]; then echo "fuzz targets failed:$$failed"; exit 1; fi
endef

## sim: regenerate docs/simulation.md and its charts with groupsim -report
## (the site level: every site policy on 1-16 back ends in handoff and proxy
## mode, the working set 2-16 times one back end's memory; the global level:
## every dnsd policy with and without the TTL controls and the 302
## correction, TTL 1-300 s, resolver skew, one and three dnsd nodes, ECS;
## about a minute on 2 cores).
sim: build
	$(BIN)/groupsim -report docs

# bench runs every benchmark once over, BenchmarkIndexMillion among them:
# it generates a tree of a million empty files first (about a minute and a
# few hundred MB of disk for the inodes; see mirror/content/bench_test.go).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## bench-site: the seven site policies compared on one front end and four
## back-end mirror processes on loopback, in proxy mode (concurrency 32), then
## handoff mode (concurrency 256, above LARD's admission limit S = 219), each
## the median and range of 3 runs (about 15 minutes on two cores).
## BENCH_SITE_ARGS=-tls measures TLS through the front end instead
## (BenchmarkSiteTLS, about 5 minutes): one front end with a plain and an
## HTTPS listener, proxy then redirect mode, a 4 KiB file over plain HTTP,
## HTTPS (HTTP/1.1 and HTTP/2) on kept connections and new connections (full
## handshakes), requests/s and the front end's CPU per request as ratios to
## plain HTTP in interleaved rounds (-tls-rounds, -tls-mode, -tls-policy).
bench-site:
	$(GO) test -count=1 -run='^$$' -bench=BenchmarkSite -benchtime=1x -timeout=60m ./e2e/benchsite/ -args -site $(BENCH_SITE_ARGS)

## bench-dns: dnsd against gdnsd (installed with apt-get when missing) with
## dnsperf on loopback, the servers on one core and dnsperf on the other:
## seven query mixes, three rounds (about 8 minutes on a quiet machine).
bench-dns: build
	@$(MAKE) --no-print-directory deps TEST_DEPS="$(BENCH_DNS_DEPS)"
	$(GO) test -count=1 -run='^$$' -bench=BenchmarkDNS -benchtime=1x -timeout=45m ./e2e/benchdns/ -args -dns -dnsd $(abspath $(BIN))/dnsd $(BENCH_DNS_ARGS)

## bench-http: the site front end against HAProxy and nginx (installed with
## apt-get when missing) over the same two nginx back ends, and in handoff
## mode over two mirror back ends; wrk on loopback, the front end and the
## back ends on one core and wrk on the other: a 4 KiB file, a mix of 1,000
## 4 KiB files and a 1 MiB file, curl checks first, 2 rounds of 6 s (about
## 6 minutes). A smoke run: BENCH_HTTP_ARGS='-rounds 1 -duration 2s'.
bench-http: build
	@$(MAKE) --no-print-directory deps TEST_DEPS="$(BENCH_HTTP_DEPS)"
	$(GO) test -count=1 -run='^$$' -bench=BenchmarkHTTP -benchtime=1x -timeout=30m ./e2e/benchhttp/ -args -http -mirror $(abspath $(BIN))/mirror $(BENCH_HTTP_ARGS)

## soak: SOAK_DURATION (default 10m) of mixed DNS and HTTP load on dnsd and
## three mirrors on loopback while members flap (a mirror stopped and started
## again, drains and undrains); fails on any failed client request or on
## goroutines or memory growing past the bounds stated in e2e/soak_test.go.
## Not part of test (the build tag soak keeps it out of e2e).
## skew: TestSkew with every phase: the skewed scenario for every global
## policy on one dnsd and on an NS set of two (make test runs four of the
## eight), printing each phase's figures line.
skew: build
	E2E_SKEW_ALL=1 $(GO) test -count=1 -run '^TestSkew$$' -timeout 30m -v ./e2e/ | grep -E '^(=== RUN|--- |\s+--- |ok|FAIL)|skew figures'

SOAK_DURATION ?= 10m
SOAK_TIMEOUT  ?= 30m
soak: build
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -tags soak -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) -v ./e2e/

## deps: install with apt-get the Debian packages of whatever the tests
## execute, only those that are missing (apt-get update only then).
deps:
	@missing=""; pkgs=""; \
	for d in $(TEST_DEPS); do \
	  what=$${d%:*}; pkg=$${d##*:}; \
	  case $$what in /*) [ -e "$$what" ] && continue;; *) command -v "$$what" >/dev/null 2>&1 && continue;; esac; \
	  missing="$$missing $$what"; \
	  case " $$pkgs " in *" $$pkg "*) ;; *) pkgs="$$pkgs $$pkg";; esac; \
	done; \
	if [ -n "$$pkgs" ]; then \
	  echo "missing$$missing: installing$$pkgs"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null; \
	fi

## demo: the whole mirror group on loopback: dnsd with a generated GeoIP
## database, three sites of a front end and two back ends each, generated
## content; everything in a temporary directory, removed on Ctrl-C.
demo: build
	$(BIN)/tmdemo -bin $(BIN)

clean:
	rm -rf $(BIN) dist
