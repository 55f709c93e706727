#!/usr/bin/env python3
"""A scripted OTLP/HTTP logs collector on 127.0.0.1 for the exporter tests.

usage: otlp_collector.py OUT_DIR RESPONSES
  RESPONSES: comma-separated answers to successive POSTs, each STATUS or STATUS:RETRY_AFTER
  (the last one repeats), e.g. "503:0,200".
Prints "PORT <n>" once listening. Each request is saved as OUT_DIR/<n>.body with its
Content-Type in OUT_DIR/<n>.type; a protobuf body is parsed with the official
opentelemetry-proto definitions and saved as OTLP/JSON in OUT_DIR/<n>.json (a body that does
not parse is answered 400 and noted in OUT_DIR/<n>.error). Stops after 60 s.
"""
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

out_dir, script = sys.argv[1], sys.argv[2].split(",")
count = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        with lock:
            n = count
            count += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ctype = self.headers.get("Content-Type", "")
        base = os.path.join(out_dir, str(n))
        open(base + ".body", "wb").write(body)
        open(base + ".type", "w").write(ctype)
        answer = script[min(n, len(script) - 1)].split(":")
        status = int(answer[0])
        if self.path != "/v1/logs":
            status = 404
        if ctype == "application/x-protobuf":
            try:
                request = ExportLogsServiceRequest.FromString(body)
                text = json_format.MessageToJson(request, use_integers_for_enums=True)
                open(base + ".json", "w").write(text)
            except Exception as e:  # noqa: BLE001 - any parse failure is the test's answer
                open(base + ".error", "w").write(str(e))
                status = 400
        self.send_response(status)
        if len(answer) > 1:
            self.send_header("Retry-After", answer[1])
        reply = b"{}" if status == 200 else b'{"message":"scripted"}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print("PORT", server.server_address[1], flush=True)
threading.Timer(60, server.shutdown).start()
server.serve_forever()
