#!/usr/bin/env bats
# The journal writer (consistency=journal and journal-data) under power
# failure: every crash state of a fixed recording, replayed by e2fsck and by
# fstitch (byte for byte the same), leaves e2fsck -fn nothing at all to say
# (design.md §3, "Journal writer").  The same workloads under
# consistency=none, with the commit block not waiting for its copies, and
# (for a file removed while open) without the orphan list, must fail, and
# so must a checkpoint written before its commit block and a wrong journal
# checksum.  And every write home of a committed transaction's block is
# that block as the transaction logged it (home_writes_ok).

load common

setup() {
	common_setup
	[ -x "$FSTITCH_TOOLS/e2tool" ] || {
		echo "e2tool is not built: $FSTITCH_TOOLS/e2tool missing" >&2
		return 1
	}
	IMG=$SCRATCH/e3.img
	MNT=$SCRATCH/mnt
	mkdir -p "$MNT"
	# journal_state_ok's files of each state, on a tmpfs where there is
	# one (as crash_check's states): on a disk, e2fsck's replay into the
	# kept image is written out and waited for, state after state
	JSTATE_TMP=$SCRATCH
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		JSTATE_TMP=$(mktemp -d /dev/shm/journal-crash.XXXXXX)
	fi
	export JSTATE_TMP
}

teardown() {
	crash_leftover_unmount
	common_teardown
	fstitch_mount_reap
	case $JSTATE_TMP in
	/dev/shm/journal-crash.*) rm -rf "$JSTATE_TMP" ;;
	esac
}

# journal_state_ok: the check of one crash state ($FSTITCH_IMAGE):
# journal_replay_check (common.bash: replayed alike by fstitch and by
# e2fsck, then e2fsck -fn finds nothing at all).  With JSTATE_DATA set to
# the name of an exported function, also run that function in a directory
# holding the files of the replayed image (debugfs rdump).  It runs once
# per state, where each process it starts counts: without JSTATE_DATA it
# makes no directory of its own and keeps no copy of the replayed image;
# with it, the directory (in $JSTATE_TMP, named by the state's number,
# $FSTITCH_STATE) goes once the state is checked, passed or failed, and
# the function runs in this shell, which exits after it.
# Most states replay to one of a few images: e2tool keeps its verdict on
# each in $E2TOOL_SEEN (see replay_check() in tests/tools/e2tool.c), and
# the function's result and output on each are kept there too, by the
# image's sum, for a state that replays to the same image.
journal_state_ok() {
	local d rc=0 sum=none seen= out
	[ -n "${JSTATE_DATA:-}" ] || {
		journal_replay_check
		return
	}
	d=$JSTATE_TMP/state.${FSTITCH_STATE:?journal_state_ok needs FSTITCH_STATE}
	mkdir "$d" || return 1
	if JOURNAL_REPLAYED=$d/replayed.img journal_replay_check; then
		[ ! -e "$d/replayed.img.sum" ] || read -r sum <"$d/replayed.img.sum"
		[ "$sum" = none ] || seen=$E2TOOL_SEEN/data.$sum
		rc=
		[ -z "$seen" ] || [ ! -e "$seen/rc" ] || rc=$(<"$seen/rc")
		if [ -n "$rc" ]; then
			out=$(<"$seen/out")
		else
			rc=0
			mkdir "$d/files" "$d/res"
			debugfs -R "rdump / $d/files" "$d/replayed.img" >/dev/null 2>&1
			cd "$d/files" && "$JSTATE_DATA" >"$d/res/out" 2>&1 || rc=1
			cd /
			out=$(<"$d/res/out")
			echo $rc >"$d/res/rc"
			# whole or not at all (a state beside this one may have
			# put it there first)
			[ -z "$seen" ] || mv -T "$d/res" "$seen" 2>/dev/null || :
		fi
		[ -z "$out" ] || printf '%s\n' "$out"
	else
		rc=1
	fi
	rm -rf "$d"
	return $rc
}

# jimage IMG: an 8M ext3 image (1 KiB blocks, a 1 MiB journal) holding the
# workload's starting tree, written by fstitch (under its default there,
# consistency=journal, and unmounted cleanly).
jimage() {
	CRASH_IMAGE_SIZE=8M crash_workload_image "$1" "$MNT" -t ext3 -b 1024
}

# jcsum IMG VERSION: give IMG's journal checksums of VERSION (1: the
# compat checksum, a crc32 per transaction; 2 or 3: crc32c per block), as
# e2fsprogs sets them: debugfs's journal_open -c, which picks version 2
# or 3 only on a file system with metadata_csum, so that is turned on for
# it and off again (with uninit_bg, which comes with it; tune2fs wants a
# file system checked since its last mount).
jcsum() {
	local img=$1 v=$2 want=journal_checksum
	if [ "$v" = 1 ]; then
		printf 'jo -c\njc\n' | debugfs -w -f - "$img" >/dev/null 2>&1
	else
		e2fsck -fp "$img" >/dev/null 2>&1
		tune2fs -O metadata_csum "$img" >/dev/null 2>&1
		printf 'jo -c -v %s\njc\n' "$v" | debugfs -w -f - "$img" >/dev/null 2>&1
		tune2fs -O ^metadata_csum,^uninit_bg "$img" >/dev/null 2>&1
		want=journal_checksum_v$v
	fi
	dumpe2fs -h "$img" 2>/dev/null | grep '^Journal features:' | grep -qw "$want" || {
		echo "jcsum: $img did not get $want" >&2
		return 1
	}
	e2fsck -fn "$img" >/dev/null 2>&1
}

