"""The checked-in message code is what protoc 3.21 makes of stream.proto."""

import os
import shutil
import subprocess

from conftest import PYCLIENT, missing


def test_generated_code_matches_proto(tmp_path):
    protoc = shutil.which("protoc")
    if protoc is None:
        missing("protoc", "protoc is not installed (apt-get install protobuf-compiler): "
                          "the generated code is not checked against stream.proto")
    v = subprocess.run([protoc, "--version"], capture_output=True, text=True).stdout.strip()
    if not v.startswith("libprotoc 3.21."):
        missing("protoc", f"protoc is not 3.21 (Debian 12's protobuf-compiler), the version the code was generated with: {v}")
    subprocess.run([os.path.join(PYCLIENT, "generate.sh"), str(tmp_path)], check=True)
    rel = os.path.join("sluice", "_proto", "stream_pb2.py")
    with open(tmp_path / rel, "rb") as f:
        want = f.read()
    with open(os.path.join(PYCLIENT, rel), "rb") as f:
        have = f.read()
    assert have == want, (f"{rel} is not what stream.proto generates: run clients/python/generate.sh "
                          "(protoc 3.21) and commit the result")


def test_generated_code_loads_in_debian_runtime():
    from sluice._proto import stream_pb2 as pb

    m = pb.Envelope(body="x", priority=-3)
    assert pb.Envelope.FromString(m.SerializeToString()).priority == -3
    assert pb.DESCRIPTOR.services_by_name["Streams"].full_name == "sluice.stream.v1.Streams"
