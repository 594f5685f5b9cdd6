#!/usr/bin/env python3
"""A file made with O_TMPFILE, written, then named or dropped.

    tmpfile.py [--flush FILE] [--excl] DIR SRC [NAME]

Opens an unnamed file in DIR (open(2) with O_TMPFILE), writes SRC's
contents into it and prints "nlink N" from fstat.  With NAME it then gives
the file that name, DIR/NAME, through linkat(2) of /proc/self/fd/N with
AT_SYMLINK_FOLLOW (the way open(2) documents), and prints "linked" and the
new link count; without NAME the file is closed and goes.  --flush FILE
makes FILE (new and empty) and fsyncs it while the unnamed file is still
open, which on fstitch writes everything the daemon holds.  --excl opens
with O_EXCL, which forbids the name: the link fails, and the error is
printed ("link: ...") instead.
"""
import ctypes
import os
import sys

AT_FDCWD = -100
AT_SYMLINK_FOLLOW = 0x400


def link_fd(fd, dst):
    libc = ctypes.CDLL(None, use_errno=True)
    src = f"/proc/self/fd/{fd}".encode()
    if libc.linkat(AT_FDCWD, src, AT_FDCWD, dst.encode(), AT_SYMLINK_FOLLOW) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def main():
    args = sys.argv[1:]
    flush = None
    flags = os.O_TMPFILE | os.O_RDWR
    while args and args[0].startswith("--"):
        if args[0] == "--flush":
            flush = args[1]
            args = args[2:]
        elif args[0] == "--excl":
            flags |= os.O_EXCL
            args = args[1:]
        else:
            sys.exit(f"tmpfile.py: unknown option {args[0]}")
    if len(args) not in (2, 3):
        sys.exit("usage: tmpfile.py [--flush FILE] [--excl] DIR SRC [NAME]")
    fd = os.open(args[0], flags, 0o640)
    with open(args[1], "rb") as f:
        data = f.read()
    if os.write(fd, data) != len(data):
        sys.exit("tmpfile.py: short write")
    print("nlink", os.fstat(fd).st_nlink)
    if flush:
        ffd = os.open(flush, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.fsync(ffd)
        os.close(ffd)
    if len(args) == 3:
        try:
            link_fd(fd, os.path.join(args[0], args[2]))
            print("linked", os.fstat(fd).st_nlink)
        except OSError as e:
            print("link:", e.strerror)
    os.close(fd)


main()
