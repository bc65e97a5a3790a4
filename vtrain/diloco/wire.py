"""The DiLoCo wire: one gRPC bidirectional stream per learner, frames of a protobuf header + raw bytes.

No protoc step (grpcio-tools is not in the images): the two messages are declared here as a
FileDescriptorProto and built with protobuf's own message factory, so the bytes are ordinary
protobuf that any language can read with this schema:

    message TensorSpec { string name = 1; string dtype = 2; repeated int64 shape = 3; bool trainable = 4; }
    message Header {
      string kind = 1;             // hello welcome reject delta update heartbeat done final
      string token = 2;  string learner = 3;  string manifest_hash = 4;  repeated TensorSpec manifest = 5;
      int32 fragment = 6;  int64 round = 7;  int64 base_round = 8;  double examples = 9;
      string codec = 10;  string reason = 11;  repeated int64 rounds = 12;
      int32 chunk = 13;  int32 chunks = 14;  bool snapshot = 15;
      bool ended = 16;             // on a welcome: training is over, this is the final model
    }
    message Frame { Header header = 1; bytes payload = 2; }   // payload: tensors back to back

Tensors are never pickled: the payload is each tensor's encoded bytes in manifest order
(:mod:`.codec`), and a large message is cut into chunks below protobuf's 2 GiB limit.
Each side has exactly one writer per stream (a queue drained by the gRPC iterator), so a slow
socket delays only its own learner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SERVICE = "vtrain.diloco.Syncer"
METHOD = f"/{SERVICE}/Session"
CHUNK_BYTES = 64 << 20
#: No message-size cap (chunks are bounded by CHUNK_BYTES); keepalives find a silently dead peer.
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
_SERVER_OPTIONS = GRPC_OPTIONS + [("grpc.http2.min_ping_interval_without_data_ms", 5_000)]

#: name: "field:type:number" ...; a leading * marks a repeated field, .Name a message type.
_FIELDS = {
    "TensorSpec": "name:string:1 dtype:string:2 shape:*int64:3 trainable:bool:4",
    "Header": "kind:string:1 token:string:2 learner:string:3 manifest_hash:string:4 manifest:*.TensorSpec:5 "
              "fragment:int32:6 round:int64:7 base_round:int64:8 examples:double:9 codec:string:10 "
              "reason:string:11 rounds:*int64:12 chunk:int32:13 chunks:int32:14 snapshot:bool:15 ended:bool:16",
    "Frame": "header:.Header:1 payload:bytes:2",
}


def _messages() -> dict[str, Any]:
    proto = descriptor_pb2.FileDescriptorProto(name="vtrain/diloco/wire.proto", package="vtrain.diloco",
                                               syntax="proto3")
    for name, specs in _FIELDS.items():
        msg = proto.message_type.add(name=name)
        for item in specs.split():
            fname, kind, number = item.split(":")
            T = descriptor_pb2.FieldDescriptorProto
            label = T.LABEL_REPEATED if kind.startswith("*") else T.LABEL_OPTIONAL
            kind = kind.lstrip("*")
            field = msg.field.add(name=fname, number=int(number), label=label)
            if kind.startswith("."):
                field.type, field.type_name = T.TYPE_MESSAGE, f".vtrain.diloco{kind}"
            else:
                field.type = getattr(T, f"TYPE_{kind.upper()}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:  # protobuf < 4.21 (older TF images)
        factory = message_factory.MessageFactory(pool)
        prototype = factory.GetPrototype  # type: ignore[attr-defined]  # gone in protobuf 5; serves < 4.21
        return {n: prototype(pool.FindMessageTypeByName(f"vtrain.diloco.{n}")) for n in _FIELDS}
    return {n: get(pool.FindMessageTypeByName(f"vtrain.diloco.{n}")) for n in _FIELDS}


_CLASSES = _messages()
TensorSpecMsg = _CLASSES["TensorSpec"]
Header = _CLASSES["Header"]
Frame = _CLASSES["Frame"]


def header(kind: str, **fields: Any) -> Any:
    """A Header; `manifest` takes codec.TensorSpec objects."""
    manifest = fields.pop("manifest", None)
    h = Header(kind=kind, **fields)
    for t in manifest or ():
        h.manifest.add(name=t.name, dtype=t.dtype, shape=list(t.shape), trainable=t.trainable)
    return h


def frames(head: Any, payload: bytes = b"", chunk_bytes: int = CHUNK_BYTES) -> list[Any]:
    """One message as frames: the header repeated on each, the payload cut at chunk_bytes."""
    count = max(1, -(-len(payload) // chunk_bytes))
    out = []
    view = memoryview(payload)
    for i in range(count):
        h = Header()
        h.CopyFrom(head)
        h.chunk, h.chunks = i, count
        out.append(Frame(header=h, payload=bytes(view[i * chunk_bytes:(i + 1) * chunk_bytes])))
    return out


class Assembler:
    """Joins the chunks of one message (frames of a stream arrive in order)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, frame: Any) -> tuple[Any, bytes] | None:
        h = frame.header
        if h.chunk != len(self._parts):
            raise ValueError(f"frame chunk {h.chunk} arrived, expected {len(self._parts)}")
        self._parts.append(frame.payload)
        if h.chunk + 1 < max(1, h.chunks):
            return None
        payload, self._parts = b"".join(self._parts), []
        return h, payload


def service_handler(session: Any) -> grpc.GenericRpcHandler:
    """The syncer's one method: session(request_iterator, context) -> iterator of Frames."""
    method = grpc.stream_stream_rpc_method_handler(
        session, request_deserializer=Frame.FromString, response_serializer=Frame.SerializeToString
    )
    return grpc.method_handlers_generic_handler(SERVICE, {"Session": method})


def open_session(channel: grpc.Channel, requests: Iterator[Any]) -> Any:
    """Start the learner's stream: returns the response iterator (also a grpc.Call for cancel())."""
    stub = channel.stream_stream(METHOD, request_serializer=Frame.SerializeToString,
                                 response_deserializer=Frame.FromString)
    return stub(requests)


def server_options() -> list[tuple[str, int]]:
    return list(_SERVER_OPTIONS)