# jrecord WORKLOAD [fstitch-mount options...]: record WORKLOAD (a function
# given the mount point) on $IMG into $SCRATCH/rec/log, with no background
# flush and no timed commit, so that the log is the same every run.
jrecord() {
	local work=$1
	shift
	rm -rf "$SCRATCH/rec"
	mkdir -p "$SCRATCH/rec"
	export FSTITCH_RECORD=$SCRATCH/rec/log
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400,commit=86400 "$@"
	unset FSTITCH_RECORD
	"$work" "$MNT"
	fstitch_mount_stop "$MNT"
	[ -s "$SCRATCH/rec/log" ]
}

# The workload of the daemon crash tests (common.bash crash_workload).
work_tree() {
	crash_workload "$1"
}

# fsync-heavy: small files created, each fsynced, appended to and fsynced
# again, and some removed between the fsyncs.
work_fsync() {
	local m=$1 i free
	free=$(stat -f -c %d "$m")
	mkdir "$m/s"
	for i in 1 2 3 4 5 6; do
		seq $((i * 300)) >"$m/s/f$i"
		sync "$m/s/f$i"
		seq 50 >>"$m/s/f$i"
		[ $((i % 2)) -eq 0 ] && rm "$m/s/f$((i - 1))"
		sync "$m/s/f$i"
	done
	rm -rf "$m/x0"
	sync "$m/v"
	# 4 inodes more (s and three files), 7 less (x0's tree)
	wait_free_inodes "$m" $((free + 3))
}

# A chain of patchgroups: group i (after group i-1) replaces p by rename
# with i and creates q<i>; only the last is synced.
work_chain() {
	local m=$1 i g prev=
	pgrun=$(fstitch_cmd pgrun)
	pgsync=$(fstitch_cmd pgsync)
	cd "$m"
	for i in 1 2 3 4 5 6; do
		g=$("$pgrun" --print-id ${prev:+--after "$prev"} -- \
			sh -c "seq $((i * 400)) >p.tmp && mv p.tmp p && echo $i >q$i")
		prev=$g
	done
	"$pgsync" "$g"
	cd /
}

# After a crash in the chain: p is whole (seq N*400 for some N), and each
# q<j> there means p is group j's or a later one's.
chain_ok() {
	local n j
	[ -e p ] || return 0
	n=$(($(wc -l <p) / 400))
	cmp -s p <(seq $((n * 400))) || {
		echo "p is not whole"
		return 1
	}
	for j in 1 2 3 4 5 6; do
		if [ -e "q$j" ] && [ "$n" -lt "$j" ]; then
			echo "q$j is there but p is group $n's"
			return 1
		fi
	done
}

# Atomic replaces under pgrun --fsync=order, where each fsync is an
# ordering point: round i writes p.tmp (blocks the write allocates, which
# go home before the commit, not through the log), renames it over p,
# then writes i over r in place (that block is reachable: the write waits
# for the commit of the rename, through the log).  The group's sync
# commits in the middle of rounds 2, 3 and 5.
work_orderfsync() {
	local m=$1
	printf '0000\n' >"$m/r"
	sync "$m/r"
	cd "$m"
	PGSYNC=$(fstitch_cmd pgsync) ID=$SCRATCH/gid "$(fstitch_cmd pgrun)" --fsync=order \
		--id-file "$SCRATCH/gid" -- bash -c '
		for i in 1 2 3 4 5 6; do
			seq $((i * 300)) >p.tmp
			sync p.tmp
			[ $i -ne 3 ] || "$PGSYNC" "$(cat "$ID")"
			mv p.tmp p
			sync p
			printf "%04d\n" $i | dd of=r conv=notrunc status=none
			sync r
			[ $i -ne 2 ] && [ $i -ne 5 ] || "$PGSYNC" "$(cat "$ID")"
		done'
	cd /
}

