"""A strict gRPC reflection client, as grpcurl and grpcio-reflection are (issue 31, item 4).

It knows no kslate proto: everything comes from the server's reflection service
(grpc.reflection.v1), and every file the server returns is built by protobuf's own
DescriptorPool (the C++ one in Debian's python3-protobuf), which refuses what protobuf
runtimes refuse: a file whose imports are missing, a reference to an unknown type, a map
entry not named <Field>Entry. Then it does what grpcurl's `list`, `describe` and an
invocation do: list the services, describe svc.v1.SvcService, build a PutRequest from JSON
with the reflected descriptors and call Put.

    /usr/bin/python3 reflection_strict.py HOST:PORT BEARER_TOKEN REFLECTION_PROTO_ROOT RECORD FIELD

REFLECTION_PROTO_ROOT holds grpc/reflection/v1/reflection.proto, the client's own copy of
the reflection protocol, compiled here with grpc_tools' protoc (python3-grpc-tools). Prints
one JSON object (services, the service's methods, the Put answer); any failure is a
traceback and exit status 1.
"""
import json
import os
import sys
import tempfile

import grpc
from google.protobuf import descriptor_database, descriptor_pb2, descriptor_pool, json_format, message_factory
from grpc_tools import protoc

REFLECTION = 'grpc.reflection.v1'


def message_class(pool, full_name):
    """The message class of a pool's type, with protobuf 4.21 (Debian 12) or a newer one."""
    desc = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, 'GetMessageClass'):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def reflection_types(proto_root):
    """ServerReflectionRequest and ServerReflectionResponse, from the client's reflection.proto."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, 'reflection.binpb')
        rc = protoc.main(['protoc', f'-I{proto_root}', f'--descriptor_set_out={out}', 'grpc/reflection/v1/reflection.proto'])
        if rc != 0:
            raise RuntimeError(f'protoc could not compile grpc/reflection/v1/reflection.proto under {proto_root}')
        with open(out, 'rb') as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fdp in files.file:
        pool.Add(fdp)
    return message_class(pool, f'{REFLECTION}.ServerReflectionRequest'), message_class(pool, f'{REFLECTION}.ServerReflectionResponse')


class ReflectionDatabase(descriptor_database.DescriptorDatabase):
    """A descriptor database that asks the server for the files it does not hold yet, as
    grpcio-reflection's ProtoReflectionDescriptorDatabase does."""

    def __init__(self, channel, proto_root):
        super().__init__()
        self.request_type, response_type = reflection_types(proto_root)
        self.info = channel.stream_stream(
            f'/{REFLECTION}.ServerReflection/ServerReflectionInfo',
            request_serializer=self.request_type.SerializeToString,
            response_deserializer=response_type.FromString,
        )
        self.added = set()

    def ask(self, **request):
        response = next(self.info(iter([self.request_type(**request)])))
        if response.HasField('error_response'):
            raise KeyError(f'reflection refused {request}: {response.error_response.error_message}')
        return response

    def add_files(self, response):
        for raw in response.file_descriptor_response.file_descriptor_proto:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
            if fdp.name not in self.added:
                self.added.add(fdp.name)
                self.Add(fdp)

    def services(self):
        return sorted(s.name for s in self.ask(list_services='').list_services_response.service)

    def FindFileByName(self, name):
        if name not in self.added:
            self.add_files(self.ask(file_by_filename=name))
        return super().FindFileByName(name)

    def FindFileContainingSymbol(self, symbol):
        try:
            return super().FindFileContainingSymbol(symbol)
        except KeyError:
            self.add_files(self.ask(file_containing_symbol=symbol))
            return super().FindFileContainingSymbol(symbol)


def describe_type(desc, seen):
    """Every field of a message and of the messages it reaches: building them is what fails
    on a broken descriptor."""
    if desc.full_name in seen:
        return
    seen[desc.full_name] = {f.name: (f.message_type.full_name if f.message_type else f.type) for f in desc.fields}
    for f in desc.fields:
        if f.message_type is not None:
            describe_type(f.message_type, seen)


def main(address, token, proto_root, record, field):
    with grpc.insecure_channel(address) as channel:
        db = ReflectionDatabase(channel, proto_root)
        services = db.services()
        pool = descriptor_pool.DescriptorPool(db)
        service = pool.FindServiceByName('svc.v1.SvcService')
        messages = {}
        methods = {}
        for m in service.methods:
            as_proto = descriptor_pb2.MethodDescriptorProto()
            m.CopyToProto(as_proto)
            methods[m.name] = {
                'input': m.input_type.full_name,
                'output': m.output_type.full_name,
                'server_streaming': as_proto.server_streaming,
            }
            describe_type(m.input_type, messages)
            describe_type(m.output_type, messages)
        put = service.methods_by_name['Put']
        request = json_format.ParseDict(
            {'record': record, 'field': field, 'value': {'from': 'python', 'ok': True}, 'expected_version': 0},
            message_class(pool, put.input_type.full_name)(),
        )
        call = channel.unary_unary(
            f'/{service.full_name}/{put.name}',
            request_serializer=type(request).SerializeToString,
            response_deserializer=message_class(pool, put.output_type.full_name).FromString,
        )
        answer = call(request, metadata=[('authorization', f'Bearer {token}')], timeout=30)
        query_filters = pool.FindMessageTypeByName('svc.v1.QueryRequest').fields_by_name['filters'].message_type
        print(json.dumps({
            'services': services,
            'files': sorted(db.added),
            'methods': methods,
            'messages': messages,
            'map_entry': {'name': query_filters.full_name, 'is_map': query_filters.GetOptions().map_entry},
            'put': json_format.MessageToDict(answer, preserving_proto_field_name=True),
        }))


if __name__ == '__main__':
    main(*sys.argv[1:6])
