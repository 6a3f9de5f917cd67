"""The test harness: a real broker (``sluice serve``) per session, a database
of its own per test run, and the skip rules.

- Debian's python3-grpcio and python3-protobuf are needed by every test: when
  they are missing the whole suite skips with the reason, unless
  SLUICE_REQUIRE lists "python" (then it fails).
- The broker is SLUICE_BIN, else built with ``go build`` from the repository.
- PostgreSQL (127.0.0.1:5432, user postgres, trust; or the server of
  SLUICE_TEST_POSTGRES, a URL) is needed by the tests that use the ``pg`` fixture: they skip with
  the reason when it is unreachable, unless SLUICE_REQUIRE lists "postgres".
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYCLIENT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PYCLIENT))


def required(part: str) -> bool:
    return part in [p.strip() for p in os.environ.get("SLUICE_REQUIRE", "").split(",")]


def missing(part: str, why: str):
    """Skips the test (prints why), or fails it when SLUICE_REQUIRE lists part."""
    if required(part):
        pytest.fail(f"{why} (SLUICE_REQUIRE lists {part!r})", pytrace=False)
    pytest.skip(why)


def _debian_packages() -> str:
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError as e:
        return (f"{e}: the Python client needs Debian's python3-grpcio and python3-protobuf "
                "(apt-get install python3-grpcio python3-protobuf python3-psycopg python3-pytest), "
                "run with /usr/bin/python3 and PYTHONPATH=clients/python")
    return ""


_MISSING = _debian_packages()


def pytest_report_header(config):
    if _MISSING:
        return f"sluice: skipping the Python client's tests: {_MISSING}"
    import google.protobuf
    import grpc

    return f"sluice: grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}, {sys.executable}"


# Without the packages the test modules cannot even be imported: none is
# collected, and the run passes, saying why (or fails, when required).
if _MISSING and not required("python"):
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config):
    if _MISSING and required("python"):
        raise pytest.UsageError(f"{_MISSING} (SLUICE_REQUIRE lists 'python')")


def pytest_terminal_summary(terminalreporter):
    if _MISSING:
        terminalreporter.write_line(f"SKIPPED the Python client's tests: {_MISSING}")


def pytest_sessionfinish(session, exitstatus):
    if _MISSING and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def eventually(cond, timeout: float = 30.0, what: str = "the condition"):
    """Polls cond until it answers a true value (returned) or the deadline
    passes (the test fails)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not hold within {timeout}s (last: {v!r})", pytrace=False)
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


@pytest.fixture(scope="session")
def sluice_bin(tmp_path_factory):
    path = os.environ.get("SLUICE_BIN")
    if path:
        return path
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH and SLUICE_BIN is not set: cannot build the broker", pytrace=False)
    out = str(tmp_path_factory.mktemp("bin") / "sluice")
    subprocess.run([go, "build", "-o", out, "./cmd/sluice"], cwd=REPO, check=True)
    return out


class Broker:
    """A ``sluice serve`` process on a free port with a temporary data dir."""

    def __init__(self, binary: str, data: str, addr: str = "127.0.0.1:0"):
        self.proc = subprocess.Popen([binary, "serve", "--addr", addr, "--data", data],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        addr: list[str] = []
        got = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                m = re.search(r"listening on (\S+)", line)
                if m and not addr:
                    addr.append(m.group(1).removeprefix("http://"))
                    got.set()
            got.set()

        threading.Thread(target=read, daemon=True).start()
        if not got.wait(60) or not addr:
            self.stop()
            pytest.fail("sluice serve did not print its address:\n" + "".join(self.lines[-20:]), pytrace=False)
        self.addr = addr[0]
        self.url = "http://" + self.addr

    def stop(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(60)


@pytest.fixture(scope="session")
def broker(sluice_bin, tmp_path_factory):
    b = Broker(sluice_bin, str(tmp_path_factory.mktemp("data")))
    yield b
    b.stop()


@pytest.fixture
def client(broker):
    from sluice import Client

    return Client(broker.url)


@pytest.fixture
def queue_name(request):
    """A queue name of the test's own (the broker is shared by the session)."""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:50]
    return f"{base}-{uuid.uuid4().hex[:8]}"


def admin_url() -> str:
    # As the Go tests' internal/pgtest.AdminURL: SLUICE_TEST_POSTGRES, else
    # the local server's "postgres" database; the test run's own database is
    # made from it.
    return os.environ.get("SLUICE_TEST_POSTGRES") or "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"


@pytest.fixture(scope="session")
def pg():
    """A database of this test run's own (its URL), dropped at the end."""
    try:
        import psycopg
    except ImportError as e:
        missing("postgres", f"{e}: apt-get install python3-psycopg")
    try:
        admin = psycopg.connect(admin_url(), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        missing("postgres", f"PostgreSQL is not reachable at {admin_url()}: {e}".strip())
    name = f"sluice_py_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    url = urllib.parse.urlsplit(admin_url())._replace(path="/" + name).geturl()
    yield url
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def pyenv():
    """The environment of a Python subprocess that imports sluice."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYCLIENT + os.pathsep + env.get("PYTHONPATH", "")
    return env
