#!/usr/bin/env bats
# pgdepend (and pgcreate): the patchgroup rules of design.md §5 through the
# shell, each refusal with its message and exit status, and that a refused
# call changes nothing.

load common

setup() {
	pg_setup
}

teardown() {
	pg_teardown
}

# An id no daemon hands out (ids start at the daemon's start time in
# microseconds, design.md §5).
NOID=9223372036854775807

# refused BEFORE AFTER WHY: pgdepend refuses with exit 1, says WHY, and
# neither group changes.
refused() {
	local b=$1 a=$2 why=$3 sb sa
	sb=$("$PGSTATUS" "$b" 2>/dev/null || true)
	sa=$("$PGSTATUS" "$a" 2>/dev/null || true)
	run -1 --separate-stderr "$PGDEPEND" "$b" "$a"
	assert_equal "$stderr" "pgdepend: cannot add dependency $b -> $a: $why"
	assert_equal "$output" ""
	assert_equal "$("$PGSTATUS" "$b" 2>/dev/null || true)" "$sb"
	assert_equal "$("$PGSTATUS" "$a" 2>/dev/null || true)" "$sa"
}

@test "pgcreate prints new positive ids, never the same twice" {
	run -0 "$PGCREATE"
	a=$output
	assert_regex "$a" '^[1-9][0-9]*$'
	run -0 "$PGCREATE"
	[ "$output" -gt "$a" ]
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp "^id=$a owner=0 engaged=0 befores=0 afters=0 changes=0 state=open$"
	run -64 "$PGCREATE" extra
	run -64 "$PGCREATE" --after 0
}

@test "a dependency seals the before and is counted on both sides" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	run -0 "$PGDEPEND" "$a" "$b"
	assert_output ""
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp 'afters=1 .*state=sealed$'
	run -0 "$PGSTATUS" "$b"
	assert_output --partial "befores=1"
	# the same pair again is not an error and adds nothing
	run -0 "$PGDEPEND" "$a" "$b"
	run -0 "$PGSTATUS" "$b"
	assert_output --partial "befores=1"
	# a before may have several afters
	c=$("$PGCREATE" --after "$a")
	run -0 "$PGSTATUS" "$a"
	assert_output --partial "afters=2"
}

@test "the same pair named again is no error once the after has changes, afters or is closed" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	run -0 "$PGDEPEND" "$a" "$b"
	# b gets a change: a new before would be refused now, the same one not
	"$PGRUN" --group "$b" -- sh -c 'echo x > f1'
	c=$("$PGCREATE")
	refused "$c" "$b" "group $b already has changes"
	run -0 "$PGDEPEND" "$a" "$b"
	assert_output ""
	# b gets an after (sealed), then is closed
	d=$("$PGCREATE" --after "$b")
	run -0 "$PGDEPEND" "$a" "$b"
	"$PGCLOSE" "$b"
	run -0 "$PGDEPEND" "$a" "$b"
	run -0 "$PGSTATUS" "$b"
	assert_output --partial "befores=1"
	# a closed after is still refused for a pair never named
	refused "$c" "$b" "group $b is closed"
	[ -n "$d" ]
}

@test "a group cannot depend on itself" {
	a=$("$PGCREATE")
	refused "$a" "$a" "a group cannot depend on itself"
}

@test "unknown groups are refused, naming the unknown one" {
	a=$("$PGCREATE")
	refused "$NOID" "$a" "group $NOID does not exist"
	refused "$a" "$NOID" "group $NOID does not exist"
}

@test "an id of an earlier mount names a group that is over, never one of this mount" {
	# A script that kept an id across a remount (or a daemon restart)
	# must not have its next group wait for, or be refused because of, a
	# group of the new mount that happens to take the same number.
	a=$("$PGRUN" --print-id -- sh -c 'echo old >f')
	cd /
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT"
	cd "$MNT"
	# the new mount's first group, open
	b=$("$PGCREATE")
	[ "$b" -gt "$a" ]
	# the old id adds no order: it is not the new mount's group
	c=$("$PGRUN" --print-id --after "$a" -- sh -c 'echo new >f')
	run -0 "$PGSTATUS" "$c"
	assert_output --regexp ' befores=0 '
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp 'state=.*retired'
	run -0 "$PGSYNC" "$a"
	run -0 "$PGDEPEND" "$a" "$b"
	run -0 "$PGSTATUS" "$b"
	assert_output --regexp ' befores=0 '
	assert_equal "$(cat f)" new
}

