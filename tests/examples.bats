#!/usr/bin/env bats
# Every example in the manual pages and every command in README.md, run
# exactly as written and checked against what the text says it does.
#
# The examples are extracted from the pages each time (extract_page), never
# copied here: an edited example is what runs.  An example is a literal
# display (.Bd -literal ... .Ed) or a one-line display (.Dl, a leading "$ "
# or "# " prompt removed), anywhere in a page.  Each has an id PAGE.N (N
# counts from 1 in page order), and each id has its test below; an example
# without one, or a page whose EXAMPLES section yields none, fails.
#
# The examples mount at /mnt, /mnt/data and /mnt/disk and keep images in
# /srv, as a reader's would.  They run in a private mount namespace
# (unshare -m) with its own tmpfs on /mnt, /srv and /run/mount, so nothing is
# mounted where anyone else can see it; whatever an example leaves mounted
# is unmounted there (fusermount3 -u) and its daemon's final flush awaited.

load common

PAGES=(fstitch-crash.1 fstitch-mkfs.8 fstitch-mount.8 fstitch-stat.8 fstitch.7 pg_create.3
	pgclose.1 pgcreate.1 pgdepend.1 pgrun.1 pgsync.1)

# Every example id and the test that runs it: a new example must be given a
# test here, a removed one taken out.
KNOWN=(
	fstitch-crash.1.1 fstitch-crash.1.2 fstitch-crash.1.3 fstitch-crash.1.4
	fstitch-crash.1.5
	fstitch-mkfs.8.1 fstitch-mkfs.8.2 fstitch-mkfs.8.3 fstitch-mkfs.8.4
	fstitch-mkfs.8.5 fstitch-mkfs.8.6
	fstitch-mount.8.1 fstitch-mount.8.2 fstitch-mount.8.3 fstitch-mount.8.4
	fstitch-mount.8.5 fstitch-mount.8.6 fstitch-mount.8.7 fstitch-mount.8.8
	fstitch-mount.8.9 fstitch-mount.8.10
	fstitch-stat.8.1 fstitch-stat.8.2 fstitch-stat.8.3 fstitch-stat.8.4
	fstitch-stat.8.5
	fstitch.7.1
	pg_create.3.1 pg_create.3.2
	pgclose.1.1
	pgcreate.1.1
	pgdepend.1.1 pgdepend.1.2
	pgrun.1.1 pgrun.1.2 pgrun.1.3
	pgsync.1.1
)

# Examples that another suite runs, from the page, with the fixture it
# already has: ID, then FILE:TEST, then a fixed string that the example
# holds and by which that suite picks it out of the page.
ELSEWHERE=(
	"fstitch-mkfs.8.5|tests/nbd.bats|the NBD example of fstitch-mkfs(8) runs as written|nbdkit --unix"
	"fstitch-mount.8.9|tests/nbd.bats|the NBD example of fstitch-mount(8) runs as written|nbdkit --unix"
)

setup() {
	common_setup
	EX=$SCRATCH/ex
	WORK=$SCRATCH/work
	FIX=$SCRATCH/fix
	mkdir -p "$EX" "$WORK" "$FIX/bin" "$FIX/sbin" "$WORK/home"
	# what make install would put in PATH and in /sbin
	ln -s "$FSTITCH_BIN/fstitch-mkfs" "$FIX/bin/mkfs.fstitch"
	ln -s "$FSTITCH_BIN/fstitch-mount" "$FIX/sbin/mount.fuse.fstitch"
	# mount(8) runs mount.fuse3 with a PATH of the system's folders only
	ln -s "$FSTITCH_BIN/fstitch-mount" "$FIX/sbin/fstitch-mount"
	PATH=$FIX/bin:$FSTITCH_BIN:$PATH
	export PATH EX WORK FIX
}

teardown() {
	cd /
	crash_leftover_unmount
	common_teardown
	[ -z "${LOOP:-}" ] || losetup -d "$LOOP" 2>/dev/null || true
}

