#!/usr/bin/env bats
# -o rename_order= (fstitch-mount(8)): a program that never fsyncs and
# publishes its files with a rename, as git does by default, finds after a
# crash the old state or the new one with everything it names.  Every
# crash state of one recording is checked (fstitch-crash's full list), and
# the same workload is shown to break without the ordering.

load common

setup() {
	common_setup
	CRASH=$(fstitch_cmd fstitch-crash)
	PATH=$FSTITCH_BIN:$PATH
	# git with its defaults (no fsync at all), and nothing from this
	# machine's or user's configuration
	export HOME=$SCRATCH GIT_CONFIG_NOSYSTEM=1
	export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org
	export GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org
	export GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
	cd "$SCRATCH"
}

teardown() {
	local m
	cd /
	for m in $(awk -v s="$SCRATCH" 'index($2, s) == 1 { print $2 }' /proc/mounts); do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
	done
	common_teardown
}

# git_record DIR [fstitch-mount options...]: 20 commits in a new repository.
git_record() {
	local dir=$1
	shift
	"$CRASH" run "$@" --size 16M --setup 'git init -q .' --rec "$dir" -- \
		sh -c 'for i in $(seq 20); do echo "line $i" > f$i; git add f$i; git commit -q -m "commit $i"; done' 3>&-
	[ -s "$dir/log" ]
}

# What a user would run after the crash: every object reachable, the
# reflogs naming objects that exist, and the history readable once a
# branch exists.
GIT_CHECK='git fsck --full >/dev/null 2>&1 || { git fsck --full 2>&1 | head -3; exit 1; }
test -e .git/refs/heads/master || exit 0
git log --oneline >/dev/null'

@test "git with no fsync keeps its repository whole in every crash state under the default rename_order=all" {
	command -v git >/dev/null || skip "git is not installed"
	git_record all
	run -0 "$CRASH" check --jobs 2 all -- sh -c "$GIT_CHECK"
	assert_line --regexp '^([0-9]+) of \1 states checked \(seed 1\), 0 failed'
	echo "# rename_order=all: ${lines[-1]}" >&3
}

@test "the same git run breaks with rename_order=file and with consistency=none" {
	command -v git >/dev/null || skip "git is not installed"
	git_record file -o rename_order=file
	run -1 "$CRASH" check --jobs 2 --max 200 file -- sh -c "$GIT_CHECK"
	assert_line --regexp '^failed states: [0-9]'
	echo "# rename_order=file: ${lines[-1]}" >&3
	git_record none -o consistency=none
	run -1 "$CRASH" check --jobs 2 --max 200 none -- sh -c "$GIT_CHECK"
	assert_line --regexp '^failed states: [0-9]'
	echo "# consistency=none: ${lines[-1]}" >&3
}
