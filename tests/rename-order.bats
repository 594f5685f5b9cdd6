#!/usr/bin/env bats
# -o rename_order= (fstitch-mount(8)): a program that never fsyncs and
# publishes its files with a rename, as git does by default, finds after a
# crash the old state or the new one with everything it names.  Every
# crash state of one recording is checked (fstitch-crash's full list), and
# the same workload is shown to break without the ordering (in 200 of its
# states, drawn with the fixed seed 1: the recordings are the same every
# run, so are the states).  Under rename_order=process a rename waits for
# its own process's data and not for another process's, which the patch
# graph (fstitch-stat --dot) shows.  A file moved over another name in
# the same directory block shows, in every mode, its new data whole, and
# a file renamed into a new directory is reachable once published.

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
	cd /
	crash_leftover_unmount
	common_teardown
}

# git_record DIR [fstitch-mount options]: 5 commits in a new repository.
# Nothing is written before the unmount (no background flush), so the log,
# and the states checked, are the same every run.
git_record() {
	"$CRASH" run -o "flush_interval=86400${2:+,$2}" --size 16M --setup 'git init -q .' --rec "$1" -- \
		sh -c 'for i in $(seq 5); do echo "line $i" > f$i; git add f$i; git commit -q -m "commit $i"; done' 3>&-
	[ -s "$1/log" ]
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
	assert_crash_pass rename_order=all all -- sh -c "$GIT_CHECK"
}

@test "git with no fsync keeps its repository whole in every crash state under rename_order=process" {
	command -v git >/dev/null || skip "git is not installed"
	git_record process rename_order=process
	assert_crash_pass rename_order=process process -- sh -c "$GIT_CHECK"
}

@test "the same git run breaks with rename_order=file and with consistency=none" {
	command -v git >/dev/null || skip "git is not installed"
	git_record file rename_order=file
	assert_crash_fail rename_order=file file --max 200 -- sh -c "$GIT_CHECK"
	git_record none consistency=none
	assert_crash_fail consistency=none none --max 200 -- sh -c "$GIT_CHECK"
}

# replace_record DIR [fstitch-mount options]: the new version of v is
# written to v.tmp and moved over v, whose inode keeps a second name
# (vlink): a rename within one directory block that raises no link count.
replace_record() {
	"$CRASH" run -o "flush_interval=86400${2:+,$2}" --size 8M \
		--setup 'echo old > v; ln v vlink; : > v.tmp' --rec "$1" -- \
		sh -c 'echo new >> v.tmp && mv v.tmp v' 3>&-
	[ -s "$1/log" ]
}

# v is the old version or the new one, never the new file short of its
# data (empty).
V_CHECK='v=$(cat v) && case $v in old|new) ;; *) echo "v is \"$v\""; exit 1;; esac'

@test "a rename over a file within one directory block waits for the new file's size" {
	replace_record all
	assert_crash_pass rename_order=all all -- sh -c "$V_CHECK"
	replace_record file rename_order=file
	assert_crash_pass rename_order=file file -- sh -c "$V_CHECK"
	replace_record none consistency=none
	assert_crash_fail consistency=none none -- sh -c "$V_CHECK"
}

# newdir_record DIR [fstitch-mount options]: a file is renamed into place
# in a new directory a/x, and a pointer to it (ref) is published by a
# rename; then another file is renamed into a, whose block then holds a
# change that must wait for ref.
newdir_record() {
	"$CRASH" run -o "flush_interval=86400${2:+,$2}" --size 8M \
		--setup 'mkdir a; seq 100 > big' --rec "$1" -- \
		sh -c 'mkdir a/x && echo x > a/x/f.tmp && mv a/x/f.tmp a/x/f &&
			echo a/x/f > ref.tmp && mv ref.tmp ref &&
			echo more >> big && mv big a/z' 3>&-
	[ -s "$1/log" ]
}

# ref, once there, names a file that holds x.
REF_CHECK='[ ! -e ref ] || { p=$(cat ref); [ "$(cat "$p" 2>/dev/null)" = x ] ||
	{ echo "ref names $p, which is not there"; exit 1; }; }'

@test "a file renamed into a new directory is reachable once a rename publishes it" {
	newdir_record all
	assert_crash_pass rename_order=all all -- sh -c "$REF_CHECK"
	newdir_record none consistency=none
	assert_crash_fail consistency=none none -- sh -c "$REF_CHECK"
}

# reaches DOT FROM TO [DOT FROM TO]...: for each triple, "yes" if a
# patch on block FROM of graph DOT waits, directly or through other
# patches (empty ones included), for a patch on one of the blocks TO
# (comma-separated), else "no"; the answers on one line, a space
# between.  (One python3 for all of a test's questions: on a loaded
# machine its start takes a second.)
reaches() {
	python3 - "$@" <<'EOF'
import re, sys

def reaches(dot, frm, to):
    blk, edges, cur = {}, {}, None
    for line in open(dot):
        m = re.match(r'\s*subgraph cluster_b(\d+) \{', line)
        if m:
            cur = m.group(1)
        elif re.match(r'\s*\}', line):
            cur = None
        elif m := re.match(r'\s*p(\d+) \[label', line):
            blk[m.group(1)] = cur
        elif m := re.match(r'\s*p(\d+) -> p(\d+);', line):
            edges.setdefault(m.group(1), []).append(m.group(2))
    to = set(to.split(','))
    todo = [p for p, b in blk.items() if b == frm]
    assert todo, "no patch on block " + frm
    seen = set(todo)
    while todo:
        for q in edges.get(todo.pop(), []):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return "yes" if any(blk.get(p) in to for p in seen) else "no"

args = sys.argv[1:]
assert args and len(args) % 3 == 0, "reaches: DOT FROM TO, one or more times"
print(" ".join(reaches(*args[i:i + 3]) for i in range(0, len(args), 3)))
EOF
}