# extract_page PAGE: write each example of man/PAGE to $EX/PAGE.N, as a
# reader copies it from the rendered page.
extract_page() {
	awk -v dir="$EX" -v page="$1" '
		function unesc(s) {
			gsub(/\\\(dq/, "\"", s)
			gsub(/\\&/, "", s)
			gsub(/\\e/, "\\", s)
			gsub(/\\-/, "-", s)
			return s
		}
		/^\.Bd -literal/ { n++; f = dir "/" page "." n; printf "" >f; inb = 1; next }
		inb && /^\.Ed/ { inb = 0; close(f); next }
		inb { print unesc($0) >f; next }
		/^\.Dl / {
			n++; f = dir "/" page "." n
			s = substr($0, 5)
			sub(/^[$#] /, "", s)
			print unesc(s) >f
			close(f)
		}
	' "$FSTITCH_ROOT/man/$1"
}

# example ID: extract ID's page, check that ID exists, and print its path.
example() {
	local page=${1%.*}
	[ -e "$EX/$1" ] || extract_page "$page"
	if [ ! -s "$EX/$1" ]; then
		echo "man/$page has no example ${1##*.}" >&2
		return 1
	fi
	printf '%s\n' "$EX/$1"
}

# in_ns ID PRE POST [FILE]: run example ID (or FILE, the program that
# example ID is part of) in a private mount namespace, from
# $WORK, with HOME=$WORK/home: first the shell code PRE (the fixture), then
# the example itself in the same shell under set -e (its stdout and stderr
# in $WORK/ex.out and $WORK/ex.err), then POST, the checks that need the
# example's mounts or variables.  Sets EX_STATUS to the example's status and
# returns POST's.  Whatever is left mounted is unmounted at the end, and each
# fstitch daemon's final flush awaited (its lock on the image).
in_ns() {
	local file=${4:-} pre=$2 post=$3
	[ -n "$file" ] || file=$(example "$1") || return 1
	cat >"$WORK/.run" <<-EOF
		set -u
		$NS_DROP_COPIES
		mount -t tmpfs -o size=16M ex-mnt /mnt
		mount -t tmpfs -o size=512M ex-srv /srv
		mkdir -p /run/mount && mount -t tmpfs -o size=1M ex-run /run/mount
		ex_cleanup() {
			local st=\$? m src
			cd /
			# only the examples' own: the namespace began with a copy of
			# every mount on the machine
			awk '\$3 ~ /^fuse(blk)?(\.fstitch)?\$/ && \$2 ~ /^\/mnt(\/|\$)/ {
				print \$2, \$1 }' /proc/self/mounts | tac >"$WORK/.mounts"
			while read -r m src; do
				fusermount3 -u "\$m" 2>/dev/null || umount "\$m" 2>/dev/null ||
					fusermount3 -uz "\$m" 2>/dev/null
			done <"$WORK/.mounts"
			while read -r m src; do
				[ -f "\$src" ] && flock "\$src" true
			done <"$WORK/.mounts"
			# an example that unmounted by itself: its daemon holds the
			# image's lock until its final flush ends
			for src in "$WORK"/*.img; do
				[ -f "\$src" ] && flock "\$src" true
			done
			wait
			exit \$st
		}
		trap ex_cleanup EXIT
		cd "$WORK"
		export HOME=$WORK/home
		$pre
		rm -f "$WORK/.status"
		set -e
		. "$file" >"$WORK/ex.out" 2>"$WORK/ex.err"
		set +e
		echo 0 >"$WORK/.status"
		cd "$WORK"
		$post
	EOF
	local rc=0
	unshare -m --propagation private bash "$WORK/.run" 3>&- </dev/null || rc=$?
	if [ -e "$WORK/.status" ]; then
		EX_STATUS=0
	else
		EX_STATUS=$rc
	fi
	echo "example $1 exited $EX_STATUS; its output:" >&2
	cat "$WORK/ex.out" "$WORK/ex.err" >&2 2>/dev/null || true
	[ "$EX_STATUS" -eq 0 ] || return "$EX_STATUS"
	return "$rc"
}

# A fresh image for examples that start from one.
fresh() {
	local img=$1 size=${2:-64M}
	fstitch-mkfs -q -F "$img" "$size"
}

# rendered PAGE: the page as man(1) shows it (on a terminal wide enough not
# to fold the displays), leading blanks removed.
rendered() {
	mandoc -Tascii -Owidth=400 "$FSTITCH_ROOT/man/$1" | col -bx | sed 's/^ *//'
}

# ------------------------------------------------------------ the extraction

@test "every page with an EXAMPLES section yields examples, and every example has a test" {
	local p n ids=() bad=()
	for p in "$FSTITCH_ROOT"/man/*.[1-8]; do
		p=${p##*/}
		[[ " ${PAGES[*]} " == *" $p "* ]] || bad+=("man/$p is not in PAGES")
		extract_page "$p"
		n=$(find "$EX" -name "$p.*" | wc -l)
		if grep -q '^\.Sh EXAMPLES' "$FSTITCH_ROOT/man/$p" && [ "$n" -eq 0 ]; then
			bad+=("man/$p has an EXAMPLES section but no example in it")
		fi
	done
	for f in "$EX"/*; do
		ids+=("${f##*/}")
		[[ " ${KNOWN[*]} " == *" ${f##*/} "* ]] || bad+=("${f##*/} has no test in examples.bats")
	done
	for f in "${KNOWN[@]}"; do
		[ -s "$EX/$f" ] || bad+=("$f is gone from its page: update KNOWN and its test")
	done
	printf '%s\n' "${bad[@]}" >&2
	assert_equal "${#bad[@]}" 0
	assert [ "${#ids[@]}" -ge 30 ]
}

@test "the extraction fails on a page whose EXAMPLES hold no display" {
	# a negative control for the test above
	mkdir -p "$SCRATCH/man"
	printf '%s\n' .Dd .Dt X 1 .Sh EXAMPLES 'Run it:' 'x --y' .Sh 'SEE ALSO' >"$SCRATCH/man/x.1"
	FSTITCH_ROOT=$SCRATCH extract_page x.1
	run find "$EX" -name 'x.1.*'
	assert_output ''
}

@test "every extracted example reads as the rendered page shows it" {
	# What runs is what a reader sees: no quote lost to mdoc's argument
	# parsing, no escape left over.
	local p f line bad=()
	for p in "${PAGES[@]}"; do
		extract_page "$p"
		rendered "$p" >"$SCRATCH/rendered"
		for f in "$EX/$p".*; do
			while IFS= read -r line; do
				[ -n "$line" ] || continue
				# a one-line display shows its prompt, which is not run
				grep -qxF -e "${line#"${line%%[! ]*}"}" -e "\$ $line" -e "# $line" \
					"$SCRATCH/rendered" ||
					bad+=("${f##*/}: '$line' is not on the rendered page")
				[[ $line != *\\* ]] || bad+=("${f##*/}: '$line' keeps an escape")
			done <"$f"
		done
	done
	printf '%s\n' "${bad[@]}" >&2
	assert_equal "${#bad[@]}" 0
}

# ------------------------------------------------------------ fstitch-crash(1)

@test "fstitch-crash(1) examples: run and check give the statuses and counts the page states" {
	# These are the crash checker's own end-to-end tests: fstitch-crash.bats
	# does not run them again.  The sqlite one is slow (60 states).
	local n f want=(1 0 1 0 0)
	command -v sqlite3 >/dev/null || skip "sqlite3 is not installed"
	cd "$WORK"
	for n in 1 2 3 4 5; do
		f=$(example "fstitch-crash.1.$n")
		run bash -e "$f" 3>&-
		echo "example $n: status $status" >&2
		printf '%s\n' "$output" >&2
		assert_equal "$status" "${want[n - 1]}"
		case $n in
		1 | 3)
			# the config file broken in some states, found and counted
			assert_line --regexp '^failed states: [0-9]'
			assert_line --regexp ', [1-9][0-9]* failed, .* states/s$'
			;;
		2)
			assert_line --regexp '^[0-9]+ of [0-9]+ states checked \(seed 1\), 0 failed'
			;;
		4)
			assert_line --regexp '^60 of [0-9]+ states checked \(seed 1\), 0 failed'
			;;
		5)
			assert_output 1000
			;;
		esac
	done
}

