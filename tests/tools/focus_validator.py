"""The FinOps Foundation's FOCUS validator (focus-validator 2.2.1) in its own Python 3.12 venv, and its report.

``python tests/tools/focus_validator.py`` creates the venv (``.ci/run`` does, so CI has it warm);
``tests/test_focus_validator.py`` uses :func:`ensure_venv` and :func:`validate`.

Measured on this project's machines:

* focus-validator 2.2.1 needs Python >= 3.12 (the project runs 3.11): the venv is made with
  ``python3.12 -m venv`` (``PYENV_VERSION=3.12.1`` picks pyenv's 3.12.1 where pyenv provides python3.12).
* It declares numpy<2 but the pyarrow it resolves needs numpy>=2, so ``focus_validator.lock`` pins
  every package at the version that works and is installed with ``--no-deps``.
* It reads its ISO 4217 list from the relative path ``focus_validator/rules/currency_codes.csv``, so it
  runs with its site-packages as working directory; ``--block-download`` keeps it offline (the FOCUS 1.2
  rule model ships in the wheel).
* Its exit status is 0 whatever it finds: the verdict is the console report, parsed here.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VERSION = "2.2.1"
FOCUS_VERSION = "1.2"
PYTHON = "python3.12"
PYENV_VERSION = "3.12.1"
LOCK = Path(__file__).with_name("focus_validator.lock")
VENV = Path(os.environ.get("FINOPS_FOCUS_VALIDATOR_VENV", Path.home() / ".cache" / "finops" / f"focus-validator-{VERSION}"))

_RESULT = re.compile(r"^\S+\s+(?P<rule>[A-Za-z]+-[A-Z]-\d{3}-[A-Z]): (?P<status>PASS|FAIL|SKIPPED)\s+\((?P<detail>.*)\)$")
_TOTAL = re.compile(r"^Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)$")


class Unavailable(Exception):
    """No Python 3.12 on this machine to run the validator with."""


@dataclass(frozen=True)
class Report:
    """The validator's verdict: rule id -> (PASS | FAIL | SKIPPED, its detail), and the failure section."""
    results: dict[str, tuple[str, str]]
    failures_text: str

    def rules(self, status: str) -> list[str]:
        return sorted(r for r, (s, _d) in self.results.items() if s == status)

    @property
    def passed(self) -> list[str]:
        return self.rules("PASS")

    @property
    def failed(self) -> list[str]:
        return self.rules("FAIL")


def find_python() -> str:
    """The real python3.12 executable to build the venv with; :class:`Unavailable` if the machine has none.

    Tried as the environment has it, then with ``PYENV_VERSION=3.12.1`` (a pyenv shim run from the
    project's Python inherits that Python's PYENV_VERSION, which hides pyenv's 3.12).
    """
    exe = shutil.which(PYTHON)
    if exe is None:
        raise Unavailable(f"{PYTHON} is not on PATH: focus-validator {VERSION} needs Python >= 3.12")
    said = ""
    for env in (os.environ, {**os.environ, "PYENV_VERSION": PYENV_VERSION}):
        probe = subprocess.run([exe, "-c", "import sys; print(sys.version_info >= (3, 12), sys.executable)"],
                               env=env, capture_output=True, text=True)
        ok, _, real = probe.stdout.strip().partition(" ")
        if probe.returncode == 0 and ok == "True":
            return real
        said = (probe.stderr or probe.stdout).strip()
    raise Unavailable(f"{exe} does not run Python >= 3.12 here: {said}")


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path = VENV) -> Path:
    """Create the validator's venv at ``venv`` unless it already holds exactly ``focus_validator.lock``.

    Under a file lock, so parallel test sessions build it once; a copy of the lock inside the venv marks
    it complete (a half-built venv is rebuilt).
    """
    python = find_python()
    venv.parent.mkdir(parents=True, exist_ok=True)
    wanted = LOCK.read_text()
    marker = venv / "finops-focus-validator.lock"
    with open(venv.parent / f"{venv.name}.build-lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == wanted:
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "-q", "--no-deps", "-r", str(LOCK)],
                       check=True)
        marker.write_text(wanted)
    return venv


def parse(text: str) -> Report:
    """The console report of focus-validator 2.2.1; checks the rule lines against its own totals."""
    results: dict[str, tuple[str, str]] = {}
    totals = None
    for line in text.splitlines():
        if m := _RESULT.match(line):
            results[m["rule"]] = (m["status"], m["detail"])
        elif m := _TOTAL.match(line.strip()):
            totals = tuple(int(x) for x in m.groups())
    if totals is None:
        raise ValueError("no 'Total: ... | Pass: ... | Fail: ... | Skipped: ...' line in the validator's output:\n"
                         + text[-2000:])
    counted = (len(results), *(sum(s == k for s, _ in results.values()) for k in ("PASS", "FAIL", "SKIPPED")))
    if counted != totals:
        raise ValueError(f"parsed {counted} (total, pass, fail, skipped) but the validator reports {totals}")
    failures = text.split("--- Failures ---", 1)[1].strip() if "--- Failures ---" in text else ""
    return Report(results, failures)


def validate(csv_path: str | Path, criteria: tuple[str, ...] = (), venv: Path = VENV) -> Report:
    """Run the validator (FOCUS 1.2, offline) on a CSV; ``criteria`` are its applicability criteria."""
    python = str(venv_python(venv))
    site = subprocess.run([python, "-c", "import focus_validator, pathlib; "
                           "print(pathlib.Path(focus_validator.__file__).parent.parent)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    cmd = [python, "-m", "focus_validator.main", "--data-file", str(Path(csv_path).resolve()),
           "--validate-version", FOCUS_VERSION, "--block-download", "--show-violations"]
    if criteria:
        cmd += ["--applicability-criteria", ",".join(criteria)]
    run = subprocess.run(cmd, cwd=site, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"focus-validator exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return parse(run.stdout)


if __name__ == "__main__":
    try:
        print(f"focus-validator {VERSION} venv ready: {ensure_venv()}")
    except Unavailable as e:
        print(f"focus-validator venv not created: {e}", file=sys.stderr)
