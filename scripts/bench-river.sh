#!/usr/bin/env bash
# spool's drain against River's benchmark on one PostgreSQL server, in one
# run: ROUNDS rounds (3), alternating which goes first, each with N
# messages for spool and N jobs for River (100 000), then the medians.
#
#   scripts/bench-river.sh            # or: make bench-river
#   N=20000 ROUNDS=5 PG=postgres://... scripts/bench-river.sh
#
# River's command-line module (cmd/river) is not on the module proxy this
# machine reaches, only its library; so River is built here from the proxy
# (github.com/riverqueue/river@RIVER_VERSION and its pgx driver) into a
# temporary module of this script's own, a program that runs River's
# benchmark the way `river bench --num-total-jobs N` does (its
# cmd/river/riverbench/river_bench.go): the jobs table truncated and
# VACUUM FULLed, N jobs of kind "benchmark" inserted in batches of 5 000
# before the client starts, MaxWorkers 2 000 on the default queue,
# FetchCooldown 2 ms, FetchPollInterval 20 ms, a subscription of 75 000
# counting completions, the rate from the client's start to the last job
# worked; a pool as the CLI opens it (pgx's default size, statement_timeout
# 10 s). Nothing of River is kept: the temporary directory goes at exit.
#
# spool is built from this checkout and runs `spool bench --n N --db PG`
# (a durable drain of N generated messages, 10% redeliveries and 1% poison,
# its ledger in a schema of the run's own).
#
# Each side gets a database of its own on the server, dropped at exit, so
# that the server's CPU is counted per side: the user and system time of
# the backends serving that database (/proc/PID/stat, by process title),
# over the measured time, read by spool bench itself and by the River
# program. Both print the process's own CPU per message over the same time
# (getrusage). The load average is printed before each run and at the end.
# The machine's other work runs meanwhile: that is why the sides alternate
# and the medians are the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

N=${N:-100000}
ROUNDS=${ROUNDS:-3}
RIVER_VERSION=${RIVER_VERSION:-v0.51.2}
PG=${PG:-${SPOOL_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}

step() { printf '\n=== %s\n' "$*"; }

# psql creates and drops the two databases.
if ! command -v psql >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client >/dev/null) || { echo "psql is not installed and apt-get could not install it"; exit 1; }
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }

tmp=$(mktemp -d)
suffix=$$
db_spool=spool_rb_spool_$suffix
db_river=spool_rb_river_$suffix
cleanup() {
  psql "$PG" -qX -c "DROP DATABASE IF EXISTS $db_spool WITH (FORCE)" -c "DROP DATABASE IF EXISTS $db_river WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# dburl URL DB: the URL with its database replaced.
dburl() {
  local base=${1%%\?*} query=
  [[ $1 == *\?* ]] && query="?${1#*\?}"
  printf '%s/%s%s' "${base%/*}" "$2" "$query"
}

step "build: spool from this checkout, River $RIVER_VERSION from the module proxy into $tmp"
go version
CGO_ENABLED=0 go build -o "$tmp/spool" ./cmd/spool
mkdir -p "$tmp/river"
cat >"$tmp/river/go.mod" <<'EOF'
module riverbench

go 1.25
EOF
cat >"$tmp/river/main.go" <<'EOF'
// River's benchmark with `river bench --num-total-jobs N`'s settings (see
// scripts/bench-river.sh), printing the rate, this process's CPU per job
// and the CPU per job of the server's backends of -db-name's database.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type BenchmarkArgs struct {
	Num int `json:"num"`
}

func (BenchmarkArgs) Kind() string { return "benchmark" }

type BenchmarkWorker struct {
	river.WorkerDefaults[BenchmarkArgs]
}

func (w *BenchmarkWorker) Work(ctx context.Context, j *river.Job[BenchmarkArgs]) error { return nil }

func main() {
	url := flag.String("database-url", "", "PostgreSQL URL")
	n := flag.Int("n", 100000, "jobs inserted before the client starts, worked down")
	dbname := flag.String("db-name", "", "the URL's database, to find its backends in /proc")
	flag.Parse()
	if err := run(context.Background(), *url, *n, *dbname); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, n int, dbname string) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "river CLI"
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "11000"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "10000"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	for _, q := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return err
		}
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &BenchmarkWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2_000}},
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 75_000,
		Kinds:    []river.EventKind{river.EventKindJobCancelled, river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	batch := make([]river.InsertManyParams, 0, 5_000)
	for i := 1; i <= n; i++ {
		batch = append(batch, river.InsertManyParams{Args: BenchmarkArgs{Num: i}})
		if len(batch) == cap(batch) || i == n {
			if _, err := client.InsertMany(ctx, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	var worked, failed atomic.Int64
	done := make(chan time.Time, 1)
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				failed.Add(1)
			}
			if worked.Add(1) == int64(n) {
				done <- time.Now()
				return
			}
		}
	}()
	// The CPU from before the client starts; the time, as riverbench's,
	// from its start to the last job worked.
	cpu0, srv0 := cpuNow(), serverCPU(dbname)
	if err := client.Start(ctx); err != nil {
		return err
	}
	start := time.Now()
	var last time.Time
	select {
	case last = <-done:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d jobs worked in 10 minutes", worked.Load(), n)
	}
	cpu1, srv1 := cpuNow(), serverCPU(dbname)
	elapsed := last.Sub(start)
	if err := client.Stop(ctx); err != nil {
		return err
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&left); err != nil {
		return err
	}
	fmt.Printf("river      %8.0f jobs/s %8s  cpu %5.1fµs/job  (%d jobs worked, River %s)\n",
		float64(n)/elapsed.Seconds(), elapsed.Round(time.Millisecond), float64((cpu1-cpu0).Microseconds())/float64(n), worked.Load(), riverVersion)
	fmt.Printf("server     cpu %5.1fµs/job (the PostgreSQL backends of database %s, during the run)\n",
		float64((srv1-srv0).Microseconds())/float64(n), dbname)
	if failed.Load() != 0 || left != 0 {
		return fmt.Errorf("%d jobs not completed, %d rows not completed", failed.Load(), left)
	}
	return nil
}