@test "the examples other suites run are there, and still the ones those suites pick" {
	local e id file name key
	for e in "${ELSEWHERE[@]}"; do
		IFS='|' read -r id file name key <<<"$e"
		grep -qF "@test \"$name\"" "$FSTITCH_ROOT/$file" ||
			fail "$file has no test '$name' to run $id"
		grep -qF -- "$key" "$(example "$id")" ||
			fail "$id does not hold '$key', by which $file finds it"
		# and it is the only example on its page that does
		run -0 grep -lF -- "$key" "$EX/${id%.*}".*
		assert_equal "${#lines[@]}" 1
	done
}

# ------------------------------------------------------------ fstitch-mkfs(8)

@test "fstitch-mkfs(8) examples: a 1 GiB image, a dry run, mkfs -t on a device, a fixed UUID" {
	# 1: a 1 GiB image file that e2fsck finds clean
	in_ns fstitch-mkfs.8.1 '' ''
	assert_equal "$(stat -c %s "$WORK/disk.img")" $((1 << 30))
	assert_fsck_clean "$WORK/disk.img"
	# 2: on the existing image: the would-be geometry, nothing written
	sum=$(file_sum "$WORK/disk.img")
	in_ns fstitch-mkfs.8.2 '' ''
	assert_equal "$(file_sum "$WORK/disk.img")" "$sum"
	run cat "$WORK/ex.out"
	assert_line "Would make an ext2 file system on 'disk.img'"
	assert_line --regexp '^  size +1\.0 GiB: 262144 blocks of 4096 bytes$'
	assert_line --regexp '^  label +data$'
	assert_line 'Dry run: nothing was written'
	# 3: mkfs(8) -t fstitch over an ext4 file system on a block device, which
	# is /dev/sdb1 in the namespace (a loop device on an image)
	truncate -s 32M "$WORK/sdb1.img"
	mke2fs -q -F -t ext4 "$WORK/sdb1.img"
	LOOP=$(losetup -f --show "$WORK/sdb1.img")
	in_ns fstitch-mkfs.8.3 "
		maj=\$((0x\$(stat -c %t $LOOP))) min=\$((0x\$(stat -c %T $LOOP)))
		mount -t tmpfs -o mode=755 ex-dev /dev
		mknod -m 666 /dev/null c 1 3
		mknod -m 660 /dev/sdb1 b \$maj \$min" ''
	assert_equal "$(cat "$WORK/ex.out" "$WORK/ex.err")" ''
	run -0 blkid -p -o value -s TYPE "$LOOP"
	assert_output ext2
	losetup -d "$LOOP"
	LOOP=
	assert_fsck_clean "$WORK/sdb1.img"
	# 4: the UUID given
	rm "$WORK/disk.img"
	in_ns fstitch-mkfs.8.4 '' ''
	run -0 blkid -p -o value -s UUID "$WORK/disk.img"
	assert_output 0b5d1e7c-4a3f-4c8e-9d2b-6f1a2e3c4d5e
	assert_equal "$(stat -c %s "$WORK/disk.img")" $((64 << 20))
}

