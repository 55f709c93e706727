#!/usr/bin/env python3
"""Strictly validate OTLP/JSON ExportLogsServiceRequest files.

Usage: validate_otlp.py FILE...

Each file must parse with the official schema (google.protobuf.json_format.Parse into
ExportLogsServiceRequest, unknown keys rejected) and must also follow the OTLP/JSON rules
that json_format.Parse tolerates: lowerCamelCase keys only, 64-bit integers
(timeUnixNano, observedTimeUnixNano, intValue) as decimal strings, severityNumber as an
integer, no bare NaN/Infinity, no duplicate keys; and every eventName must survive parsing
into LogRecord.event_name (field 12). Exits 0 if all files pass, 1 with the reason otherwise.
"""
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
UNSIGNED = re.compile(r"^(0|[1-9][0-9]*)$")
SIGNED = re.compile(r"^-?(0|[1-9][0-9]*)$")
DOUBLE_STRINGS = {"NaN", "Infinity", "-Infinity"}


class Invalid(Exception):
    pass


def pairs_without_duplicates(pairs):
    keys = [k for k, _ in pairs]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise Invalid(f"duplicate key(s) {sorted(duplicates)}")
    return dict(pairs)


def reject_constant(name):
    raise Invalid(f"bare {name} is not JSON (write \"NaN\"/\"Infinity\" as strings)")


def walk(node, path):
    if isinstance(node, list):
        for i, element in enumerate(node):
            walk(element, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        here = f"{path}.{key}"
        if not CAMEL.match(key):
            raise Invalid(f"{here}: key {key!r} is not lowerCamelCase")
        if key in ("timeUnixNano", "observedTimeUnixNano"):
            if not (isinstance(value, str) and UNSIGNED.match(value)) or int(value) >= 2**64:
                raise Invalid(f"{here}: {value!r} is not a uint64 as a decimal string")
        elif key == "intValue":
            if not (isinstance(value, str) and SIGNED.match(value)) or not -(2**63) <= int(value) < 2**63:
                raise Invalid(f"{here}: {value!r} is not an int64 as a decimal string")
        elif key == "severityNumber":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 24:
                raise Invalid(f"{here}: {value!r} is not an integer severity 0...24")
        elif key == "doubleValue":
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or value in DOUBLE_STRINGS):
                raise Invalid(f"{here}: {value!r} is not a number or NaN/Infinity/-Infinity")
        walk(value, here)


def check_event_names(raw, message):
    field = LogRecord.DESCRIPTOR.fields_by_name.get("event_name")
    if field is None or field.number != 12 or field.json_name != "eventName":
        raise Invalid("this opentelemetry-proto has no LogRecord.event_name field 12 (need proto 1.5+)")
    for r, (raw_rl, rl) in enumerate(zip(raw.get("resourceLogs", []), message.resource_logs)):
        for s, (raw_sl, sl) in enumerate(zip(raw_rl.get("scopeLogs", []), rl.scope_logs)):
            for i, (raw_lr, lr) in enumerate(zip(raw_sl.get("logRecords", []), sl.log_records)):
                if "eventName" in raw_lr and lr.event_name != raw_lr["eventName"]:
                    raise Invalid(f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}].eventName "
                                  f"{raw_lr['eventName']!r} did not survive parsing")


def validate(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        raw = json.loads(text, object_pairs_hook=pairs_without_duplicates, parse_constant=reject_constant)
    except json.JSONDecodeError as e:
        raise Invalid(f"not JSON: {e}")
    if not isinstance(raw, dict):
        raise Invalid("top level is not an object")
    walk(raw, "$")
    message = ExportLogsServiceRequest()
    try:
        json_format.Parse(text, message)  # ignore_unknown_fields=False: unknown keys fail
    except json_format.ParseError as e:
        raise Invalid(f"json_format.Parse: {e}")
    check_event_names(raw, message)
    return sum(len(sl.log_records) for rl in message.resource_logs for sl in rl.scope_logs)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in argv[1:]:
        try:
            count = validate(path)
        except (Invalid, OSError, UnicodeDecodeError) as e:
            print(f"{path}: INVALID: {e}", file=sys.stderr)
            return 1
        print(f"{path}: OK ({count} log records)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