# After a crash: p is whole (seq N*300 for some N), and r, written after
# round N's rename and before round N+1's data, holds N or N-1.
orderfsync_ok() {
	local n=0 k
	if [ ! -e r ]; then
		[ ! -e p ] || echo "p is there but r is not"
		[ ! -e p ]
		return
	fi
	k=$((10#$(head -c 4 r)))
	if [ -e p ]; then
		n=$(($(wc -l <p) / 300))
		cmp -s p <(seq $((n * 300))) || {
			echo "p is not whole"
			return 1
		}
	fi
	[ "$k" -le "$n" ] && [ "$n" -le $((k + 1)) ] || {
		echo "r is round $k's but p is round $n's"
		return 1
	}
}

# Overwrites in place of one 24 KiB file, each a single write and an
# fsync: the file is all A, all B, all C or all D.
work_overwrite() {
	local m=$1 l
	head -c 24576 /dev/zero | tr '\0' A >"$m/g"
	sync "$m/g"
	for l in B C D; do
		head -c 24576 /dev/zero | tr '\0' "$l" |
			dd of="$m/g" bs=24576 conv=notrunc status=none
		sync "$m/g"
	done
}

overwrite_ok() {
	[ -e g ] || return 0
	[ "$(tr -d "$(head -c 1 g)" <g | wc -c)" -eq 0 ] || {
		echo "g mixes old and new data"
		return 1
	}
}

# One write of 1.5 MiB, more than the log, over a file of as many A's
# (image_bigwrite writes it, unrecorded): under journal-data it is cut
# into transactions, so a crash leaves the file's first pieces B and the
# rest A (fstitch(7)), never an A after a B.
BIG=$((1536 * 1024))
image_bigwrite() {
	jimage "$1"
	fstitch_mount_start "$1" "$MNT"
	head -c $BIG /dev/zero | tr '\0' A >"$MNT/h"
	fstitch_mount_stop "$MNT"
}

work_bigwrite() {
	head -c $BIG /dev/zero | tr '\0' B |
		dd of="$1/h" bs=$BIG iflag=fullblock conv=notrunc status=none
	sync "$1/h"
}

bigwrite_ok() {
	[ -e h ] || return 0
	case $(tr -s AB <h) in
	'' | A | B | BA) ;;
	*)
		echo "h is not new pieces then old ones"
		return 1
		;;
	esac
}

# One fallocate(2) of 1.5 MiB, more than the log, under journal-data: its
# zeros join the transactions, so it is cut into pieces like a write.
# image_falloc leaves the free blocks holding B's (a file written and
# removed, unrecorded), so that a block exposed before its zeros shows.
image_falloc() {
	jimage "$1"
	fstitch_mount_start "$1" "$MNT"
	head -c $BIG /dev/zero | tr '\0' B >"$MNT/stale"
	sync "$MNT/stale"
	rm "$MNT/stale"
	fstitch_mount_stop "$MNT"
}

work_falloc() {
	fallocate -l $BIG "$1/z"
	sync "$1/z"
}

# z, if there, is zeros up to its size, which is at most the request's
# (BIG; the check runs in a shell of its own).
falloc_ok() {
	[ -e z ] || return 0
	[ "$(stat -c %s z)" -le 1572864 ] || {
		echo "z is longer than the request"
		return 1
	}
	[ "$(tr -d '\0' <z | wc -c)" -eq 0 ] || {
		echo "z holds something other than zeros"
		return 1
	}
}

# A truncate of a 40 MiB file to 1000 bytes on 256-block groups (1 KiB
# blocks): its frees touch a bitmap block in each of some 160 groups, more
# than a quarter of the log, so it is cut into a chain of transactions,
# with the file on the orphan list until the last (image_trunc writes the
# file, unrecorded).  A crash leaves it whole or cut to 1000 bytes, once
# the orphan list is processed; never at a size between.
# The file's bytes are kept in $TRUNC_REF for the checks: making them
# again with seq takes a second, for each of some 200 states.  The image
# and $TRUNC_REF are made once for the file's tests (in $BATS_FILE_TMPDIR)
# and the image copied for each: the 40 MiB written through a mount, and
# made by seq, cost more than a check of many states.
TRUNC_LEN=$((40 * 1024 * 1024))
image_trunc() {
	local keep=$BATS_FILE_TMPDIR/trunc.img
	export TRUNC_REF=$BATS_FILE_TMPDIR/t.ref
	if [ ! -e "$keep" ]; then
		make_stock_image "$keep.new" 48M -t ext3 -b 1024 -g 256 -N 1024 -J size=1 \
			-O ^resize_inode,^dir_index,^ext_attr
		seq -w 99999999 | head -c $TRUNC_LEN >"$TRUNC_REF"
		fstitch_mount_start "$keep.new" "$MNT"
		cp "$TRUNC_REF" "$MNT/t"
		fstitch_mount_stop "$MNT"
		mv "$keep.new" "$keep"
	fi
	cp "$keep" "$1"
}

work_trunc() {
	truncate -s 1000 "$1/t"
	sync "$1/t"
}

