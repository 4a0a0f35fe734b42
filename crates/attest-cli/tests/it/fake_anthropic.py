"""A scripted Anthropic Messages API on 127.0.0.1, for driving the real Claude Code offline.

    fake_anthropic.py SCRIPT LOG -- COMMAND [ARGS...]

Serves on a free port of 127.0.0.1, runs COMMAND with ANTHROPIC_BASE_URL pointing at it
(the caller runs this inside a network namespace that has only loopback), and exits with
COMMAND's status. Python's standard library only.

SCRIPT is a JSON list of turns, each `{"tool": NAME, "input": {...}}` (the model calls a
tool) or `{"text": "..."}` (the model answers and the session ends). A request carrying
`tools` is the agent's main loop: its turn is the number of assistant messages already
in the conversation, so a retried request gets the same turn and a tool that was denied
still moves the script on. Past the script's end the model says "done". Any other
request Claude Code makes (a title, a quota probe, token counting) gets a short harmless
answer. Every request is appended to LOG as one JSON line: method, path, body.
"""

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "claude-sonnet-4-5"


def events_for(turn, index):
    """The server-sent events of one streamed assistant message playing `turn`."""
    message = {
        "id": f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    out = [("message_start", {"type": "message_start", "message": message})]
    if "tool" in turn:
        block = {"type": "tool_use", "id": f"toolu_{index:04d}", "name": turn["tool"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(turn["input"])}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": turn["text"]}
        stop = "end_turn"
    out.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    out.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    out.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def whole_message(turn, index):
    """The same turn as one JSON message, for a request that does not stream."""
    if "tool" in turn:
        content = [{"type": "tool_use", "id": f"toolu_{index:04d}", "name": turn["tool"], "input": turn["input"]}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": turn["text"]}]
        stop = "end_turn"
    return {
        "id": f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


class Handler(BaseHTTPRequestHandler):
    script = []
    log_path = ""
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def record(self, body):
        with self.lock, open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": self.command, "path": self.path, "body": body}) + "\n")

    def send_json(self, value, status=200):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record(None)
        self.send_json({})

    def do_HEAD(self):
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        self.record(body)
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.send_json({"input_tokens": 10})
        if not path.endswith("/v1/messages") or not isinstance(body, dict):
            return self.send_json({})
        if body.get("tools"):
            index = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            turn = self.script[index] if index < len(self.script) else {"text": "done"}
        else:
            index = 9000
            turn = {"text": "ok"}
        if not body.get("stream"):
            return self.send_json(whole_message(turn, index))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in events_for(turn, index):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: fake_anthropic.py SCRIPT LOG -- COMMAND [ARGS...]")
    with open(sys.argv[1], encoding="utf-8") as f:
        Handler.script = json.load(f)
    Handler.log_path = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}")
    status = subprocess.call(sys.argv[4:], env=env)
    server.shutdown()
    sys.exit(status)


if __name__ == "__main__":
    main()
