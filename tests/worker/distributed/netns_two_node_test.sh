#!/usr/bin/env bash
# Two "nodes" on one machine (issue 20): two network namespaces joined by one
# veth pair (10.233.N.1 and .2, nothing else in them, so nothing is routed
# outside), rank 0 in one with the TCPStore on its veth address, rank 1 in
# the other, Gloo over the veth (GLOO_SOCKET_IFNAME). 10 SGD steps of the
# distributed test program's rank mode; both ranks must finish with equal
# losses and bit-identical gradients every step, and bytes = parameter bytes.
# Then a whole trial the same way: frontier-trial's two ranks of a spec with
# runtime.ranks 2, nodes 2, meeting through torchrun's variables (RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT: what the Kubernetes example sets);
# its losses must equal a 1-rank run's, and only rank 0 prints the result.
# Exit 77 (skipped) when network namespaces cannot be made (not root).
#   netns_two_node_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
bin="$build/tests/worker/distributed/frontier_distributed_tests"
trial="$build/worker/frontier-trial"
readonly SKIP=77
tag=$(($$ % 100000))
net=10.233.$((tag % 250))
ns=("fdn$tag-a" "fdn$tag-b")
veth=("fdn${tag}a" "fdn${tag}b")
if [[ $(id -u) -ne 0 ]] || ! ip netns add "${ns[0]}" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces (needs root and iproute2)"
  exit $SKIP
fi
work="$(mktemp -d)"
pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for n in "${ns[@]}"; do
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "$n" 2>/dev/null
  done
  if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$work"/rank* "$work"/trial*; do [[ -e "$f" ]] && { echo "== $(basename "$f")"; tail -5 "$f"; }; done
  exit 1
}

ip netns add "${ns[1]}"
ip link add "${veth[0]}" type veth peer name "${veth[1]}"
for i in 0 1; do
  ip link set "${veth[$i]}" netns "${ns[$i]}"
  ip -n "${ns[$i]}" link set lo up
  ip -n "${ns[$i]}" addr add "$net.$((i + 1))/24" dev "${veth[$i]}"
  ip -n "${ns[$i]}" link set "${veth[$i]}" up
done
port=29533
for i in 0 1; do
  ip netns exec "${ns[$i]}" env FRONTIER_DIST_TEST_CHILD=1 FRONTIER_RANK=$i FRONTIER_WORLD_SIZE=2 \
    FRONTIER_RENDEZVOUS="tcp://$net.1:$port" GLOO_SOCKET_IFNAME="${veth[$i]}" FRONTIER_DIST_TIMEOUT_S=30 \
    OMP_NUM_THREADS=1 DT_STEPS=10 DT_CAP_MB=0.002 DT_OUT="$work/rank$i.txt" \
    timeout 120 "$bin" > "$work/rank$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1; do wait "${pids[$i]}" || fail "rank $i exited with status $?"; done
pids=()
python3 - "$work" <<'PY' || fail "the ranks disagree"
import sys
work = sys.argv[1]
ranks = [[l.split() for l in open(f"{work}/rank{r}.txt") if l.startswith("step ")] for r in (0, 1)]
inits = [[l.split()[1] for l in open(f"{work}/rank{r}.txt") if l.startswith("init ")] for r in (0, 1)]
assert inits[0] == inits[1] and inits[0], f"initial parameters differ: {inits}"
assert len(ranks[0]) == len(ranks[1]) == 10, [len(r) for r in ranks]
for a, b in zip(*ranks):
    # step i loss allreduce exposed bytes buckets in_backward step slowest hash identical param_bytes
    assert a[2] == b[2], f"step {a[1]}: losses {a[2]} != {b[2]}"
    assert a[10] == b[10] and a[11] == b[11] == "1", f"step {a[1]}: gradients differ"
    assert a[5] == a[12] and b[5] == b[12], f"step {a[1]}: bytes {a[5]} != parameter bytes {a[12]}"
    assert float(a[3]) > 0 and float(b[3]) > 0
print(f"two-node rehearsal: 10 steps, final loss {ranks[0][-1][2]}, {ranks[0][0][5]} bytes/step in "
      f"{ranks[0][0][6]} buckets, all-reduce {float(ranks[0][-1][3])*1e3:.2f} ms, exposed {float(ranks[0][-1][4])*1e3:.2f} ms")
PY

# A whole trial over the two "nodes".
python3 - "$work" <<'PY'
import json, sys
spec = {"schema": 1, "trial_id": "netns", "seed": 5,
        "task": {"dataset": "synthetic", "input": {"channels": 1, "height": 16, "width": 16, "classes": 4},
                 "batch_size": 32, "steps": 12, "eval_every": 6, "warmup_steps": 2},
        "arch": {"stem": {"kind": "conv3x3", "width": 8, "stride": 2, "depth": 1},
                 "stages": [{"block": "basic", "width": 16, "depth": 1, "stride": 2}],
                 "norm": "group", "norm_groups": 4},
        "runtime": {"threads": 1}, "latency": {"repetitions": 0}, "profile": {"steps": 0}}
json.dump(spec, open(f"{sys.argv[1]}/one.json", "w"))
spec["runtime"].update({"ranks": 2, "nodes": 2})
json.dump(spec, open(f"{sys.argv[1]}/two.json", "w"))
PY
"$trial" --spec "$work/one.json" --progress-every 1 > "$work/trial-one.out" 2> "$work/trial-one.err" ||
  fail "the 1-rank trial failed"
for i in 0 1; do
  ip netns exec "${ns[$i]}" env RANK=$i WORLD_SIZE=2 MASTER_ADDR="$net.1" MASTER_PORT=$((port + 1))     GLOO_SOCKET_IFNAME="${veth[$i]}" FRONTIER_DIST_TIMEOUT_S=30     timeout 120 "$trial" --spec "$work/two.json" --progress-every 1 > "$work/trial$i.out" 2> "$work/trial$i.err" &
  pids+=($!)
done
for i in 0 1; do wait "${pids[$i]}" || fail "trial rank $i exited with status $?"; done
pids=()
[[ ! -s "$work/trial1.out" ]] || fail "rank 1 printed on standard output"
python3 - "$work" <<'PY' || fail "the two-node trial differs from the 1-rank trial"
import json, sys
work = sys.argv[1]
def events(name): return [json.loads(l) for l in open(f"{work}/{name}")]
one, two = events("trial-one.out"), events("trial0.out")
l1 = [e["loss"] for e in one if e["event"] == "progress"]
l2 = [e["loss"] for e in two if e["event"] == "progress"]
assert len(l1) == len(l2) == 12, (len(l1), len(l2))
worst = max(abs(a - b) / abs(a) for a, b in zip(l1, l2))
assert worst < 1e-5, f"losses differ by {worst:.3g} (relative)"
r = two[-1]
assert r["status"] == "completed", r
d = r["distributed"]
assert d["ranks"] == 2 and d["nodes"] == 2 and d["allreduce_bytes_per_step"] == 4 * r["params"], d
assert abs(r["val_loss"] - one[-1]["val_loss"]) <= 1e-4 * abs(one[-1]["val_loss"]), (r["val_loss"], one[-1]["val_loss"])
print(f"two-node trial: 12 steps equal to 1 rank within {worst:.2g}, val_loss {r['val_loss']:.5f}, "
      f"all-reduce {d['allreduce_ms']:.2f} ms/step over the veth, exposed {d['exposed_ms']:.2f} ms")
PY
echo "PASS"