# The zeros past 1000 in the block the new end falls in are data written
# into an existing block, which under journal (data=ordered) may reach the
# disk before the commit that cuts the file (fstitch(7)): the whole file
# may have them.
trunc_ok() {
	local size tail
	size=$(stat -c %s t)
	case $size in
	1000) cmp t <(head -c 1000 "$TRUNC_REF") ;;
	"$TRUNC_LEN")
		cmp -n 1000 t "$TRUNC_REF" && cmp -i 1024 t "$TRUNC_REF" || return 1
		tail=$(tail -c +1001 t | head -c 24 | tr -d '\0')
		[ -z "$tail" ] || [ "$tail" = "$(tail -c +1001 "$TRUNC_REF" | head -c 24)" ] || {
			echo "t's bytes 1000 to 1023 are neither the old ones nor zeros"
			return 1
		}
		;;
	*)
		echo "t is $size bytes: neither whole nor cut"
		return 1
		;;
	esac
}

# The same file removed: its blocks are freed (once the kernel forgets the
# inode) in a chain of transactions as well, the inode on the orphan list
# from its removal to the last, so a crash leaves it whole or gone.
image_unlink() {
	image_trunc "$@"
}

work_unlink() {
	local free
	free=$(stat -f -c %d "$1")
	rm "$1/t"
	wait_free_inodes "$1" $((free + 1))
	sync "$1"
}

unlink_ok() {
	[ -e t ] || return 0
	cmp t "$TRUNC_REF"
}

# A file removed while open: o (with an indirect block) is opened,
# removed, written through the open handle, and a commit comes while it
# has no name; then it is closed, and the free is committed.  In between,
# only the orphan list says that the inode and its blocks are in use.
work_orphan() {
	local m=$1 free
	free=$(stat -f -c %d "$m")
	seq 3000 >"$m/o"
	sync "$m/o"
	(
		exec 5<>"$m/o"
		rm "$m/o"
		seq 5000 >&5
		sync "$m/v"
		seq 2000 >&5
		exec 5>&-
	)
	# the release (sent after the close returns) frees the inode
	wait_free_inodes "$m" "$free"
	sync "$m/v"
}

# A file made with O_TMPFILE (with an indirect block) is held open with no
# name over a commit, then dropped; another is written and named t.  While
# the first is open only the orphan list says that its inode and blocks
# are in use.
work_tmpfile() {
	local m=$1 free probe=$FSTITCH_ROOT/tests/tools/tmpfile.py
	free=$(stat -f -c %d "$m")
	seq 5000 >"$SCRATCH/tdata"
	"$probe" --flush "$m/.flushed" "$m" "$SCRATCH/tdata" >/dev/null
	# the release (sent after the close returns) frees the inode
	wait_free_inodes "$m" $((free - 1))
	"$probe" "$m" "$SCRATCH/tdata" t >/dev/null
	sync "$m/t"
}

# t is absent or whole.
tmpfile_ok() {
	[ -e t ] || return 0
	cmp -s t <(seq 5000) || {
		echo "t is there but not whole"
		return 1
	}
}

# exchange A B: swap two names with renameat2(RENAME_EXCHANGE), which
# mv(1) cannot do.
exchange() {
	python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, os.fsencode(sys.argv[1]), -100, os.fsencode(sys.argv[2]), 2):
    sys.exit(os.strerror(ctypes.get_errno()))' "$1" "$2"
}

# Directories moved to other parents, one over an empty directory, and
# two directories of different parents exchanged.  Under
# soft updates a crash can leave such a directory under two names or none,
# which e2fsck -p does not repair on its own (doc/ext2-ordering.md); in a
# transaction the move is whole or not at all.
work_dirmove() {
	local m=$1 i free
	free=$(stat -f -c %d "$m")
	mkdir -p "$m/src" "$m/dst/e1"
	for i in 1 2 3 4; do
		mkdir -p "$m/src/d$i/sub"
		seq $((i * 100)) >"$m/src/d$i/sub/f"
	done
	flush_point "$m/.flushed"
	mv -T "$m/src/d3" "$m/dst/e1"
	# e1's inode is freed with the move over it, no one having it open:
	# wait all the same, so that the free surely has its place in the
	# recording
	wait_free_inodes "$m" $((free - 15))
	mv "$m/src/d1" "$m/dst/"
	mv "$m/src/d2" "$m/x0/a/"
	mv "$m/x0/c" "$m/src/d4/sub/"
	sync "$m/dst"
	mv "$m/dst/d1" "$m/src/d4/"
	mv "$m/x0/a/d2" "$m/dst/e1/sub/"
	exchange "$m/src/d4" "$m/dst/e1"
	[ -e "$m/dst/e1/d1" ] && [ -e "$m/src/d4/sub/d2" ]
}

