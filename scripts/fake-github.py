#!/usr/bin/env python3
"""A loopback fake of the few GitHub REST endpoints `hank run --deliver pr` uses, for
scripts/getting-started.sh (the Rust tests have their own, tests/integration/fake_github.rs).

    fake-github.py PORT_FILE    listens on 127.0.0.1 (a free port, written to PORT_FILE),
                                answers until killed; every check run is green and every
                                request is appended to PORT_FILE.log as `METHOD PATH`.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PULLS = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self):
        with open(sys.argv[1] + ".log", "a") as log:
            log.write(f"{self.command} {self.path}\n")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_GET(self):
        self.record()
        segs = self.path.split("?")[0].strip("/").split("/")
        if segs == ["user"]:
            return self.reply(200, {"login": "hank-bot", "id": 1})
        if len(segs) == 3 and segs[0] == "repos":
            return self.reply(200, {"full_name": f"{segs[1]}/{segs[2]}", "default_branch": "main",
                                    "permissions": {"admin": False, "push": True, "pull": True}})
        if segs[3:] == ["pulls"]:
            return self.reply(200, PULLS)
        if len(segs) == 6 and segs[3] == "commits" and segs[5] == "check-runs":
            run = {"id": 1, "name": "build", "status": "completed", "conclusion": "success"}
            return self.reply(200, {"total_count": 1, "check_runs": [run]})
        if len(segs) == 6 and segs[3] == "commits" and segs[5] == "status":
            return self.reply(200, {"state": "success", "sha": segs[4], "total_count": 0, "statuses": []})
        if segs[-1] in ("reviews", "comments"):
            return self.reply(200, [])
        return self.reply(404, {"message": "Not Found"})

    def do_POST(self):
        self.record()
        segs = self.path.split("?")[0].strip("/").split("/")
        req = self.body()
        if segs[3:] == ["pulls"]:
            n = len(PULLS) + 1
            pr = {"number": n, "node_id": f"PR_node{n}", "state": "open",
                  "html_url": f"https://github.com/{segs[1]}/{segs[2]}/pull/{n}",
                  "title": req.get("title"), "body": req.get("body"),
                  "head": {"ref": req.get("head"), "sha": "0" * 40}, "base": {"ref": req.get("base")}}
            PULLS.append(pr)
            return self.reply(201, pr)
        if segs[-1] == "comments":
            return self.reply(201, {"id": 77})
        return self.reply(404, {"message": "Not Found"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
