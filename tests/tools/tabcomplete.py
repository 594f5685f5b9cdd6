#!/usr/bin/env python3
"""Press TAB in a real interactive bash, as a user would.

    tabcomplete.py LINE

Starts `bash -i` on a pseudo-terminal with bash-completion loaded (its
COMP_WORDBREAKS and its on-demand loading of completions, from
$BASH_COMPLETION_USER_DIR/completions first), types LINE, presses TAB once,
and prints what readline did:

    line: LINE AFTER TAB
    candidate: WORD        (one per candidate readline listed, if any)

Readline is told to list the candidates at once when there are several
(show-all-if-ambiguous), one per line.  Exits 2 if bash does not answer
within 20 seconds.
"""
import os
import pty
import select
import sys
import tempfile
import time

PROMPT = "TAB-PROMPT> "
READY = "TAB-READY"
DONE = "TAB-DONE"


def read_until(fd, cond, timeout=20.0):
    buf = b""
    end = time.monotonic() + timeout
    while not cond(buf):
        left = end - time.monotonic()
        if left <= 0:
            sys.stderr.write("tabcomplete: no answer from bash; got %r\n" % buf)
            sys.exit(2)
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
    return buf


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: tabcomplete.py LINE\n")
        sys.exit(64)
    line = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="tabcomplete.")
    out = os.path.join(tmp, "line")
    rc = os.path.join(tmp, "rc")
    with open(rc, "w") as f:
        f.write(
            "PS1='%s'\n"
            ". /usr/share/bash-completion/bash_completion\n"
            "bind 'set bell-style none'\n"
            "bind 'set show-all-if-ambiguous on'\n"
            "bind 'set completion-display-width 0'\n"
            "bind 'set completion-query-items -1'\n"
            "bind 'set page-completions off'\n"
            "bind 'set horizontal-scroll-mode on'\n"
            "bind -x '\"\\C-t\": printf \"%%s\\n\" \"$READLINE_LINE\" >%s; echo %s'\n"
            "echo %s\n" % (PROMPT, out, DONE, READY)
        )
    env = dict(os.environ, TERM="dumb", COLUMNS="400", LINES="100", INPUTRC="/dev/null")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe("bash", ["bash", "--noprofile", "--rcfile", rc, "-i"], env)
    read_until(fd, lambda b: (READY + "\r\n" + PROMPT).encode() in b or
               (READY + "\n" + PROMPT).encode() in b)
    # Readline handles keys in order: C-t runs only after the completion.
    os.write(fd, line.encode() + b"\t\x14")
    # The terminal shows the listing before C-t's own output.
    shown = read_until(fd, lambda b: ("\n" + DONE).encode() in b)
    with open(out) as f:
        after = f.read().rstrip("\n")
    os.write(fd, b"\x15exit\n")
    try:
        read_until(fd, lambda b: False, timeout=5)
    except SystemExit:
        pass
    os.waitpid(pid, 0)
    for p in (out, rc):
        os.unlink(p)
    os.rmdir(tmp)
    print("line: " + after)
    # A listing is the lines readline printed between the typed line and
    # the prompt it drew again.
    if os.environ.get("TAB_DEBUG"):
        sys.stderr.write(repr(shown) + "\n")
    text = shown.decode(errors="replace").replace("\r", "")
    rows = text.split("\n")
    if len(rows) > 2:
        for r in rows[1:]:
            if r.startswith(PROMPT) or r == DONE:
                break
            if r.strip():
                print("candidate: " + r.strip())


if __name__ == "__main__":
    main()