# home_writes_ok LOG: in the recorder log LOG of a journal mode, every
# write of a block outside the journal, made while the durable log still
# holds a copy of that block, is that copy, from the latest transaction
# whose commit block was durable when the write's round began; and no block
# goes home before the commit of the transaction that logs it (a write of
# a block with no durable copy that a later descriptor names must not be
# that transaction's copy).  So a committed transaction goes home whole and
# never with a change of a later one (design.md §3, "Checkpoint").  Prints
# each write that is not, and fails if there is one.  The exception: a
# write of the superblock that changes only the marks made in place, not
# in a transaction (the mount's times, count and unclean state, and
# needs_recovery, which goes with the first log blocks).  The superblock's
# free counts are logged, so such a write beside a transaction's log
# blocks is not that transaction going home.
home_writes_ok() {
	python3 - "$1" <<'PY'
import hashlib, re, struct, subprocess, sys, tempfile

MAGIC = 0xC03B3998
f = open(sys.argv[1], "rb")
if f.read(8) != b"FSTREC1\n":
    sys.exit("home_writes_ok: not a recorder log")
bs, nblocks = struct.unpack("<IQ", f.read(12))
disk = bytearray(f.read(bs * nblocks))
with tempfile.NamedTemporaryFile() as img:
    img.write(disk)
    img.flush()
    text = subprocess.run(["debugfs", "-R", "stat <8>", img.name],
                          capture_output=True, text=True).stdout
jmap = []  # journal block -> device block
for m in re.finditer(r"\((\d+)(?:-(\d+))?\):(\d+)", text[text.index("BLOCKS"):]):
    first, last, dev = int(m[1]), int(m[2] or m[1]), int(m[3])
    jmap += range(dev, dev + last - first + 1)
injournal = set(jmap)

def blk(n):
    return bytes(disk[n * bs:(n + 1) * bs])

def head(d):
    return struct.unpack(">III", d[:12])

def copies(tid):
    """home block -> copy, read from transaction tid's log blocks on disk"""
    out = {}
    for i in range(1, len(jmap)):
        d = blk(jmap[i])
        if head(d) != (MAGIC, 1, tid):
            continue
        off, j = 12, i
        while off + 8 <= bs:
            home = struct.unpack(">I", d[off:off + 4])[0]
            flags = struct.unpack(">H", d[off + 6:off + 8])[0]
            j = j + 1 if j + 1 < len(jmap) else 1
            c = bytearray(blk(jmap[j]))
            if flags & 1:
                c[:4] = struct.pack(">I", MAGIC)
            out[home] = bytes(c)
            off += 8 if flags & 2 else 24
            if flags & 8:
                break
    return out

# the superblock's fields set in place: s_mtime, s_wtime, s_mnt_count,
# s_state, s_feature_incompat
SB_BLK, SB_OFF = divmod(1024, bs)
MARKS = ((0x2c, 8), (0x34, 2), (0x3a, 2), (0x60, 4))

def marks_only(n, d):
    if n != SB_BLK:
        return False
    a, b = bytearray(d), bytearray(blk(n))
    for off, ln in MARKS:
        a[SB_OFF + off:SB_OFF + off + ln] = b[SB_OFF + off:SB_OFF + off + ln]
    return a == b

def first_live():
    seq, start = struct.unpack(">II", blk(jmap[0])[0x18:0x20])
    return seq if start else None

def logblocks(writes, kind):
    for n, d in writes:
        if n in injournal and n != jmap[0] and head(d)[:2] == (MAGIC, kind):
            yield head(d)[2]

durable = {}  # home block -> [(tid, copy)] of durable commits, in order
committed = set()  # tids whose commit block is durable
described = {}  # home block -> latest tid whose descriptor names it
unlogged = {}  # home block -> [(round, digest)] of writes with no copy yet
bad = nrounds = 0
more = True
while more:
    writes = []
    while (kind := f.read(1)) == b"\0":
        n = struct.unpack("<Q", f.read(8))[0]
        writes.append((n, f.read(bs)))
    more = kind != b""
    nrounds += 1
    live = first_live()  # (as the round begins)
    # the round's log blocks first: a copy in flight is not yet committed
    for n, d in writes:
        if n in injournal:
            disk[n * bs:(n + 1) * bs] = d
    for tid in logblocks(writes, 1):
        for home, c in copies(tid).items():
            described[home] = tid
            # a block written home before its transaction was even logged
            for r, h in unlogged.pop(home, []):
                if h == hashlib.sha1(c).digest():
                    print("round %d: block %d goes home before transaction %d commits" % (r, home, tid))
                    bad += 1
    for n, d in writes:
        if n in injournal:
            continue
        have = [tc for tc in durable.get(n, []) if live is not None and tc[0] >= live]
        if have and d != have[-1][1]:
            print("round %d: block %d is not its copy of transaction %d" % (nrounds, n, have[-1][0]))
            bad += 1
        elif not have and described.get(n) not in committed | {None} and not marks_only(n, d):
            print("round %d: block %d goes home before transaction %d commits" % (nrounds, n, described[n]))
            bad += 1
        elif not have:
            unlogged.setdefault(n, []).append((nrounds, hashlib.sha1(d).digest()))
    for n, d in writes:
        disk[n * bs:(n + 1) * bs] = d
    for tid in logblocks(writes, 2):
        committed.add(tid)
        for home, c in copies(tid).items():
            durable.setdefault(home, []).append((tid, c))
print("%d rounds, %d wrong home writes" % (nrounds, bad))
sys.exit(1 if bad else 0)
PY
}

