#!/usr/bin/env bash
# make demo: a short end-to-end run of fstitch on a default image.
#   make an image, mount it, extract a tree, update a file atomically, rename
#   over a file, show what was written, unmount, and let e2fsck judge it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD/bin
DEMO=$PWD/$BUILD/demo
IMG=$DEMO/demo.img
MNT=$DEMO/mnt
PATH=$PATH:/usr/sbin:/sbin

step() { printf '\n==> %s\n' "$*"; }

[ -x "$BIN/fstitch-mount" ] || { echo "demo: $BIN/fstitch-mount is not built" >&2; exit 1; }
mkdir -p "$DEMO" "$MNT"
if mountpoint -q "$MNT" 2>/dev/null || ! ls "$MNT" >/dev/null 2>&1; then
	fusermount3 -uz "$MNT" 2>/dev/null || true
fi

daemon=
cleanup() {
	# always unmount, and let the daemon finish its final flush
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	[ -z "$daemon" ] || wait "$daemon" 2>/dev/null || true
	rm -rf "$DEMO/src"
}
trap cleanup EXIT

step "making a 256 MiB ext2 image: $IMG"
rm -f "$IMG"
if [ -x "$BIN/fstitch-mkfs" ]; then
	"$BIN/fstitch-mkfs" -q -F "$IMG" 256M
else
	truncate -s 256M "$IMG"
	mke2fs -q -F -t ext2 "$IMG"
fi

step "mounting it on $MNT (soft updates on)"
"$BIN/fstitch-mount" -f "$IMG" "$MNT" &
daemon=$!
for _ in $(seq 200); do
	mountpoint -q "$MNT" && break
	kill -0 "$daemon" 2>/dev/null || { echo "demo: fstitch-mount failed" >&2; exit 1; }
	sleep 0.05
done
mountpoint -q "$MNT"
grep " $MNT " /proc/mounts

# The tree: the first few thousand files of /usr/include (or /usr/share/doc
# where it is missing).
src=/usr/include
[ -d "$src" ] || src=/usr/share/doc
step "extracting the first 4000 files of $src with tar into $MNT/tree"
mkdir "$MNT/tree"
start=$EPOCHREALTIME
(cd "$src" && find . -type f | LC_ALL=C sort | awk 'NR <= 4000' | tar -cf - --no-recursion -T -) |
	tar -xf - -C "$MNT/tree"
end=$EPOCHREALTIME
printf '    %d files, %d directories in %s s\n' \
	"$(find "$MNT" -type f | wc -l)" "$(find "$MNT" -type d | wc -l)" \
	"$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"

if [ -x "$BIN/fstitch-stat" ]; then
	step "the patch engine right after the extraction (fstitch-stat)"
	"$BIN/fstitch-stat" "$MNT" | sed 's/^/    /' || true
fi

step "atomic update of config.txt: write a temporary file, then rename it over"
printf 'version=1\n' >"$MNT/config.txt"
printf 'version=2\n' >"$DEMO/new.txt"
if [ -x "$BIN/pgrun" ]; then
	# ---- patchgroups: the rename reaches disk only after the new content,
	# without an fsync (pgrun from the "pg" part) ----
	echo "    (with pgrun: the rename is ordered after the write, no fsync)"
	a=$("$BIN/pgrun" -C "$MNT" --print-id -- sh -c "cat '$DEMO/new.txt' > '$MNT/config.txt.tmp'")
	"$BIN/pgrun" -C "$MNT" --after "$a" -- mv "$MNT/config.txt.tmp" "$MNT/config.txt"
	echo "    group $a holds the write; the rename's group depends on it"
else
	# without patchgroups the classic way: fsync the new file, then rename
	echo "    (pgrun not built: write + fsync + rename)"
	cp "$DEMO/new.txt" "$MNT/config.txt.tmp"
	sync "$MNT/config.txt.tmp"
	mv "$MNT/config.txt.tmp" "$MNT/config.txt"
fi
rm -f "$DEMO/new.txt"
printf '    config.txt now says: %s\n' "$(cat "$MNT/config.txt")"

step "renaming one file over another"
echo "the old README" >"$MNT/README"
echo "the new README" >"$MNT/README.new"
mv "$MNT/README.new" "$MNT/README"
printf '    README now says: %s\n' "$(cat "$MNT/README")"

step "what the mount holds"
du -sh "$MNT"
df -h "$MNT" | sed 's/^/    /'
ls -la "$MNT" | sed 's/^/    /'
ls "$MNT/tree" | awk 'NR <= 8 { printf "    tree/%s\n", $0 } END { printf "    ... %d entries in tree/\n", NR }'

step "unmounting (the daemon flushes everything, with barriers)"
fusermount3 -u "$MNT"
wait "$daemon" && rc=0 || rc=$?
daemon=
echo "    fstitch-mount exited with status $rc"
[ "$rc" -eq 0 ] || { echo "demo: the final flush failed" >&2; exit 1; }

step "e2fsck -fn $IMG"
e2fsck -fn "$IMG"
echo
echo "demo: done; the image is clean (it stays in $IMG)"