@test "fstitch-mkfs(8) example 6: an ext3 image with a 16 MiB journal, as dumpe2fs shows" {
	in_ns fstitch-mkfs.8.6 '' ''
	run cat "$WORK/ex.out"
	assert_line --regexp '^Filesystem features: +has_journal filetype sparse_super large_file$'
	assert_line --regexp '^Total journal size: +16M$'
	assert_equal "$(stat -c %s "$WORK/disk.img")" $((256 << 20))
	assert_fsck_clean "$WORK/disk.img"
}

# ------------------------------------------------------------ fstitch-mount(8)

@test "fstitch-mount(8) example: make an image, mount it, untar into it, unmount" {
	mkdir -p "$SCRATCH/tree/d"
	seq 5000 >"$SCRATCH/tree/d/numbers"
	echo hello >"$SCRATCH/tree/greeting"
	tar -cf "$WORK/src.tar" -C "$SCRATCH/tree" .
	in_ns fstitch-mount.8.1 '' ''
	# unmount returned; the daemon's flush ended before the namespace did
	assert_fsck_clean "$WORK/disk.img"
	assert_equal "$(debugfs -R 'cat /d/numbers' "$WORK/disk.img" 2>/dev/null)" "$(seq 5000)"
	assert_equal "$(debugfs -R 'cat /greeting' "$WORK/disk.img" 2>/dev/null)" hello
}

@test "fstitch-mount(8) example: as root, umount returns after the final flush and e2fsck finds the image clean" {
	local n
	mkdir -p "$SCRATCH/tree"
	for ((n = 0; n < 400; n++)); do
		head -c $((n * 613 % 40000)) /dev/urandom >"$SCRATCH/tree/f$n"
	done
	tar -cf "$WORK/src.tar" -C "$SCRATCH/tree" .
	fresh "$WORK/disk.img"
	in_ns fstitch-mount.8.5 '' ''
	# the example's own e2fsck ran right after umount, under set -e: its
	# status 0 is the example's, and it checked the whole tree
	grep -q '^disk.img: [0-9]*/[0-9]* files' "$WORK/ex.out"
	mkdir "$SCRATCH/out"
	debugfs -R "rdump / $SCRATCH/out" "$WORK/disk.img" 2>/dev/null
	rm -rf "$SCRATCH/out/lost+found"
	diff -r "$SCRATCH/tree" "$SCRATCH/out"
}