@test "an after that already has afters is refused" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	c=$("$PGCREATE")
	"$PGDEPEND" "$b" "$c"
	refused "$a" "$b" "group $b is sealed: it has afters"
}

@test "an after that already carries a change is refused" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	"$PGRUN" --group "$b" -- sh -c 'echo x >f'
	refused "$a" "$b" "group $b already has changes"
	# an engaged after without changes is fine
	c=$("$PGCREATE")
	"$PGRUN" --group "$c" -- "$PGDEPEND" "$a" "$c"
	run -0 "$PGSTATUS" "$c"
	assert_output --partial "befores=1"
}

@test "a before that is engaged by anyone is refused" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	"$PGRUN" --group "$a" -- sh -c 'touch ready; while [ ! -e go ]; do sleep 0.05; done' &
	pid=$!
	for ((n = 0; n < 1200; n++)); do [ -e ready ] && break; sleep 0.05; done
	refused "$a" "$b" "group $a is engaged"
	touch go
	wait "$pid"
	run -0 "$PGDEPEND" "$a" "$b"
}

@test "a sealed group can never be engaged again" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	"$PGDEPEND" "$a" "$b"
	run -125 --separate-stderr "$PGRUN" --group "$a" -- touch f
	assert_equal "$stderr" "pgrun: cannot engage group $a: group $a is sealed: it has afters"
	assert [ ! -e f ]
}

@test "a closed group is no after, but still a before until it is forgotten" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	run -0 "$PGCLOSE" "$a"
	refused "$b" "$a" "group $a is closed"
	run -1 --separate-stderr "$PGCLOSE" "$a"
	assert_equal "$stderr" "pgclose: cannot close group $a: group $a is closed"
	run -0 "$PGDEPEND" "$a" "$b"
}

@test "usage errors exit 64" {
	run -64 "$PGDEPEND"
	run -64 "$PGDEPEND" 1
	run -64 "$PGDEPEND" 1 2 3
	run -64 --separate-stderr "$PGDEPEND" 1 x
	assert_equal "${stderr_lines[0]}" "pgdepend: invalid group id 'x'"
	run -64 "$PGDEPEND" 0 1
	run -64 "$PGSYNC"
	run -64 "$PGCLOSE" -- -3
	run -0 "$PGDEPEND" --help
	assert_output --partial "Exit status"
}

@test "pgcreate --after that is refused leaves no group behind" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	"$PGDEPEND" "$a" "$b"
	before=$("$PGSTATUS" --summary)
	run -1 --separate-stderr "$PGCREATE" --after "$NOID"
	assert_regex "$stderr" "^pgcreate: cannot add dependency $NOID -> [0-9]+: group $NOID does not exist$"
	assert_equal "$output" ""
	# the group it made was closed again: nothing open was added
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --partial closed
	run -0 "$PGCREATE" --after "$a"
}

@test "pgcreate with standard output closed says so and leaves no group behind" {
	# The library's socket would get descriptor 1, and the id would go
	# to the daemon instead.
	run -1 --separate-stderr sh -c 'exec "$@" >&-' _ "$PGCREATE"
	assert_equal "$stderr" "pgcreate: cannot print the group id: Bad file descriptor"
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --partial closed
}

@test "pgcreate into a pipe whose reader has gone says so and leaves no group behind" {
	# SIGPIPE would kill pgcreate before it could close the group.
	run -1 --separate-stderr broken_pipe "$PGCREATE"
	assert_equal "$stderr" "pgcreate: cannot print the group id: Broken pipe"
	run -0 "$PGSTATUS" "$(pg_last_id)"
	assert_output --partial closed
}

@test "pgsync syncs a closed group, and says a missing one does not exist" {
	# A closed group may still be synced (pgsync(1)), so the message for
	# an unknown id must not suggest that it was refused for being closed.
	a=$("$PGCREATE")
	"$PGRUN" --group "$a" -- sh -c 'echo x >f'
	run -0 "$PGCLOSE" "$a"
	run -0 "$PGSYNC" "$a"
	run -0 "$PGSYNC" "$a"
	run -1 --separate-stderr "$PGSYNC" "$NOID"
	assert_equal "$stderr" "pgsync: cannot sync group $NOID: group $NOID does not exist"
}

