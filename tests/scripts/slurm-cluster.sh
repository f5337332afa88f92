#!/usr/bin/env bash
# The --slurm runs on a real one-node Slurm cluster (docs/scale.md): started here by
# scripts/slurm-cluster, stopped on the way out whatever happens.
#   1. a sweep of 20 seeds as 4 array tasks joins into one passing run, in seed order,
#      with one JUnit of 20 test cases and one report.html linking every task's consoles,
#      and its 20 results kept once in the history by the joining run (docs/history.md);
#   2. a sweep whose boots fail joins into one failing run (exit 1) with each failure's
#      replay line, in seed order;
#   3. an unknown partition is refused (exit 2) before anything builds;
#   4. a hostfuzz campaign of 4 seeds finds in each (exit 1), each finding with a replay
#      command that finds again; a clean campaign exits 0;
#   5. a first SIGINT while the array runs cancels it: the run reports the boots its
#      tasks did not finish as failed, saying so, and Slurm holds none of them after;
#   6. the cluster's daemons are all gone once it is stopped.
set -euo pipefail
root=$(pwd)
dir=$(mktemp -d /tmp/testbench-slurm.XXXXXX)
trap 'scripts/slurm-cluster stop "$dir/cluster"; rm -rf "$dir"' EXIT
scripts/slurm-cluster start "$dir/cluster"
export SLURM_CONF=$dir/cluster/slurm.conf
fail() { echo "slurm-cluster: $*" >&2; exit 1; }

# 1. Twenty seeds, four tasks, from a prebuilt directory made first.
cargo testbench --prebuild "$dir/prebuilt" --exact bench-boot --arch rv64
status=0
cargo testbench --slurm --slurm-tasks 4 --slurm-partition tb --prebuilt "$dir/prebuilt" --exact bench-boot \
    --arch rv64 --sweep 1..20 --junit "$dir/sweep.xml" --history "$dir/history.sqlite" > "$dir/sweep.out" 2>&1 || status=$?
cat "$dir/sweep.out"
[ "$status" = 0 ] || fail "the sweep exited $status"
run=$(grep -oE 'logs in [^ ]+' "$dir/sweep.out" | head -1 | cut -d' ' -f3)
grep -q 'runs 20 boots as 4 array tasks on partition tb' "$dir/sweep.out" || fail "no submission line"
if grep -q '^prebuilding' "$dir/sweep.out"; then fail "the sweep built, though given --prebuilt"; fi
grep -q "exec $dir/prebuilt/testbench --prebuilt $dir/prebuilt --slurm-task" "$run/slurm/task.sh" \
    || fail "the tasks do not run the prebuilt bench"
seeds=$(grep -E '^bench-boot rv64 smp1 +seed [0-9]+ +PASS' "$dir/sweep.out" | awk '{print $5}' | tr '\n' ' ')
[ "$seeds" = "$(seq -s ' ' 1 20) " ] || fail "the joined PASS lines are not seeds 1..20 in order: $seeds"
grep -q '^sweep bench-boot: 20 seeds, 20 boots, 0 failed$' "$dir/sweep.out" || fail "no sweep summary"
grep -q '^testbench: 20 passed, 0 failed, 0 skipped' "$dir/sweep.out" || fail "no joint summary"
[ "$(grep -c '<testcase' "$dir/sweep.xml")" = 20 ] || fail "the JUnit report has not 20 test cases"
kept=$(cargo testbench history bench-boot --history "$dir/history.sqlite" --last 1000 --message-format json)
for field in '"window":20' '"passed":20' '"failed":0'; do
    echo "$kept" | grep -qF "$field" || fail "the history does not keep the 20 results once ($field): $kept"
done
for k in 0 1 2 3; do
    [ -f "$run/task-$k/done" ] || fail "task $k left no done mark in $run"
    grep -q "href=\"task-$k/bench-boot/seed-[0-9]*-rv64/console.log\"" "$run/report.html" \
        || fail "the joined report.html does not link task $k's consoles"
    boots=$(ls "$run/task-$k/bench-boot" | wc -l)
    [ "$boots" = 5 ] || fail "task $k booted $boots seeds, not 5"
done

# 2. Failing boots (prebuilt by the run itself, in its own directory): a copy of bench-boot that forbids the line it prints.
mkdir -p "$dir/cases"
sed -e 's/^description = .*/description = "Fails on purpose: forbids what the smoke program prints"/' \
    -e 's/^expect = .*/expect = ["^kernel: harts 1$"]\nforbid = ["^smoke: done$"]/' \
    tests/bench-boot.toml > "$dir/cases/slurm-fails.toml"
status=0
cargo testbench --slurm --slurm-tasks 2 --cases "$dir/cases" --exact slurm-fails --arch rv64 --sweep 1..4 \
    > "$dir/fails.out" 2>&1 || status=$?