# orphan_states: ORPHAN_STATES := how many crash states of the last
# jcheck have an orphan list once fstitch has replayed them: the marks the
# check of each state left in $JOURNAL_ORPHANS (journal_replay_check), so
# that no state is made and replayed a second time to count them.
orphan_states() {
	ORPHAN_STATES=$(find "$JOURNAL_ORPHANS" -type f | wc -l)
}

run_check() {
	export -f journal_state_ok
	export SCRATCH
	"$@"
}

# jcheck pass|fail LABEL WORK MODE [csum=V] [debug=FLAG]: the shape of
# the tests below.  A new image in $IMG (image_WORK if there is such a
# function, else jimage), given journal checksums of version V (jcsum);
# work_WORK recorded on it under consistency=MODE (jrecord), with
# FSTITCH_JOURNAL_DEBUG=FLAG for the recording only; then every crash
# state checked by journal_state_ok, which runs WORK_ok in each state's
# files if there is such a function (and marks in $JOURNAL_ORPHANS the
# states whose replay has an orphan list).  pass: every state must pass; fail:
# some state must fail (assert_crash_pass or assert_crash_fail, which
# print the counts of states and failed states under LABEL).
jcheck() {
	local expect=$1 label=$2 work=$3 mode=$4 arg csum= debug=
	shift 4
	case $expect in
	pass | fail) ;;
	*) fail "jcheck: expect 'pass' or 'fail', not '$expect'" ;;
	esac
	for arg; do
		case $arg in
		csum=*) csum=${arg#csum=} ;;
		debug=*) debug=${arg#debug=} ;;
		*) fail "jcheck: unknown argument '$arg'" ;;
		esac
	done
	if declare -F "image_$work" >/dev/null; then
		"image_$work" "$IMG"
	else
		jimage "$IMG"
	fi
	[ -z "$csum" ] || jcsum "$IMG" "$csum"
	[ -z "$debug" ] || export FSTITCH_JOURNAL_DEBUG=$debug
	jrecord "work_$work" -o consistency="$mode"
	unset FSTITCH_JOURNAL_DEBUG
	export JOURNAL_ORPHANS=$SCRATCH/orphans
	rm -rf "$JOURNAL_ORPHANS"
	mkdir "$JOURNAL_ORPHANS"
	export E2TOOL_SEEN=$JSTATE_TMP/seen
	mkdir "$E2TOOL_SEEN"
	if declare -F "${work}_ok" >/dev/null; then
		export -f "${work}_ok"
		export JSTATE_DATA=${work}_ok
	fi
	run_check "assert_crash_$expect" "$label" "$SCRATCH/rec" --fsck none --no-mount -- \
		bash -c journal_state_ok
}

@test "journal: every crash state of the tree workload replays to a clean file system" {
	jcheck pass journal tree journal
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	run e2fsck -fn "$SCRATCH/final.img"
	assert_success
}

@test "journal-data: every crash state of the tree workload replays to a clean file system" {
	jcheck pass journal-data tree journal-data
}

@test "journal: every crash state of an fsync-heavy workload replays to a clean file system" {
	jcheck pass journal-fsync fsync journal
}

@test "the same checks catch consistency=none" {
	jcheck fail none tree none
}

@test "the same checks catch a commit block that does not wait for its copies" {
	jcheck fail nocopies tree journal debug=nocopies
}

@test "the same checks catch a checkpoint that goes before its commit" {
	jcheck fail earlycheckpoint tree journal debug=earlycheckpoint
}

@test "journal: a committed transaction goes home whole, in one round" {
	jimage "$IMG"
	cp "$IMG" "$SCRATCH/start.img"
	jrecord work_chain -o consistency=journal
	run home_writes_ok "$SCRATCH/rec/log"
	echo "$output"
	[ "$status" -eq 0 ]
	cp "$SCRATCH/start.img" "$IMG"
	jrecord work_dirmove -o consistency=journal
	run home_writes_ok "$SCRATCH/rec/log"
	echo "$output"
	[ "$status" -eq 0 ]
	cp "$SCRATCH/start.img" "$IMG"
	jrecord work_orderfsync -o consistency=journal
	run home_writes_ok "$SCRATCH/rec/log"
	echo "$output"
	[ "$status" -eq 0 ]
	cp "$SCRATCH/start.img" "$IMG"
	jrecord work_tree -o consistency=journal-data
	run home_writes_ok "$SCRATCH/rec/log"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "the home-write check catches a checkpoint that goes before its commit" {
	jimage "$IMG"
	export FSTITCH_JOURNAL_DEBUG=earlycheckpoint
	jrecord work_chain -o consistency=journal
	unset FSTITCH_JOURNAL_DEBUG
	run home_writes_ok "$SCRATCH/rec/log"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"goes home before transaction"* ]]
}

@test "journal checksums v3: every crash state of the fsync workload replays alike and clean" {
	jcheck pass journal-csum3 fsync journal csum=3
}

