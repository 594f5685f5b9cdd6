#!/usr/bin/env bats
# fstitch-crash: recording a run, numbering its crash states, checking a
# command against each, and the bats helper users load.  The man page's
# examples, the end-to-end runs, are in examples.bats (run once, from the
# page).

load common

setup() {
	common_setup
	CRASH=$(fstitch_cmd fstitch-crash)
	PATH=$FSTITCH_BIN:$PATH
	export PATH
	cd "$SCRATCH"
}

teardown() {
	cd /
	crash_leftover_unmount
	common_teardown
}

# A recording: the config file replaced by mv, consistency=none (some
# states break it), in $SCRATCH/none; written only at the unmount, so the
# same every run.
record_none() {
	"$CRASH" run -o consistency=none,flush_interval=86400 --setup 'seq 1000 > config' --rec none -- \
		sh -c 'seq 2000 > config.tmp && mv config.tmp config' 3>&-
}

@test "sqlite under pgrun --fsync=order with consistency=none is caught losing integrity" {
	command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
	"$CRASH" run -o consistency=none,flush_interval=86400 --setup 'sqlite3 db "create table t(x)"' --rec db -- \
		sh -c 'seq 2 | sed "s/.*/insert into t values(&);/" | pgrun --fsync=order -- sqlite3 db' 3>&-
	run -1 "$CRASH" check --jobs 2 --max 60 --rw db -- \
		sh -c 'test "$(sqlite3 db "pragma integrity_check")" = ok' 3>&-
	assert_line --regexp ', [1-9][0-9]* failed, '
	echo "# sqlite, consistency=none: ${lines[-1]}" >&3
}

@test "run passes on the command's status, keeps the log, and reports a failing setup with 125" {
	run -3 "$CRASH" run --size 4M --rec r -- sh -c 'echo hi > f; test "$PWD" = "$FSTITCH_MNT" && exit 3' 3>&-
	assert [ -s r/log ]
	assert_equal "$(debugfs -R 'cat f' r/image 2>/dev/null)" hi
	assert_equal "$(stat -c %s r/image)" 4194304
	run -125 --separate-stderr "$CRASH" run --setup 'exit 7' --rec s -- true 3>&-
	assert_equal "$stderr" "fstitch-crash: setup command failed: exit status 7"
	run -127 "$CRASH" run --rec t -- /nonexistent/cmd 3>&-
	# --image copies and leaves the original alone
	make_image "$SCRATCH/orig.img" 4M
	sum=$(file_sum "$SCRATCH/orig.img")
	run -0 "$CRASH" run --image "$SCRATCH/orig.img" --rec u -- sh -c 'echo x > y' 3>&-
	assert_equal "$(file_sum "$SCRATCH/orig.img")" "$sum"
	assert_equal "$(debugfs -R 'cat y' u/image 2>/dev/null)" x
}

# As root, run and check mount in a namespace of their own, so that a
# namespace made elsewhere meanwhile cannot hold a copy of a mount (which
# would keep its daemon from exiting at the unmount).  The command sees its
# mount; the namespace this test runs in does not.
not_in_caller_ns() {
	test -d "$FSTITCH_MNT/lost+found" &&
		test "$(readlink /proc/self/ns/mnt)" != "$1" &&
		! grep -qF " $FSTITCH_MNT " "/proc/$2/mounts"
}

@test "run and check mount where no namespace but their own can see or copy it" {
	[ "$(id -u)" -eq 0 ] || skip "only root may make a mount namespace"
	export -f not_in_caller_ns
	outer=$(readlink /proc/self/ns/mnt)
	run -0 "$CRASH" run --rec ns -- bash -c 'not_in_caller_ns "$@"' sh "$outer" $$ 3>&-
	run -0 "$CRASH" check ns -- bash -c 'not_in_caller_ns "$@"' sh "$outer" $$ 3>&-
	assert_line --regexp '^([0-9]+) of \1 states checked \(seed 1\), 0 failed'
}

@test "a run holds no copy of another FUSE mount: its owner's unmount still ends it" {
	[ "$(id -u)" -eq 0 ] || skip "only root may make a mount namespace"
	make_image "$SCRATCH/other.img" 16M
	fstitch_mount_start "$SCRATCH/other.img" "$SCRATCH/other"
	other_pid=$FSTITCH_MOUNT_PID
	# a run whose namespace is made while the other mount is there, and
	# lives on until told
	"$CRASH" run --rec held -- sh -c "touch '$SCRATCH/started'
		while [ ! -e '$SCRATCH/done' ]; do sleep 0.05; done" 3>&- &
	crash_pid=$!
	for ((i = 0; i < 400; i++)); do
		[ -e "$SCRATCH/started" ] && break
		sleep 0.05
	done
	[ -e "$SCRATCH/started" ]
	echo written >"$SCRATCH/other/f"
	# the unmount ends the daemon, with its final flush, while the run
	# still goes on: the image holds f at once
	fusermount3 -u "$SCRATCH/other"
	for ((i = 0; i < 200; i++)); do
		kill -0 "$other_pid" 2>/dev/null || break
		sleep 0.05
	done
	run kill -0 "$other_pid"
	assert_failure
	kill -0 "$crash_pid"
	run -0 debugfs -R "cat /f" "$SCRATCH/other.img"
	assert_output --partial written
	touch "$SCRATCH/done"
	wait "$crash_pid"
}

