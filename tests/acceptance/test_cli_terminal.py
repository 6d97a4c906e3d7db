"""The live view on a real pseudo-terminal: progress of this operation, waiting and paused."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

CONVERGE = [str(Path(sys.executable).parent / "converge")]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

CHAIN = """\
heat_template_version: 2021-04-16
resources:
  first: {type: OS::Heat::None}
  second: {type: OS::Heat::None, depends_on: first}
  third: {type: OS::Heat::None, depends_on: second}
"""
PAUSE = "resource_registry: {resources: {second: {hooks: pre-create}}}\n"


class Terminal:
    """A command on a pseudo-terminal 200 columns wide; its screen output, escapes removed."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "CONVERGE_STATE": str(cwd / "s.db")}
        self.process = subprocess.Popen(
            args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True
        )
        os.close(slave)
        self.master = master
        self.text = ""

    def _read(self, wait: float) -> bool:
        """Read what is there within ``wait`` seconds; False once the terminal closed."""
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the command ended and its side of the terminal closed
            return False
        self.text += ANSI.sub("", chunk.decode(errors="replace"))
        return bool(chunk)

    def read_until(self, pattern: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            remaining = deadline - time.monotonic()
            open_ = remaining > 0 and self._read(min(remaining, 0.5))
            assert open_, f"{pattern!r} not shown; the screen said:\n{self.text[-3000:]}"
        return self.text

    def finish(self, timeout: float = 30.0) -> int:
        """Read to the end; the command's exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.5):
            pass
        code = self.process.wait(timeout=timeout)
        os.close(self.master)
        return code


def test_a_paused_resource_shows_how_to_resume_and_the_rest_waits(tmp_path: Path) -> None:
    (tmp_path / "chain.yaml").write_text(CHAIN)
    (tmp_path / "pause.yaml").write_text(PAUSE)
    terminal = Terminal([*CONVERGE, "apply", "chain.yaml", "-e", "pause.yaml"], tmp_path)
    screen = terminal.read_until(r"second\s+OS::Heat::None\s+PAUSED")
    assert "converge hook clear chain second pre-create" in screen
    assert re.search(r"third\s+OS::Heat::None\s+WAITING\s+not started yet", screen)
    assert re.search(r"1/3", screen)  # first done; second paused, third waiting
    assert "INIT_COMPLETE" not in screen.split("create chain")[-1]

    cleared = subprocess.run(
        [*CONVERGE, "hook", "clear", "chain", "second", "pre-create"],
        cwd=tmp_path,
        env={**os.environ, "CONVERGE_STATE": str(tmp_path / "s.db")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cleared.returncode == 0, cleared.stderr
    assert terminal.finish() == 0, terminal.text[-3000:]
    assert "Stack chain CREATE_COMPLETE" in terminal.text


UPDATED = """\
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
resources:
  first: {type: OS::Heat::TestResource, properties: {value: {get_param: v}}}
  second: {type: OS::Heat::None, depends_on: first}
  third: {type: OS::Heat::None, depends_on: second}
"""


def test_an_update_counts_only_its_own_work(tmp_path: Path) -> None:
    (tmp_path / "chain.yaml").write_text(UPDATED)
    env = {**os.environ, "CONVERGE_STATE": str(tmp_path / "s.db")}
    created = subprocess.run(
        [*CONVERGE, "apply", "chain.yaml", "-f", "json"], cwd=tmp_path, env=env, timeout=60
    )
    assert created.returncode == 0
    # The update pauses at its first resource: nothing of it is done, although every row
    # still says CREATE_COMPLETE from the create.
    (tmp_path / "pause.yaml").write_text(
        "resource_registry: {resources: {first: {hooks: pre-update}}}\n"
    )
    args = [*CONVERGE, "apply", "chain.yaml", "-e", "pause.yaml", "-P", "v=two"]
    terminal = Terminal(args, tmp_path)
    screen = terminal.read_until(r"first\s+OS::Heat::TestResource\s+PAUSED")
    assert "converge hook clear chain first pre-update" in screen
    assert re.search(r"second\s+OS::Heat::None\s+WAITING", screen)
    assert "0/3" in screen and "3/3" not in screen and "2/3" not in screen
    terminal.process.terminate()
    terminal.finish()
