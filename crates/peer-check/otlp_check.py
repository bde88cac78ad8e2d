"""The official OpenTelemetry protobuf definitions read the lab's OTLP/JSON.

Reads one ExportTraceServiceRequest in OTLP/JSON from standard input, checks the rules
OTLP/JSON adds to protobuf's JSON mapping (opentelemetry-proto v1.11.0,
docs/specification.md, "JSON Protobuf Encoding"), then decodes it with
opentelemetry-proto's generated classes, strictly (an unknown field is an error).
Protobuf's JSON reader takes bytes fields as base64, where OTLP/JSON writes trace and
span ids as hex, so the ids are turned into base64 first and their decoded lengths
checked. Writes a JSON summary of what it decoded, for the test to compare.
"""

import base64
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

HEX_IDS = {"traceId": 32, "spanId": 16, "parentSpanId": 16}
INT64 = {"startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue"}
ENUMS = {"kind", "code"}


def check(node, path):
    """The OTLP/JSON rules protobuf's reader does not enforce."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            check(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        where = f"{path}.{key}"
        if not re.fullmatch(r"[a-z][A-Za-z0-9]*", key):
            raise SystemExit(f"{where}: not a lowerCamelCase key")
        if key in HEX_IDS:
            if not re.fullmatch(rf"[0-9a-f]{{{HEX_IDS[key]}}}", value) or set(value) == {"0"}:
                raise SystemExit(f"{where}: {value!r} is not a nonzero hex id of {HEX_IDS[key]} digits")
        elif key in INT64:
            if not (isinstance(value, str) and value.isdigit()):
                raise SystemExit(f"{where}: {value!r} is not a 64-bit integer as a decimal string")
        elif key in ENUMS:
            if not isinstance(value, int):
                raise SystemExit(f"{where}: {value!r} is not an enum as an integer")
        check(value, where)


def to_base64(node):
    if isinstance(node, list):
        return [to_base64(item) for item in node]
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode() if k in HEX_IDS else to_base64(v)
            for k, v in node.items()
        }
    return node


def main():
    document = json.load(sys.stdin)
    check(document, "$")
    request = json_format.Parse(json.dumps(to_base64(document)), ExportTraceServiceRequest())
    spans = []
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                if (len(span.trace_id), len(span.span_id)) != (16, 8):
                    raise SystemExit(f"span {span.name}: ids of {len(span.trace_id)} and {len(span.span_id)} bytes")
                attributes = {a.key: a.value.WhichOneof("value") for a in span.attributes}
                spans.append({
                    "span_id": span.span_id.hex(),
                    "trace_id": span.trace_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "schema_url": scope.schema_url,
                    "attributes": attributes,
                    "events": [
                        {
                            "name": e.name,
                            "attributes": {a.key: a.value.WhichOneof("value") for a in e.attributes},
                        }
                        for e in span.events
                    ],
                })
    json.dump({"spans": spans}, sys.stdout)


if __name__ == "__main__":
    main()
