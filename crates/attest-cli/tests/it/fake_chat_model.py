"""A scripted OpenAI Chat Completions model on 127.0.0.1 for a real coding agent.

Usage: fake_chat_model.py SCRIPT LOG -- COMMAND...

Run inside a network namespace of its own (`unshare --net`): it brings loopback up,
listens on 127.0.0.1 on a free port, starts COMMAND with
COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:PORT/v1 in its environment, and exits with
COMMAND's exit code. SCRIPT is a JSON list of tool calls, `{"tool": NAME, "args": {...}}`,
played one per model turn: a request whose conversation already holds N assistant tool
calls gets step N (streamed, or not, as the request asks); after the last step the model
answers "done". Each request is appended to LOG as one JSON line (the messages the agent
sent, so a test reads what a tool or hook answered, and the tools offered). Standard library only.
"""

import http.server
import json
import os
import subprocess
import sys
import threading


def main():
    sep = sys.argv.index("--")
    script_path, log_path = sys.argv[1:sep]
    command = sys.argv[sep + 1 :]
    with open(script_path) as f:
        script = json.load(f)
    # Inside `unshare --net` only loopback exists, and it starts down.
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False)
    log_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            # A model listing, in case the agent asks which models there are.
            if self.path.rstrip("/").endswith("/models"):
                body = {"object": "list", "data": [{"id": "gpt-4.1", "object": "model"}]}
                return self.reply(200, json.dumps(body).encode())
            self.reply(404, b"{}")

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                return self.reply(404, b"{}")
            messages = request.get("messages", [])
            with log_lock, open(log_path, "a") as log:
                tools = [t.get("function", {}).get("name") for t in request.get("tools") or []]
                entry = {"path": self.path, "tools": tools, "messages": messages}
                log.write(json.dumps(entry) + "\n")
            done = sum(
                len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant"
            )
            if done < len(script):
                step = script[done]
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_%d" % done,
                            "type": "function",
                            "function": {
                                "name": step["tool"],
                                "arguments": json.dumps(step["args"]),
                            },
                        }
                    ],
                }
                finish = "tool_calls"
            else:
                message = {"role": "assistant", "content": "done"}
                finish = "stop"
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            model = request.get("model", "gpt-4.1")
            if request.get("stream"):
                chunks = [
                    {"index": 0, "delta": message, "finish_reason": None},
                    {"index": 0, "delta": {}, "finish_reason": finish},
                ]
                body = b""
                for i, choice in enumerate(chunks):
                    chunk = {
                        "id": "fake",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": model,
                        "choices": [choice],
                    }
                    if i == len(chunks) - 1:
                        chunk["usage"] = usage
                    body += b"data: " + json.dumps(chunk).encode() + b"\n\n"
                body += b"data: [DONE]\n\n"
                return self.reply(200, body, "text/event-stream")
            message.pop("index", None)
            for call in message.get("tool_calls") or []:
                call.pop("index", None)
            body = {
                "id": "fake",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            self.reply(200, json.dumps(body).encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ)
    env["COPILOT_PROVIDER_BASE_URL"] = "http://127.0.0.1:%d/v1" % server.server_address[1]
    code = subprocess.run(command, env=env).returncode
    server.shutdown()
    sys.exit(code)


if __name__ == "__main__":
    main()