@test "bad usage and bad recordings get one clear line and the documented status" {
	run -64 --separate-stderr "$CRASH" frobnicate
	assert_equal "${stderr_lines[0]}" "fstitch-crash: unknown command 'frobnicate'"
	run -64 --separate-stderr "$CRASH" run -- true
	assert_equal "${stderr_lines[0]}" "fstitch-crash: run needs --rec DIR"
	run -64 --separate-stderr "$CRASH" check dir
	assert_equal "${stderr_lines[0]}" "fstitch-crash: check needs a command after --"
	run -64 --separate-stderr "$CRASH" check --jobs 0 dir -- true
	assert_equal "${stderr_lines[0]}" "fstitch-crash: --jobs takes a number from 1 to 1024, not '0'"
	run -1 --separate-stderr "$CRASH" states "$SCRATCH/nothing"
	assert_equal "$stderr" "fstitch-crash: cannot load '$SCRATCH/nothing/log': No such file or directory"
	mkdir junk
	echo "not a log" >junk/log
	run -1 --separate-stderr "$CRASH" check junk -- true
	assert_equal "$stderr" "fstitch-crash: cannot load 'junk/log': not an fstitch-crash log"
	record_none
	total=$("$CRASH" states none | awk '$1 == "states" { print $2 }')
	run -1 --separate-stderr "$CRASH" image none "$total" out.img
	assert_equal "$stderr" "fstitch-crash: no crash state $total: 'none' has $total (0 to $((total - 1)))"
	assert [ ! -e out.img ]
	run -1 --separate-stderr "$CRASH" check --max 2 none -- /nonexistent/check
	assert_equal "$stderr" "fstitch-crash: cannot run '/nonexistent/check': No such file or directory"
	run -64 --separate-stderr "$CRASH" image none seven out.img
	assert_equal "$stderr" "fstitch-crash: bad state number 'seven'"
}

@test "every state check sees is the one image writes, at any --jobs, after repairs and writes" {
	record_none
	# the check compares its (unrepaired) image with image's, then
	# scribbles on it: the next state must still be rebuilt right
	run -0 "$CRASH" check --max 24 --fsck none --no-mount --jobs 2 none -- sh -c '
		fstitch-crash image none "$FSTITCH_STATE" "$FSTITCH_IMAGE.want" &&
		cmp "$FSTITCH_IMAGE" "$FSTITCH_IMAGE.want" && rm "$FSTITCH_IMAGE.want" &&
		dd if=/dev/urandom of="$FSTITCH_IMAGE" bs=1024 seek=$((FSTITCH_STATE % 8)) count=64 conv=notrunc status=none'
	assert_line --regexp '^([0-9]+) of \1 states checked \(seed 1\), 0 failed'
	# and after e2fsck -fy repaired each one
	run -0 "$CRASH" check --max 24 --no-mount none -- sh -c '
		fstitch-crash image none "$FSTITCH_STATE" want.img &&
		e2fsck -fy want.img >/dev/null 2>&1; e2fsck -fn "$FSTITCH_IMAGE" >/dev/null'
	# the check can fail: a different state's image is caught
	run -1 "$CRASH" check --max 8 --fsck none --no-mount none -- sh -c '
		fstitch-crash image none $(( (FSTITCH_STATE + 1) % 20 )) other.img && cmp -s "$FSTITCH_IMAGE" other.img'
}

