"""Starts a service detached from converge: run as a script, a spec as JSON on stdin.

The launcher forks; the child starts a new session, points its output at the log file and
executes the command; the launcher prints the child's pid and exits without waiting, so the
service is re-parented away from the engine and outlives it. Whether exec succeeded comes
back through a close-on-exec pipe: end of file means it did, bytes carry the error.
Standard library only, imported by nothing: it runs in a fresh, isolated interpreter.
"""

import json
import os
import sys


def main() -> int:
    spec = json.load(sys.stdin)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the service-to-be
        os.close(read_end)
        try:
            os.setsid()
            os.chdir(spec["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.umask(0o022)
            os.execve(spec["executable"], spec["argv"], spec["env"])
        except OSError as exc:
            os.write(
                write_end, f"{exc.strerror or exc} ({exc.filename or spec['executable']})".encode()
            )
        finally:
            os._exit(127)
    os.close(write_end)
    failure = b""
    while chunk := os.read(read_end, 4096):
        failure += chunk
    if failure:
        os.waitpid(pid, 0)
        print(json.dumps({"error": failure.decode("utf-8", "replace")}))
        return 1
    print(json.dumps({"pid": pid}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
