"""A stand-in for an OpenAI-compatible chat-completions server, for tests:
answers POST /v1/chat/completions from a script, one step per request, and
records every request (body and Authorization header).

A step is a dict:
  {"content": TEXT}              200 with that message content (and usage)
  {"status": 429|500|400, "body": TEXT, "retry_after": S}   an HTTP error
  {"sleep": S, ...}              waits S seconds first (a timeout when S is past the client's)
  {"from_schema": true}          valid JSON built from the request's response_format schema: the
                                 first N combinations of its enums (N: "propose N" in the prompt) that
                                 the prompt's table of measured configurations does not list
  {"call": FUNCTION}             (in-process only) the content FUNCTION(body) returns, or, when it
                                 returns a dict, its "content" with its "usage"
When the script runs out, the last step repeats.

As a process (main below): `llm_standin.py --script SCRIPT.json --port-file FILE
[--record REQUESTS.jsonl]` serves 127.0.0.1 on a free port until killed.
"""

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with standin._lock:
                    standin.requests.append({"path": self.path, "body": body,
                                             "authorization": self.headers.get("Authorization", "")})
                    step = standin.script.pop(0) if len(standin.script) > 1 else standin.script[0]
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                if self.path != "/v1/chat/completions":
                    return self._send(404, "no such path")
                if "status" in step:
                    extra = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
                    return self._send(step["status"], step.get("body", "error"), extra)
                content = step.get("content")
                usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
                if step.get("from_schema"):
                    content = from_schema(body)
                if step.get("call"):
                    content = step["call"](body)
                    if isinstance(content, dict):
                        content, usage = content["content"], content["usage"]
                reply = {"id": "x", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "stop"}],
                         "usage": usage}
                self._send(200, json.dumps(reply), {"Content-Type": "application/json"})

            def _send(self, code, text, headers=None):
                data = text.encode()
                try:
                    self.send_response(code)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout step)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def prompt_table(prompt):
    """The configurations the prompt's table lists (frontier-llm-proposer's proposal_prompt.table), each as
    (label, [choice values], [metric texts], outcome text), and the dimension and metric column names."""
    rows, names, metrics = [], [], []
    for line in prompt.split("\n"):
        if line.startswith("Measured so far:") and "Columns: " in line:
            dims, _, rest = line.split("Columns: ", 1)[1].partition(" || ")
            names = dims.split(" | ")
            metrics = [m.split(" (")[0] for m in rest.split(" | ")[:-1]]
        elif names and line.startswith("- ") and " || " in line:
            label, _, rest = line[2:].partition(": ")
            left, _, right = rest.partition(" || ")
            cells = right.split(" | ")
            rows.append((label, [json.loads(v) if v != "?" else None for v in left.split(" | ")],
                         cells[:len(metrics)], " | ".join(cells[len(metrics):])))
    return rows, names, metrics


def from_schema(body):
    schema = body["response_format"]["json_schema"]["schema"]["properties"]["configs"]
    props = schema["items"]["properties"]["config"]["properties"]
    names = list(props)
    prompt = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
    wanted = re.search(r"propose (\d+) new configuration", prompt)
    rows, columns, _ = prompt_table(prompt)
    tried = [dict(zip(columns, values)) for _, values, _, _ in rows]
    configs = []
    for values in itertools.product(*(props[n]["enum"] for n in names)):
        config = dict(zip(names, values))
        if config in tried:
            continue
        configs.append({"config": config, "rationale": "stand-in: next untried combination"})
        if len(configs) >= (int(wanted.group(1)) if wanted else 1):
            break
    return json.dumps({"configs": configs})


def main(argv=None):
    """A stand-in run as a process: `llm_standin.py --script SCRIPT.json --port-file FILE [--record FILE]`
    binds 127.0.0.1:0, writes its port to FILE once serving (written whole, then renamed into place), and
    serves until killed (SIGTERM or SIGINT). SCRIPT.json holds the list of steps. --record appends every
    request, one JSON line each ({"path", "body", "authorization"}). `llm_standin.py SCRIPT.json` (no
    flags) prints the URL instead: a stand-in to point frontier-llm-proposer at by hand."""
    import argparse
    import os
    import signal
    import sys
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible chat-completions server for tests.")
    parser.add_argument("script_file", nargs="?", default="", help="the list of steps (same as --script)")
    parser.add_argument("--script", default="", help="JSON file holding the list of steps")
    parser.add_argument("--port-file", default="", help="write the port bound here once serving")
    parser.add_argument("--record", default="", help="append every request here as a JSON line")
    args = parser.parse_args(argv)
    path = args.script or args.script_file
    script = [{"from_schema": True}]
    if path:
        with open(path) as f:
            script = json.load(f)
        if not isinstance(script, list) or not script or not all(isinstance(s, dict) for s in script):
            sys.exit(f"{path}: expected a non-empty JSON list of steps")
    standin = StandIn(script)
    if args.record:
        class Recorded(list):
            def append(self, item):
                super().append(item)
                with open(args.record, "a") as f:
                    f.write(json.dumps(item) + "\n")
        standin.requests = Recorded()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with standin:
        if args.port_file:
            tmp = f"{args.port_file}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(f"{standin.server.server_address[1]}\n")
            os.replace(tmp, args.port_file)
        else:
            print(standin.url, flush=True)
        try:
            while standin.thread.is_alive():
                standin.thread.join(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
