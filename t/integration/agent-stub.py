#!/usr/bin/env python3
"""A stub model server for the coding-agent templates (templates.t).

Speaks just enough of two model APIs for an agent to do real tool work:
- Anthropic Messages (/v1/messages, streamed or not; Claude Code): the first
  answer asks the agent to write FILE (the Write tool), the second to run a
  shell command (the Bash tool) that checksums it into FILE.sha256, the
  third is plain text ending the turn;
- OpenAI Responses (/v1/responses, streamed; Codex): the same two steps,
  both through its shell tool (exec_command).
Requests that offer no tools (titles, summaries) get a short text. Every
request is logged, one JSON line each, so the test can see what was sent.

    agent-stub.py ADDR:PORT LOG FILE CONTENT

FILE is a path in the sandbox (the agent writes it there). The test runs
the stub on a test host of its own: a network namespace it made, at an
address it routes there (templates-agents.t, egresslib.sh), so the sandbox
reaches the stub and nothing else on this machine.
"""
import json
import socketserver
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

ADDR, _, PORT = sys.argv[1].rpartition(":")
PORT, LOG, FILE, CONTENT = int(PORT), sys.argv[2], sys.argv[3], sys.argv[4]


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def responses(body):
    """The Responses API's stream: a function call per step, then text."""
    done = sum(1 for i in body.get("input", []) if isinstance(i, dict) and i.get("type") == "function_call_output")
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    cmds = ["printf %%s %s > %s" % (shq(CONTENT), shq(FILE)), "sha256sum %s > %s.sha256" % (FILE, FILE)]
    if "exec_command" in tools and done < len(cmds):
        item = {"type": "function_call", "id": "fc_stub_%d" % done, "call_id": "call_stub_%d" % done,
                "name": "exec_command", "arguments": json.dumps({"cmd": cmds[done]})}
    else:
        item = {"type": "message", "id": "msg_stub_%d" % done, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Done." if done else "ok", "annotations": []}]}
    rid = "resp_stub_%d" % done
    ev = [{"type": "response.created", "response": {"id": rid}},
          {"type": "response.output_item.added", "output_index": 0, "item": item},
          {"type": "response.output_item.done", "output_index": 0, "item": item},
          {"type": "response.completed", "response": {"id": rid, "status": "completed", "usage": {
              "input_tokens": 10, "input_tokens_details": None, "output_tokens": 10,
              "output_tokens_details": None, "total_tokens": 20}}}]
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)) for e in ev).encode()


def tool_results(body):
    n = 0
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, list):
            n += sum(1 for b in c if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def answer(body):
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    done = tool_results(body)
    if "Write" in tools and done == 0:
        return "tool_use", {"type": "tool_use", "id": "toolu_stub_1", "name": "Write",
                            "input": {"file_path": FILE, "content": CONTENT}}
    if "Bash" in tools and done == 1:
        return "tool_use", {"type": "tool_use", "id": "toolu_stub_2", "name": "Bash",
                            "input": {"command": "sha256sum %s > %s.sha256" % (FILE, FILE),
                                      "description": "Checksum the file"}}
    return "end_turn", {"type": "text", "text": "Done." if done else "ok"}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, ctype, data):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(200, "application/json", b"{}")

    do_HEAD = do_GET

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "tools": [t.get("name") for t in body.get("tools", [])
                                                             if isinstance(t, dict)],
                                "tool_results": tool_results(body) + sum(
                                    1 for i in body.get("input", []) if isinstance(i, dict)
                                    and i.get("type") == "function_call_output"), "stream": bool(body.get("stream"))}) + "\n")
        if self.path.split("?")[0].endswith("/responses"):
            return self.send(200, "text/event-stream", responses(body))
        if "count_tokens" in self.path:
            return self.send(200, "application/json", b'{"input_tokens": 10}')
        if "/messages" not in self.path:
            return self.send(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"stub"}}')
        stop, block = answer(body)
        model = body.get("model", "stub")
        usage = {"input_tokens": 10, "output_tokens": 10}
        if not body.get("stream"):
            msg = {"id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": [block],
                   "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return self.send(200, "application/json", json.dumps(msg).encode())
        ev = [("message_start", {"type": "message_start", "message": {
            "id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        if block["type"] == "tool_use":
            ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        else:
            ev.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": block["text"]}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 10}}))
        ev.append(("message_stop", {"type": "message_stop"}))
        data = "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(d)) for e, d in ev).encode()
        self.send(200, "text/event-stream", data)


class Server(HTTPServer):
    def server_bind(self):
        # HTTPServer's own asks the resolver for the address's name
        # (getfqdn): in a test host's namespace that is seconds of timeouts
        # and DNS packets for nothing
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


Server((ADDR or "127.0.0.1", PORT), H).serve_forever()
