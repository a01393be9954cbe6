"""Calls a Weir engine with a stock gRPC client (Python grpcio), as a Python coordinator would.

Usage: client.py TARGET METHOD REQUEST_HEX [CALLS]

TARGET is a grpcio target (`unix:/run/engine.sock`, `127.0.0.1:5544`), METHOD a full method path
(`/engine.Engine/ExecuteRawQuery`), REQUEST_HEX the protobuf request message as hex (the
`bytes flatbuffer = 1` envelope), CALLS how many times to make the call on one channel (default
1). The channel keeps grpcio's defaults, so `:authority` is whatever grpcio sends for the target.
For each call, prints one `MESSAGE <hex>` line per response message, then `STATUS OK`, or
`STATUS <code name> <details>` when the call ends with an error. Exit code 0 unless the arguments
are wrong (2).
"""

import sys

import grpc


def main(argv):
    if len(argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    target, method, request_hex = argv[1:4]
    calls = int(argv[4]) if len(argv) == 5 else 1
    request = bytes.fromhex(request_hex)
    with grpc.insecure_channel(target) as channel:
        # No serializers: messages are raw bytes, so no protobuf code is needed.
        call = channel.unary_stream(method, request_serializer=None, response_deserializer=None)
        for _ in range(calls):
            try:
                for message in call(request):
                    print("MESSAGE", message.hex(), flush=True)
            except grpc.RpcError as error:
                print("STATUS", error.code().name, error.details(), flush=True)
                continue
            print("STATUS OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
