#!/usr/bin/env python3
"""One seeded sequence of file operations, done on two trees side by side.

    fsrand.py [--seed N] [--ops N] [--check K] [--trace] [--compare] A B

A and B are empty directories on two file systems: fstitch's and a
reference (Linux's driver on the same kind of image: ext4's, which serves
ext2 here; the separate ext2 driver cannot punch holes).  Every step
picks an operation and its arguments from a random generator seeded with N
(default 1), does it in both trees and compares the two results: the value
returned or the errno.  Half the steps are made by root, the others by one
of three users (through file-system ids, so that permissions, sticky
directories and the set-ID rules of changes by others come into play);
the umask is 002.  Every K steps (default 200), and at the end, the
whole trees are compared: names, types, modes, owners, link counts, sizes,
contents, symbolic link targets, user.* attributes and which names are
links of one inode.  Times, block counts, directory sizes and inode numbers
are left out: they depend on the clock and on each allocator.

The choices depend only on the seed and on the reference tree, so a seed
names one sequence of operations, the same on every run.  The first
difference is printed with the step number and the seed, and the exit
status is 1; 0 means no difference was found.  --trace prints each
step and its outcome on standard error.  --compare skips the operations
and only compares the trees (after a remount, for example).  Run as root.
"""
import ctypes
import errno
import fcntl
import hashlib
import os
import random
import stat
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
MAX_ENTRIES = 160	# the tree stays small, so that a name is often met again
MAX_OPEN = 4
NB = os.O_NONBLOCK	# a fifo picked as a file must not block the run
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
# chattr's S, d, A, D and T: the flags set and compared.  Not i and a: the
# kernel does not know a FUSE file's immutable and append-only flags, so
# its own checks refuse with another errno first (EACCES or EISDIR where
# Linux's ext2 says EPERM).
FLAGS = 0x8 | 0x40 | 0x80 | 0x10000 | 0x20000
# Who makes a step: root half the time, else one of these (uid, gid,
# supplementary groups), as file-system ids (setfsuid(2)), which also
# drop root's file capabilities as Linux does for any other user.
USERS = [(1000, 1000, [1000]), (1001, 1001, [1000]), (1002, 1002, [])]


def renameat2(src, dst, flags):
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def punch(fd, off, length):
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Differ(Exception):
    pass


def become(who):
    uid, gid, groups = who
    os.setgroups(groups)
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    if libc.setfsuid(-1) != uid or libc.setfsgid(-1) != gid:
        sys.exit("fsrand.py: cannot take file-system ids %d:%d" % (uid, gid))


def show(args):
    """args for a message: data as its length and hash, not its bytes."""
    return "(%s)" % ", ".join(
        "<%d bytes %s>" % (len(a), hashlib.sha256(a).hexdigest()[:12])
        if isinstance(a, bytes) else repr(a) for a in args)


def outcome(fn, *args):
    """fn's result, or its error by name."""
    try:
        return ("ok", fn(*args))
    except OSError as e:
        return ("error", errno.errorcode.get(e.errno, str(e.errno)))


