"""The repository's .streamlit/config.toml: `streamlit run app.py` listens on 127.0.0.1 only, sends no usage
statistics, shows no Deploy button, and Streamlit's raw table download (which writes =HYPERLINK(...) cells
as they are) is off."""
import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_config_holds_the_safe_defaults():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["client"]["toolbarMode"] == "minimal"
    assert cfg["client"]["disableDataExport"] is True


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} writes them) listening on ``port``."""
    out = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        for line in Path(name).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if int(p, 16) == port and state == "0A":          # 0A: LISTEN
                out.add(addr)
    return out


def test_streamlit_run_with_the_repo_config_listens_on_loopback_only(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, FINOPS_DB=str(tmp_path / "empty.duckdb"), FINOPS_DEMO="0")
    # no --server.address: the repository's config decides
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-2000:]
                assert time.monotonic() < deadline, "streamlit did not answer its health check"
                time.sleep(0.2)
        addresses = _listening(port)
        assert addresses == {"0100007F"}, addresses                # 127.0.0.1, and nothing on 0.0.0.0 or ::
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