var riverVersion = "?"

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU sums the user and system time of the PostgreSQL backends
// serving database dbname, found by their process titles.
func serverCPU(dbname string) time.Duration {
	var ticks int64
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmd), "postgres:") || !strings.Contains(string(cmd), " "+dbname+" ") {
			continue
		}
		st, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		var u, sy int64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &sy)
		ticks += u + sy
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}
EOF
(
  cd "$tmp/river"
  export GOFLAGS=-mod=mod GOWORK=off
  go get github.com/riverqueue/river@"$RIVER_VERSION" github.com/riverqueue/river/riverdriver/riverpgxv5@"$RIVER_VERSION" github.com/jackc/pgx/v5 >/dev/null 2>&1 ||
    go get github.com/riverqueue/river@"$RIVER_VERSION" github.com/riverqueue/river/riverdriver/riverpgxv5@"$RIVER_VERSION" github.com/jackc/pgx/v5
  go mod tidy >/dev/null 2>&1 || go mod tidy
  CGO_ENABLED=0 go build -ldflags "-X main.riverVersion=$RIVER_VERSION" -o "$tmp/river-bench" .
  grep -E 'riverqueue/river |jackc/pgx/v5 ' go.mod | sed 's/^\t*/  /'
)

step "databases $db_spool and $db_river on ${PG%%\?*}"
psql "$PG" -qX -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db_spool" -c "CREATE DATABASE $db_river"
psql "$PG" -AtqX -c 'SELECT version()'
echo "cores $(nproc), load at start $(load)"

# one_spool and one_river run one side once and append "rate cpu server
# load" to their results file.
one_spool() {
  local out l
  l=$(load)
  echo "-- spool, load $l"
  out=$("$tmp/spool" bench --n "$N" --db "$(dburl "$PG" "$db_spool")")
  echo "$out"
  awk -v l="${l%% *}" '/^spool /{r=$2; c=$6} /^server /{s=$3} END{sub(/µs.*/,"",c); sub(/µs.*/,"",s); print r, c, s, l}' <<<"$out" >>"$tmp/spool.txt"
}
one_river() {
  local out l
  l=$(load)
  echo "-- River, load $l"
  out=$("$tmp/river-bench" -database-url "$(dburl "$PG" "$db_river")" -db-name "$db_river" -n "$N" 2>"$tmp/river.log") || { cat "$tmp/river.log"; return 1; }
  echo "$out"
  awk -v l="${l%% *}" '/^river /{r=$2; c=$6} /^server /{s=$3} END{sub(/µs.*/,"",c); sub(/µs.*/,"",s); print r, c, s, l}' <<<"$out" >>"$tmp/river.txt"
}

for round in $(seq "$ROUNDS"); do
  step "round $round of $ROUNDS ($( ((round % 2)) && echo "spool first" || echo "River first"))"
  if ((round % 2)); then one_spool; one_river; else one_river; one_spool; fi
done

# median COLUMN FILE
median() { awk -v c="$1" '{print $c}' "$2" | sort -g | awk '{v[NR]=$1} END{if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

step "results: $N messages / jobs a run, $ROUNDS rounds alternated, load at end $(load)"
paste -d' ' "$tmp/spool.txt" "$tmp/river.txt" | awk '{print $0, $1/$5}' >"$tmp/rounds.txt"
echo "| round | load at start (spool, River) | spool msg/s | River jobs/s | spool / River | spool CPU µs/msg (server) | River CPU µs/job (server) |"
echo "|---:|---|---:|---:|---:|---:|---:|"
awk '{printf "| %d | %s, %s | %.0f | %.0f | %.2f | %.1f (%.1f) | %.1f (%.1f) |\n", NR, $4, $8, $1, $5, $9, $2, $3, $6, $7}' "$tmp/rounds.txt"
printf '| median | | %.0f | %.0f | **%.2f** | %.1f (%.1f) | %.1f (%.1f) |\n' \
  "$(median 1 "$tmp/rounds.txt")" "$(median 5 "$tmp/rounds.txt")" "$(median 9 "$tmp/rounds.txt")" \
  "$(median 2 "$tmp/rounds.txt")" "$(median 3 "$tmp/rounds.txt")" "$(median 6 "$tmp/rounds.txt")" "$(median 7 "$tmp/rounds.txt")"
awk '{sc=$2+$3; rc=$6+$7; printf "round %d: CPU per message, client and server together: spool %.1f µs (server %.0f%%), River %.1f µs (server %.0f%%)\n", NR, sc, 100*$3/sc, rc, 100*$7/rc}' "$tmp/rounds.txt"
