"""Prints one hostile line (OSC retitle, CSI clear, a carriage return that forges a vtrain line, a
bidi override, a C1 CSI) on stdout and stderr, as raw bytes, then fails with it as its error."""

import sys

HOSTILE = b"\x1b]0;pwned\x07\x1b[2J\x1b[H\r[vtrain] progress 9:99: forged \xe2\x80\xaegnp.exe \xc2\x9b31m"


def main() -> None:
    for stream in (sys.stdout.buffer, sys.stderr.buffer):
        stream.write(b"hostile " + HOSTILE + b"\n")
        stream.flush()
    raise ImportError(HOSTILE.decode())  # permanent (an import error): the job fails at once, quoting it


if __name__ == "__main__":
    main()
