#!/usr/bin/env bats
# pgrun (and pgsync, pgclose): groups on a live mount, the scope of a
# process tree, exit statuses, and access by another user.  The daemon's
# group status (tests/tools/pgstatus) is the judge of which changes landed
# in which group.

load common

setup() {
	pg_setup
}

teardown() {
	pg_teardown
}

# field ID NAME: one field of the group's status line.
field() {
	"$PGSTATUS" "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# fsync_ordered: how many fsyncs the daemon has turned into ordering points.
fsync_ordered() {
	"$PGSTATUS" --summary | tr ' ' '\n' | sed -n 's/^fsync_ordered=//p'
}

# requests: how many control requests the daemon has answered (this
# reading's own not counted).
requests() {
	"$PGSTATUS" --summary | tr ' ' '\n' | sed -n 's/^requests=//p'
}

control_socket() {
	python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.fstitch.control").decode())' "$MNT"
}

# wait_field ID NAME VALUE: poll (up to 60 s) until the field has the value.
wait_field() {
	local n
	for ((n = 0; n < 1200; n++)); do
		[ "$(field "$1" "$2")" = "$3" ] && return 0
		sleep 0.05
	done
	echo "group $1: $2 is $(field "$1" "$2"), expected $3" >&2
	return 1
}

@test "every path in the mount names the control socket, and nothing else does" {
	mkdir d
	run -0 control_socket
	assert [ -S "$output" ]
	run -0 python3 -c 'import os; print(os.getxattr("d", "user.fstitch.control").decode())'
	assert [ -S "$output" ]
	cd "$SCRATCH"
	run -125 --separate-stderr "$PGRUN" true
	assert_equal "$stderr" "pgrun: cannot create a group: not inside an fstitch mount (use -C DIR or FSTITCH_CONTROL)"
	run -0 "$PGRUN" -C "$MNT" true
	FSTITCH_CONTROL=$MNT run -0 "$PGRUN" true
	# a path that does not exist is named, not taken for a missing group
	run -125 --separate-stderr "$PGRUN" -C /nonexistent true
	assert_equal "$stderr" "pgrun: cannot use '/nonexistent': No such file or directory"
	FSTITCH_CONTROL=/nonexistent run -125 --separate-stderr "$PGRUN" --print-id -- touch f
	assert_equal "$stderr" "pgrun: cannot use '/nonexistent': No such file or directory"
	assert_output ""
	assert [ ! -e f ]
}

@test "pgrun passes on the command's exit status, 128+signal, 126/127, 64" {
	run -0 "$PGRUN" true
	run -3 "$PGRUN" -- sh -c 'exit 3'
	run -143 "$PGRUN" -- sh -c 'kill -TERM $$'
	run -127 --separate-stderr "$PGRUN" -- /nonexistent/cmd
	assert_equal "$stderr" "pgrun: cannot run '/nonexistent/cmd': No such file or directory"
	touch plain
	run -126 "$PGRUN" -- ./plain
	# an executable without "#!" is a shell script, as for execvp(3)
	printf 'exit 5\n' >noshebang
	chmod +x noshebang
	run -5 "$PGRUN" -- ./noshebang
	run -64 "$PGRUN"
	run -64 "$PGRUN" --fsync=maybe true
	run -64 --separate-stderr "$PGRUN" --order=all true
	assert_equal "${stderr_lines[0]}" "pgrun: --order takes 'groups' or 'mount', not 'all'"
	run -64 "$PGRUN" --after x true
	run -0 "$PGRUN" --help
	assert_output --partial "Exit status"
}

@test "--print-id, --id-file and --id-fd give the id before the command runs" {
	run -0 "$PGRUN" --print-id -- echo from-command
	assert_equal "${#lines[@]}" 2
	assert_regex "${lines[0]}" '^[1-9][0-9]*$'
	assert_equal "${lines[1]}" from-command
	id=${lines[0]}
	# the command saw the id file already written
	run -0 "$PGRUN" --id-file "$SCRATCH/id" -- cat "$SCRATCH/id"
	assert_regex "$output" '^[1-9][0-9]*$'
	[ "$output" -gt "$id" ]
	run -0 bash -c '"$1" --id-fd 9 -- true 9>"$2"; cat "$2"' _ "$PGRUN" "$SCRATCH/fd"
	assert_regex "$output" '^[1-9][0-9]*$'
	# ids are never reused
	assert [ "$(cat "$SCRATCH/fd")" -gt "$(cat "$SCRATCH/id")" ]
}

@test "a closed standard output or --id-fd is reported, not taken by the control socket" {
	# The library's socket would get the lowest free descriptor, and the
	# id would go to the daemon instead.
	run -125 --separate-stderr sh -c 'exec "$@" >&-' _ "$PGRUN" --print-id -- sh -c 'echo x >f'
	assert_equal "$stderr" "pgrun: cannot print the group id: Bad file descriptor"
	assert [ ! -e f ]
	# the group it made is left and closed
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --regexp 'engaged=0 .*state=.*closed'
	run -125 --separate-stderr sh -c 'exec "$@" >&-' _ "$PGRUN" --print-id --sync -- sh -c 'echo x >f'
	assert_equal "$stderr" "pgrun: cannot print the group id: Bad file descriptor"
	assert [ ! -e f ]
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --regexp 'engaged=0 .*state=.*closed'
	# a closed --id-fd is refused before a group is made
	last=$(pg_last_id)
	run -125 --separate-stderr sh -c 'exec "$@" 3>&-' _ "$PGRUN" --id-fd=3 -- touch f
	assert_equal "$stderr" "pgrun: cannot write the group id to fd 3: Bad file descriptor"
	assert [ ! -e f ]
	assert_equal "$(pg_last_id)" "$last"
}

@test "a reader that has gone is reported, and the command gets pgrun's SIGPIPE" {
	# SIGPIPE would kill pgrun (141) before the command ran, leaving the
	# group of --sync open.
	run -125 --separate-stderr broken_pipe "$PGRUN" --print-id -- touch f
	assert_equal "$stderr" "pgrun: cannot print the group id: Broken pipe"
	assert [ ! -e f ]
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --regexp 'engaged=0 .*state=.*closed'
	run -125 --separate-stderr broken_pipe "$PGRUN" --print-id --sync -- touch f
	assert_equal "$stderr" "pgrun: cannot print the group id: Broken pipe"
	assert [ ! -e f ]
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --regexp 'engaged=0 .*state=.*closed'
	run -125 --separate-stderr broken_pipe sh -c 'exec "$@" 3>&1' _ "$PGRUN" --id-fd=3 -- touch f
	assert_equal "$stderr" "pgrun: cannot write the group id to fd 3: Broken pipe"
	assert [ ! -e f ]
	# The command starts with the SIGPIPE pgrun was started with: by
	# default, yes dies of it once head has read the id and gone ...
	run -0 env --default-signal=PIPE bash -c \
		'"$1" --print-id -- yes | head -n 1 >/dev/null; echo "${PIPESTATUS[0]}"' _ "$PGRUN"
	assert_output 141
	# ... and ignored, it sees the error instead
	run -0 env --ignore-signal=PIPE bash -c \
		'"$1" --print-id -- yes 2>/dev/null | head -n 1 >/dev/null; echo "${PIPESTATUS[0]}"' _ "$PGRUN"
	assert_output 1
}

@test "the atomic-replace chain works and pgrun closes the groups it made" {
	echo old >f
	a=$("$PGRUN" --print-id -- sh -c 'echo new >f.tmp')
	run -0 "$PGRUN" --print-id --after "$a" -- mv f.tmp f
	b=$output
	run cat f
	assert_output new
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp 'afters=1 .*state=.*sealed'
	assert_output --partial closed
	run -0 "$PGSTATUS" "$b"
	assert_output --partial "befores=1"
	run -0 "$PGSYNC" "$b" "$a"
	# once durable and closed, the groups are forgotten but still usable
	# as befores (a no-op) and syncable
	wait_field "$a" state closed,retired
	run -0 "$PGRUN" --after "$a" --after "$b" true
	run -0 "$PGSYNC" "$a"
}

@test "pgrun makes one request, and its group is closed once it has exited" {
	echo old >f
	r0=$(requests)
	a=$("$PGRUN" --print-id -- sh -c 'echo new >f.tmp')
	b=$("$PGRUN" --print-id --after "$a" --fsync=order -- mv f.tmp f)
	r1=$(requests)
	# two pgruns, and the first reading's own request
	assert_equal $((r1 - r0)) 3
	run cat f
	assert_output new
	# the second named the first as a before as soon as it had exited
	run -0 "$PGSTATUS" "$b"
	assert_output --regexp 'engaged=0 befores=1 .*state=.*closed'
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp 'engaged=0 .*afters=1 .*state=.*closed'
	# --sync waits, so it asks more: the leave, then the wait
	r0=$(requests)
	run -0 "$PGRUN" --print-id --sync --after "$b" -- true
	r1=$(requests)
	assert_equal $((r1 - r0)) 4
	run -0 "$PGSTATUS" "$output"
	assert_output --regexp 'engaged=0 .*state=.*closed'
	# a group of one's own is engaged in one request, and only
	# disengaged by the exit
	g=$("$PGCREATE")
	r0=$(requests)
	run -0 "$PGRUN" --group "$g" -- true
	r1=$(requests)
	assert_equal $((r1 - r0)) 2
	run -0 "$PGSTATUS" "$g"
	assert_output --regexp 'engaged=0 .*state=open'
}

@test "pipelines, subshells, background jobs and threads all land in the group" {
	g=$("$PGCREATE")
	run -0 "$PGRUN" --group "$g" -- sh -c 'echo a >p1'
	c1=$(field "$g" changes)
	[ "$c1" -gt 0 ]
	run -0 "$PGRUN" --group "$g" -- sh -c 'echo b | cat | tee p2 >/dev/null'
	c2=$(field "$g" changes)
	[ "$c2" -gt "$c1" ]
	run -0 "$PGRUN" --group "$g" -- sh -c '(cd . && (echo c >p3))'
	c3=$(field "$g" changes)
	[ "$c3" -gt "$c2" ]
	# a background job that outlives its shell: pgrun waits for it too
	run -0 "$PGRUN" --group "$g" -- sh -c '(sleep 0.3; echo d >p4) & exit 0'
	assert [ -s p4 ]
	c4=$(field "$g" changes)
	[ "$c4" -gt "$c3" ]
	run -0 "$PGRUN" --group "$g" -- python3 -c '
import threading
def w(i):
    with open("t%d" % i, "w") as f:
        f.write("x" * 5000)
ts = [threading.Thread(target=w, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]'
	c5=$(field "$g" changes)
	[ "$c5" -gt "$c4" ]
	run cat t0 t3
	assert_equal "${#output}" 10000
	run -0 "$PGCLOSE" "$g"
}

@test "a process outside pgrun does not join its group" {
	g=$("$PGCREATE")
	"$PGRUN" --group "$g" -- sh -c 'touch ready; while [ ! -e go ]; do sleep 0.05; done' &
	pid=$!
	for ((n = 0; n < 1200; n++)); do [ -e ready ] && break; sleep 0.05; done
	assert [ -e ready ]
	wait_field "$g" engaged 1
	c0=$(field "$g" changes)
	echo outside >outside
	mkdir outdir
	touch go
	wait "$pid"
	assert_equal "$(field "$g" changes)" "$c0"
	assert_equal "$(field "$g" engaged)" 0
	# and a process started after pgrun ended is outside too
	echo later >later
	assert_equal "$(field "$g" changes)" "$c0"
}

@test "engagement reaches children started afterwards, not those already running" {
	g=$("$PGCREATE")
	run -0 "$FSTITCH_TOOLS/pg_fork" "$g"
	read -r c0 c1 c2 <<<"$output"
	assert [ -s early ]
	assert [ -s late ]
	# the late child's changes joined the group, the early child's did not
	assert [ "$c1" -gt "$c0" ]
	assert_equal "$c2" "$c1"
}

# signalled SIG CODE: start pgrun on a command that, sent SIG, writes the
# file got inside the group and exits with CODE (99 if no signal comes
# within 20 seconds); send SIG to pgrun (not to the command) from this
# shell; pgrun must live to pass the command's status on, and the write
# must have joined the group.
signalled() {
	local sig=$1 code=$2 pid g i st c0
	g=$("$PGCREATE")
	rm -f ready got
	# (a shell starts a background job with INT and QUIT ignored, and
	# nohup ignores HUP, which the command's shell could not undo: every
	# signal at its default, as a command started by hand has them)
	env --default-signal "$PGRUN" --group "$g" -- \
		sh -c "trap 'echo got > got; exit $code' $sig
		echo > ready; i=0; while [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done; exit 99" &
	pid=$!
	for ((i = 0; i < 400; i++)); do
		[ -e ready ] && break
		sleep 0.05
	done
	[ -e ready ]
	c0=$(field "$g" changes)
	kill -s "$sig" "$pid"
	st=0
	wait "$pid" || st=$?
	assert_equal "$st" "$code"
	assert [ -s got ]
	assert [ "$(field "$g" changes)" -gt "$c0" ]
	assert_equal "$(field "$g" engaged)" 0
}

@test "HUP, INT, QUIT, TERM, USR1, USR2 and ALRM sent to pgrun go to the command" {
	# each would end pgrun by default and leave the command running
	# outside the group; INT and QUIT from another process, not the
	# terminal, which sends them to the command itself
	signalled USR1 11
	signalled USR2 12
	signalled ALRM 13
	signalled HUP 14
	signalled TERM 15
	signalled INT 16
	signalled QUIT 17
}

@test "a killed pgrun leaves no engaged group" {
	g=$("$PGCREATE")
	other=$("$PGCREATE")
	"$PGRUN" --group "$g" -- sleep 30 &
	pid=$!
	wait_field "$g" engaged 1
	child=$(pgrep -P "$pid")
	run -1 --separate-stderr "$PGDEPEND" "$g" "$other"
	assert_equal "$stderr" "pgdepend: cannot add dependency $g -> $other: group $g is engaged"
	kill -KILL "$pid"
	wait "$pid" || true
	# the orphaned child is outside the group now, and the daemon has
	# seen pgrun go
	wait_field "$g" engaged 0
	[ -z "$child" ] || kill -KILL "$child" 2>/dev/null || true
	run -0 "$PGDEPEND" "$g" "$other"
}

@test "another user cannot engage, depend on, sync or close someone else's group" {
	# other users reach the socket only when the mount lets them in
	cd /
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	cd "$MNT"
	sock=$(control_socket)
	g=$("$PGCREATE")
	as_nobody() {
		FSTITCH_CONTROL=$sock setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
	}
	run -1 --separate-stderr as_nobody "$PGSYNC" "$g"
	assert_equal "$stderr" "pgsync: cannot sync group $g: group $g belongs to another user"
	run -1 --separate-stderr as_nobody "$PGCLOSE" "$g"
	assert_equal "$stderr" "pgclose: cannot close group $g: group $g belongs to another user"
	run -125 --separate-stderr as_nobody "$PGRUN" --group "$g" -- true
	assert_equal "$stderr" "pgrun: cannot engage group $g: group $g belongs to another user"
	run -0 as_nobody "$PGCREATE"
	mine=$output
	run -1 --separate-stderr as_nobody "$PGDEPEND" "$g" "$mine"
	assert_equal "$stderr" "pgdepend: cannot add dependency $g -> $mine: group $g belongs to another user"
	run -1 --separate-stderr as_nobody "$PGDEPEND" "$mine" "$g"
	assert_equal "$stderr" "pgdepend: cannot add dependency $mine -> $g: group $g belongs to another user"
	# nothing changed, and the owner still can
	run -0 "$PGSTATUS" "$g"
	assert_output --regexp 'engaged=0 befores=0 afters=0 changes=0 state=open'
	run -0 "$PGSYNC" "$g"
	run -0 "$PGCLOSE" "$g"
	# root may touch anyone's group
	run -0 "$PGSYNC" "$mine"
}

@test "--sync returns once the group is durable; --fsync=order keeps fsync from blocking" {
	run -0 "$PGRUN" --print-id --sync -- sh -c 'echo data >s'
	id=$output
	wait_field "$id" state closed,retired
	before=$(fsync_ordered)
	run -0 "$PGRUN" --fsync=order -- python3 -c '
import os
fd = os.open("o", os.O_WRONLY | os.O_CREAT)
for i in range(50):
    os.write(fd, b"x" * 100)
    os.fsync(fd)
os.close(fd)'
	run stat -c %s o
	assert_output 5000
	assert_equal "$(fsync_ordered)" $((before + 50))
	# outside pgrun --fsync=order an fsync is a real one
	python3 -c 'import os; fd = os.open("o", os.O_WRONLY); os.fsync(fd)'
	assert_equal "$(fsync_ordered)" $((before + 50))
	run -0 "$PGRUN" --fsync=keep -- python3 -c 'import os; fd = os.open("o", os.O_WRONLY); os.fsync(fd)'
	assert_equal "$(fsync_ordered)" $((before + 50))
}

@test "the article's example program replaces a file through the C API" {
	echo old >f
	run -0 "$FSTITCH_TOOLS/pg_example" f new-contents
	assert_line --regexp '^tmp [0-9]+$'
	assert_line --regexp '^final [0-9]+$'
	t=$(sed -n 's/^tmp //p' <<<"$output")
	fin=$(sed -n 's/^final //p' <<<"$output")
	run cat f
	assert_output new-contents
	assert [ ! -e f.tmp ]
	run -0 "$PGSTATUS" "$fin"
	assert_output --partial "befores=1"
	run -0 "$PGSYNC" "$fin"
	wait_field "$t" state closed,retired
}

# record_start: remount $IMG with the daemon recording every block write and
# barrier into $SCRATCH/rec/log (saved at unmount).  Extra arguments go to
# fstitch-mount.  Nothing is written before the unmount (no background
# flush or timed commit), so the log, and the states checked, are the
# same every run.
record_start() {
	cd /
	fstitch_mount_stop "$MNT"
	rm -rf "$SCRATCH/rec"
	mkdir "$SCRATCH/rec"
	export FSTITCH_RECORD=$SCRATCH/rec/log
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400,commit=86400 "$@"
	unset FSTITCH_RECORD
	cd "$MNT"
}

# record_stop: unmount and check that the daemon saved its log.
record_stop() {
	cd /
	fstitch_mount_stop "$MNT"
	if [ ! -s "$SCRATCH/rec/log" ]; then
		echo "fstitch-mount saved no recorder log: FSTITCH_RECORD is not supported" >&2
		return 1
	fi
}

# crash_count REC [fstitch-crash check options] -- CHECK...: crash_check
# (common.bash: every state of the recording) and print its last line.
# Sets STATES (checked) and BAD (failed).
crash_count() {
	local out
	# (exit status 1 when a state failed: the counts below tell)
	out=$(crash_check "$@") || true
	tail -n 1 <<<"$out"
	STATES=$(tail -n 1 <<<"$out" | sed -n 's/^\([0-9]*\) of .*/\1/p')
	BAD=$(tail -n 1 <<<"$out" | sed -n 's/.*, \([0-9]*\) failed,.*/\1/p')
	[ -n "$STATES" ] && [ -n "$BAD" ]
}

# crash_summary LABEL RUN [ARGS...]: RUN, one of the *_run functions below
# (which set STATES and BAD), then its summary line in the test's output.
crash_summary() {
	local label=$1
	shift
	"$@" >"$SCRATCH/summary"
	echo "# $label: $(cat "$SCRATCH/summary")" >&3
}

# crash_states CHECK: record_stop, then crash_count (STATES and BAD) with
# CHECK, a function of this file, run in every state as the crash left it
# (no e2fsck, no mount).
crash_states() {
	record_stop
	export -f "$1"
	export SCRATCH
	crash_count "$SCRATCH/rec" --fsck none --no-mount -- bash -c "$1"
}

# assert_states_ok MIN: more than MIN states were checked, and none failed.
assert_states_ok() {
	assert [ "$STATES" -gt "$1" ]
	assert_equal "$BAD" 0
}

# The check run in every state of the replace, as the crash left it: f is
# the complete old or the complete new file.  The copy of f goes beside the
# state and is removed, so that fstitch-crash can remove its directory.
f_old_or_new() {
	local f=$FSTITCH_IMAGE.f rc=1
	rm -f "$f"
	debugfs -R "dump /f $f" "$FSTITCH_IMAGE" >/dev/null 2>&1
	{ cmp -s "$f" "$SCRATCH/old" || cmp -s "$f" "$SCRATCH/new"; } && rc=0
	rm -f "$f"
	return $rc
}

# atomic_replace_run [--order=groups] [fstitch-mount options]: old f made
# durable first, then the two-group replace under a recording daemon (with
# --order=groups, both pgruns are given it).
atomic_replace_run() {
	local order=()
	if [ "${1:-}" = --order=groups ]; then
		order=("$1")
		shift
	fi
	head -c 20000 /dev/urandom | base64 >"$SCRATCH/old"
	head -c 30000 /dev/urandom | base64 >"$SCRATCH/new"
	cp "$SCRATCH/old" f
	record_start "$@"
	a=$("$PGRUN" "${order[@]}" --print-id -- sh -c "cat '$SCRATCH/new' >f.tmp")
	"$PGRUN" "${order[@]}" --after "$a" -- mv f.tmp f
	run cat f
	assert_output "$(cat "$SCRATCH/new")"
	crash_states f_old_or_new
}

@test "crash states: the pgrun atomic replace leaves f complete old or complete new" {
	crash_summary "atomic replace" atomic_replace_run
	assert_states_ok 3
}

@test "crash states: with consistency=none the same replace is caught breaking f" {
	crash_summary "atomic replace, consistency=none" atomic_replace_run -o consistency=none
	assert [ "$STATES" -gt 3 ]
	assert [ "$BAD" -gt 0 ]
}

@test "crash states: the replace under pgrun --order=groups still leaves f old or new" {
	crash_summary "atomic replace, --order=groups" atomic_replace_run --order=groups
	assert_states_ok 3
}

@test "crash states: with consistency=none the replace under --order=groups breaks f" {
	crash_summary "atomic replace, --order=groups, consistency=none" \
		atomic_replace_run --order=groups -o consistency=none
	assert [ "$BAD" -gt 0 ]
}

# The check run in every state of gated_write_run: once t shows its data,
# the rename that came before the write (d/x.tmp over d/x) shows too.
t_data_after_rename() {
	local size
	size=$(debugfs -R "stat /t" "$FSTITCH_IMAGE" 2>/dev/null |
		sed -n 's/.*Size: \([0-9]*\).*/\1/p' | head -n 1)
	[ "${size:-0}" -gt 0 ] || return 0
	# (a lookup: the old entry may stay in the block with inode 0)
	! debugfs -R "stat /d/x.tmp" "$FSTITCH_IMAGE" 2>&1 | grep -q '^Inode:'
}

# gated_write_run [--no-group | --order=groups] [fstitch-mount options]: in
# one group, make t, rename d/x.tmp over d/x in another directory, then
# write t, under a recording daemon.  The group orders nothing among the
# three; rename_order=all orders the write after the rename, and t's write
# must keep that wait though its entry (made before the rename) lets it
# leave out the group's own (fstitch(7), Patchgroups).  With --no-group, in
# no group but after an fsync, when a new file's entry waits for the
# rename_order set in its size's place.  With --order=groups, pgrun's
# option, which takes that wait away.
gated_write_run() {
	local pgrun=("$PGRUN" --) pre=
	if [ "${1:-}" = --no-group ]; then
		shift
		pgrun=()
		pre='sync d/x; '
	elif [ "${1:-}" = --order=groups ]; then
		pgrun=("$PGRUN" "$1" --)
		shift
	fi
	mkdir d
	echo old >d/x
	echo new >d/x.tmp
	record_start "$@"
	run -0 "${pgrun[@]}" sh -c "${pre}"'exec 3>t; mv d/x.tmp d/x; printf "%3000s" x >&3'
	crash_states t_data_after_rename
}

@test "crash states: a new file's write in a group still waits for an earlier rename" {
	crash_summary "write after a rename" gated_write_run
	assert_states_ok 3
}

@test "crash states: after an fsync a new file's write still waits for an earlier rename" {
	crash_summary "write after a rename, no group" gated_write_run --no-group
	assert_states_ok 3
}

@test "crash states: under pgrun --order=groups the write may go ahead of the rename" {
	crash_summary "write after a rename, --order=groups" gated_write_run --order=groups
	assert [ "$BAD" -gt 0 ]
}

@test "crash states: with consistency=none the write is caught ahead of the rename" {
	crash_summary "write after a rename, consistency=none" gated_write_run -o consistency=none
	assert [ "$BAD" -gt 0 ]
}

@test "crash states: with consistency=none the write after an fsync is caught ahead of the rename" {
	crash_summary "write after a rename, no group, consistency=none" \
		gated_write_run --no-group -o consistency=none
	assert [ "$BAD" -gt 0 ]
}

# The check run in every state of mail_run: the archive holds its first m
# messages, whole, and the inbox marks its first k moved, with m = k or
# k + 1: each append comes after the mark before it, each mark after its
# append.
mail_prefix() {
	local a=$FSTITCH_IMAGE.a i=$FSTITCH_IMAGE.i m k rc=1
	rm -f "$a" "$i"
	debugfs -R "dump /archive $a" "$FSTITCH_IMAGE" >/dev/null 2>&1
	debugfs -R "dump /inbox $i" "$FSTITCH_IMAGE" >/dev/null 2>&1
	for m in 0 1 2 3; do
		cmp -s "$a" "$SCRATCH/archive.$m" && break
	done
	for k in 0 1 2 3; do
		cmp -s "$i" "$SCRATCH/inbox.$k" && break
	done
	echo "archive $m, inbox $k"
	cmp -s "$a" "$SCRATCH/archive.$m" && cmp -s "$i" "$SCRATCH/inbox.$k" &&
		[ "$m" -ge "$k" ] && [ "$m" -le $((k + 1)) ] && rc=0
	rm -f "$a" "$i"
	return $rc
}

# mail_run [fstitch-mount options]: a mail server's move of three messages
# under pgrun --fsync=order, recorded: append each to the archive, fsync,
# mark it moved in the inbox in place, fsync.  Each append crosses into
# the next block or fills the last one, past the archive's size: those
# bytes leave the groups' order out (fstitch(7), Patchgroups), which the
# size that covers them keeps.
mail_run() {
	local m
	: >"$SCRATCH/archive.0"
	for m in 1 2 3; do
		{ cat "$SCRATCH/archive.$((m - 1))"; printf 'message %s\n%3000s\n' $m x; } \
			>"$SCRATCH/archive.$m"
	done
	printf 'OOO\n' >"$SCRATCH/inbox.0"
	printf 'DOO\n' >"$SCRATCH/inbox.1"
	printf 'DDO\n' >"$SCRATCH/inbox.2"
	printf 'DDD\n' >"$SCRATCH/inbox.3"
	: >archive
	cp "$SCRATCH/inbox.0" inbox
	record_start "$@"
	run -0 "$PGRUN" --fsync=order -- sh -c '
		for m in 1 2 3; do
			printf "message %s\n%3000s\n" $m x >>archive && sync archive &&
			printf D | dd of=inbox bs=1 seek=$((m - 1)) conv=notrunc status=none &&
			sync inbox || exit
		done'
	cmp archive "$SCRATCH/archive.3"
	cmp inbox "$SCRATCH/inbox.3"
	crash_states mail_prefix
}

@test "crash states: a mail move under pgrun --fsync=order keeps its order" {
	crash_summary "mail move" mail_run
	assert_states_ok 3
}

@test "crash states: the mail move keeps its order with rename_order=file too" {
	# (the size then waits for the earlier mark only through the group)
	crash_summary "mail move, rename_order=file" mail_run -o rename_order=file
	assert_states_ok 3
}

@test "crash states: with consistency=none the mail move is caught out of order" {
	crash_summary "mail move, consistency=none" mail_run -o consistency=none
	assert [ "$BAD" -gt 0 ]
}

@test "crash states: with consistency=none and rename_order=file the mail move is caught too" {
	crash_summary "mail move, rename_order=file, consistency=none" \
		mail_run -o consistency=none,rename_order=file
	assert [ "$BAD" -gt 0 ]
}

# The check run in every state of shrink_append_run: f is one of the three
# files it went through.
f_one_of_three() {
	local f=$FSTITCH_IMAGE.f rc=1 k
	rm -f "$f"
	debugfs -R "dump /f $f" "$FSTITCH_IMAGE" >/dev/null 2>&1
	for k in 0 1 2; do
		cmp -s "$f" "$SCRATCH/f.$k" && rc=0
	done
	rm -f "$f"
	return $rc
}

# shrink_append_run [fstitch-mount options]: under pgrun --fsync=order,
# shrink f, fsync, and append: the appended bytes lie past the new size
# but within the old one, which the disk may still hold, so they must
# keep the order (e2_isize_hi()).
shrink_append_run() {
	head -c 6000 /dev/zero | tr '\0' A >"$SCRATCH/f.0"
	head -c 1000 "$SCRATCH/f.0" >"$SCRATCH/f.1"
	{ cat "$SCRATCH/f.1"; head -c 2000 /dev/zero | tr '\0' B; } >"$SCRATCH/f.2"
	cp "$SCRATCH/f.0" f
	record_start "$@"
	run -0 "$PGRUN" --fsync=order -- sh -c \
		"truncate -s 1000 f && sync f && tail -c 2000 '$SCRATCH/f.2' >>f"
	cmp f "$SCRATCH/f.2"
	crash_states f_one_of_three
}

@test "crash states: an append after a shrink in an earlier group keeps its order" {
	crash_summary "append after a shrink" shrink_append_run -o rename_order=file
	assert_states_ok 2
}

@test "crash states: with consistency=none the append is caught ahead of the shrink" {
	crash_summary "append after a shrink, consistency=none" \
		shrink_append_run -o consistency=none,rename_order=file
	assert [ "$BAD" -gt 0 ]
}

# sqlite_run [fstitch-mount options]: 3 autocommit inserts by one sqlite3
# under pgrun --fsync=order with a recording daemon; then in every crash
# state, repaired by e2fsck and mounted read-write (so that sqlite3
# can roll back a hot journal), the database must be intact and hold rows
# 1..k, a prefix of the commits.  Sets STATES and BAD.
sqlite_run() {
	sqlite3 db 'create table t(x integer);'
	record_start "$@"
	seq 1 3 | sed 's/.*/insert into t values(&);/' >"$SCRATCH/ins.sql"
	run -0 "$PGRUN" --fsync=order -- sqlite3 db <"$SCRATCH/ins.sql"
	ORDERED=$(fsync_ordered)
	record_stop
	# "ok", then "1|ROWS": rows 1..ROWS
	crash_count "$SCRATCH/rec" --rw -- sh -c '
		out=$(sqlite3 db "pragma integrity_check; select count(*) = coalesce(max(x), 0), count(*) from t;" 2>&1)
		echo "$out"
		[ "$(echo "$out" | sed -n 1p)" = ok ] && [ "$(echo "$out" | sed -n 2p | cut -d"|" -f1)" = 1 ]'
}

@test "crash states: sqlite under pgrun --fsync=order keeps integrity and a prefix of commits" {
	command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
	sqlite_run >"$SCRATCH/summary"
	echo "# sqlite fsync=order: $(cat "$SCRATCH/summary"), $ORDERED fsyncs ordered" >&3
	assert_states_ok 3
	# every commit's fsyncs really became ordering points
	assert [ "$ORDERED" -ge 3 ]
	# the final state holds every transaction
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	debugfs -R "dump /db $SCRATCH/final.db" "$SCRATCH/final.img" >/dev/null 2>&1
	run sqlite3 "$SCRATCH/final.db" 'select count(*) from t'
	assert_output 3
}

@test "crash states: sqlite with consistency=none is caught losing integrity" {
	command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
	sqlite_run -o consistency=none >"$SCRATCH/summary"
	echo "# sqlite fsync=order, consistency=none: $(cat "$SCRATCH/summary")" >&3
	assert [ "$BAD" -gt 0 ]
}
