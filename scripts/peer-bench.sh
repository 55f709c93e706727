#!/usr/bin/env bash
# Side by side: Aftermath and sentry-native's inproc backend, each over its own baseline (the
# same program without the SDK), whole processes, configurations interleaved. Method:
# Harness/Peer/README.md. Sets itself up: scripts/setup.sh, cmake if missing, builds sentry-native
# (../shared/deps/sentry-native, out of tree in .build/peer), the C apps and launcher, and
# peer-app / peer-baseline-app in release; then runs and prints a markdown table.
#   bash scripts/peer-bench.sh [--runs N] [--mem-runs M] [--keep]
# N: runs of each configuration (default 25); M: runs of the 2 s memory figure (default 5);
# --keep: keep the SDKs' directories (.build/peer/dirs); the raw values are always left in
# .build/peer/results.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=25 mem_runs=5 cpu_runs="" keep=0
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --mem-runs) mem_runs=$2; shift 2 ;;
    --cpu-runs) cpu_runs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--runs N] [--mem-runs M] [--cpu-runs C] [--keep]" >&2; exit 2 ;;
    esac
done
# The CPU figure differs by a few tenths of a millisecond on medians near 10 ms: three times the
# runs by default (a launch takes about 0.13 s).
cpu_runs=${cpu_runs:-$((runs * 3))}
deps=$(cd "$root/.." && pwd)/shared/deps
sentry_src=$deps/sentry-native
if [ ! -f "$sentry_src/CMakeLists.txt" ]; then
    echo "peer-bench: SKIPPED: no sentry-native sources in $sentry_src (the repository's parent" \
        "has no shared/deps; see Harness/Peer/README.md)"
    exit 0
fi

# ---- set-up and builds (quiet; their logs in .build/peer/*.log) ----
work=$root/.build/peer
mkdir -p "$work"
bash scripts/setup.sh >"$work/setup.log" 2>&1 || { echo "peer-bench: set-up failed:" >&2; tail -30 "$work/setup.log" >&2; exit 1; }
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v cc >/dev/null || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    echo "peer-bench: installing ${need_apt[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >"$work/apt.log" 2>&1 || {
        $SUDO apt-get update -qq >>"$work/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >>"$work/apt.log" 2>&1
    }
fi
sentry_build=$work/sentry-build
step() { # name command...: runs it with its output in .build/peer/<name>.log, or shows the log
    local name=$1; shift
    if ! "$@" >"$work/$name.log" 2>&1; then
        echo "peer-bench: $name failed:" >&2; tail -30 "$work/$name.log" >&2; exit 1
    fi
}
if [ ! -f "$sentry_build/CMakeCache.txt" ]; then
    echo "peer-bench: building sentry-native (first run only, about 30 s)" >&2
    step sentry-configure cmake -S "$sentry_src" -B "$sentry_build" -DSENTRY_BACKEND=inproc \
        -DSENTRY_TRANSPORT=none -DSENTRY_BUILD_TESTS=OFF -DSENTRY_BUILD_EXAMPLES=OFF \
        -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
