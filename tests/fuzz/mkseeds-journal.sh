#!/usr/bin/env bash
# Make the seeds of the "journal" fuzz target (tests/fuzz/corpus/journal):
# the leading blocks of journals the kernel left needing recovery, on
# ext3 with 1 KiB blocks (plain, with revoke records, with journal_checksum
# (version 1)) and on ext4 (checksum version 3, 64-bit tags), and an empty
# journal from mke2fs.  Trailing zero bytes are cut off (the target pads
# the journal with zeros).  Needs root and the kernel's ext3 and ext4; run
# by hand, the seeds are committed.
#   tests/fuzz/mkseeds-journal.sh
set -eu
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/journal
tmp=$(mktemp -d)
trap 'umount "$tmp/m" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$out" "$tmp/m"

# seed NAME IMAGE: the journal inode's contents, trailing zeros cut.
seed() {
	debugfs -R "dump <8> $tmp/j" "$2" >/dev/null 2>&1
	python3 - "$tmp/j" "$out/$1" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read().rstrip(b'\0')
n = (len(b) + 1023) // 1024 * 1024
open(sys.argv[2], 'wb').write(b + b'\0' * (n - len(b)))
PY
}

# dirty NAME MKFS-TYPE MOUNT-TYPE MOUNT-OPTIONS [revoke]: a journal the
# kernel left dirty.
dirty() {
	rm -f "$tmp/k.img"
	mke2fs -q -F -t "$2" -b 1024 "$tmp/k.img" 3M
	mount -t "$3" -o "loop${4:+,$4}" "$tmp/k.img" "$tmp/m"
	mkdir "$tmp/m/d"
	for i in 1 2 3 4 5 6; do
		head -c $((i * 900)) /dev/urandom >"$tmp/m/d/f$i"
	done
	if [ "${5:-}" = revoke ]; then
		head -c 30000 /dev/urandom >"$tmp/m/big"
		sync -f "$tmp/m/big"
		rm "$tmp/m/big" "$tmp/m/d/f1"
	fi
	sync -f "$tmp/m/d"
	cp "$tmp/k.img" "$tmp/dirty.img"
	umount "$tmp/m"
	seed "$1" "$tmp/dirty.img"
}

dirty kernel-ext3 ext3 ext3 ""
dirty kernel-ext3-revoke ext3 ext3 "" revoke
dirty kernel-ext3-csum1 ext3 ext4 journal_checksum revoke
dirty kernel-ext4-csum3 ext4 ext4 "" revoke
mke2fs -q -F -t ext3 -b 1024 "$tmp/e.img" 3M
seed empty "$tmp/e.img"
ls -l "$out"
