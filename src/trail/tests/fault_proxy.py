#!/usr/bin/env python3
"""fault_proxy.py: an HTTP proxy on 127.0.0.1 in front of MinIO that breaks
responses on purpose, for the pager's fault tests.

    fault_proxy.py UPSTREAM_PORT PORT_FILE [MAX_SECONDS]

Listens on a free port of 127.0.0.1 (written to PORT_FILE) and forwards
requests unchanged (the Host header too, so SigV4 signatures stay valid) to
127.0.0.1:UPSTREAM_PORT.  GET /__fault__?plan=a,b,c sets the faults of the
next requests, one per request, in order (then requests pass through):

    ok         pass through
    500, 503   that status with an S3 error body, upstream not asked
    429        429 with <Code>SlowDown</Code>
    slowdown   503 with <Code>SlowDown</Code>
    200        answer 200 OK and the whole object to a range request (a server
               that ignores Range).  Range is signed, so the proxy cannot
               drop it to fetch the whole object: it forwards the request,
               and puts the 206's bytes at their offset in a body of the
               object's full size (zeros elsewhere)
    short      the right headers, half the body, then close
    badrange   Content-Range shifted by one byte
    etag       a different ETag header (an object replaced behind a cache
               that ignores If-Match)
    stall      headers and a quarter of the body, then silence for 8 s
    reset      close the connection with a TCP reset, no response
    slice      the whole response, its body written in pieces of 1 to 97
               bytes with short pauses (TCP segments as a slow network cuts them)

GET /__fault__/count answers how many proxied requests were seen.  The
proxy exits after MAX_SECONDS (default 600) whatever happens.
"""
import http.client
import os
import http.server
import socket
import struct
import sys
import threading
import time
import urllib.parse

UPSTREAM = int(sys.argv[1])
PORT_FILE = sys.argv[2]
MAX_SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 600.0

lock = threading.Lock()
plan = []
seen = [0]

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


def error_body(code, msg):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{msg}</Message></Error>").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def control(self):
        u = urllib.parse.urlparse(self.path)
        if u.path == "/__fault__/count":
            with lock:
                body = str(seen[0]).encode()
        else:
            q = urllib.parse.parse_qs(u.query)
            with lock:
                plan[:] = [p for p in q.get("plan", [""])[0].split(",") if p]
                seen[0] = 0
            body = b"ok"
        self.reply(200, body, [("Content-Type", "text/plain")])

    def handle_any(self):
        if self.path.startswith("/__fault__"):
            return self.control()
        with lock:
            fault = plan.pop(0) if plan else "ok"
            seen[0] += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""

        if fault == "reset":
            # SO_LINGER 0: close() sends RST instead of FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if fault in ("500", "503", "429", "slowdown"):
            status = 503 if fault == "slowdown" else int(fault)
            code = {"500": "InternalError", "503": "ServiceUnavailable"}.get(fault, "SlowDown")
            return self.reply(status, error_body(code, "injected by fault_proxy"),
                              [("Content-Type", "application/xml")])

        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=30)
        conn.request(self.command, self.path, body=body if body else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()

        status = resp.status
        out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP and k.lower() != "content-length"]
        if fault == "200" and status == 206:
            rng = dict((k.lower(), v) for k, v in out).get("content-range", "")
            if rng.startswith("bytes "):
                span, total = rng[6:].split("/")
                a = int(span.split("-")[0])
                whole = bytearray(int(total))
                whole[a:a + len(data)] = data
                data = bytes(whole)
                status = 200
                out = [(k, v) for k, v in out if k.lower() != "content-range"]
        if fault == "badrange":
            fixed = []
            for k, v in out:
                if k.lower() == "content-range" and v.startswith("bytes "):
                    rng, total = v[6:].split("/")
                    a, b = (int(x) for x in rng.split("-"))
                    v = f"bytes {a + 1}-{b + 1}/{total}"
                fixed.append((k, v))
            out = fixed
        if fault == "etag":
            out = [(k, '"00000000000000000000000000000000"' if k.lower() == "etag" else v) for k, v in out]

        self.send_response(status)
        for k, v in out:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "short":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if fault == "stall":
            self.wfile.write(data[: len(data) // 4])
            self.wfile.flush()
            time.sleep(8)
            self.close_connection = True
            return
        if fault == "slice":
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pos, k = 0, 0
            while pos < len(data):
                n = 1 + (k * 37) % 97
                self.wfile.write(data[pos:pos + n])
                self.wfile.flush()
                pos += n
                k += 1
                if k % 64 == 0:
                    time.sleep(0.002)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients reset connections on purpose (cancel tests); stay quiet


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)
    timer = threading.Timer(MAX_SECONDS, srv.shutdown)
    timer.daemon = True
    timer.start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
