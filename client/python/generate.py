"""Generates kioku's Python stubs (src/kioku/v1/) from the API.

./scripts/generate runs it with Debian's Python, after `buf build` has
compiled proto/ into a FileDescriptorSet (with its imports):

    go tool -modfile=tools/go.mod buf build proto --as-file-descriptor-set -o api.binpb
    /usr/bin/python3 client/python/generate.py api.binpb

The generators are Debian bookworm's: protoc 3.21.12 (protobuf-compiler)
with its Python and .pyi generators, and grpc_python_plugin 1.51.1
(protobuf-compiler-grpc). Their output depends on their version, so the
script refuses any other: that is what keeps CI's drift check reproducible
(same packages, same bytes). Other versions are pinned by Debian's archive,
not by this repository.

The API's methods carry google.api.http options (the REST bindings), which
import google/api/annotations.proto. Python has no Debian package of
Google's googleapis modules (googleapis-common-protos), and a gRPC client
has no use for REST bindings, so the stubs are generated from the API with
those options and that import removed: `import kioku` then needs only
grpcio and protobuf. Nothing else in the descriptors changes.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

PROTOC_VERSION = "libprotoc 3.21.12"
GRPC_PLUGIN_PACKAGE = "protobuf-compiler-grpc"
GRPC_PLUGIN_VERSION = "1.51.1"
ANNOTATIONS = "google/api/annotations.proto"

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "src")
GENERATED = os.path.join(OUT, "kioku", "v1")


def fail(msg):
    sys.exit("client/python/generate.py: " + msg)


def check_generators():
    """Refuses generators other than the pinned ones, saying what to install."""
    install = "apt-get install protobuf-compiler protobuf-compiler-grpc (Debian bookworm)"
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        fail(f"needs protoc and grpc_python_plugin: {install}")
    got = subprocess.run([protoc, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if got != PROTOC_VERSION:
        fail(f"the stubs are generated with {PROTOC_VERSION}, this protoc is {got!r}: {install}")
    try:
        version = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", GRPC_PLUGIN_PACKAGE], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        fail(f"grpc_python_plugin must come from Debian's {GRPC_PLUGIN_PACKAGE} {GRPC_PLUGIN_VERSION}: {install}")
    if not version.startswith(GRPC_PLUGIN_VERSION + "-"):
        fail(f"the stubs are generated with {GRPC_PLUGIN_PACKAGE} {GRPC_PLUGIN_VERSION}, installed is {version!r}: {install}")
    return protoc, plugin


def strip_rest_bindings(fds):
    """Removes the google.api.http options and their import from kioku's files."""
    kioku = [f for f in fds.file if f.name.startswith("kioku/")]
    for f in kioku:
        if ANNOTATIONS in f.dependency:
            if f.public_dependency or f.weak_dependency:
                fail(f"{f.name}: public or weak imports are not expected")
            deps = [d for d in f.dependency if d != ANNOTATIONS]
            del f.dependency[:]
            f.dependency.extend(deps)
        for service in f.service:
            for method in service.method:
                # The http option is an extension Python does not know here:
                # an unknown field of MethodOptions, the only one there.
                method.options.DiscardUnknownFields()
                if not method.options.ListFields():
                    method.ClearField("options")
    return [f.name for f in kioku]


def main():
    if len(sys.argv) != 2:
        fail("usage: generate.py API.binpb (a FileDescriptorSet of proto/ with its imports)")
    protoc, plugin = check_generators()
    fds = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], "rb") as f:
        fds.ParseFromString(f.read())
    names = strip_rest_bindings(fds)
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "api.binpb")
        with open(stripped, "wb") as f:
            f.write(fds.SerializeToString())
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        run = lambda *args: subprocess.run([protoc, "--descriptor_set_in=" + stripped, *args], check=True)
        run("--python_out=" + out, "--pyi_out=" + out, *names)
        # Service stubs only for the files that have services.
        services = [f.name for f in fds.file if f.name in names and f.service]
        run("--plugin=protoc-gen-grpc_python=" + plugin, "--grpc_python_out=" + out, *services)
        shutil.rmtree(GENERATED, ignore_errors=True)
        shutil.copytree(os.path.join(out, "kioku", "v1"), GENERATED)
    # kioku.v1 is a package of its own (kioku/__init__.py is the client).
    with open(os.path.join(GENERATED, "__init__.py"), "w") as f:
        f.write('"""Generated from proto/kioku/v1 by client/python/generate.py. DO NOT EDIT."""\n')


if __name__ == "__main__":
    main()