step sentry-build cmake --build "$sentry_build" -j "$(nproc)"
peer=$root/Harness/Peer
cflags=(-std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$peer/CPeer/include")
step launcher cc "${cflags[@]}" "$peer/launcher.c" -o "$work/launcher"
step sentry-app cc "${cflags[@]}" -DPEER_WITH_SENTRY -DSENTRY_BUILD_STATIC -I"$sentry_src/include" \
    "$peer/sentry_app.c" "$peer/CPeer/peer.c" "$sentry_build/libsentry.a" \
    "$sentry_build/vendor/libunwind/libunwind.a" -lpthread -ldl -lm -o "$work/sentry-app"
step sentry-baseline-app cc "${cflags[@]}" "$peer/sentry_app.c" "$peer/CPeer/peer.c" \
    -o "$work/sentry-baseline-app"
step peer-app swift build -c release --product peer-app
step peer-baseline-app swift build -c release --product peer-baseline-app
bin=$(swift build -c release --show-bin-path)

# ---- configurations: name, program, extra argument (Aftermath's fsyncReports) ----
declare -A prog=(
    [c-base]=$work/sentry-baseline-app [sentry]=$work/sentry-app
    [swift-base]=$bin/peer-baseline-app [aft]=$bin/peer-app [aft-nofsync]=$bin/peer-app
    [aft-linked]=$bin/peer-app [aft-nohang]=$bin/peer-app
)
# Aftermath's fsyncReports, then how much of it peer-app starts (Harness/Peer/README.md).
declare -A extra=([aft]=1 [aft-nofsync]=0 [aft-linked]="1 linked" [aft-nohang]="1 nohang")
# The Swift runtime's backtracer (about 200 ms a crash) is off for both Swift apps.
export SWIFT_BACKTRACE=enable=no
dirs=$work/dirs
rm -rf "$dirs" && mkdir -p "$dirs"
results=$work/results.tsv
: >"$results"
problems=$work/problems.txt
: >"$problems"

field() { # key line: the value of key=value in line
    awk -v k="$1" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == k) { print substr($i, n + 1); exit } } }' <<<"$2"
}
launch() { # config mode dir: one timed process; its launcher line
    local c=$1 x
    read -r -a x <<<"${extra[$c]:-}"
    "$work/launcher" "${prog[$c]}" "$2" "$3" "${x[@]}"
}
prepare() { # config dir: a fresh directory left by one clean run (the next is a later launch)
    rm -rf "$2"
    launch "$1" init "$2" >/dev/null
}
record() { # figure config run value
    printf '%s\t%s\t%s\t%s\n' "$@" >>"$results"
}
problem() { echo "$*" >>"$problems"; }
reports_in() { # dir: crash reports written there (Aftermath's crash files, sentry's envelopes)
    # Aftermath's: a .crash file, or the reserve its handler committed in place under its
    # .crash.tmp name ("CMIT" at byte 28), which the next launch reads and renames.
    local n f
    n=$(find "$1" \( -path '*/crashes/*.crash' -o -name '*.envelope' \) 2>/dev/null | wc -l)
    while IFS= read -r f; do
        [ "$(dd if="$f" bs=1 skip=28 count=4 2>/dev/null)" = CMIT ] && n=$((n + 1))
    done < <(find "$1" -path '*/crashes/*.crash.tmp' 2>/dev/null)
    echo "$n"
}