@test "fstitch-mount(8) example: cache=512M,flush_interval=60 reach the engine" {
	fresh "$WORK/disk.img"
	in_ns fstitch-mount.8.2 '' '
		fstitch-stat --json /mnt | jq -c .mode >"$WORK/mode"'
	run -0 jq -r '"\(.flush_interval_ms) \(.max_blocks) \(.block_size)"' "$WORK/mode"
	assert_output "60000 524288 1024"
}

@test "fstitch-mount(8) examples: the fstab lines, through mount.fuse.fstitch and mount.fuse3" {
	local ex
	for ex in fstitch-mount.8.3 fstitch-mount.8.4; do
		# The line goes into /etc/fstab, and what runs is mount(8), which
		# finds the helper in /sbin: both are the namespace's own.
		cp "$(example "$ex")" "$WORK/fstab"
		echo 'mount /mnt/disk' >"$SCRATCH/mount-it"
		in_ns "$ex" "
			mount --bind $WORK/fstab /etc/fstab
			mount -t overlay ex-sbin -o lowerdir=$FIX/sbin:/usr/sbin /usr/sbin
			fstitch-mkfs -q /srv/disk.img 64M
			mkdir /mnt/disk" '
			findmnt -n -o FSTYPE,SOURCE /mnt/disk >"$WORK/found"
			echo data >/mnt/disk/f
			umount /mnt/disk
			flock /srv/disk.img true
			debugfs -R "cat /f" /srv/disk.img 2>/dev/null >"$WORK/f"
			e2fsck -fn /srv/disk.img >"$WORK/fsck" 2>&1 || echo "e2fsck: $?" >>"$WORK/fsck"' \
			"$SCRATCH/mount-it"
		run cat "$WORK/found"
		# as root, a fuseblk mount on a loop device attached to the image
		assert_output --regexp '^fuseblk(\.fstitch)? +/dev/loop[0-9]+$'
		assert_equal "$(cat "$WORK/f")" data
		run cat "$WORK/fsck"
		refute_line --partial 'e2fsck:'
	done
}

@test "fstitch-mount(8) example: in the foreground, wait for the final flush" {
	fresh "$WORK/disk.img"
	# "..." is the reader's own work: here, writing a file
	in_ns fstitch-mount.8.6 '
		...() {
			until findmnt -n -t fuse.fstitch,fuseblk.fstitch /mnt >/dev/null; do sleep 0.05; done
			seq 20000 >/mnt/numbers
		}' ''
	# wait returned the daemon's status 0: everything is on disk
	assert_fsck_clean "$WORK/disk.img"
	assert_equal "$(debugfs -R 'cat /numbers' "$WORK/disk.img" 2>/dev/null)" "$(seq 20000)"
}

@test "fstitch-mount(8) examples: after unmounting a background daemon, flock and lock_wait wait for its flush" {
	local ex
	for ex in fstitch-mount.8.7 fstitch-mount.8.8; do
		fresh "$WORK/disk.img"
		# a daemon in the background with a minute of dirty data, on a
		# plain mount, whose unmount returns before the final flush
		in_ns "$ex" '
			fstitch-mount -o noblkdev,flush_interval=60 disk.img /mnt
			seq 30000 >/mnt/numbers' '
			if findmnt -n -t fuse.fstitch,fuseblk.fstitch /mnt >/dev/null; then
				cmp <(seq 30000) /mnt/numbers && echo "remount sees it" >"$WORK/seen"
			else
				# flock returned: the flush is over, the image complete
				e2fsck -fn disk.img >/dev/null 2>&1 && echo "clean after flock" >"$WORK/seen"
			fi'
		case $ex in
		*.7) assert_equal "$(cat "$WORK/seen")" "clean after flock" ;;
		*.8) assert_equal "$(cat "$WORK/seen")" "remount sees it" ;;
		esac
		assert_fsck_clean "$WORK/disk.img"
		rm "$WORK/seen"
	done
}

@test "fstitch-mount(8) example: statsfile= writes the final counters, which jq reads" {
	fresh "$WORK/disk.img"
	in_ns fstitch-mount.8.10 '
		...() {
			until findmnt -n -t fuse.fstitch,fuseblk.fstitch /mnt >/dev/null; do sleep 0.05; done
			seq 20000 >/mnt/numbers
		}' ''
	run -0 jq -r 'keys[]' "$WORK/ex.out"
	assert_line block_writes
	assert_line barriers
	run -0 jq -r '.block_writes > 0' "$WORK/ex.out"
	assert_output true
}