class Run:
    trace = False

    def __init__(self, a, b, seed):
        self.root = (a, b)
        self.rng = random.Random(seed)
        self.seed = seed
        self.step = 0
        self.open = []	# (fd in A, fd in B, the path it was opened by)
        self.root_ids = (0, 0, os.getgroups())
        self.who = self.root_ids

    # ---- picking, from the reference tree

    def entries(self):
        """Every path under the root, relative, sorted; directories end in /."""
        out = []
        b = self.root[1]
        for d, dirs, files in os.walk(b):
            dirs.sort()
            rel = os.path.relpath(d, b)
            rel = "" if rel == "." else rel + "/"
            for n in dirs:
                out.append(rel + n + "/")
            for n in sorted(files):
                out.append(rel + n)
        return out

    def dirs(self, ents):
        return [""] + [e for e in ents if e.endswith("/")]

    def files(self, ents):
        return [e for e in ents if not e.endswith("/") and
                stat.S_ISREG(os.lstat(os.path.join(self.root[1], e)).st_mode)]

    def newname(self, ents):
        r = self.rng.random()
        if r < 0.02:
            name = "n" * self.rng.choice([255, 256])
        else:
            name = "%s%d" % (self.rng.choice("abcfx"), self.rng.randrange(40))
        return self.rng.choice(self.dirs(ents)) + name

    def anypath(self, ents):
        """An existing path mostly, a new one sometimes."""
        if ents and self.rng.random() < 0.85:
            return self.rng.choice(ents).rstrip("/")
        return self.newname(ents)

    def afile(self, ents):
        fs = self.files(ents)
        if fs and self.rng.random() < 0.9:
            return self.rng.choice(fs)
        return self.anypath(ents)

    def offset(self, size):
        r = self.rng.random()
        if r < 0.5:
            return self.rng.randrange(size + 4096)
        if r < 0.8:
            return self.rng.randrange(300 << 10)	# the single indirect block
        if r < 0.97:
            return self.rng.randrange(70 << 20)	# double, and triple at 1 KiB
        return self.rng.randrange(1 << 36)	# far: EFBIG at small blocks

    def length(self):
        return self.rng.choice([1, 7, 512, 1000, 1024, 4096, 5000, 16384,
                                self.rng.randrange(1, 70000)])

    # ---- doing

    def pair(self, fn, x, y, *args):
        """fn(x, *args) and fn(y, *args) as this step's user."""
        become(self.who)
        try:
            return outcome(fn, x, *args), outcome(fn, y, *args)
        finally:
            become(self.root_ids)

    def both(self, what, fn, *args):
        """Do fn(root, *args) in A and in B and compare the outcomes."""
        return self.fds(what, fn, (self.root[0], self.root[1], None), *args)

    def fds(self, what, fn, h, *args):
        """The same with h's two objects (h[2] names them, or None)."""
        ra, rb = self.pair(fn, h[0], h[1], *args)
        what += "" if h[2] is None else " on %s" % h[2]
        if self.trace:
            print(self.step, "uid %d" % self.who[0], what, show(args), rb, file=sys.stderr)
        if ra != rb:
            raise Differ("%s %s as uid %d: fstitch %r, reference %r" %
                         (what, show(args), self.who[0], ra, rb))
        return rb

    def one(self):
        ents = self.entries()
        full = len(ents) >= MAX_ENTRIES
        rng = self.rng
        ops = [
            ("create", 8), ("write", 14), ("truncate", 5), ("read", 6),
            ("unlink", 6 + 10 * full), ("mkdir", 4), ("rmdir", 3 + 6 * full),
            ("rename", 10), ("rename2", 3), ("link", 4), ("symlink", 3),
            ("readlink", 2), ("chmod", 3), ("chown", 2), ("xattr", 5),
            ("punch", 3), ("listdir", 2), ("open", 3), ("fdop", 8),
            ("close", 3), ("utime", 2), ("append", 3), ("mkfifo", 1), ("chattr", 2),
        ]
        op = rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        self.who = rng.choice(USERS) if rng.random() < 0.5 else self.root_ids
        j = os.path.join
        if full and op in ("create", "mkdir", "link", "symlink", "mkfifo"):
            op = "unlink"

        if op == "create":
            p = self.newname(ents) if rng.random() < 0.7 else self.anypath(ents)
            fl = os.O_WRONLY | os.O_CREAT | rng.choice([0, os.O_EXCL, os.O_TRUNC])
            mode = rng.choice([0o644, 0o600, 0o755, 0o4755, 0o2755, 0o666, 0o4777, 0o2767,
                               0o6777])

            def create(r, p, fl, mode):
                os.close(os.open(j(r, p), fl | NB, mode))
            self.both("create", create, p, fl, mode)
        elif op in ("write", "truncate", "punch", "read"):
            p = self.afile(ents)
            try:
                size = os.lstat(j(self.root[1], p)).st_size
            except OSError:
                size = 0
            off, n = self.offset(size), self.length()
            if op == "write":
                data = rng.randbytes(n)

                def write(r, p, off, data):
                    fd = os.open(j(r, p), os.O_WRONLY | NB)
                    try:
                        return os.pwrite(fd, data, off)
                    finally:
                        os.close(fd)
                self.both("write", write, p, off, data)
            elif op == "truncate":
                to = rng.choice([0, off, max(size - n, 0), size + n])
                self.both("truncate", lambda r, p, to: os.truncate(j(r, p), to), p, to)
            elif op == "punch":
                def hole(r, p, off, n):
                    fd = os.open(j(r, p), os.O_WRONLY | NB)
                    try:
                        punch(fd, off, n)
                    finally:
                        os.close(fd)
                self.both("punch", hole, p, off, n)
            else:
                def read(r, p, off, n):
                    fd = os.open(j(r, p), os.O_RDONLY | NB)
                    try:
                        return hashlib.sha256(os.pread(fd, n, off)).hexdigest()
                    finally:
                        os.close(fd)
                self.both("read", read, p, off, n)
        elif op == "unlink":
            self.both("unlink", lambda r, p: os.unlink(j(r, p)), self.anypath(ents))
        elif op == "mkdir":
            p = self.newname(ents) if rng.random() < 0.8 else self.anypath(ents)
            mode = rng.choice([0o755, 0o700, 0o2775, 0o777, 0o1777, 0o2777, 0o3777, 0o777])
            self.both("mkdir", lambda r, p, m: os.mkdir(j(r, p), m), p, mode)
        elif op == "rmdir":
            ds = self.dirs(ents)[1:]
            p = rng.choice(ds).rstrip("/") if ds and rng.random() < 0.8 else self.anypath(ents)
            self.both("rmdir", lambda r, p: os.rmdir(j(r, p)), p)
        elif op in ("rename", "rename2"):
            src = self.anypath(ents)
            dst = self.anypath(ents) if rng.random() < 0.5 else self.newname(ents)
            if op == "rename":
                self.both("rename", lambda r, s, d: os.rename(j(r, s), j(r, d)), src, dst)
            else:
                fl = rng.choice([RENAME_NOREPLACE, RENAME_EXCHANGE])
                self.both("renameat2", lambda r, s, d, f: renameat2(j(r, s), j(r, d), f),
                          src, dst, fl)
        elif op == "link":
            src = self.anypath(ents)
            self.both("link", lambda r, s, d: os.link(j(r, s), j(r, d)), src, self.newname(ents))
        elif op == "symlink":
            target = rng.choice(["a1", "../b2/c3", "x" * rng.choice([59, 60, 61, 200, 1000])])
            self.both("symlink", lambda r, t, d: os.symlink(t, j(r, d)), target,
                      self.newname(ents))
        elif op == "readlink":
            self.both("readlink", lambda r, p: os.readlink(j(r, p)), self.anypath(ents))
        elif op == "chmod":
            mode = rng.choice([0o644, 0o4755, 0o2755, 0o2745, 0o6777, 0o1777, 0o000, 0o777,
                               0o666, 0o2777])
            self.both("chmod", lambda r, p, m: os.chmod(j(r, p), m), self.anypath(ents), mode)
        elif op == "chown":
            uid, gid = rng.choice([0, 1000, -1]), rng.choice([0, 1000, -1])
            how = rng.choice(["lchown", "lchown", "fchown", "fchownat"])

            # the three calls the daemon tells chown(f, -1, -1) by (through
            # an open file, and by name from a directory descriptor)
            def chown(r, p, u, g, how):
                if how == "lchown":
                    return os.lchown(j(r, p), u, g)
                if how == "fchownat":
                    d = os.open(os.path.dirname(j(r, p)), os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        return os.chown(os.path.basename(p), u, g, dir_fd=d,
                                        follow_symlinks=False)
                    finally:
                        os.close(d)
                fd = os.open(j(r, p), os.O_RDONLY | NB)
                try:
                    return os.fchown(fd, u, g)
                finally:
                    os.close(fd)
            self.both("chown", chown, self.anypath(ents), uid, gid, how)
        elif op == "utime":
            # a set time needs the owner, the time now only write access
            t = rng.randrange(1 << 31) * 1000000000 + rng.randrange(1000000000)
            if rng.random() < 0.5:
                self.both("utime", lambda r, p, t: os.utime(j(r, p), ns=(t, t),
                                                              follow_symlinks=False),
                          self.anypath(ents), t)
            else:
                self.both("utime now", lambda r, p: os.utime(j(r, p)), self.anypath(ents))
        elif op == "append":
            data = rng.randbytes(self.length())

            def append(r, p, data):
                fd = os.open(j(r, p), os.O_WRONLY | os.O_APPEND | NB)
                try:
                    return os.write(fd, data), os.fstat(fd).st_size
                finally:
                    os.close(fd)
            self.both("append", append, self.afile(ents), data)
        elif op == "chattr":
            # all of them at once, as FS_IOC_SETFLAGS sets them; on files
            # and directories (on a fifo the kernel answers for both, and
            # not alike)
            p = rng.choice(self.files(ents) + self.dirs(ents)).rstrip("/") or "."
            fl = rng.choice([0, 0, 0x8, 0x40 | 0x80, 0x10000, 0x20000, 0x8 | 0x10000])

            def chattr(r, p, fl):
                fd = os.open(j(r, p), os.O_RDONLY | NB)
                try:
                    fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", fl))
                finally:
                    os.close(fd)
            self.both("chattr", chattr, p, fl)
        elif op == "mkfifo":
            self.both("mkfifo", lambda r, p: os.mkfifo(j(r, p), 0o640), self.newname(ents))
        elif op == "xattr":
            p = self.anypath(ents)
            name = "user.%s" % rng.choice(["a", "bb", "c" * 20, "d1", "e2"])
            r = rng.random()
            if r < 0.5:
                val = rng.randbytes(rng.choice([0, 1, 16, 60, 100]))
                fl = rng.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
                self.both("setxattr", lambda r, p, n, v, f: os.setxattr(
                    j(r, p), n, v, f, follow_symlinks=False), p, name, val, fl)
            elif r < 0.7:
                self.both("removexattr", lambda r, p, n: os.removexattr(
                    j(r, p), n, follow_symlinks=False), p, name)
            else:
                self.both("getxattr", lambda r, p, n: os.getxattr(
                    j(r, p), n, follow_symlinks=False), p, name)
        elif op == "listdir":
            p = rng.choice(self.dirs(ents)) if rng.random() < 0.8 else self.anypath(ents)
            self.both("listdir", lambda r, p: sorted(os.listdir(j(r, p))), p)
        elif op == "open":
            if len(self.open) >= MAX_OPEN:
                return
            p = self.afile(ents)
            fa, fb = self.pair(lambda r: os.open(j(r, p), os.O_RDWR | NB), self.root[0],
                               self.root[1])
            if fa[0] != fb[0] or (fa[0] == "error" and fa != fb):
                for f in (fa, fb):
                    if f[0] == "ok":
                        os.close(f[1])
                raise Differ("open %r: fstitch %r, reference %r" % (p, fa, fb))
            if fa[0] == "ok":
                self.open.append((fa[1], fb[1], p))
        elif op in ("fdop", "close") and self.open:
            h = rng.choice(self.open)
            if op == "close":
                self.open.remove(h)
                self.fds("close", os.close, h)
                return
            r = rng.random()
            size = os.fstat(h[1]).st_size
            off, n = self.offset(size), self.length()
            if r < 0.4:
                self.fds("pwrite", lambda fd, d, o: os.pwrite(fd, d, o), h, rng.randbytes(n), off)
            elif r < 0.7:
                self.fds("pread", lambda fd, n, o: hashlib.sha256(os.pread(fd, n, o)).hexdigest(),
                         h, n, off)
            elif r < 0.85:
                self.fds("ftruncate", os.ftruncate, h, rng.choice([0, off, size // 2]))
            else:
                self.fds("fstat", lambda fd: self.meta(os.fstat(fd)), h)

    # ---- comparing whole trees

    @staticmethod
    def meta(st):
        m = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
             st.st_nlink]
        if not stat.S_ISDIR(st.st_mode):
            m.append(st.st_size)
        return m

    @staticmethod
    def content(path, size):
        """The file's data map (SEEK_DATA and SEEK_HOLE follow the block
        map on both file systems) and a hash of the data it names: a file
        of 70 MB with a few blocks written is read in a few reads."""
        h = hashlib.sha256()
        spans = []
        fd = os.open(path, os.O_RDONLY)
        try:
            at = 0
            while at < size:
                try:
                    lo = os.lseek(fd, at, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:
                        break
                    raise
                hi = os.lseek(fd, lo, os.SEEK_HOLE)
                spans.append((lo, hi))
                for o in range(lo, hi, 1 << 20):
                    h.update(os.pread(fd, min(1 << 20, hi - o), o))
                at = hi
        finally:
            os.close(fd)
        return [spans, h.hexdigest()]

    def describe(self, root):
        tree, inodes = {}, {}
        for d, dirs, files in os.walk(root):
            for n in dirs + files:
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                st = os.lstat(p)
                m = self.meta(st)
                if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        got = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4)
                    finally:
                        os.close(fd)
                    m.append("flags %#x" % (struct.unpack("i", got)[0] & FLAGS))
                if stat.S_ISREG(st.st_mode):
                    m.append(self.content(p, st.st_size))
                elif stat.S_ISLNK(st.st_mode):
                    m.append(os.readlink(p))
                xs = {}
                for x in sorted(os.listxattr(p, follow_symlinks=False)):
                    if x.startswith("user."):
                        xs[x] = os.getxattr(p, x, follow_symlinks=False).hex()
                m.append(xs)
                tree[rel] = m
                if not stat.S_ISDIR(st.st_mode):
                    inodes.setdefault(st.st_ino, []).append(rel)
        links = sorted(sorted(v) for v in inodes.values() if len(v) > 1)
        return tree, links

    def compare(self):
        ta, la = self.describe(self.root[0])
        tb, lb = self.describe(self.root[1])
        for p in sorted(set(ta) | set(tb)):
            if ta.get(p) != tb.get(p):
                raise Differ("tree: %s is %r in fstitch, %r in the reference" %
                             (p, ta.get(p), tb.get(p)))
        if la != lb:
            raise Differ("tree: hard links %r in fstitch, %r in the reference" % (la, lb))
        return len(tb)


def main():
    args = sys.argv[1:]
    seed, ops, check, only = 1, 2000, 200, False
    while args and args[0].startswith("--"):
        o = args.pop(0)
        if o == "--compare":
            only = True
            continue
        if o == "--trace":
            Run.trace = True
            continue
        if not args:
            sys.exit("fsrand.py: %s needs a value" % o)
        v = int(args.pop(0))
        if o == "--seed":
            seed = v
        elif o == "--ops":
            ops = v
        elif o == "--check":
            check = max(v, 1)
        else:
            sys.exit("fsrand.py: unknown option %s" % o)
    if len(args) != 2:
        sys.exit("usage: fsrand.py [--seed N] [--ops N] [--check K] [--trace] [--compare] A B")
    run = Run(args[0], args[1], seed)
    try:
        if not only:
            # a fixed umask, so that a seed replays the same anywhere;
            # every user may make names at the top
            os.umask(0o002)
            for r in run.root:
                os.chmod(r, 0o777)
            # and reach them through descriptors, whatever the modes of the
            # directories above them (a test's scratch directory is 0700)
            run.root = tuple("/proc/self/fd/%d" % os.open(r, os.O_PATH | os.O_DIRECTORY)
                             for r in run.root)
            for run.step in range(1, ops + 1):
                run.one()
                if run.step % check == 0:
                    run.compare()
            for h in run.open:
                os.close(h[0])
                os.close(h[1])
            run.open = []
        n = run.compare()
    except Differ as e:
        print("seed %d, step %d: %s" % (seed, run.step, e))
        return 1
    print("seed %d: %d steps, %d entries alike" % (seed, 0 if only else ops, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
