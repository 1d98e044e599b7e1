#!/usr/bin/env bash
# Two "nodes" on one machine (issue 20): two network namespaces joined by one
# veth pair (10.233.N.1 and .2, nothing else in them, so nothing is routed
# outside), rank 0 in one with the TCPStore on its veth address, rank 1 in
# the other, Gloo over the veth (GLOO_SOCKET_IFNAME). 10 SGD steps of the
# distributed test program's rank mode; both ranks must finish with equal
# losses and bit-identical gradients every step, and bytes = parameter bytes.
# Exit 77 (skipped) when network namespaces cannot be made (not root).
#   netns_two_node_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
bin="$build/tests/worker/distributed/frontier_distributed_tests"
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
  for f in "$work"/rank*; do echo "== $(basename "$f")"; tail -5 "$f"; done
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
echo "PASS"
