"""The email example as a process: the signup is answered at once, the
email sent once by its worker, and SIGTERM stops it cleanly."""

import os
import signal
import socket
import subprocess
import sys
import urllib.request

from conftest import PYCLIENT, eventually


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_email_example(broker, client, pyenv, tmp_path):
    out = tmp_path / "emails.log"
    port = free_port()
    p = subprocess.Popen([sys.executable, os.path.join(PYCLIENT, "examples", "email", "email_example.py"),
                          "--broker", broker.url, "--listen", f"127.0.0.1:{port}", "--out", str(out)],
                         env=pyenv, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in p.stderr.readline()
        bad = urllib.request.Request(f"http://127.0.0.1:{port}/signup", data=b"email=nope")
        try:
            urllib.request.urlopen(bad, timeout=10)
            raise AssertionError("a bad address was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 400
        req = urllib.request.Request(f"http://127.0.0.1:{port}/signup", data=b"email=ada%40example.com")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
        text = eventually(lambda: out.exists() and out.read_text(), what="the welcome email")
        assert "to=ada@example.com" in text and 'subject="Welcome!"' in text
        eventually(lambda: client.stats("email-welcome")["depth"] == 0, what="the message acked")
        assert out.read_text().count("ada@example.com") == 1
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
    finally:
        p.kill()
        p.wait()
