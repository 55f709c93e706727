#!/usr/bin/env python3
"""A scripted Breakpad/Crashpad minidump upload receiver on 127.0.0.1 for the uploader tests.

usage: breakpad_receiver.py OUT_DIR RESPONSES
  RESPONSES: comma-separated answers to successive requests (the last one repeats):
    STATUS[=BODY]   e.g. "200=CrashID=bp-6fa4c1", "400=bad product", "503"
    silent          reads the request and never answers (until the client leaves)
    garbage         4 KiB of random bytes instead of a response, then it closes
Prints "PORT <n>" once listening. Each request n is saved as OUT_DIR/<n>.*: .method, .path,
.headers (JSON, names in lower case), .wire (the body as sent), and, parsed from the body
(gunzipped first when Content-Encoding is gzip) field by field: .parts (JSON list, in order, of
{name, filename, content_type, size}), .part.<name> (each part's bytes). A body that is not
multipart/form-data as RFC 7578 has it (no boundary parameter, a delimiter missing, a part
without Content-Disposition form-data and a quoted name, no closing delimiter, a part header
without CRLF CRLF) is answered 400 and the reason saved in .error. Stops after 60 s.
"""
import gzip
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

out_dir, script = sys.argv[1], sys.argv[2].split(",")
count = 0
lock = threading.Lock()


class Malformed(Exception):
    pass


def parse_multipart(ctype, body):
    """The parts of a multipart/form-data body: [(headers dict, bytes)], strictly."""
    m = re.match(r'multipart/form-data;\s*boundary=("?)([^";]+)\1\s*$', ctype)
    if not m:
        raise Malformed("Content-Type is not multipart/form-data with a boundary: %r" % ctype)
    delimiter = b"--" + m.group(2).encode()
    if not body.startswith(delimiter + b"\r\n"):
        raise Malformed("the body does not start with the delimiter")
    parts = []
    pos = 0
    while True:
        start = pos + len(delimiter)
        if body[start:start + 2] == b"--":
            if body[start + 2:] not in (b"", b"\r\n"):
                raise Malformed("bytes after the closing delimiter")
            return parts
        if body[start:start + 2] != b"\r\n":
            raise Malformed("a delimiter not followed by CRLF")
        end = body.find(b"\r\n" + delimiter, start + 2)
        if end < 0:
            raise Malformed("no closing delimiter")
        part = body[start + 2:end]
        head_end = part.find(b"\r\n\r\n")
        if head_end < 0:
            raise Malformed("a part's headers do not end with CRLF CRLF")
        headers = {}
        for line in part[:head_end].split(b"\r\n"):
            name, sep, value = line.decode("utf-8").partition(":")
            if not sep:
                raise Malformed("a part header without a colon: %r" % line)
            headers[name.strip().lower()] = value.strip()
        parts.append((headers, part[head_end + 4:]))
        pos = end + 2


def disposition(headers):
    value = headers.get("content-disposition", "")
    if not value.startswith("form-data;"):
        raise Malformed("a part without Content-Disposition: form-data")
    params = dict(re.findall(r';\s*([a-z]+)="([^"]*)"', value))
    if "name" not in params:
        raise Malformed("a part without a quoted name")
    return params["name"], params.get("filename")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        with lock:
            n = count
            count += 1
        base = os.path.join(out_dir, str(n))
        answer = script[min(n, len(script) - 1)]
        wire = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        open(base + ".method", "w").write(self.command)
        open(base + ".path", "w").write(self.path)
        open(base + ".headers", "w").write(json.dumps({k.lower(): v for k, v in self.headers.items()}))
        open(base + ".wire", "wb").write(wire)
        try:
            body = gzip.decompress(wire) if self.headers.get("Content-Encoding", "") == "gzip" else wire
            listing = []
            for headers, data in parse_multipart(self.headers.get("Content-Type", ""), body):
                name, filename = disposition(headers)
                if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
                    raise Malformed("a part name this receiver does not save: %r" % name)
                listing.append({"name": name, "filename": filename,
                                "content_type": headers.get("content-type"), "size": len(data)})
                open(base + ".part." + name, "wb").write(data)
            open(base + ".parts", "w").write(json.dumps(listing))
        except (Malformed, OSError, EOFError, UnicodeDecodeError) as error:
            open(base + ".error", "w").write(str(error))
            answer = "400=" + str(error)
        if answer == "silent":
            time.sleep(30)
            return
        if answer == "garbage":
            self.wfile.write(os.urandom(4096))
            self.close_connection = True
            return
        status, _, text = answer.partition("=")
        payload = text.encode()
        self.send_response(int(status))
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("PORT", server.server_address[1], flush=True)
threading.Timer(60, server.shutdown).start()
server.serve_forever()