# base_image: $BASE with a 64 KiB file a and directories d and e in other
# block groups; $ABLK (a's blocks, comma-separated), $DBLK and $EBLK (the
# directories' blocks).
base_image() {
	local mnt=$SCRATCH/mnt
	BASE=$SCRATCH/base.img
	make_image "$BASE" 32M
	fstitch_mount_start "$BASE" "$mnt"
	python3 -c 'open("a", "wb").write(bytes(range(256)) * 256)' && mv a "$mnt/a"
	mkdir "$mnt/d" "$mnt/e"
	fstitch_mount_stop "$mnt"
	ABLK=$(debugfs -R 'blocks /a' "$BASE" 2>/dev/null | xargs | tr ' ' ,)
	DBLK=$(debugfs -R 'blocks /d' "$BASE" 2>/dev/null | xargs)
	EBLK=$(debugfs -R 'blocks /e' "$BASE" 2>/dev/null | xargs)
	[ -n "$ABLK" ] && [ -n "$DBLK" ] && [ -n "$EBLK" ] && [ "$DBLK" != "$EBLK" ]
}

# graph MODE SCRIPT...: run each python3 SCRIPT as its own process in a
# mount of a copy of $BASE with rename_order=MODE, then write the patch
# graph to $SCRATCH/MODE.dot.  Nothing is flushed before the graph is
# taken (flush interval 600 s).  One python3 runs the scripts one after
# another, each in a child of its own (fork): to the daemon each is a
# process of its own, as a python3 of its own would be, without a
# python3 start for each.
graph() {
	local mode=$1 mnt=$SCRATCH/mnt
	shift
	cp "$BASE" "$SCRATCH/fs.img"
	fstitch_mount_start "$SCRATCH/fs.img" "$mnt" -o flush_interval=600,rename_order=$mode
	python3 - "$mnt" "$@" <<'EOF' || return 1
import os, sys, traceback

os.chdir(sys.argv[1])
for script in sys.argv[2:]:
    pid = os.fork()
    if pid == 0:
        try:
            exec(script, {})
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        os._exit(code)
    if os.waitpid(pid, 0)[1]:
        sys.exit("graph: a script failed")
EOF
	"$(fstitch_cmd fstitch-stat)" --dot --limit 100000 "$mnt" >"$SCRATCH/$mode.dot"
	fstitch_mount_stop "$mnt"
}

# Process B: publish d/f with a rename.
PUBLISH_B='
import os
with open("d/t", "wb") as f:
    f.write(b"B\n")
os.rename("d/t", "d/f")'

@test "rename_order=process orders a rename after its own process's data, not another's" {
	command -v debugfs >/dev/null || skip "debugfs is not installed"
	local mode got= q=() a1 b1 a2 b2 a3 b3
	base_image
	# Process A overwrites a in place and publishes e/g with a rename;
	# then process B publishes d/f.
	for mode in process all file; do
		graph "$mode" '
import os
with open("a", "r+b") as f:
    f.write(bytes(reversed(range(256))) * 256)
with open("e/u", "wb") as f:
    f.write(b"A\n")
os.rename("e/u", "e/g")' "$PUBLISH_B"
		q+=("$SCRATCH/$mode.dot" "$EBLK" "$ABLK" "$SCRATCH/$mode.dot" "$DBLK" "$ABLK")
	done
	read -r a1 b1 a2 b2 a3 b3 < <(reaches "${q[@]}")
	got="process: A $a1 B $b1; all: A $a2 B $b2; file: A $a3 B $b3; "
	assert_equal "$got" "process: A yes B no; all: A yes B yes; file: A no B no; "
}

@test "rename_order=process: data written back from a shared mapping is waited for by every process" {
	command -v debugfs >/dev/null || skip "debugfs is not installed"
	local mode got= q=() b1 b2
	base_image
	# A shared mapping's pages reach the daemon with pid 0 (the close
	# writes them back; msync would fsync them as well); then process B
	# publishes d/f.
	for mode in process file; do
		graph "$mode" '
import mmap, os
fd = os.open("a", os.O_RDWR)
m = mmap.mmap(fd, 65536)
m[:] = bytes(reversed(range(256))) * 256
m.close()
os.close(fd)' "$PUBLISH_B"
		q+=("$SCRATCH/$mode.dot" "$DBLK" "$ABLK")
	done
	read -r b1 b2 < <(reaches "${q[@]}")
	got="process: B $b1; file: B $b2; "
	assert_equal "$got" "process: B yes; file: B no; "
}