@test "journal checksums v2 under journal-data: every crash state replays alike and clean" {
	jcheck pass journal-data-csum2 tree journal-data csum=2
}

@test "journal checksum v1 (compat): every crash state replays alike and clean" {
	jcheck pass journal-csum1 tree journal csum=1
}

# Negative controls: one wrong checksum per transaction (the first tag of
# each descriptor in v3, the transaction's crc32 in v1).  fstitch refuses
# such a log; e2fsck stops or skips there and flags the file system.
@test "the same checks catch a wrong tag checksum (v3)" {
	jcheck fail badcsum3 fsync journal csum=3 debug=badcsum
}

@test "the same checks catch a wrong transaction checksum (v1)" {
	jcheck fail badcsum1 tree journal csum=1 debug=badcsum
}

@test "journal: a truncate cut into transactions is whole or undone in every crash state" {
	export TRUNC_LEN
	jcheck pass journal-trunc trunc journal
	# the chain met the list: some state replays to one
	orphan_states
	echo "# states whose replay has an orphan list: $ORPHAN_STATES" >&3
	[ "$ORPHAN_STATES" -gt 0 ]
}

@test "without the orphan list (FSTITCH_JOURNAL_DEBUG=noorphans) the truncate's steps show" {
	export TRUNC_LEN
	jcheck fail noorphans-trunc trunc journal debug=noorphans
}

@test "the truncate under consistency=none is caught" {
	export TRUNC_LEN
	jcheck fail none-trunc trunc none
}

@test "journal: a removal whose frees take a chain of transactions is whole in every crash state" {
	export TRUNC_LEN
	jcheck pass journal-unlink unlink journal
	orphan_states
	echo "# states whose replay has an orphan list: $ORPHAN_STATES" >&3
	[ "$ORPHAN_STATES" -gt 0 ]
}

@test "without the orphan list (FSTITCH_JOURNAL_DEBUG=noorphans) the removal's steps leak" {
	export TRUNC_LEN
	jcheck fail noorphans-unlink unlink journal debug=noorphans
}

@test "the removal under consistency=none is caught" {
	export TRUNC_LEN
	jcheck fail none-unlink unlink none
}

@test "journal: a file removed while open is on the orphan list in every crash state" {
	jcheck pass journal-orphan orphan journal
	# the check met the list: some state replays to one
	orphan_states
	[ "$ORPHAN_STATES" -gt 0 ]
	echo "# states whose replay has an orphan list: $ORPHAN_STATES" >&3
	# and it is empty at the end
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	run -0 dumpe2fs -h "$SCRATCH/final.img"
	refute_line --partial "First orphan inode"
}

@test "without the orphan list (FSTITCH_JOURNAL_DEBUG=noorphans) a file removed while open is caught" {
	jcheck fail noorphans orphan journal debug=noorphans
}

@test "a file removed while open under consistency=none is caught" {
	jcheck fail none-orphan orphan none
}

@test "journal: an O_TMPFILE file is on the orphan list until it is named, in every crash state" {
	jcheck pass journal-tmpfile tmpfile journal
	orphan_states
	[ "$ORPHAN_STATES" -gt 0 ]
	echo "# states whose replay has an orphan list: $ORPHAN_STATES" >&3
}

@test "without the orphan list (FSTITCH_JOURNAL_DEBUG=noorphans) the O_TMPFILE file is caught" {
	jcheck fail noorphans-tmpfile tmpfile journal debug=noorphans
}

@test "the O_TMPFILE files under consistency=none are caught" {
	jcheck fail none-tmpfile tmpfile none
}

@test "journal: directories moved to other parents are whole in every crash state" {
	jcheck pass journal-dirmove dirmove journal
}

@test "the directory moves under consistency=none are caught" {
	jcheck fail none-dirmove dirmove none
}

@test "journal: a patchgroup chain keeps its order in every crash state" {
	jcheck pass journal-chain chain journal
}

@test "journal: pgrun --fsync=order keeps its order and new data whole in every crash state" {
	jcheck pass journal-orderfsync orderfsync journal
}

@test "the --fsync=order replaces under consistency=none are caught" {
	jcheck fail none-orderfsync orderfsync none
}

@test "the overwrite after an ordering point is caught when it leaves the order out (unscopedall)" {
	jcheck fail unscopedall orderfsync journal debug=unscopedall
}

@test "journal-data: an overwrite in place is all old or all new in every crash state" {
	jcheck pass journal-data-overwrite overwrite journal-data
}

@test "journal-data: a write larger than the log is new pieces then old in every crash state" {
	jcheck pass journal-data-bigwrite bigwrite journal-data
}

@test "journal-data: a preallocation larger than the log is whole zeros in every crash state" {
	jcheck pass journal-data-falloc falloc journal-data
}

@test "the preallocation under consistency=none is caught" {
	jcheck fail none-falloc falloc none
}

@test "journal (data ordered, not journaled) is caught mixing the big write" {
	jcheck fail journal-bigwrite bigwrite journal
}