# shuffled config...: the configurations in a new order for each round (Fisher-Yates on bash's
# generator, seeded once: the same orders at every run of the script). In a fixed order a
# configuration always ran after the same one: the first Swift process of a round, after the
# C ones, was about 0.3 ms slower in CPU than the same program later in it, which made the
# Swift baseline look dearer than the Swift app linked with Aftermath.
RANDOM=19
shuffled() {
    local a=("$@") i j t
    for ((i = ${#a[@]} - 1; i > 0; i--)); do
        j=$((RANDOM % (i + 1)))
        t=${a[i]} a[i]=${a[j]} a[j]=$t
    done
    echo "${a[@]}"
}

started=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "peer-bench: $runs runs a configuration ($cpu_runs for CPU, $mem_runs for memory), interleaved" >&2

# 1. crash to exit: prepared directory, start, null store at once; fork to wait4.
crash_configs=(c-base sentry swift-base aft aft-nofsync)
for ((i = 1; i <= runs; i++)); do
    for c in $(shuffled "${crash_configs[@]}"); do
        d=$dirs/crash-$c
        prepare "$c" "$d"
        line=$(launch "$c" crash "$d")
        if [ "$(field signal "$line")" != 11 ]; then problem "crash $c run $i: $line"; continue; fi
        record crash "$c" "$i" "$(field wall_ns "$line")"
        record crash-reports "$c" "$i" "$(reports_in "$d")"
    done
done
echo "peer-bench: crash to exit done ($(($(date +%s) - started)) s)" >&2

# 2. init on the calling thread, later launch: one directory a configuration, made by a first run.
for c in sentry aft; do prepare "$c" "$dirs/init-$c"; done
for ((i = 1; i <= runs; i++)); do
    for c in $(shuffled sentry aft); do
        line=$(launch "$c" init "$dirs/init-$c")
        v=$(field init_ns "$line")
        if [ -z "$v" ]; then problem "init $c run $i: $line"; continue; fi
        record init "$c" "$i" "$v"
    done
done

# 3. CPU of init + 100 ms idle + exit: wait4's rusage plus the children the app left alive.
# aft-linked and aft-nohang: what Aftermath's parts cost (the third table).
cpu_configs=(c-base sentry swift-base aft aft-linked aft-nohang)
for c in "${cpu_configs[@]}"; do prepare "$c" "$dirs/idle-$c"; done
for ((i = 1; i <= cpu_runs; i++)); do
    for c in $(shuffled "${cpu_configs[@]}"); do
        line=$(launch "$c" idle "$dirs/idle-$c")
        own=$(field cpu_ns "$line") child=$(field child_cpu_ns "$line")
        if [ "$(field exit "$line")" != 0 ] || [ -z "$child" ]; then problem "idle $c run $i: $line"; continue; fi
        record cpu "$c" "$i" $((own + child))
        record cpu-child "$c" "$i" "$child"
        record cpu-helpers "$c" "$i" "$(field child_aft_unw "$line")"
        record cpu-children "$c" "$i" "$(field children "$line")"
    done
done
echo "peer-bench: init and CPU done ($(($(date +%s) - started)) s)" >&2

# 4. private dirty memory and descriptors 2 s after init (after sync()).
for c in "${cpu_configs[@]}"; do prepare "$c" "$dirs/mem-$c"; done
for ((i = 1; i <= mem_runs; i++)); do
    for c in $(shuffled "${cpu_configs[@]}"); do
        line=$(launch "$c" mem "$dirs/mem-$c")
        pd=$(field self_pd_kb "$line")
        if [ "$(field exit "$line")" != 0 ] || [ -z "$pd" ]; then problem "mem $c run $i: $line"; continue; fi
        [ "$(field child_kcmp_unknown "$line")" = 0 ] || problem "mem $c run $i: kcmp failed, a child may be counted twice: $line"
        record mem "$c" "$i" $((pd + $(field child_pd_kb "$line")))
        record fds "$c" "$i" $(($(field self_fds "$line") + $(field child_fds "$line")))
        record threads "$c" "$i" "$(field self_threads "$line")"
        record mem-helpers "$c" "$i" "$(field child_aft_unw "$line")"
        record mem-shared-vm "$c" "$i" "$(field child_shared_vm "$line")"
        record mem-shared-fds "$c" "$i" "$(field child_shared_fds "$line")"
        record mem-child-raw "$c" "$i" "$(field child_raw_pd_kb "$line")"
        record fds-child-raw "$c" "$i" "$(field child_raw_fds "$line")"
    done
done
echo "peer-bench: memory done ($(($(date +%s) - started)) s)" >&2

# 5. handler: the app's handler installed first; fault to it, through the SDK's handler.
for ((i = 1; i <= runs; i++)); do
    for c in $(shuffled "${crash_configs[@]}"); do
        d=$dirs/handler-$c
        prepare "$c" "$d"
        line=$(launch "$c" handler "$d")
        v=$(field handler_ns "$line")
        if [ "$(field exit "$line")" != 0 ] || [ -z "$v" ]; then problem "handler $c run $i: $line"; continue; fi
        record handler "$c" "$i" "$v"
        record handler-reports "$c" "$i" "$(reports_in "$d")"
        v=$(field sdk_handler_ns "$line")
        [ -z "$v" ] || record handler-own "$c" "$i" "$v"
    done
done
elapsed=$(($(date +%s) - started))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "peer-bench: handler done ($elapsed s)" >&2

# ---- statistics and the table (every figure from results.tsv) ----
stat() { # figure config: "median p90 n" (p90 by nearest rank)
    awk -F'\t' -v f="$1" -v c="$2" '$1 == f && $2 == c { print $4 }' "$results" | sort -g |
        awk '{ v[NR] = $1 } END {
            if (NR == 0) { print "nan nan 0"; exit }
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            k = int(0.9 * NR); if (k < 0.9 * NR) k++
            print m, v[k], NR }'
}
sum() { # figure config: the sum of its values
    awk -F'\t' -v f="$1" -v c="$2" '$1 == f && $2 == c { s += $4 } END { print s + 0 }' "$results"
}
# fmt figure config base scale digits unit: "median (p90 ...)" over base's median and p90
fmt() {
    local s b
    read -r -a s <<<"$(stat "$1" "$2")"
    if [ -n "$3" ]; then read -r -a b <<<"$(stat "$1" "$3")"; else b=(0 0 0); fi
    awk -v m="${s[0]}" -v p="${s[1]}" -v bm="${b[0]}" -v bp="${b[1]}" -v sc="$4" -v dg="$5" -v u="$6" -v over="$3" 'BEGIN {
        if (m == "nan" || bm == "nan") { print "n/a"; exit }
        f = "%" (over != "" ? "+" : "") "." dg "f"
        printf(f "%s (p90 " f ")\n", (m - bm) / sc, u == "" ? "" : " " u, (p - bp) / sc) }'
}
# paired figure config base scale digits unit: the median (p90) of the differences between the
# config's run and its baseline's run of the same round (the rounds are interleaved, so a slow
# stretch of the machine weighs on both sides of each difference)
paired() {
    awk -F'\t' -v f="$1" -v c="$2" -v b="$3" '$1 == f && $2 == c { s[$3] = $4 } $1 == f && $2 == b { t[$3] = $4 }
        END { for (i in s) if (i in t) print s[i] - t[i] }' "$results" | sort -g |
        awk -v sc="$4" -v dg="$5" -v u="$6" '{ v[NR] = $1 } END {
            if (NR == 0) { print "n/a"; exit }
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            k = int(0.9 * NR); if (k < 0.9 * NR) k++
            f = "%+." dg "f"
            printf(f " %s (p90 " f ")\n", m / sc, u, v[k] / sc) }'
}
# versus figure config base peer peer-base scale digits unit: per round, the config's cost over
# its baseline minus the peer's over its own; the median, and the ranks of a distribution-free
# 95 % interval of that median (n/2 -/+ 0.98 sqrt(n)), so a difference the machine's drift
# could make reads as one that includes 0
versus() {
    awk -F'\t' -v f="$1" -v c="$2" -v b="$3" -v p="$4" -v q="$5" '$1 == f { v[$2, $3] = $4; r[$3] = 1 }
        END { for (i in r) if ((c, i) in v && (b, i) in v && (p, i) in v && (q, i) in v)
            print (v[c, i] - v[b, i]) - (v[p, i] - v[q, i]) }' "$results" | sort -g |
        awk -v sc="$6" -v dg="$7" -v u="$8" '{ v[NR] = $1 } END {
            if (NR < 6) { print "n/a"; exit }
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            h = 0.98 * sqrt(NR); lo = int(NR / 2 - h); hi = int(NR / 2 + h + 1)
            if (lo < 1) lo = 1; if (hi > NR) hi = NR
            f = "%+." dg "f"
            printf(f " %s (95 %% interval " f " to " f ", %d rounds)\n", m / sc, u, v[lo] / sc, v[hi] / sc, NR) }'
}
raw() { # figure config scale digits unit: a row of the second table
    local s
    read -r -a s <<<"$(stat "$1" "$2")"
    awk -v m="${s[0]}" -v p="${s[1]}" -v n="${s[2]}" -v sc="$3" -v dg="$4" -v u="$5" -v f="$1" -v c="$2" 'BEGIN {
        u = u == "" ? "" : " " u
        printf("| %s | %s | %." dg "f%s | %." dg "f%s | %d |\n", f, c, m / sc, u, p / sc, u, n) }'
}

