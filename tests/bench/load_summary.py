"""One line of load_generator JSON (stdin) as text: trials/s and p50/p99 per RPC.

LeaseTrial is the leases that returned a trial, by LeaseTrial or with a
completion (CompleteTrial+lease, whose latency it then takes); LeaseTrial(empty)
the long polls that found the queue empty (they wait up to 200 ms by design);
LeaseTrial(steady) the leases after each worker's first (the first ones all
arrive together when the run starts).
Then the CPU milliseconds per trial of each part, when the line has them."""
import json
import sys

r = json.load(sys.stdin)
parts = [f"{r['trials_per_s']:.0f} trials/s"]
for rpc in ("LeaseTrial", "LeaseTrial(steady)", "ReportProgress", "CompleteTrial", "CompleteTrial+lease", "LeaseTrial(empty)"):
    l = r["latency_ms"].get(rpc)
    if l:
        parts.append(f"{rpc} p50 {l['p50']:.1f} ms p99 {l['p99']:.1f} ms (n {l['n']})")
cpu = r.get("cpu_ms_per_trial")
if cpu:
    parts.append("CPU per trial: " + ", ".join(f"{name} {ms:.3f} ms" for name, ms in cpu.items()))
print("; ".join(parts))