# ------------------------------------------------------------ fstitch-stat(8)

# A mount at /mnt/data with a minute's dirty data, block 1234 among it.
STAT_PRE='
	mkdir /mnt/data
	fstitch-mkfs -q /srv/disk.img 64M
	fstitch-mount -o flush_interval=600 /srv/disk.img /mnt/data
	head -c 2M /dev/zero >/mnt/data/zeros
	fstitch-stat --blocks --limit 100000 /mnt/data | awk "\$1 == 1234" | grep -q . ||
		{ echo "fixture: block 1234 is not dirty" >&2; exit 99; }'

@test "fstitch-stat(8) examples: the summary of the current directory's mount, and rates" {
	in_ns fstitch-stat.8.1 "$STAT_PRE
		cd /mnt/data" ''
	run cat "$WORK/ex.out"
	assert_line --regexp '^mode: +consistency softupdates, flush interval 10m00s, block size 1024$'
	assert_line --regexp '^blocks: +[0-9]+ cached, [1-9][0-9]* dirty'
	in_ns fstitch-stat.8.2 "$STAT_PRE" ''
	# a header, then five lines of rates, one a second
	run -0 grep -cE '^ *[0-9]' "$WORK/ex.out"
	assert_output 5
}

@test "fstitch-stat(8) examples: why block 1234 waits, the patch graph, dirty blocks in JSON" {
	in_ns fstitch-stat.8.3 "$STAT_PRE" ''
	run cat "$WORK/ex.out"
	assert_output --regexp '^block 1234 is '
	refute_output --partial 'clean'
	in_ns fstitch-stat.8.4 "$STAT_PRE" ''
	run -0 grep -c '<svg' "$WORK/graph.svg"
	run -0 grep -c 'class="node"' "$WORK/graph.svg"
	assert [ "$output" -ge 1 ]
	in_ns fstitch-stat.8.5 "$STAT_PRE" ''
	# the oldest dirty block, as an object
	run -0 jq -r '"\(.block) \(.state)"' "$WORK/ex.out"
	assert_output --regexp '^[0-9]+ [a-z]+$'
}

# ------------------------------------------------------------ fstitch(7)

@test "fstitch(7) example: make, mount and replace a file with two pgrun calls" {
	printf 'new contents\n' >"$WORK/home/new"
	in_ns fstitch.7.1 '' '
		cat /mnt/f >"$WORK/f"
		ls /mnt >"$WORK/ls"'
	assert_equal "$(cat "$WORK/f")" "new contents"
	run cat "$WORK/ls"
	refute_line f.tmp
	assert_fsck_clean "$WORK/disk.img"
}

# ------------------------------------------------------------ pg_create(3)