echo
version=$(sed -n 's/^# *define SENTRY_SDK_VERSION *"\(.*\)"/\1/p' "$sentry_src/include/sentry.h" | head -1)
echo "## Aftermath vs sentry-native $version (inproc backend), each over its own baseline"
echo
echo "$(nproc) cores, $(uname -sr), $(date -u '+%Y-%m-%d %H:%M UTC'); $runs runs a configuration" \
    "($cpu_runs for CPU, $mem_runs for memory), interleaved; load average $load_before before, $load_after after; $elapsed s."
echo "Medians, p90 in brackets; \"over baseline\": the SDK's median (p90) minus its baseline's."
echo
echo "| figure | sentry-native inproc | Aftermath (fsync on) | Aftermath (fsync off, the default) |"
echo "|---|---|---|---|"
echo "| crash to exit, over baseline | $(fmt crash sentry c-base 1e6 2 ms) | $(fmt crash aft swift-base 1e6 2 ms) | $(fmt crash aft-nofsync swift-base 1e6 2 ms) |"
echo "| init on the calling thread, later launch | $(fmt init sentry "" 1e6 2 ms) | $(fmt init aft "" 1e6 2 ms) | (no crash: as fsync on) |"
echo "| CPU of init + 100 ms idle + exit, over baseline | $(fmt cpu sentry c-base 1e6 2 ms) | $(fmt cpu aft swift-base 1e6 2 ms), of which helper $(fmt cpu-child aft "" 1e6 2 ms) | (as fsync on) |"
echo "| the same, median of each round's difference to its baseline | $(paired cpu sentry c-base 1e6 2 ms) | $(paired cpu aft swift-base 1e6 2 ms) | (as fsync on) |"
echo "| crash to exit, median of each round's difference | $(paired crash sentry c-base 1e6 2 ms) | $(paired crash aft swift-base 1e6 2 ms) | $(paired crash aft-nofsync swift-base 1e6 2 ms) |"
echo "| CPU: Aftermath's cost minus sentry-native's, per round | | $(versus cpu aft swift-base sentry c-base 1e6 2 ms) | (as fsync on) |"
echo "| crash to exit: the same | | $(versus crash aft swift-base sentry c-base 1e6 2 ms) | $(versus crash aft-nofsync swift-base sentry c-base 1e6 2 ms) |"
echo "| idle private dirty memory 2 s after init, over baseline | $(fmt mem sentry c-base 1 0 KiB) | $(fmt mem aft swift-base 1 0 KiB) | (as fsync on) |"
echo "| open descriptors 2 s after init, over baseline | $(fmt fds sentry c-base 1 0 "") | $(fmt fds aft swift-base 1 0 "") | (as fsync on) |"
echo "| handler, fault to the previous handler, over baseline | $(fmt handler sentry c-base 1e3 0 µs) | $(fmt handler aft swift-base 1e3 0 µs) | $(fmt handler aft-nofsync swift-base 1e3 0 µs) |"
echo "| of which Aftermath's own figure: signal entry to committed file | | $(fmt handler-own aft "" 1e3 0 µs) | $(fmt handler-own aft-nofsync "" 1e3 0 µs) |"
echo
echo "| figure | configuration | median | p90 | runs |"
echo "|---|---|---|---|---|"
for c in "${crash_configs[@]}"; do raw crash "$c" 1e6 2 ms; done
for c in sentry aft; do raw init "$c" 1e6 2 ms; done
for c in "${cpu_configs[@]}"; do raw cpu "$c" 1e6 2 ms; done
raw cpu-child aft 1e6 2 ms
for c in "${cpu_configs[@]}"; do raw mem "$c" 1 0 KiB; done
for c in "${cpu_configs[@]}"; do raw fds "$c" 1 0 ""; done
for c in "${cpu_configs[@]}"; do raw threads "$c" 1 0 ""; done
for c in "${crash_configs[@]}"; do raw handler "$c" 1e3 1 µs; done
for c in aft aft-nofsync; do raw handler-own "$c" 1e3 1 µs; done
echo
echo "What each part of Aftermath costs: peer-app linked with it but not starting it, starting it"
echo "without hang watching (no watchdog, pinger or pool probe; the run record's updater then has a"
echo "thread of its own), and starting it in full; each row over the one before."
echo
echo "| part | CPU of init + 100 ms idle + exit | the same, paired rounds | private dirty memory | descriptors | threads |"
echo "|---|---|---|---|---|---|"
part_row() { # label config base
    echo "| $1 | $(fmt cpu "$2" "$3" 1e6 2 ms) | $(paired cpu "$2" "$3" 1e6 2 ms) | $(fmt mem "$2" "$3" 1 0 KiB) |" \
        "$(fmt fds "$2" "$3" 1 0 "") | $(fmt threads "$2" "$3" 1 0 "") |"
}
part_row "linked, not started (over the Swift baseline)" aft-linked swift-base
part_row "start: crash capture, run record, delivery (over linked)" aft-nohang aft-linked
part_row "hang watching (over start without it)" aft aft-nohang
echo
n_crash=$(stat crash aft | cut -d' ' -f3) n_mem=$(stat mem aft | cut -d' ' -f3)
echo "Checks: crash reports written by the crash runs: sentry $(sum crash-reports sentry)/$(stat crash sentry | cut -d' ' -f3)," \
    "Aftermath $(sum crash-reports aft)/$n_crash, fsync off $(sum crash-reports aft-nofsync)/$(stat crash aft-nofsync | cut -d' ' -f3);" \
    "by the handler runs: sentry $(sum handler-reports sentry), Aftermath $(sum handler-reports aft) and $(sum handler-reports aft-nofsync)." \
    "Aftermath's helper (aftermath.unw) alive at the CPU reading in $(sum cpu-helpers aft) of $(stat cpu aft | cut -d' ' -f3) runs," \
    "at the memory reading in $(sum mem-helpers aft) of $n_mem; sharing the app's address space in $(sum mem-shared-vm aft)" \
    "and its descriptor table in $(sum mem-shared-fds aft) (then counted once, in the app's figures; its own" \
    "smaps_rollup read $(stat mem-child-raw aft | cut -d' ' -f1) KiB Private_Dirty and its fd directory" \
    "$(stat fds-child-raw aft | cut -d' ' -f1) entries, medians: the app's own, not added)." \
    "Child processes of the sentry app at the CPU reading: $(sum cpu-children sentry) over all runs."
if [ -s "$problems" ]; then
    echo
    echo "Runs left out ($(wc -l <"$problems")):"
    sed 's/^/- /' "$problems"
fi
[ "$keep" = 1 ] || rm -rf "$dirs"
