"""The README's 20-line worker runs as written: it handles the message it
sends, and stops on SIGTERM."""

import os
import re
import signal
import subprocess
import sys

from conftest import PYCLIENT


def test_readme_worker(broker, pyenv, tmp_path):
    with open(os.path.join(PYCLIENT, "README.md")) as f:
        text = f.read()
    block = re.search(r"## A worker in 20 lines\n\n```python\n(.*?)```", text, re.S).group(1)
    assert len(block.strip().splitlines()) <= 20
    script = tmp_path / "worker.py"
    script.write_text(block.replace("http://127.0.0.1:9324", broker.url))
    p = subprocess.Popen([sys.executable, str(script)], env=pyenv, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().split() == ["welcome", "ada@example.com", "attempt", "1"]
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
    finally:
        p.kill()
        p.wait()