@test "journal (data ordered, not journaled) is caught mixing an overwrite" {
	jcheck fail journal-overwrite overwrite journal
}

# kernel_states: five states of $SCRATCH/rec, from first to last, each
# mounted under the kernel's ext3 (which replays the journal), read whole
# and checked, then e2fsck -fn after the kernel's unmount.
kernel_states() {
	local crash n s km=$SCRATCH/kmnt
	crash=$(fstitch_cmd fstitch-crash)
	n=$("$crash" states "$SCRATCH/rec" | awk '$1 == "states" { print $2 }')
	mkdir -p "$km"
	for s in 0 $((n / 4)) $((n / 2)) $((3 * n / 4)) $((n - 1)); do
		"$crash" image "$SCRATCH/rec" "$s" "$SCRATCH/s.img"
		mount -t ext3 -o loop "$SCRATCH/s.img" "$km"
		track_mount "$km" kernel
		find "$km" -xdev -type f -exec cat {} + >/dev/null
		case $(cat "$km/v") in
		0 | 1) ;;
		*) fail "state $s: v holds '$(cat "$km/v")'" ;;
		esac
		[ ! -e "$km/x1" ] || diff -r "$SCRATCH/tree" "$km/x1"
		umount "$km"
		run e2fsck -fn "$SCRATCH/s.img"
		assert_success
	done
}

@test "crash states of the journal mount under the kernel's ext3, which replays them" {
	need_kernel_ext3
	jimage "$IMG"
	jrecord work_tree -o consistency=journal
	kernel_states
}

# The kernel's own v1: a mount with journal_checksum leaves the feature on.
@test "crash states of checksummed journals (the kernel's v1, v3) replay under the kernel" {
	need_kernel_ext3
	local v km=$SCRATCH/kmnt
	mkdir -p "$km"
	for v in kernel 3; do
		rm -rf "$SCRATCH/tree"
		jimage "$IMG"
		if [ $v = kernel ]; then
			# on a copy: the loop device may hold it a while after
			# the unmount, and fstitch-mount refuses an image in use
			cp "$IMG" "$SCRATCH/k.img"
			mount -t ext4 -o loop,journal_checksum "$SCRATCH/k.img" "$km" ||
				skip "the kernel does not mount ext3 with journal_checksum"
			track_mount "$km" kernel
			# (the feature reaches the journal with its first commit)
			touch "$km/k"
			sync -f "$km/k"
			rm "$km/k"
			umount "$km"
			cp "$SCRATCH/k.img" "$IMG"
			dumpe2fs -h "$IMG" 2>/dev/null | grep '^Journal features:' |
				grep -qw journal_checksum
		else
			jcsum "$IMG" $v
		fi
		jrecord work_tree -o consistency=journal
		kernel_states
	done
}

# A full disk, and a file's blocks taken by the next file as soon as its
# removal commits (REUSE blocks of 1 KiB): image_reuse leaves about 300
# blocks free, unrecorded; work_reuse writes r (A's) and syncs it, removes
# it, and writes s (B's) without a sync between, so that s can only have
# room once r's removal commits, and a crash must never leave r with B's.
export REUSE=200
image_reuse() {
	jimage "$1"
	fstitch_mount_start "$1" "$MNT"
	dd if=/dev/zero of="$MNT/pad" bs=64k status=none 2>/dev/null || true
	truncate -s -300K "$MNT/pad"
	fstitch_mount_stop "$MNT"
}

work_reuse() {
	local m=$1 free n
	head -c $((REUSE * 1024)) /dev/zero | tr '\0' A >"$m/r"
	sync "$m/r"
	free=$(stat -f -c %f "$m")
	rm "$m/r"
	# the blocks are freed with the removal (no one has r open): wait
	# all the same, as the kernel may still hold r's release
	for ((n = 0; n < 400; n++)); do
		[ "$(stat -f -c %f "$m")" -ge $((free + REUSE)) ] && break
		sleep 0.05
	done
	head -c $((REUSE * 1024)) /dev/zero | tr '\0' B |
		dd of="$m/s" bs=$((REUSE * 1024)) iflag=fullblock status=none
	sync "$m/s"
}

reuse_ok() {
	if [ -e r ] && { [ "$(stat -c %s r)" -ne $((REUSE * 1024)) ] ||
		[ "$(tr -d A <r | wc -c)" -ne 0 ]; }; then
		echo "r is not its own A's"
		return 1
	fi
	if [ -e s ] && [ "$(tr -d B <s | wc -c)" -ne 0 ]; then
		echo "s holds something else than B's"
		return 1
	fi
}

@test "journal: blocks freed by a commit are reused by the next file in every crash state" {
	jcheck pass journal-reuse reuse journal
}

@test "the reuse is caught when it does not wait for the commit (reuseearly)" {
	jcheck fail reuseearly reuse journal debug=reuseearly
	assert_output --partial "r is not its own A's"
}

@test "the reuse is caught under consistency=none" {
	jcheck fail none-reuse reuse none
}
