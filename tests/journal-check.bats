#!/usr/bin/env bats
# The crash-state checks for images with a journal (common.bash,
# "journals"), on soft updates on an ext3 image (chosen explicitly: the
# default there is consistency=journal), which leaves the journal empty.  The replays compared are then trivial, so
# the checks are also shown to fail: on consistency=none's states, on a
# damaged journal, on a leak where none is allowed, and on images that
# differ by one byte.  A kernel's dirty journal gives them real replays.

load common

setup() {
	common_setup
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	[ -x "$FSTITCH_TOOLS/e2tool" ] || {
		echo "e2tool is not built: $FSTITCH_TOOLS/e2tool missing" >&2
		return 1
	}
}

teardown() {
	crash_leftover_unmount
	common_teardown
	fstitch_mount_reap
}

# record_ext3 [fstitch-mount options...]: crash_workload recorded on a 4M
# ext3 image.
record_ext3() {
	crash_workload_image "$IMG" "$MNT" -t ext3
	crash_workload_record "$IMG" "$MNT" "$@"
}

# kernel_reads_state: a CHECK; the state, as the crash left it, read back
# through the kernel's ext3: v is the old or the new one, and x1, if it is
# there, is the whole tree.
kernel_reads_state() {
	local d
	d=$(mktemp -d "${BATS_TEST_TMPDIR:-/tmp}/read.XXXXXX")
	kernel_ext3_read "$FSTITCH_IMAGE" "$d" v x1 || return 1
	case $(cat "$d/v") in
	0 | 1) ;;
	*)
		echo "v holds '$(cat "$d/v")'"
		return 1
		;;
	esac
	[ ! -e "$d/x1" ] || diff -r "$SCRATCH/tree" "$d/x1" || return 1
	rm -rf "$d"
}

# assert_crash_sample LABEL N REC [check options] -- CHECK...: crash_check
# of N states of REC (--max N: the last state, then round boundaries, then
# subsets, drawn with seed 1), every one of them passing.
assert_crash_sample() {
	local label=$1 n=$2 rec=$3
	shift 3
	run -0 crash_check "$rec" --max "$n" "$@"
	assert_line --regexp "^$n of [0-9]+ states checked \(seed 1\), 0 failed"
	echo "# $label: ${lines[-1]}" >&3
}

# The journal stays empty under soft updates, so a sample of the states
# does: each replayed both ways and read back through the kernel.
@test "soft updates on ext3: crash states replay alike under fstitch and e2fsck, and the kernel reads them" {
	need_kernel_ext3
	record_ext3 -o consistency=softupdates
	export -f kernel_reads_state
	export SCRATCH
	assert_crash_sample softupdates 4 "$SCRATCH/rec" --fsck none --no-mount -- \
		bash -c 'journal_replay_check --benign && kernel_reads_state'
	# the last state (after the final flush) passes with nothing allowed
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	FSTITCH_IMAGE=$SCRATCH/final.img run -0 journal_replay_check
}

@test "the same check fails on consistency=none's crash states" {
	record_ext3 -o consistency=none
	run -1 crash_check "$SCRATCH/rec" --max 8 --fsck none --no-mount -- \
		bash -c 'journal_replay_check --benign'
	assert_line --regexp '^failed states: [0-9]'
	echo "# consistency=none: ${lines[-1]}" >&3
}

@test "the replay check fails on a damaged journal and on a leak; the comparison sees one byte" {
	make_stock_image "$IMG" 4M -t ext3
	FSTITCH_IMAGE=$IMG run -0 journal_replay_check
	local sum
	sum=$(file_sum "$IMG")

	# the journal superblock's magic broken: fstitch refuses to replay
	# (e2fsck -y would rebuild the journal)
	cp "$IMG" "$SCRATCH/bad.img"
	local jsb bs
	jsb=$(debugfs -R 'bmap <8> 0' "$IMG" 2>/dev/null)
	bs=$(dumpe2fs -h "$IMG" 2>/dev/null | awk '/^Block size:/ {print $3}')
	printf '\x12\x34\x56\x78' | dd of="$SCRATCH/bad.img" bs=1 seek=$((jsb * bs)) conv=notrunc status=none
	FSTITCH_IMAGE=$SCRATCH/bad.img run -1 journal_replay_check
	assert_line --partial "fstitch's replay (e2tool recover) failed"

	# a leaked block: benign, so only --benign lets it pass
	cp "$IMG" "$SCRATCH/leak.img"
	debugfs -w -R 'setb 3000' "$SCRATCH/leak.img" >/dev/null 2>&1
	FSTITCH_IMAGE=$SCRATCH/leak.img run -1 journal_replay_check
	assert_line "e2fsck -fn after the replay does not find it clean:"
	FSTITCH_IMAGE=$SCRATCH/leak.img run -0 journal_replay_check --benign

	# the comparison: s_wtime may differ, nothing else
	cp "$IMG" "$SCRATCH/a.img"
	printf '\x01\x02\x03\x04' | dd of="$SCRATCH/a.img" bs=1 seek=1072 conv=notrunc status=none
	run -0 images_equal_but_wtime "$IMG" "$SCRATCH/a.img"
	printf '\x01' | dd of="$SCRATCH/a.img" bs=1 seek=1076 conv=notrunc status=none
	run -1 images_equal_but_wtime "$IMG" "$SCRATCH/a.img"
	assert_line --partial "differ"
	assert_line --regexp '^ *1077 '
	# and the state checked was never changed
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "a kernel's dirty journal passes the replay check and reads back under the kernel" {
	need_kernel_ext3
	local km=$SCRATCH/kmnt
	mkdir -p "$km" "$SCRATCH/tree/d"
	seq 30000 >"$SCRATCH/tree/d/numbers"
	echo hello >"$SCRATCH/tree/greeting"
	make_stock_image "$SCRATCH/k.img" 8M -t ext3
	mount -t ext3 -o loop "$SCRATCH/k.img" "$km"
	track_mount "$km" kernel
	cp -a "$SCRATCH/tree/." "$km/"
	sync -f "$km/greeting"
	# the backing file while still mounted: committed, not checkpointed
	cp "$SCRATCH/k.img" "$IMG"
	umount "$km"
	dumpe2fs -h "$IMG" 2>/dev/null | grep '^Filesystem features' | grep -q needs_recovery

	JOURNAL_REPLAYED=$SCRATCH/replayed.img FSTITCH_IMAGE=$IMG run -0 journal_replay_check
	# the replay changed the image: the check compared real replays
	run -1 cmp -s "$IMG" "$SCRATCH/replayed.img"
	kernel_ext3_read "$IMG" "$SCRATCH/back" d greeting missing
	diff -r "$SCRATCH/tree" "$SCRATCH/back"
	# and no loop device is left on the copies
	run -0 losetup -j "$IMG"
	assert_output ""
	run -0 bash -c "losetup -l -n -O BACK-FILE | grep -F '$BATS_TEST_TMPDIR' || true"
	assert_output ""
}
