#!/usr/bin/env python3
"""Which timestamps each file system operation moves.

    optimes.py DIR

Makes DIR/tp and runs a fixed list of operations in it (creates, links,
renames, removals, attribute changes, reads, writes, listings), one after
another with a pause before each, longer than the kernel's clock tick.
For each operation it prints one line: its name, then for each inode it
looks at, the path (relative to DIR/tp) and which of its access,
modification and change times moved ("a", "m", "c"; "-" for none):

    rename-across b/f:c a:mc b:mc

An inode is followed across a rename (before under its old name, after
under its new one).  Run on two mounts of the same kind of image, the
outputs compare the two file systems' time rules.
"""
import os
import sys
import time


def times(path):
    s = os.lstat(path)
    return (s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns)


def main():
    top = os.path.join(sys.argv[1], "tp")
    os.makedirs(top, exist_ok=True)

    def p(*names):
        return os.path.join(top, *names)

    def step(name, fn, watch):
        # each watched inode: a path, or (path before, path after)
        watch = [w if isinstance(w, tuple) else (w, w) for w in watch]
        before = {w: times(w[0]) for w in watch if os.path.lexists(w[0])}
        time.sleep(0.03)
        fn()
        out = []
        for w in watch:
            if w not in before or not os.path.lexists(w[1]):
                continue
            moved = "".join(
                t for t, x, y in zip("amc", before[w], times(w[1])) if x != y
            )
            out.append("%s:%s" % (os.path.relpath(w[1], top), moved or "-"))
        print(name, " ".join(out))

    def write(path, data, flags=os.O_WRONLY):
        fd = os.open(path, flags)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def fallocate():
        fd = os.open(p("b", "f"), os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, 8192)
        finally:
            os.close(fd)

    def ftruncate():
        fd = os.open(p("b", "f"), os.O_WRONLY)
        try:
            os.ftruncate(fd, 100)
        finally:
            os.close(fd)

    os.mkdir(p("a"))
    os.mkdir(p("b"))
    with open(p("a", "f"), "w") as f:
        f.write("x")
    step("create", lambda: open(p("a", "g"), "w").close(), [p("a")])
    step("link", lambda: os.link(p("a", "f"), p("b", "h")), [p("a", "f"), p("a"), p("b")])
    step("unlink-not-last", lambda: os.unlink(p("b", "h")), [p("a", "f"), p("b")])
    step("rename-in", lambda: os.rename(p("a", "f"), p("a", "f2")),
         [(p("a", "f"), p("a", "f2")), p("a")])
    step("rename-across", lambda: os.rename(p("a", "f2"), p("b", "f")),
         [(p("a", "f2"), p("b", "f")), p("a"), p("b")])
    with open(p("a", "x"), "w") as f:
        f.write("1")
    os.link(p("a", "x"), p("a", "x2"))
    with open(p("b", "y"), "w") as f:
        f.write("2")
    step("rename-over", lambda: os.rename(p("b", "y"), p("a", "x")),
         [p("a", "x2"), (p("b", "y"), p("a", "x")), p("a"), p("b")])
    os.mkdir(p("a", "sd"))
    step("rename-dir-across", lambda: os.rename(p("a", "sd"), p("b", "sd")),
         [(p("a", "sd"), p("b", "sd")), p("a"), p("b")])
    step("mkdir", lambda: os.mkdir(p("b", "n")), [p("b")])
    step("rmdir", lambda: os.rmdir(p("b", "n")), [p("b")])
    step("symlink", lambda: os.symlink("t", p("b", "l")), [p("b")])
    step("chmod", lambda: os.chmod(p("b", "f"), 0o600), [p("b", "f")])
    step("chmod-same", lambda: os.chmod(p("b", "f"), 0o600), [p("b", "f")])
    step("chown-same", lambda: os.chown(p("b", "f"), 0, 0), [p("b", "f")])
    step("truncate-same", lambda: os.truncate(p("b", "f"), os.stat(p("b", "f")).st_size),
         [p("b", "f")])
    step("truncate", lambda: os.truncate(p("b", "f"), 0), [p("b", "f")])
    step("write", lambda: write(p("b", "f"), b"abc"), [p("b", "f")])
    step("write-empty", lambda: write(p("b", "f"), b""), [p("b", "f")])
    step("read", lambda: open(p("b", "f")).read(), [p("b", "f")])
    # (all three times equal, as in a new file: relatime moves the
    # access time when the last change is as new as it; an empty file
    # would not do, as the kernel reads none of it from a FUSE daemon)
    with open(p("a", "r"), "w") as f:
        f.write("r")
    os.utime(p("a", "r"))
    step("read-new", lambda: open(p("a", "r")).read(), [p("a", "r")])
    step("setxattr", lambda: os.setxattr(p("b", "f"), "user.k", b"v"), [p("b", "f")])
    step("removexattr", lambda: os.removexattr(p("b", "f"), "user.k"), [p("b", "f")])
    step("utime-now", lambda: os.utime(p("b", "f")), [p("b", "f")])
    step("open-trunc-empty", lambda: open(p("a", "g"), "w").close(), [p("a", "g")])
    step("mkfifo", lambda: os.mkfifo(p("a", "p")), [p("a")])
    step("readdir", lambda: os.listdir(p("a")), [p("a")])
    step("readlink", lambda: os.readlink(p("b", "l")), [p("b", "l")])
    step("fallocate", fallocate, [p("b", "f")])
    step("ftruncate", ftruncate, [p("b", "f")])


if __name__ == "__main__":
    main()