cat "$dir/fails.out"
[ "$status" = 1 ] || fail "the failing sweep exited $status, not 1"
grep -q '^testbench: 0 passed, 4 failed' "$dir/fails.out" || fail "not 4 failures joined"
replays=$(grep -E '^    replay: cd .* cargo testbench --exact slurm-fails --arch rv64 --smp 1 --sweep [0-9]+ --cases ' \
    "$dir/fails.out" | sed -E 's/.*--sweep ([0-9]+).*/\1/' | tr '\n' ' ')
[ "$replays" = "1 2 3 4 1 2 3 4 " ] || fail "the replay lines (each failure, then the recap) are not seeds 1..4 in order: $replays"

# 3. An unknown partition, refused before anything builds.
status=0
cargo testbench --slurm --slurm-partition no-such-partition --exact bench-boot --arch rv64 --sweep 1..2 \
    > "$dir/refused.out" 2>&1 || status=$?
cat "$dir/refused.out"
[ "$status" = 2 ] || fail "an unknown partition exited $status, not 2"
grep -q 'no such partition; Slurm has: tb' "$dir/refused.out" || fail "the refusal does not name the partitions"
if grep -qE '^(built|prebuilding|testbench: .* logs in)' "$dir/refused.out"; then
    fail "something was built or a run directory made before the refusal"
fi

# 4. hostfuzz campaigns, one seed a task.
status=0
cargo hostfuzz --slurm --seeds 1..4 --slurm-partition tb --count 300 canary > "$dir/canary.out" 2>&1 || status=$?
cat "$dir/canary.out"
[ "$status" = 1 ] || fail "the canary campaign exited $status, not 1"
[ "$(grep -c '^seed [1-4]: a finding$' "$dir/canary.out")" = 4 ] || fail "not a finding for each of the 4 seeds"
replay=$(grep -m1 -oE 'replay: cargo hostfuzz --replay canary [^ ]+' "$dir/canary.out" | cut -d' ' -f2-)
[ -n "$replay" ] || fail "no replay command"
status=0
$replay || status=$?
[ "$status" = 1 ] || fail "the replay ($replay) exited $status, not 1 (the finding)"
status=0
cargo hostfuzz --slurm --seeds 5..6 --count 200 fdt > "$dir/clean.out" 2>&1 || status=$?
cat "$dir/clean.out"
[ "$status" = 0 ] || fail "the clean campaign exited $status"
grep -q '2 seeds: 2 clean, 0 with a finding or hang, 0 without a result' "$dir/clean.out" || fail "no clean summary"
# 5. Interrupted: the rester sleeps forever, so the array is still running when the
# bench gets its SIGINT.
cat > "$dir/cases/slurm-rests.toml" <<'CASE'
description = "Never ends on its own: the rester sleeps and nobody prints the expected line"
arch = ["rv64"]
kind = "boot"
programs = ["rester"]
timeout_secs = 300
expect = ['^never printed$']
CASE
cargo testbench --slurm --slurm-tasks 2 --cases "$dir/cases" --exact slurm-rests --sweep 1..2 \
    > "$dir/interrupted.out" 2>&1 &
bench=$!
job=""
for _ in $(seq 1200); do
    job=$(grep -oE 'slurm: job [0-9]+ runs' "$dir/interrupted.out" | cut -d' ' -f3 || true)
    [ -n "$job" ] && break
    sleep 0.1
done
[ -n "$job" ] || { kill -9 "$bench"; cat "$dir/interrupted.out"; fail "no submission within 120 s"; }
for _ in $(seq 300); do
    [ "$(squeue --noheader --array --jobs "$job" --states=RUNNING | wc -l)" = 2 ] && break
    sleep 0.1
done
kill -INT "$bench"
status=0
wait "$bench" || status=$?
cat "$dir/interrupted.out"
[ "$status" = 1 ] || fail "the interrupted run exited $status, not 1"
grep -q "slurm: job $job ended in .* (interrupted with 2 task(s) unreported: cancelled)" "$dir/interrupted.out" \
    || fail "the run does not say the array was cancelled"
[ "$(grep -c "the run was interrupted while this task was RUNNING; the job was cancelled (scancel $job)" \
    "$dir/interrupted.out")" -ge 2 ] || fail "the unfinished boots do not say why"
left=x
for _ in $(seq 100); do
    left=$(squeue --noheader --jobs "$job" 2>/dev/null || true)
    [ -z "$left" ] && break
    sleep 0.1
done
[ -z "$left" ] || fail "Slurm still holds job $job 10 s after the cancel: $left"

# 6. The cluster stops: no daemon of it outlives the case (the trap stops it again, in
#    vain, on any way out).
scripts/slurm-cluster stop "$dir/cluster"
daemons=$(pgrep -af "$dir/cluster" || true)
[ -z "$daemons" ] || fail "daemons of the test cluster still run after its stop: $daemons"

echo "slurm-cluster: every check held"
