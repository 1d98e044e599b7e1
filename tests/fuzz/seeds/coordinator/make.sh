#!/usr/bin/env bash
# Encodes each NAME.txtpb (first line: "# rpc R bind B", then the request in
# protobuf text format) into NAME.bin: byte R, byte B, the wire-format request
# (coordinator_fuzz.cc reads them so). Needs protoc.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
proto="$here/../../../../proto"
for txt in "$here"/*.txtpb; do
  read -r _ _ rpc _ bind type < "$txt"
  {
    printf "\\x$(printf %02x "$rpc")\\x$(printf %02x "$bind")"
    tail -n +2 "$txt" | protoc --proto_path="$proto" --encode="$type" frontier/v1/frontier.proto
  } > "${txt%.txtpb}.bin"
done
