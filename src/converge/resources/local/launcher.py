"""Starts a service detached from converge: run as a script, a spec as JSON on stdin.

The launcher forks; the child starts a new session, enters the working directory and points
its output at the log file through descriptors converge passed it, and executes the command;
the launcher prints the child's pid and exits without waiting, so the service is re-parented
away from the engine and outlives it. Whether exec succeeded comes back through a
close-on-exec pipe: end of file means it did, bytes carry the error.
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
            # Descriptors opened by converge without following symlinks, never the paths.
            os.fchdir(spec["cwd_fd"])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(spec["log_fd"], 1)
            os.dup2(spec["log_fd"], 2)
            for fd in {null, spec["cwd_fd"], spec["log_fd"]} - {0, 1, 2}:
                os.close(fd)
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