# pg_example ID: compile example ID of pg_create(3) as the body of a main()
# against the installed header (the fragment may keep an id it does not
# use again), run it in /mnt on a fresh mount to replace /mnt/file, and
# check that it did.  $WORK/requests gets the control requests it made:
# the daemon's count (pgstatus --summary) after less before, less the
# first reading's own request.
pg_example() {
	local src=$SCRATCH/pg_create_example.c
	{
		printf '%s\n' '#include <fcntl.h>' '#include <stdio.h>' '#include <string.h>' \
			'#include <unistd.h>' \
			'#include <fstitch/patchgroup.h>' '' \
			'int main(int argc, char **argv)' '{' \
			'	const char *data = argc > 1 ? argv[1] : "new";' \
			'	size_t len = strlen(data);' '	int fd;' ''
		cat "$(example "$1")"
		printf '%s\n' '	return 0;' '}'
	} >"$src"
	cc -std=gnu11 -Wall -Wno-unused-result -Wno-unused-variable -Werror -I"$FSTITCH_ROOT/lib" \
		-o "$SCRATCH/pgex" "$src" "$FSTITCH_BUILD/libfstitch.a" -pthread
	fresh "$WORK/disk.img"
	# the fragment runs as part of that program
	printf '%s\n' "$SCRATCH/pgex 'replaced contents'" >"$SCRATCH/pgex.sh"
	in_ns "$1" '
		fstitch-mount disk.img /mnt
		echo old >/mnt/file
		FSTITCH_CONTROL=/mnt "$FSTITCH_TOOLS/pgstatus" --summary >"$WORK/before"
		cd /mnt' '
		FSTITCH_CONTROL=/mnt "$FSTITCH_TOOLS/pgstatus" --summary >"$WORK/after"
		cat /mnt/file >"$WORK/file"
		ls /mnt >"$WORK/ls"' "$SCRATCH/pgex.sh"
	assert_equal "$(cat "$WORK/file")" "replaced contents"
	run cat "$WORK/ls"
	refute_line file.tmp
	echo $(($(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$WORK/after") -
		$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$WORK/before") - 1)) >"$WORK/requests"
}

@test "pg_create(3) example: the C fragment compiles against the installed header and replaces a file" {
	pg_example pg_create.3.1
	# as the page says: one request per call
	assert_equal "$(cat "$WORK/requests")" 9
}

@test "pg_create(3) example: the same replace with pg_switch makes two requests" {
	pg_example pg_create.3.2
	assert_equal "$(cat "$WORK/requests")" 2
}

# ------------------------------------------------------------ README.md

# readme_commands: the commands of README.md's indented code blocks, one a
# line, without their comments.
readme_commands() {
	awk '
		/^$/ { blank = 1; next }
		/^    [^ ]/ && (blank || inb) { inb = 1; blank = 0; l = substr($0, 5)
			sub(/[ \t]+#.*$/, "", l); print l; next }
		{ inb = 0; blank = 0 }
	' "$FSTITCH_ROOT/README.md"
}

@test "README.md commands: make demo and the benchmark help run as written" {
	run -0 readme_commands
	# every command is here, run or named below with the reason it is not
	assert_equal "$output" "$(printf '%s\n' 'make demo' 'make check' 'make bench' \
		'make bench BENCH_ARGS=--full' 'make bench BENCH_ARGS=--full FS_BENCH_ARGS="--runs 5"' \
		'bash tests/bench/fs_bench.sh --help')"
	local cmds=("${lines[@]}")
	cd "$FSTITCH_ROOT"
	run -0 bash -ec "${cmds[5]}"
	assert_line --partial 'Workloads: untar postmark replace mail meta'
	run -0 bash -ec "${cmds[0]}" </dev/null 3>&-
	assert_line --regexp '^demo: done; the image is clean'
}

@test "README.md commands: make check and make bench are valid make invocations" {
	# Not run here: make check would run this very test again, and make
	# bench takes 15 to 60 minutes (it is its own target).  make -n shows
	# that each names a target and variables the Makefile has.
	local c
	cd "$FSTITCH_ROOT"
	readme_commands | grep '^make \(check\|bench\)' >"$SCRATCH/cmds"
	assert_equal "$(wc -l <"$SCRATCH/cmds")" 4
	while IFS= read -r c; do
		run -0 bash -c "${c/make /make -n BUILD=$FSTITCH_BUILD }"
		assert_output --partial 'tests/'
	done <"$SCRATCH/cmds"
	run -0 bash -c 'make -n bench BENCH_ARGS=--full FS_BENCH_ARGS="--runs 5"'
	assert_output --partial -- '--full'
}

# ------------------------------------------------------------ the pg commands

# A mount at /mnt with the current directory in it.
PG_PRE='
	fstitch-mkfs -q disk.img 64M
	fstitch-mount disk.img /mnt
	cd /mnt'

@test "pgclose(1) example: a group for make install, closed after" {
	in_ns pgclose.1.1 "$PG_PRE
		printf 'install:\n\tmkdir -p inst && cp prog inst/prog\n' >Makefile
		echo binary >prog" '
		cat /mnt/inst/prog >"$WORK/prog"
		cd /mnt && '"$FSTITCH_TOOLS"'/pgstatus "$g" >"$WORK/status"'
	assert_equal "$(cat "$WORK/prog")" binary
	run cat "$WORK/status"
	assert_output --regexp '^id=[1-9][0-9]* .* state=([a-z]+,)*closed'
	assert_output --regexp ' changes=[1-9]'
}

@test "pgcreate(1) example: a group ordered after \$prev" {
	in_ns pgcreate.1.1 "$PG_PRE
		prev=\$(pgcreate)" '
		echo "$prev $g" >"$WORK/ids"
		cd /mnt && '"$FSTITCH_TOOLS"'/pgstatus "$g" >"$WORK/status"'
	read -r prev g <"$WORK/ids"
	assert [ "$g" -gt "$prev" ]
	run cat "$WORK/status"
	assert_output --regexp "^id=$g .* befores=1 "
}

@test "pgdepend(1) example: fill a group, order a second after it, fill that" {
	in_ns pgdepend.1.2 "$PG_PRE
		seq 3000 >data.new" '
		cat /mnt/data >"$WORK/data"
		ls /mnt >"$WORK/ls"'
	assert_equal "$(cat "$WORK/data")" "$(seq 3000)"
	run cat "$WORK/ls"
	refute_line data.tmp
	assert_fsck_clean "$WORK/disk.img"
}

@test "pgdepend(1) shows the message of a refused dependency word for word" {
	# "cannot add dependency 12 -> 9: group 12 is engaged": twelve groups,
	# the twelfth engaged by the pgrun that runs pgdepend.  The page's ids
	# are the groups' places: a mount's ids start at its start time.
	local want g
	in_ns pgdepend.1.1 "$PG_PRE
		for i in \$(seq 12); do pgcreate; done >\"$WORK/ids\"
		g12=\$(sed -n 12p \"$WORK/ids\") g9=\$(sed -n 9p \"$WORK/ids\")
		pgrun --group \"\$g12\" -- pgdepend \"\$g12\" \"\$g9\" 2>\"$WORK/err\" && exit 98" '' /dev/null
	mapfile -t g <"$WORK/ids"
	assert_equal "${#g[@]}" 12
	want=$(sed -e "s/\<12\>/${g[11]}/g" -e "s/\<9\>/${g[8]}/g" "$(example pgdepend.1.1)")
	assert_equal "$(cat "$WORK/err")" "$want"
}

@test "pgrun(1) examples: replace a file in two groups, sqlite3 with fsync as an ordering point" {
	in_ns pgrun.1.1 "$PG_PRE
		echo 'the new contents' >new
		echo old >f
		FSTITCH_CONTROL=/mnt $FSTITCH_TOOLS/pgstatus --summary >$WORK/before" '
		FSTITCH_CONTROL=/mnt "$FSTITCH_TOOLS/pgstatus" --summary >"$WORK/after"
		cat /mnt/f >"$WORK/f"'
	assert_equal "$(cat "$WORK/f")" "the new contents"
	# one control request per pgrun (and the first reading's own)
	assert_equal $(($(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$WORK/after") -
		$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$WORK/before"))) 3
	in_ns pgrun.1.2 "$PG_PRE
		printf '%s\n' 'create table t(x);' 'insert into t values(1);' \
			'insert into t values(2);' >updates.sql" '
		sqlite3 /mnt/db.sqlite "select count(*) from t; pragma integrity_check" >"$WORK/rows"'
	assert_equal "$(cat "$WORK/rows")" "$(printf '2\nok')"
}

@test "pgrun(1) example: move messages, each copy in a group before its removal" {
	in_ns pgrun.1.3 "$PG_PRE
		mkdir inbox archive
		for i in 1 2 3; do seq \$((i * 500)) >inbox/msg\$i; done" '
		ls /mnt/inbox >"$WORK/inbox"
		cat /mnt/archive/msg1 /mnt/archive/msg2 /mnt/archive/msg3 >"$WORK/archive"'
	run cat "$WORK/inbox"
	assert_output ''
	assert_equal "$(cat "$WORK/archive")" "$( (seq 500; seq 1000; seq 1500) )"
	assert_fsck_clean "$WORK/disk.img"
}

@test "pgsync(1) example: after pgsync the extracted files are on the image, the mount still up" {
	mkdir -p "$SCRATCH/rel/r"
	seq 4000 >"$SCRATCH/rel/r/file"
	tar -cf "$WORK/release.tar" -C "$SCRATCH/rel" r
	# a ten-minute flush interval: only pgsync puts the data on disk
	in_ns pgsync.1.1 '
		fstitch-mkfs -q disk.img 64M
		fstitch-mount -o flush_interval=600 disk.img /mnt
		cd /mnt
		cp "$WORK/release.tar" .' '
		mountpoint -q /mnt && echo mounted >"$WORK/up"
		debugfs -c -R "cat /r/file" "$WORK/disk.img" 2>/dev/null >"$WORK/ondisk"'
	assert_equal "$(cat "$WORK/up")" mounted
	assert_equal "$(cat "$WORK/ondisk")" "$(seq 4000)"
}
