#!/usr/bin/env bash
# tests/deploy/fake_srun, the srun stand-in that worker tests put in PATH:
#  1. tasks see SLURM_PROCID/NTASKS/NODEID/LOCALID of srun's block
#     distribution (even and uneven splits, --ntasks N and -n forms), the
#     caller's environment (--export=ALL) or only SLURM_* and the listed
#     variables (--export=NONE,...); every task's stdout reaches srun's stdout;
#     each task leads its own process group;
#  2. --kill-on-bad-exit: a failing task stops the others (and their
#     children) at once, one that ignores SIGTERM by SIGKILL after the kill
#     wait; srun exits with the failing task's status; without it the others
#     run to their end and srun exits with the highest status;
#  3. SIGTERM and SIGINT to srun reach every task; nothing is left running;
#  4. what it does not implement or cannot fit is an error, not ignored.
#   fake_srun_test.sh SOURCE_DIR [FAKE_SRUN]   (FAKE_SRUN: another copy to test)
# shellcheck disable=SC2016  # the tasks' commands expand in the tasks
set -euo pipefail
src="$(cd "$1" && pwd)"
srun="${2:-$src/tests/deploy/fake_srun}"
work="$(mktemp -d)"
cleanup() {
  # Anything a task recorded is killed, so a failing check leaves no orphan either.
  for f in "$work"/pids/*; do [[ -f "$f" ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/pids"
fail() { echo "FAIL: $*"; exit 1; }
live() {  # live PID: running, not a zombie (an orphan's is reaped by init a moment later)
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z && "$state" != X ]]
}
running() {  # running: the recorded pids still alive
  local f alive=()
  for f in "$work"/pids/*; do [[ -f "$f" ]] && live "$(cat "$f")" && alive+=("$(basename "$f")=$(cat "$f")"); done
  echo "${alive[*]:-}"
}
no_orphans() {  # no_orphans WHAT: every recorded task and child has exited
  local left
  # srun's SIGKILL is sent when it exits; the kernel takes a moment to act on it.
  for _ in $(seq 10); do left=$(running); [[ -z "$left" ]] && break; sleep 0.1; done
  [[ -z "$left" ]] || fail "$1: still running after srun exited: $left"
  rm -f "$work"/pids/*
}
# A task that records itself and a child in the group, then behaves as $1 says.
cat > "$work/task.sh" <<'SH'
#!/bin/bash
dir=$1 mode=$2
echo $$ > "$dir/pids/task$SLURM_PROCID"
[[ "$mode" == fail1-ignoreterm ]] && trap '' TERM  # the child inherits it
sleep 60 & echo $! > "$dir/pids/child$SLURM_PROCID"
case "$mode" in
  plain) kill %1; exec sleep 60 ;;
  fail1) if [[ $SLURM_PROCID == 1 ]]; then sleep 0.5; exit 3; fi; wait ;;
  fail1-ignoreterm) if [[ $SLURM_PROCID == 1 ]]; then sleep 0.5; exit 3; fi; wait ;;
  fail1-others-finish)
    kill %1
    if [[ $SLURM_PROCID == 1 ]]; then exit 3; fi
    sleep 1; echo "task $SLURM_PROCID finished"; exit 0 ;;
  trap-term) trap 'echo "task $SLURM_PROCID got TERM"; exit 0' TERM
             trap 'echo "task $SLURM_PROCID got INT"; exit 0' INT
             echo "task $SLURM_PROCID ready"; while :; do sleep 0.1; done ;;
esac
SH
chmod +x "$work/task.sh"

echo "== variables and output"
expect_layout() {  # expect_layout "OPTIONS" "PROCID:NTASKS:NODEID:LOCALID ..."
  local out
  # shellcheck disable=SC2086  # the options are meant to be split
  out=$("$srun" $1 bash -c 'echo "$SLURM_PROCID:$SLURM_NTASKS:$SLURM_NODEID:$SLURM_LOCALID"' | sort -n | tr '\n' ' ')
  [[ "${out% }" == "$2" ]] || fail "srun $1: tasks saw '${out% }', expected '$2'"
  echo "  srun $1: $2"
}
expect_layout "--nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 --export=ALL" "0:4:0:0 1:4:0:1 2:4:1:0 3:4:1:1"
expect_layout "--nodes=2 --ntasks 3 --ntasks-per-node=2 --kill-on-bad-exit" "0:3:0:0 1:3:0:1 2:3:1:0"
expect_layout "-N 3 -n 4" "0:4:0:0 1:4:0:1 2:4:1:0 3:4:2:0"
expect_layout "--nodes=2 --ntasks-per-node=1" "0:2:0:0 1:2:1:0"
expect_layout "-n 2" "0:2:0:0 1:2:0:1"
out=$(FRONTIER_RENDEZVOUS=tcp://node0:29500 "$srun" --ntasks=2 --export=ALL bash -c 'echo "$SLURM_PROCID $FRONTIER_RENDEZVOUS $SLURM_NNODES $SLURM_TASKS_PER_NODE"' | sort)
[[ "$out" == $'0 tcp://node0:29500 1 2\n1 tcp://node0:29500 1 2' ]] || fail "--export=ALL: $out"
out=$(SLURM_JOB_ID=7 SECRET=x KEEP=y "$srun" --ntasks=1 --export=NONE,FOO=bar,KEEP /bin/bash -c 'echo "$SLURM_JOB_ID ${SECRET:-unset} $FOO $KEEP"')
[[ "$out" == "7 unset bar y" ]] || fail "--export=NONE,FOO=bar,KEEP: '$out'"
echo "  --export=ALL passes the caller's environment; NONE,... only SLURM_* and the list"
out=$("$srun" --ntasks=3 bash -c 'echo "$$ $(ps -o pgid= $$)"')
while read -r pid pgid; do [[ "$pid" == "$pgid" ]] || fail "task $pid is in process group $pgid, not its own"; done <<< "$out"
[[ $(wc -l <<< "$out") -eq 3 ]] || fail "three tasks should print three lines: $out"
echo "  each task leads its own process group"

echo "== --kill-on-bad-exit"
start=$SECONDS
# (timeout: a copy that does not stop the others would wait for their 60 s sleeps)
set +e; timeout -k 2 10 "$srun" --nodes=2 --ntasks=3 --ntasks-per-node=2 --kill-on-bad-exit=1 "$work/task.sh" "$work" fail1 2> "$work/err"; rc=$?; set -e
[[ $rc -eq 3 ]] || fail "srun exited $rc, expected task 1's 3: $(cat "$work/err")"
(( SECONDS - start < 10 )) || fail "the other tasks were not stopped (srun took $((SECONDS - start)) s)"
grep -q "task 1: Exited with exit code 3" "$work/err" || fail "no error line for task 1: $(cat "$work/err")"
no_orphans "kill-on-bad-exit"
echo "  task 1 exits 3: srun exits 3 in $((SECONDS - start)) s, tasks 0 and 2 and their children stopped"
start=$SECONDS
set +e; FAKE_SRUN_KILL_WAIT=1 timeout -k 2 10 "$srun" -n 2 --kill-on-bad-exit "$work/task.sh" "$work" fail1-ignoreterm 2> "$work/err"; rc=$?; set -e
[[ $rc -eq 3 ]] || fail "srun exited $rc with a task ignoring SIGTERM: $(cat "$work/err")"
grep -q "task 0: Killed by signal 9" "$work/err" || fail "the task that ignored SIGTERM was not killed: $(cat "$work/err")"
no_orphans "kill-on-bad-exit, SIGTERM ignored"
echo "  a task that ignores SIGTERM is killed after the kill wait ($((SECONDS - start)) s)"
set +e; out=$("$srun" -n 3 --kill-on-bad-exit=0 "$work/task.sh" "$work" fail1-others-finish 2> "$work/err"); rc=$?; set -e
[[ $rc -eq 3 ]] || fail "without kill-on-bad-exit srun exited $rc, expected the highest status 3"
[[ $(grep -c finished <<< "$out") -eq 2 ]] || fail "without kill-on-bad-exit the other tasks should finish: '$out'"
no_orphans "kill-on-bad-exit=0"
echo "  --kill-on-bad-exit=0: the other two tasks run to their end, srun exits 3"

echo "== signals"
for sig in TERM INT; do
  # (bash starts a background command with SIGINT ignored; the worker's fork/exec does not)
  env --default-signal=INT "$srun" --nodes=2 --ntasks=2 "$work/task.sh" "$work" trap-term > "$work/out" 2>&1 & p=$!
  for _ in $(seq 100); do [[ $(grep -c ready "$work/out") -eq 2 ]] && break; sleep 0.1; done
  [[ $(grep -c ready "$work/out") -eq 2 ]] || fail "tasks did not start: $(cat "$work/out")"
  kill -"$sig" "$p"
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && { kill -9 "$p"; fail "srun still runs 10 s after SIG$sig: $(cat "$work/out")"; }
  set +e; wait "$p"; rc=$?; set -e
  [[ $rc -eq 0 ]] || fail "SIG$sig: srun exited $rc, expected 0 (both tasks exit 0 on the signal): $(cat "$work/out")"
  [[ $(grep -c "got $sig" "$work/out") -eq 2 ]] || fail "SIG$sig did not reach both tasks: $(cat "$work/out")"
  no_orphans "SIG$sig"
  echo "  SIG$sig to srun reaches both tasks; srun exits with their status; nothing left"
done

"$srun" --ntasks=2 "$work/task.sh" "$work" plain & p=$!
for _ in $(seq 100); do [[ -f "$work/pids/task0" && -f "$work/pids/task1" ]] && break; sleep 0.1; done
sleep 0.3; kill -KILL "$p"; wait "$p" 2>/dev/null || true
rm -f "$work"/pids/child*  # killed by the tasks themselves
no_orphans "srun SIGKILLed"
echo "  srun SIGKILLed: its tasks are killed with it"

echo "== errors"
expect_error() {  # expect_error STATUS MESSAGE-PART ARGS...
  local want=$1 part=$2 rc; shift 2
  set +e; "$srun" "$@" true 2> "$work/err"; rc=$?; set -e
  [[ $rc -eq $want ]] || fail "srun $*: exit $rc, expected $want"
  grep -q -- "$part" "$work/err" || fail "srun $*: no '$part' in: $(cat "$work/err")"
  echo "  srun $*: exit $rc ($part)"
}
expect_error 2 "unsupported option --gpus-per-task=1" --ntasks=2 --gpus-per-task=1
expect_error 2 "positive integer" --ntasks=two
expect_error 1 "more than --ntasks-per-node=1" --nodes=2 --ntasks=3 --ntasks-per-node=1
SLURM_JOB_NUM_NODES=1 expect_error 1 "Only allocated 1 nodes" --nodes=2 --ntasks=2
echo "fake_srun ok"
