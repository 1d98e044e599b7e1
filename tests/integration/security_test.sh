#!/usr/bin/env bash
# Auth and TLS with the real programs: the coordinator with user and worker
# tokens and mutual TLS (certificates made here with openssl). RPCs without a
# token, with a wrong token, or with the other role's token are refused with
# clear errors; a plaintext client cannot connect; the right credentials work
# end to end (a worker runs the trials of a submitted experiment).
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -20 server.log worker.log 2>/dev/null; exit 1; }

# A CA, a server certificate for 127.0.0.1, and a client certificate.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=frontier-test-ca" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=frontier-client" -keyout client.key -out client.csr 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out client.pem 2>/dev/null
echo "user-$RANDOM-$RANDOM" > user.token
echo "worker-$RANDOM-$RANDOM" > worker.token
echo "wrong-token" > wrong.token

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
"$build/server/frontier-server" --listen "$addr" --store "$work/secure.db" --user-token-file user.token \
  --worker-token-file worker.token --tls-cert server.pem --tls-key server.key --tls-client-ca ca.pem \
  --metrics-listen "" > server.log 2>&1 & pids+=($!)
tls=(--tls-ca ca.pem --tls-cert client.pem --tls-key client.key)
frontier="$build/server/frontier"
# Up when a listing works: waited for by what it does, not by a time (a loaded machine starts it slowly).
up=0
for _ in $(seq 600); do
  "$frontier" list --server "$addr" "${tls[@]}" --token-file user.token >/dev/null 2>&1 && { up=1; break; }
  kill -0 "${pids[0]}" 2>/dev/null || fail "frontier-server exited"
  sleep 0.2
done
[[ $up -eq 1 ]] || fail "frontier-server did not answer a listing in 120 s"

expect() {  # expect EXIT_CODE MESSAGE_PATTERN -- command...
  local want=$1 pattern=$2; shift 3
  set +e; "$@" > out.txt 2> err.txt; local rc=$?; set -e
  [[ $rc -eq $want ]] || fail "$* exited $rc, expected $want: $(cat err.txt)"
  grep -q "$pattern" err.txt out.txt || fail "$*: no '$pattern' in: $(cat err.txt)"
  echo "ok: exit $rc, $(head -c 160 err.txt | tr '\n' ' ')"
}
expect 4 "requires a user token" -- "$frontier" list --server "$addr" "${tls[@]}"
expect 4 "invalid token" -- "$frontier" list --server "$addr" "${tls[@]}" --token-file wrong.token
expect 4 "the token given is a worker token" -- "$frontier" submit "$src/tests/integration/tiny.yaml" --server "$addr" "${tls[@]}" --token-file worker.token
expect 1 "" -- "$frontier" list --server "$addr" --token-file user.token                       # plaintext to a TLS server
expect 1 "" -- "$frontier" list --server "$addr" --tls-ca ca.pem --token-file user.token       # no client certificate
FRONTIER_TOKEN="$(cat user.token)" "$frontier" list --server "$addr" "${tls[@]}" > /dev/null || fail "token from FRONTIER_TOKEN refused"

exp="$("$frontier" submit "$src/tests/integration/tiny.yaml" --server "$addr" "${tls[@]}" --token-file user.token)"
# A worker with the user token is refused; with the worker token it runs the experiment.
# It registers after calibrating its peaks (seconds, more on a loaded machine): --no-calibrate, and
# it exits by itself when refused; the timeout only bounds a hang.
set +e
timeout 300 "$build/worker/frontier-worker" --coordinator "$addr" "${tls[@]}" --token-file user.token --max-trials 1 \
  --no-calibrate --metrics-listen "" > refused.log 2>&1
refused_rc=$?
set -e
[[ $refused_rc -ne 0 && $refused_rc -ne 124 ]] || fail "a worker with a user token exited $refused_rc: $(tail -3 refused.log)"
grep -qi "permission\|the token given is a user token" refused.log || fail "a worker with a user token was not refused: $(tail -3 refused.log)"
"$build/worker/frontier-worker" --coordinator "$addr" "${tls[@]}" --token-file worker.token --threads-per-trial 1 \
  --metrics-listen "" > worker.log 2>&1 & pids+=($!)
timeout 300 "$frontier" watch "$exp" --server "$addr" "${tls[@]}" --token-file user.token > watch.out || fail "watch failed"
grep -q "experiment completed" watch.out || fail "experiment did not complete"
echo "security ok: tokens by role, mutual TLS, experiment $exp completed"
