"""One line of load_generator JSON (stdin) as text: trials/s and p50/p99 per RPC."""
import json
import sys

r = json.load(sys.stdin)
parts = [f"{r['trials_per_s']:.0f} trials/s"]
for rpc in ("LeaseTrial", "ReportProgress", "CompleteTrial"):
    l = r["latency_ms"][rpc]
    parts.append(f"{rpc} p50 {l['p50']:.1f} ms p99 {l['p99']:.1f} ms")
print("; ".join(parts))
