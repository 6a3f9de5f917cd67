"""SQS's MD5 digests, computed by the test scripts themselves: botocore does
not verify them, so the scripts check the broker's digests against these."""

import hashlib
import struct


def md5_hex(data):
    """MD5OfMessageBody: the hex MD5 of the UTF-8 body."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.md5(data).hexdigest()


def md5_attributes(attrs):
    """SQS's digest of message attributes: names sorted; each field a 4-byte
    big-endian length then bytes; the value prefixed by 1 (string) or 2 (binary)."""
    h = hashlib.md5()

    def field(b):
        h.update(struct.pack(">I", len(b)))
        h.update(b)

    for name in sorted(attrs):
        a = attrs[name]
        field(name.encode("utf-8"))
        field(a["DataType"].encode("utf-8"))
        if "StringValue" in a:
            h.update(b"\x01")
            field(a["StringValue"].encode("utf-8"))
        else:
            h.update(b"\x02")
            field(a["BinaryValue"])
    return h.hexdigest()
