#!/usr/bin/env python3
"""A scripted OTLP/HTTP logs collector on 127.0.0.1 for the exporter tests.

usage: otlp_collector.py OUT_DIR RESPONSES [CERT KEY]
  With CERT and KEY (PEM files) it speaks https.
  RESPONSES: comma-separated answers to successive requests (the last one repeats):
    STATUS[:RETRY_AFTER]  e.g. "503:0,200"
    STATUS>LOCATION       a redirect, e.g. "307>/v2/logs"; {port} in LOCATION is this
                          collector's port ("308>http://localhost:{port}/v1/logs": another origin)
    STATUS=MESSAGE        an OTLP failure whose Status carries MESSAGE (protobuf for a protobuf
                          request, else JSON), e.g. "400=record 3 has no body"
    cut                   a status line and half a header, then the connection closes
    cutbody               200 with Content-Length 100, one byte of body, then it closes
    silent                reads the request and never answers (until the client leaves)
    reset                 closes the connection with a reset before reading the body
    garbage               4 KiB of random bytes instead of a response, then it closes
    headerflood           a status line, then header lines without end (until the client leaves)
    huge                  200 with a 256 MiB body (Content-Length sent)
    hugestream            200 with a 256 MiB body, no Content-Length (ends at close)
Prints "PORT <n>" once listening. Each request, whatever its method, is saved as OUT_DIR/<n>.*:
.method, .path, .headers (JSON), .body (gunzipped when Content-Encoding is gzip; the bytes on
the wire then in .wire), .type (Content-Type); a protobuf body is parsed with the official
opentelemetry-proto definitions and saved as OTLP/JSON in .json (a body that does not parse is
answered 400 and noted in .error). For huge answers, .sent holds the body bytes the client took.
A path must end in /logs (else 404). Stops after 60 s.
"""
import gzip
import json
import os
import select
import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

out_dir, script = sys.argv[1], sys.argv[2].split(",")
count = 0
lock = threading.Lock()
HUGE = 256 << 20


def save(path, data):
    """Writes a file whole under its name (a temporary name, then a rename): a test that polls
    for it never reads it half-written, nor empty."""
    with open(path + ".tmp", "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def status_proto(code, message):
    """google.rpc.Status{code, message} in protobuf."""
    text = message.encode()
    out = bytes([0x08, code, 0x12])
    n = len(text)
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n]) + text


class Handler(BaseHTTPRequestHandler):
    def handle_any(self):
        global count
        with lock:
            n = count
            count += 1
        base = os.path.join(out_dir, str(n))
        answer = script[min(n, len(script) - 1)].replace("{port}", str(self.server.server_address[1]))
        if answer == "reset":
            save(base + ".method", self.command)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        wire = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = wire
        if self.headers.get("Content-Encoding", "") == "gzip":
            save(base + ".wire", wire)
            body = gzip.decompress(wire)
        ctype = self.headers.get("Content-Type", "")
        save(base + ".method", self.command)
        save(base + ".path", self.path)
        save(base + ".headers", json.dumps({k.lower(): v for k, v in self.headers.items()}))
        save(base + ".body", body)
        save(base + ".type", ctype)
        if ctype == "application/x-protobuf":
            try:
                request = ExportLogsServiceRequest.FromString(body)
                text = json_format.MessageToJson(request, use_integers_for_enums=True)
                save(base + ".json", text)
            except Exception as e:  # noqa: BLE001 - any parse failure is the test's answer
                save(base + ".error", str(e))
                answer = "400=cannot parse"
        if not self.path.endswith("/logs"):
            answer = "404"
        if answer == "cut":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
            self.close_connection = True
            return
        if answer == "cutbody":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            self.close_connection = True
            return
        if answer == "garbage":
            self.wfile.write(os.urandom(4096))
            self.close_connection = True
            return
        if answer == "headerflood":
            self.close_connection = True
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                line = b"X-Flood: " + b"a" * 1000 + b"\r\n"
                for _ in range(1_000_000):
                    self.wfile.write(line)
            except OSError:
                pass
            return
        if answer == "silent":
            self.close_connection = True
            while True:
                readable, _, _ = select.select([self.connection], [], [], 1)
                if readable and not self.connection.recv(4096):
                    return
        if answer in ("huge", "hugestream"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if answer == "huge":
                self.send_header("Content-Length", str(HUGE))
            self.end_headers()
            sent, chunk = 0, b"x" * 65536
            try:
                while sent < HUGE:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            save(base + ".sent", str(sent))
            self.close_connection = True
            return
        headers = {}
        if ">" in answer:
            answer, headers["Location"] = answer.split(">", 1)
        message = "scripted"
        if "=" in answer:
            answer, message = answer.split("=", 1)
        if ":" in answer:
            answer, headers["Retry-After"] = answer.split(":", 1)
        status = int(answer)
        if status == 200:
            reply, rtype = b"{}", "application/json"
        elif ctype == "application/x-protobuf":
            reply, rtype = status_proto(3, message), "application/x-protobuf"
        else:
            reply, rtype = json.dumps({"code": 3, "message": message}).encode(), "application/json"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", rtype)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_POST = do_GET = do_PUT = do_HEAD = handle_any

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
if len(sys.argv) > 4:
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print("PORT", server.server_address[1], flush=True)
threading.Timer(60, server.shutdown).start()
server.serve_forever()