@test "a dead daemon is reported by every patchgroup command as gone" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	kill -9 "$FSTITCH_MOUNT_PID"
	wait "$FSTITCH_MOUNT_PID" 2>/dev/null || true
	gone="cannot use '.': its fstitch daemon is gone (the mount is dead)"
	run -1 --separate-stderr "$PGCREATE"
	assert_equal "$stderr" "pgcreate: $gone"
	run -1 --separate-stderr "$PGSYNC" "$a"
	assert_equal "$stderr" "pgsync: $gone"
	run -1 --separate-stderr "$PGCLOSE" "$a"
	assert_equal "$stderr" "pgclose: $gone"
	run -1 --separate-stderr "$PGDEPEND" "$a" "$b"
	assert_equal "$stderr" "pgdepend: $gone"
	run -125 --separate-stderr "$PGRUN" -- true
	assert_equal "$stderr" "pgrun: $gone"
	run -125 --separate-stderr "$PGRUN" --group "$a" -- true
	assert_equal "$stderr" "pgrun: $gone"
	# the same through -C, from outside the mount
	cd /
	run -1 --separate-stderr "$PGSYNC" -C "$MNT" "$a"
	assert_equal "$stderr" "pgsync: cannot use '$MNT': its fstitch daemon is gone (the mount is dead)"
}

@test "a -C or FSTITCH_CONTROL that cannot be looked up is named by every command" {
	# Its ENOENT was taken for the group's, ELOOP for a self-dependency.
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	no=/nonexistent/mnt
	why="cannot use '$no': No such file or directory"
	run -1 --separate-stderr "$PGCREATE" -C "$no"
	assert_equal "$stderr" "pgcreate: $why"
	assert_equal "$output" ""
	run -1 --separate-stderr "$PGSYNC" -C "$no" "$a"
	assert_equal "$stderr" "pgsync: $why"
	run -1 --separate-stderr "$PGCLOSE" -C "$no" "$a"
	assert_equal "$stderr" "pgclose: $why"
	run -1 --separate-stderr "$PGDEPEND" -C "$no" "$a" "$b"
	assert_equal "$stderr" "pgdepend: $why"
	run -125 --separate-stderr "$PGRUN" -C "$no" -- touch f
	assert_equal "$stderr" "pgrun: $why"
	assert [ ! -e f ]
	FSTITCH_CONTROL=$no run -1 --separate-stderr "$PGSYNC" "$a"
	assert_equal "$stderr" "pgsync: $why"
	FSTITCH_CONTROL=$no run -125 --separate-stderr "$PGRUN" true
	assert_equal "$stderr" "pgrun: $why"
	ln -s loop "$SCRATCH/loop"
	run -1 --separate-stderr "$PGDEPEND" -C "$SCRATCH/loop" "$a" "$b"
	assert_equal "$stderr" "pgdepend: cannot use '$SCRATCH/loop': Too many levels of symbolic links"
	run -1 --separate-stderr "$PGSYNC" -C /dev/null/x "$a"
	assert_equal "$stderr" "pgsync: cannot use '/dev/null/x': Not a directory"
	# a path that exists in no mount is still said to be that
	run -1 --separate-stderr "$PGCREATE" -C "$SCRATCH"
	assert_equal "$stderr" "pgcreate: cannot create a group: not inside an fstitch mount (use -C DIR or FSTITCH_CONTROL)"
	run -1 --separate-stderr "$PGSYNC" -C "$SCRATCH" "$a"
	assert_equal "$stderr" "pgsync: cannot sync group $a: not inside an fstitch mount (use -C DIR or FSTITCH_CONTROL)"
	# and nothing reached the mount
	run -0 "$PGSTATUS" "$a"
	assert_output --regexp 'befores=0 afters=0 .*state=open$'
}

@test "pgsync and pgclose name the group they could not handle" {
	run -1 --separate-stderr "$PGSYNC" "$NOID"
	assert_equal "$stderr" "pgsync: cannot sync group $NOID: group $NOID does not exist"
	a=$("$PGCREATE")
	run -1 --separate-stderr "$PGCLOSE" "$a" "$NOID"
	assert_equal "$stderr" "pgclose: cannot close group $NOID: group $NOID does not exist"
	run -0 "$PGSTATUS" "$a"
	assert_output --partial closed
}
