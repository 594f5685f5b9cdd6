#!/usr/bin/env bash
# Make the seed images of the "image" fuzz target (tests/fuzz/corpus/image):
# small ext2 images from mke2fs -d and from fstitch-mkfs, with a tree that
# has every kind of inode the module reads (nested directories, small,
# indirect and sparse files, fast and slow symlinks, a hard link, a fifo).
# Trailing zero blocks are cut off: the target pads the device to the size
# the superblock gives.  Run by hand; the seeds are committed.
#   BUILD=build tests/fuzz/mkseeds.sh
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
out=tests/fuzz/corpus/image
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out" "$tmp/t/a/b/c"
printf 'hello\n' >"$tmp/t/small"
head -c 20000 /dev/zero | tr '\0' x >"$tmp/t/a/indirect"
truncate -s 300000 "$tmp/t/a/sparse"
printf 'end' >>"$tmp/t/a/sparse"
ln -s small "$tmp/t/fast"
ln -s a/b/c/../../../a/indirect/../././../a/b/c/../../indirect "$tmp/t/slow"
ln -s /a/b "$tmp/t/a/b/c/up"
ln -s loop "$tmp/t/loop"
ln "$tmp/t/small" "$tmp/t/a/b/hard"
mkfifo "$tmp/t/a/fifo"
for i in 1 2 3 4 5 6 7 8; do : >"$tmp/t/a/b/c/name-$i"; done

# trim FILE: cut trailing zero bytes, keep whole KiB.
trim() {
	python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = open(p, 'rb').read().rstrip(b'\0')
n = (len(b) + 1023) // 1024 * 1024
open(p, 'wb').write(b + b'\0' * (n - len(b)))
PY
}

mk() { # name size_kib mke2fs-options...
	local n=$1 k=$2
	shift 2
	rm -f "$tmp/img"
	mke2fs -q -F -t ext2 -E root_owner=0:0 "$@" -d "$tmp/t" "$tmp/img" "$k" >/dev/null
	trim "$tmp/img"
	cp "$tmp/img" "$out/$n"
}
mk tree-1k 256 -b 1024 -N 32 -I 128
mk tree-1k-256 256 -b 1024 -N 32 -I 256
mk tree-2k 512 -b 2048 -N 32 -I 128
mk tree-4k 512 -b 4096 -N 32 -I 128
mk tree-nofiletype 256 -b 1024 -N 32 -I 128 -O ^filetype
rm -f "$tmp/img"
"$BUILD/bin/fstitch-mkfs" -q -b 1024 "$tmp/img" 128K >/dev/null
trim "$tmp/img"
cp "$tmp/img" "$out/fstitch-mkfs-empty"
ls -l "$out"

# Seeds of the "control" target (record format in fuzz_control.c).
python3 - tests/fuzz/corpus/control <<'PY'
import os, struct, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
HELLO, CREATE, DEPEND, ENGAGE, DISENGAGE, SYNC, CLOSE, INFO, POLICY, SUMMARY, NEXT, STATS, SWITCH, ORDER, SCOPE_OWN = range(1, 16)
def short(op, a=0, b=0, pid=0, uid=0):
    return bytes([0x40 | uid << 2 | pid, op, a & 255, b & 255])
def fs(what, which, pid=0):
    return bytes([0x80 | what << 4 | pid, which])
def raw(msg, pid=0, uid=0):
    return bytes([uid << 2 | pid, len(msg)]) + msg
def req(op, a=0, b=0, magic=0x46535443, version=1, flags=0):
    return struct.pack('<IHHIIqq', magic, version, op, flags, 0, a, b)
seeds = {
    'one-group': short(HELLO) + short(CREATE) + short(ENGAGE, 1) + fs(0, 4) + fs(1, 9)
        + short(DISENGAGE, 1) + short(SYNC, 1) + short(INFO, 1) + short(CLOSE, 1)
        + short(SUMMARY) + fs(6, 0),
    'chain': short(CREATE) + short(CREATE) + short(DEPEND, 1, 2) + short(ENGAGE, 1)
        + short(ENGAGE, 2) + fs(0, 1) + short(DISENGAGE, 1) + short(ENGAGE, 2) + fs(0, 2)
        + short(CLOSE, 1) + short(NEXT, 0) + short(NEXT, 2) + short(SYNC, 2) + fs(7, 0)
        + short(CLOSE, 2) + short(INFO, 2),
    'users': short(CREATE, uid=1) + short(ENGAGE, 1, uid=2) + short(DEPEND, 1, 1, uid=1)
        + short(CREATE, uid=2) + short(DEPEND, 1, 2, uid=2) + short(DEPEND, 1, 2, uid=0)
        + short(ENGAGE, 2, pid=1, uid=2) + short(SYNC, 1, uid=3) + short(CLOSE, 1, uid=1)
        + short(DISENGAGE, 2, pid=3),
    'fsync-order': short(POLICY, 1) + short(CREATE) + short(ENGAGE, 1) + fs(0, 3) + fs(5, 3)
        + fs(0, 7) + fs(5, 3) + short(POLICY, 0) + fs(4, 3) + short(SUMMARY),
    'raw': raw(req(HELLO)) + raw(req(CREATE)) + raw(req(DEPEND, 1, 1 << 40))
        + raw(req(HELLO, version=3)) + raw(req(HELLO, version=0)) + raw(req(HELLO, magic=0))
        + raw(req(ENGAGE, -1))
        + raw(req(INFO, 1)[:20]) + raw(b'') + raw(req(99)) + raw(req(STATS, 0, 0, flags=16)),
    'switch': raw(req(SWITCH, 0, 0, version=2, flags=11)) + fs(0, 1)
        + raw(req(SWITCH, 1, 1, version=2, flags=3)) + fs(0, 2) + raw(req(SWITCH, 0, 0, flags=11))
        + raw(req(DISENGAGE, 2)) + raw(req(INFO, 2), pid=1) + short(SUMMARY),
    'stats': short(CREATE) + short(ENGAGE, 1) + fs(0, 1) + short(STATS, 0, 0)
        + short(STATS, 1, 0) + short(STATS, 2, 1) + short(STATS, 3, 5) + short(STATS, 4, 0),
    'group-order': short(ORDER, 1) + short(CREATE) + short(ENGAGE, 1) + fs(0, 1) + fs(3, 1)
        + fs(0, 5) + short(ORDER, 2) + short(ORDER, 0) + fs(0, 9) + short(CLOSE, 1) + fs(6, 0),
    'scope-own': short(CREATE) + short(ENGAGE, 1) + short(SCOPE_OWN, pid=1) + short(SCOPE_OWN)
        + short(DISENGAGE, 1) + fs(0, 1, pid=1) + short(DEPEND, 1, 1) + short(SUMMARY),
    'unlink-rename': short(CREATE) + short(ENGAGE, 1) + fs(0, 1) + fs(0, 2) + fs(3, 2)
        + fs(2, 1) + fs(2, 0) + short(CLOSE, 1) + fs(6, 0),
}
for name, data in seeds.items():
    open(os.path.join(out, name), 'wb').write(data)
PY