@test "check --fail-fast stops at the first failed state, having checked the states before it" {
	record_none
	run -0 "$CRASH" states none
	total=${lines[0]#states }
	# states 7 and on fail: one job checks 0 to 7 and stops
	run -1 "$CRASH" check --fail-fast --fsck none --no-mount none -- sh -c 'test "$FSTITCH_STATE" -lt 7'
	assert_line 'failed states: 7'
	assert_line --regexp "^8 of $total states checked \(seed 1\), 1 failed, .*; stopped at the first failure \(--fail-fast\)\$"
	# two jobs finish the state the other had begun, and take no more
	run -1 "$CRASH" check --fail-fast --jobs 2 --json --fsck none --no-mount none -- \
		sh -c 'test "$FSTITCH_STATE" -lt 7'
	run -0 python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["stopped_early"] is True and d["checked"] in (8, 9), d
assert [f["state"] for f in d["failures"]] in ([7], [7, 8]), d' "$output"
	# the first state the whole check fails is the one --fail-fast finds
	check='seq 1000 | cmp -s - config || seq 2000 | cmp -s - config'
	run -1 "$CRASH" check none -- sh -c "$check"
	all=$(grep '^failed states:' <<<"$output")
	first=${all#failed states: }
	first=${first%% *}
	run -1 "$CRASH" check --fail-fast none -- sh -c "$check"
	assert_line "failed states: $first"
	assert_line --regexp "^$((first + 1)) of $total states checked"
	# a check that passes everywhere is taken through every state
	run -0 "$CRASH" check --fail-fast --fsck none --no-mount none -- true
	assert_line --regexp "^$total of $total states checked \(seed 1\), 0 failed, [^;]*; [0-9.]+ states/s\$"
}

@test "the same recording, seed and limits give the same states in the same order" {
	record_none
	run -0 "$CRASH" states --list none
	first=$output
	assert_line --index 0 --regexp '^states [0-9]+$'
	assert_line "seed 1"
	run -0 "$CRASH" states --list none
	assert_equal "$output" "$first"
	# a sample: the same seed gives the same states, another seed others
	a=$("$CRASH" states --list --max 12 --seed 5 none | grep '^state ')
	b=$("$CRASH" states --list --max 12 --seed 5 none | grep '^state ')
	c=$("$CRASH" states --list --max 12 --seed 6 none | grep '^state ')
	assert_equal "$a" "$b"
	assert_equal "$(wc -l <<<"$a")" 12
	assert [ "$a" != "$c" ]
	# a check fails the same states whatever --jobs is
	check='test $((FSTITCH_STATE % 3)) != 1'
	run -1 "$CRASH" check --max 12 --seed 5 --fsck none --no-mount none -- sh -c "$check"
	one=$(grep '^failed states:' <<<"$output")
	run -1 "$CRASH" check --max 12 --seed 5 --fsck none --no-mount --jobs 3 none -- sh -c "$check"
	assert_line "$one"
	want=$(grep '^state ' <<<"$a" | awk '$2 % 3 == 1 { printf " %s", $2 }')
	assert_equal "$one" "failed states:$want"
}

@test "check --json reports the counts, the rate and each failure with e2fsck's findings" {
	record_none
	run -1 "$CRASH" check --json --jobs 2 none -- sh -c 'seq 1000 | cmp -s - config || seq 2000 | cmp -s - config'
	run -0 python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["checked"] == d["states"] > 10, d
assert 0 < d["failed"] == len(d["failures"]) < d["checked"], d
assert d["seed"] == 1 and d["jobs"] == 2 and d["states_per_second"] > 0
# rebuilt by writing blocks, not one whole image per state
image_blocks = 8 * 1024
assert d["full_writes"] <= 2 and d["blocks_written"] < d["checked"] * image_blocks / 4, d
f = d["failures"][0]
assert f["reason"] == "check" and f["check_status"] in (1, 2) and f["fsck_status"] in (0, 1)
assert any(x["fsck_status"] == 1 and "Fix? yes" in x["fsck"] for x in d["failures"])
print(d["checked"], d["failed"])' "$output"
	echo "# consistency=none config replace: $output (checked, failed)" >&3
}

@test "check --fsck preen fails a state e2fsck -p cannot repair; --fsck none leaves states alone" {
	record_none
	run -1 "$CRASH" check --fsck preen --no-mount none -- true
	assert_line --regexp '^state [0-9]+ \(round [0-9]+, [0-9]+ of [0-9]+ writes\): e2fsck -fp left errors \(exit status 4\)$'
	run -0 "$CRASH" check --fsck none --no-mount none -- true
	assert_line --regexp ', 0 failed, 0 repaired by e2fsck; '
}

@test "the installed bats helper runs and checks a script the way a user's test would" {
	load "$FSTITCH_ROOT/share/bats/fstitch-crash"
	FSTITCH_CRASH=$CRASH
	run -0 fstitch_crash_run --setup 'echo old > f' -- sh -c 'echo new > f.tmp && mv f.tmp f' 3>&-
	assert [ -s "$BATS_TEST_TMPDIR/fstitch-crash.rec/log" ]
	run -0 fstitch_crash_states
	assert_line --regexp '^states [0-9]+$'
	run -0 fstitch_crash_check --max 6 -- sh -c 'grep -qx -e old -e new f'
	assert_line --regexp '^6 of [0-9]+ states checked \(seed 1\), 0 failed'
	# and it reports a failing check
	run -1 fstitch_crash_check --max 6 -- sh -c 'grep -qx old f'
	assert_line --regexp '^failed states: [0-9]'
}
