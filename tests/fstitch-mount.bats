#!/usr/bin/env bats
# fstitch-mount: the FUSE daemon, with real tools on the mount and e2fsck
# (and remounts) as the judges.

load common

setup() {
	common_setup
	MOUNT=$(fstitch_cmd fstitch-mount)
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	mkdir -p "$MNT"
}

teardown() {
	common_teardown
	fstitch_mount_reap
}

# as_user CMD... and as_other CMD...: run CMD in $MNT as user and group
# 1000, or 1001, with no supplementary groups.
as_user() { (cd "$MNT" && setpriv --reuid 1000 --regid 1000 --clear-groups "$@"); }
as_other() { (cd "$MNT" && setpriv --reuid 1001 --regid 1001 --clear-groups "$@"); }

# new_image [SIZE] [mke2fs options...]: a fresh ext2 image in $IMG, made
# with fstitch-mkfs when it is built, with stock mke2fs otherwise.
new_image() {
	local size=${1:-64M}
	shift || true
	if [ -x "$FSTITCH_BIN/fstitch-mkfs" ] && [ $# -eq 0 ]; then
		make_image "$IMG" "$size"
	else
		make_stock_image "$IMG" "$size" "$@"
	fi
}

# tree_tar OUT N: a tar of the first N files of /usr/include (sorted, so the
# same machine always gives the same tree).
tree_tar() {
	(cd /usr/include && find . -type f | LC_ALL=C sort | head -n "$2" |
		tar -cf "$1" --no-recursion -T -)
}

@test "mounts, serves and unmounts; the image is e2fsck clean afterwards" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/d"
	echo hello >"$MNT/d/f"
	run cat "$MNT/d/f"
	assert_output hello
	# as root, a fuseblk mount on a loop device attached to the image
	L=$(findmnt -n -o SOURCE "$MNT")
	grep -q "^$L $MNT fuseblk.fstitch " /proc/mounts
	run -0 losetup -n -O BACK-FILE "$L"
	assert_output "$IMG"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	# and the content is what a second tool sees too
	run debugfs -R 'cat /d/f' "$IMG"
	assert_output --partial hello
}

@test "without -f it returns only once the mount is live, and reports failure" {
	new_image 32M
	run -0 "$MOUNT" "$IMG" "$MNT" 3>&-
	track_mount "$MNT" fuse
	mountpoint -q "$MNT"
	echo x >"$MNT/x"
	fusermount3 -u "$MNT"
	# the daemon flushes and exits after the unmount: its lock goes last
	for ((i = 0; i < 200; i++)); do
		flock -n "$IMG" true && break
		sleep 0.05
	done
	flock -n "$IMG" true
	assert_fsck_clean "$IMG"
	# a failure in the background child is the parent's exit status
	head -c 4M /dev/urandom >"$SCRATCH/junk.img"
	run -8 "$MOUNT" "$SCRATCH/junk.img" "$MNT" 3>&-
	run ! mountpoint -q "$MNT"
}

@test "cp -a and tar x of a few thousand files match the source, also after a remount" {
	new_image 192M
	tree_tar "$SCRATCH/tree.tar" 3000
	mkdir "$SCRATCH/ref"
	tar -xf "$SCRATCH/tree.tar" -C "$SCRATCH/ref"
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/tar" "$MNT/cp"
	tar -xf "$SCRATCH/tree.tar" -C "$MNT/tar"
	cp -a "$SCRATCH/ref/." "$MNT/cp/"
	diff -r "$SCRATCH/ref" "$MNT/tar"
	diff -r "$SCRATCH/ref" "$MNT/cp"
	n=$(find "$MNT/tar" -type f | wc -l)
	[ "$n" -ge 1000 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	diff -r "$SCRATCH/ref" "$MNT/tar"
	diff -r "$SCRATCH/ref" "$MNT/cp"
	fstitch_mount_stop "$MNT"
}

@test "concurrent writers, readers and renames leave every tree intact" {
	new_image 192M
	tree_tar "$SCRATCH/tree.tar" 1500
	mkdir "$SCRATCH/ref"
	tar -xf "$SCRATCH/tree.tar" -C "$SCRATCH/ref"
	fstitch_mount_start "$IMG" "$MNT"
	pids=()
	for i in 1 2 3; do
		(mkdir "$MNT/t$i" && tar -xf "$SCRATCH/tree.tar" -C "$MNT/t$i" &&
			mv "$MNT/t$i" "$MNT/u$i") &
		pids+=($!)
	done
	(for j in $(seq 200); do echo "$j" >"$MNT/r.tmp" && mv "$MNT/r.tmp" "$MNT/r"; done) &
	pids+=($!)
	# a reader walking the trees while they are renamed: names vanishing
	# under find are expected, so only the writers' results are judged
	(for j in $(seq 20); do find "$MNT" -type f >/dev/null 2>&1 || true; done) &
	pids+=($!)
	for p in "${pids[@]}"; do
		wait "$p"
	done
	for i in 1 2 3; do
		diff -r "$SCRATCH/ref" "$MNT/u$i"
	done
	assert_equal "$(cat "$MNT/r")" 200
	[ ! -e "$MNT/r.tmp" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "git init, add, commit and log work on the mount" {
	new_image 64M
	fstitch_mount_start "$IMG" "$MNT"
	cd "$MNT"
	git init -q repo
	cd repo
	for i in 1 2 3; do
		seq $((i * 1000)) >"file$i"
		git add "file$i"
		git -c user.name=t -c user.email=t@example.com commit -q -m "commit $i"
	done
	run git log --oneline
	assert_line --index 0 --partial "commit 3"
	assert_equal "${#lines[@]}" 3
	git fsck --strict
	cd /
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "sqlite3 transactions pass PRAGMA integrity_check" {
	new_image 64M
	fstitch_mount_start "$IMG" "$MNT"
	db=$MNT/t.db
	sqlite3 "$db" 'PRAGMA journal_mode=DELETE; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);'
	for i in $(seq 1 20); do
		sqlite3 "$db" "BEGIN; INSERT INTO t (v) SELECT hex(randomblob(200)) FROM
			(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<100)
			SELECT x FROM c); DELETE FROM t WHERE id % 7 = $((i % 7)); COMMIT;"
	done
	sqlite3 "$db" 'PRAGMA journal_mode=WAL; INSERT INTO t (v) VALUES ("wal");'
	run sqlite3 "$db" 'PRAGMA integrity_check;'
	assert_output ok
	count=$(sqlite3 "$db" 'SELECT count(*) FROM t;')
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	run sqlite3 "$db" 'PRAGMA integrity_check;'
	assert_output ok
	run sqlite3 "$db" 'SELECT count(*) FROM t;'
	assert_output "$count"
	fstitch_mount_stop "$MNT"
}

@test "links, symlinks, rename over, chmod, chown and touch -d survive a remount" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo one >"$MNT/a"
	ln "$MNT/a" "$MNT/b"
	ln -s a "$MNT/s"
	ln -s "$(printf 'x%.0s' $(seq 300))" "$MNT/long" # a slow symlink
	echo new >"$MNT/tmp"
	echo old >"$MNT/target"
	mv "$MNT/tmp" "$MNT/target"
	mkdir -p "$MNT/d1/sub" "$MNT/d2"
	echo in >"$MNT/d1/sub/f"
	mv "$MNT/d1/sub" "$MNT/d2/"
	chmod 4751 "$MNT/a"
	chown 1234:5678 "$MNT/a"
	touch -d '2001-02-03 04:05:06 UTC' "$MNT/a"
	mkfifo "$MNT/fifo"
	before=$(cd "$MNT" && stat -c '%n %s %a %u %g %h %Y %F' a b s target fifo d2/sub/f)
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	after=$(cd "$MNT" && stat -c '%n %s %a %u %g %h %Y %F' a b s target fifo d2/sub/f)
	assert_equal "$after" "$before"
	assert_equal "$(cat "$MNT/b")" one
	assert_equal "$(readlink "$MNT/s")" a
	assert_equal "$(readlink "$MNT/long" | wc -c)" 301
	assert_equal "$(cat "$MNT/target")" new
	[ ! -e "$MNT/tmp" ]
	[ ! -e "$MNT/d1/sub" ]
	assert_equal "$(stat -c %h "$MNT/a")" 2
	assert_equal "$(stat -c %Y "$MNT/a")" 981173106
	fstitch_mount_stop "$MNT"
}

@test "reads move access times as noatime, relatime and strictatime say" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo data >"$MNT/old"
	echo data >"$MNT/recent"
	touch -d '2001-02-03 04:05:06 UTC' "$MNT/old"
	fstitch_mount_stop "$MNT"
	# old: read a long time ago; recent: read after its last change
	fstitch_mount_start "$IMG" "$MNT"
	cat "$MNT/recent" >/dev/null
	fstitch_mount_stop "$MNT"
	atimes() { (cd "$MNT" && stat -c '%X' old recent | tr '\n' ' '); }
	fstitch_mount_start "$IMG" "$MNT" -o noatime
	before=$(atimes)
	cat "$MNT/old" "$MNT/recent" >/dev/null
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o noatime
	assert_equal "$(atimes)" "$before"
	fstitch_mount_stop "$MNT"
	# relatime (the default): only the access time older than a day moves
	fstitch_mount_start "$IMG" "$MNT"
	cat "$MNT/old" "$MNT/recent" >/dev/null
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o noatime
	read -r old recent <<<"$(atimes)"
	read -r old0 recent0 <<<"$before"
	[ "$old" -gt $((old0 + 86400)) ]
	assert_equal "$recent" "$recent0"
	fstitch_mount_stop "$MNT"
	# strictatime: every read moves it (a second later, so that it shows)
	sleep 1.1
	fstitch_mount_start "$IMG" "$MNT" -o strictatime
	cat "$MNT/recent" >/dev/null
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o noatime
	read -r old recent <<<"$(atimes)"
	[ "$recent" -gt "$recent0" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "the kernel checks permissions, and set-group-ID directories pass on their group" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 777 "$MNT"
	mkdir "$MNT/shared"
	chgrp 4242 "$MNT/shared"
	chmod 2775 "$MNT/shared"
	touch "$MNT/shared/f"
	mkdir "$MNT/shared/sub"
	assert_equal "$(stat -c '%g' "$MNT/shared/f")" 4242
	assert_equal "$(stat -c '%a %g' "$MNT/shared/sub")" "2755 4242"
	# another user (working inside the mount, as the scratch directories
	# above it are private): owns what it creates, and cannot read root's
	# 0600 file or remove from a directory it may not write
	as_user sh -c 'echo mine >u'
	assert_equal "$(stat -c '%u %g' "$MNT/u")" "1000 1000"
	assert_equal "$(as_user cat u)" mine
	echo secret >"$MNT/secret"
	chmod 600 "$MNT/secret"
	run ! as_user cat secret
	assert_output --partial "Permission denied"
	run ! as_user rm -f shared/f
	assert_output --partial "Permission denied"
	[ -e "$MNT/shared/f" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "open with O_TRUNC by another user drops set-user-ID and set-group-ID, as a truncate does" {
	new_image 8M
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 777 "$MNT"
	for f in a b c d; do
		echo abc >"$MNT/$f"
		chown 1000:1000 "$MNT/$f"
	done
	chmod 6755 "$MNT/a" "$MNT/c" "$MNT/d"
	# set-group-ID without group execute is not a privilege: it stays
	chmod 2745 "$MNT/b"
	run -0 as_user sh -c ': >a; : >b'
	# truncate(2) by the same user, which the kernel handles itself
	run -0 as_user truncate -s 0 d
	# root (CAP_FSETID) keeps them
	: >"$MNT/c"
	run -0 stat -c '%n %a %s' "$MNT/a" "$MNT/b" "$MNT/c" "$MNT/d"
	assert_output "$MNT/a 755 0
$MNT/b 2745 0
$MNT/c 6755 0
$MNT/d 755 0"
	# and mtime and ctime are one reading of the clock
	assert_equal "$(stat -c %y "$MNT/a")" "$(stat -c %z "$MNT/a")"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "a write, truncate, fallocate or chown drops set-user-ID bits and capabilities, as on Linux" {
	new_image 8M
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 777 "$MNT"
	for op in write truncate fallocate otrunc chown chown-1 other-1 root-1 rootwrite \
		keepsgid owrite otruncate ofallocate roottruncate; do
		f=$MNT/$op
		echo abc >"$f"
		chown 1000:1000 "$f"
		chmod 6777 "$f"
		setcap cap_net_raw+ep "$f"
	done
	# set-group-ID without group execute is not a privilege: it stays
	chmod 2767 "$MNT/keepsgid"
	as_user sh -c 'echo more >>write; echo more >>keepsgid; echo new >otrunc'
	as_user truncate -s 100 truncate
	as_user fallocate -l 8192 fallocate
	# by a user who does not own them, which the kernel leaves to the
	# change itself (the owner's are dropped before it: see below)
	as_other sh -c 'echo more >>owrite'
	as_other truncate -s 100 otruncate
	as_other fallocate -l 8192 ofallocate
	chown 1001 "$MNT/chown"
	# chown(f, -1, -1) drops them for the owner and for root; another
	# user's is refused, as on Linux, where it would be a mode change
	as_user /usr/bin/python3 -c 'import os; os.chown("chown-1", -1, -1)'
	run -1 as_other /usr/bin/python3 -c 'import os; os.chown("other-1", -1, -1)'
	assert_output --partial 'PermissionError: [Errno 1] Operation not permitted'
	/usr/bin/python3 -c 'import os, sys; os.chown(sys.argv[1], -1, -1)' "$MNT/root-1"
	# root (CAP_FSETID) keeps the bits, but not the capability
	echo more >>"$MNT/rootwrite"
	truncate -s 10 "$MNT/roottruncate"
	# (stat at once: the kernel must not answer from a stale cache)
	run -0 stat -c '%n %a' "$MNT"/{write,truncate,fallocate,otrunc,chown,chown-1,other-1,root-1,rootwrite,keepsgid,owrite,otruncate,ofallocate,roottruncate}
	assert_output "$MNT/write 777
$MNT/truncate 777
$MNT/fallocate 777
$MNT/otrunc 777
$MNT/chown 777
$MNT/chown-1 777
$MNT/other-1 6777
$MNT/root-1 777
$MNT/rootwrite 6777
$MNT/keepsgid 2767
$MNT/owrite 777
$MNT/otruncate 777
$MNT/ofallocate 777
$MNT/roottruncate 6777"
	# (the kernel removes the capability before it asks the daemon, also
	# for another user's refused chown(f, -1, -1), where Linux's ext2
	# keeps it: fstitch-mount(8))
	run -0 getcap -r "$MNT"
	assert_output ""
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	# and on disk
	run -0 debugfs -R "ea_list /write" "$IMG"
	refute_output --partial capability
	run -0 debugfs -R "stat /fallocate" "$IMG"
	assert_output --regexp 'Mode: +0777'
}

@test "set-group-ID without group execute goes when the changer is outside the file's group" {
	new_image 8M
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 777 "$MNT"
	local all="own out outgrp trunc falloc otrunc rootchgrp chgrp chown-1 rootwrite"
	for f in $all; do
		echo abc >"$MNT/$f"
		chown 1000:1000 "$MNT/$f"
		chmod 2767 "$MNT/$f"
	done
	chown 1000:1002 "$MNT/chgrp" "$MNT/chown-1"
	as() { (cd "$MNT" && setpriv --reuid "$1" --regid "$1" "${@:2}"); }
	# in the group, as the file-system group or a supplementary one
	as 1000 --clear-groups sh -c 'echo x >>own'
	as 1001 --groups 1000 sh -c 'echo x >>outgrp'
	# outside it: a write, truncate, fallocate and O_TRUNC open
	as 1001 --clear-groups sh -c 'echo x >>out'
	as 1001 --clear-groups truncate -s 1 trunc
	as 1001 --clear-groups fallocate -l 8192 falloc
	as 1001 --clear-groups sh -c ': >otrunc'
	# the owner's chgrp, and chown(f, -1, -1), from outside the old group
	as 1000 --groups 1003 chgrp 1003 chgrp
	as 1000 --clear-groups /usr/bin/python3 -c 'import os; os.chown("chown-1", -1, -1)'
	# root is outside group 1000 but holds CAP_FSETID
	chgrp 1001 "$MNT/rootchgrp"
	echo x >>"$MNT/rootwrite"
	# (what the kernel's own ext2 answers for each, on Linux 6.18)
	run -0 bash -c "cd '$MNT' && stat -c '%n %a' $all"
	assert_output "own 2767
out 767
outgrp 2767
trunc 767
falloc 767
otrunc 767
rootchgrp 2767
chgrp 767
chown-1 767
rootwrite 2767"
	# a chown that drops set-user-ID checks the new group as well, for a
	# caller without CAP_FSETID (root, with it off the bounding set)
	for f in ng-out ng-nosuid ng-in; do
		echo x >"$MNT/$f"
		chown 1000:1000 "$MNT/$f"
		chmod 6765 "$MNT/$f"
	done
	chmod 2765 "$MNT/ng-nosuid"
	nofsetid() { (cd "$MNT" && setpriv --bounding-set -fsetid "$@"); }
	nofsetid --groups 1000 chgrp 1002 ng-out
	nofsetid --groups 1000 chgrp 1002 ng-nosuid
	nofsetid --groups 1000,1002 chgrp 1002 ng-in
	run -0 bash -c "cd '$MNT' && stat -c '%n %a %g' ng-out ng-nosuid ng-in"
	assert_output "ng-out 765 1002
ng-nosuid 2765 1002
ng-in 2765 1002"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R "stat /out" "$IMG"
	assert_output --regexp 'Mode: +0767'
	run -0 debugfs -R "stat /ng-out" "$IMG"
	assert_output --regexp 'Mode: +0765'
}

@test "a write or truncate refused as too large drops no set-ID bit, as on Linux" {
	# 1 KiB blocks: the largest file is about 16 GiB
	new_image 8M -b 1024
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	chmod 777 "$MNT"
	for f in w t ok ow ot oo; do
		echo abc >"$MNT/$f"
		chown 1000:1000 "$MNT/$f"
		chmod 6777 "$MNT/$f"
	done
	# by another user, and by the owner (whose write the kernel precedes
	# with an empty change of its own)
	as() { (cd "$MNT" && setpriv --reuid "$1" --regid "$1" --clear-groups "${@:2}"); }
	local u o
	for u in 1001 1000; do
		o=
		[ "$u" = 1000 ] && o=o
		run -1 as "$u" /usr/bin/python3 -c \
			'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.pwrite(fd, b"x", 1 << 36)' \
			"${o}w"
		assert_output --partial 'File too large'
		run -1 as "$u" truncate -s 64G "${o}t"
		assert_output --partial 'File too large'
	done
	as 1001 truncate -s 1M ok
	as 1000 sh -c 'echo x >>oo'
	# (what the kernel's own ext2 answers, on Linux 6.18)
	run -0 bash -c "cd '$MNT' && stat -c '%n %a %s' w t ok ow ot oo"
	assert_output "w 6777 4
t 6777 4
ok 777 1048576
ow 6777 4
ot 6777 4
oo 777 6"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R "stat /t" "$IMG"
	assert_output --regexp 'Mode: +06777'
}

@test "O_TMPFILE makes a file with no name, which linkat names or which goes at its close" {
	local probe=$FSTITCH_ROOT/tests/tools/tmpfile.py t free
	# more than 12 blocks of 1 KiB: an indirect block too
	seq 5000 >"$SCRATCH/data"
	for t in ext2 ext3; do
		make_stock_image "$IMG" 8M -t $t
		fstitch_mount_start "$IMG" "$MNT"
		free=$(stat -f -c %d "$MNT")
		run -0 "$probe" "$MNT" "$SCRATCH/data" t
		assert_output "nlink 0
linked 1"
		cmp "$MNT/t" "$SCRATCH/data"
		assert_equal "$(stat -c '%h %a %s' "$MNT/t")" "1 640 $(stat -c %s "$SCRATCH/data")"
		# not named: it goes at its close, blocks and all
		run -0 "$probe" "$MNT" "$SCRATCH/data"
		assert_output "nlink 0"
		wait_free_inodes "$MNT" $((free - 1))
		# O_EXCL: never to be named (the kernel refuses the link)
		run -0 "$probe" --excl "$MNT" "$SCRATCH/data" x
		assert_output "nlink 0
link: No such file or directory"
		[ ! -e "$MNT/x" ]
		wait_free_inodes "$MNT" $((free - 1))
		fstitch_mount_stop "$MNT"
		assert_fsck_clean "$IMG"
		rm -f "$SCRATCH/t.out"
		debugfs -R "dump /t $SCRATCH/t.out" "$IMG" 2>/dev/null
		cmp "$SCRATCH/t.out" "$SCRATCH/data"
	done
}

# tmpfile_record [fstitch-mount options...]: a daemon run, recorded and
# written only at its flush point and at the unmount (as record_run), in
# which one O_TMPFILE file is held open over the flush point and dropped,
# and another is written and named t.
tmpfile_record() {
	local probe=$FSTITCH_ROOT/tests/tools/tmpfile.py free
	make_stock_image "$IMG" 8M
	seq 5000 >"$SCRATCH/data"
	mkdir -p "$SCRATCH/rec"
	export FSTITCH_RECORD=$SCRATCH/rec/log
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400 "$@"
	unset FSTITCH_RECORD
	free=$(stat -f -c %d "$MNT")
	"$probe" --flush "$MNT/.flushed" "$MNT" "$SCRATCH/data" >/dev/null
	# (freed once the kernel forgets it: before the unmount's writes)
	wait_free_inodes "$MNT" $((free - 1))
	"$probe" "$MNT" "$SCRATCH/data" t >/dev/null
	fstitch_mount_stop "$MNT"
	[ -s "$SCRATCH/rec/log" ]
}

# The check run in every state: nothing dangerous to e2fsck, and /t is
# absent or holds the whole data.
t_absent_or_whole() {
	local f=$FSTITCH_IMAGE.t rc=0
	fsck_not_dangerous || return 1
	debugfs -R "stat /t" "$FSTITCH_IMAGE" 2>&1 | grep -q 'File not found' && return 0
	debugfs -R "dump /t $f" "$FSTITCH_IMAGE" >/dev/null 2>&1
	if ! cmp -s "$f" "$SCRATCH/data"; then
		echo "/t is there without its whole data"
		rc=1
	fi
	rm -f "$f"
	return $rc
}

@test "crash states: an O_TMPFILE file is named whole or not at all, and one held open only leaks" {
	tmpfile_record
	export -f t_absent_or_whole
	export SCRATCH
	assert_crash_pass softupdates "$SCRATCH/rec" --fsck none --no-mount -- bash -c t_absent_or_whole
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	assert_fsck_clean "$SCRATCH/final.img"
}

@test "the same O_TMPFILE crash states with consistency=none are caught" {
	tmpfile_record -o consistency=none
	export -f t_absent_or_whole
	export SCRATCH
	assert_crash_fail consistency=none "$SCRATCH/rec" --fsck none --no-mount -- bash -c t_absent_or_whole
}

@test "the blocks reserved for root (-m) are refused to other users, as Linux's ext2 does" {
	# half the blocks kept for root (mke2fs -m 50, stock mke2fs)
	new_image 4M -m 50
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	mkdir "$MNT/u"
	chmod 777 "$MNT/u"
	resv=$(dumpe2fs -h "$IMG" 2>/dev/null | sed -n 's/^Reserved block count: *//p')
	[ "$resv" -gt 1000 ]
	run ! as_user dd if=/dev/zero of=u/big bs=64k count=100
	assert_output --partial "No space left on device"
	# what is left is root's: none of it available, all of it free
	assert_equal "$(stat -f -c %a "$MNT")" 0
	free=$(stat -f -c %f "$MNT")
	[ "$free" -ge "$resv" ] && [ "$free" -le $((resv + 1)) ]
	# root may still write there
	head -c 65536 /dev/zero >"$MNT/root-file"
	[ "$(stat -c %s "$MNT/root-file")" -eq 65536 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "the reserve is open to a member of the reserved group by a supplementary group" {
	new_image 4M -m 50
	# the reserved group: 2000 (tune2fs -g), which user 1000 is not in by
	# its primary group
	run -0 tune2fs -g 2000 "$IMG"
	fstitch_mount_start "$IMG" "$MNT" -o allow_other
	mkdir "$MNT/u"
	chmod 777 "$MNT/u"
	as_user() { (cd "$MNT" && setpriv --reuid 1000 --regid 1000 "$@"); }
	# fill what is not reserved, as a user of no such group
	run ! as_user --clear-groups dd if=/dev/zero of=u/fill bs=64k count=100
	assert_output --partial "No space left on device"
	run ! as_user --clear-groups dd if=/dev/zero of=u/a bs=64k count=16
	assert_output --partial "No space left on device"
	# a member of group 2000 among its supplementary groups may take it
	run -0 as_user --groups 2000 dd if=/dev/zero of=u/b bs=64k count=16
	assert_equal "$(stat -c %s "$MNT/u/b")" 1048576
	# (CAP_SYS_RESOURCE, which opens it too, is off every process's
	# bounding set on the machines this runs on: test_procstatus reads it)
	# the same user without either still may not
	run ! as_user --clear-groups dd if=/dev/zero of=u/d bs=64k count=16
	assert_output --partial "No space left on device"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "a sparse file cut before its only far block keeps no empty indirect blocks" {
	local t l
	for t in ext2 ext3; do
		make_stock_image "$IMG" 256M -t $t -b 1024
		fstitch_mount_start "$IMG" "$MNT"
		# one block in the single, double and triple indirect trees
		for l in 17 785 131345; do
			dd if=/dev/zero of="$MNT/f$l" bs=1024 count=1 seek=$l status=none
			truncate -s $((l * 1024)) "$MNT/f$l"
			[ "$(stat -c %b "$MNT/f$l")" = 0 ] ||
				fail "$t: a file cut at lblk $l holds $(stat -c %b "$MNT/f$l") sectors"
		done
		# a kept block beside the cut keeps its indirect blocks
		dd if=/dev/zero of="$MNT/g" bs=1024 count=3 seek=783 status=none
		truncate -s $((785 * 1024)) "$MNT/g"
		assert_equal "$(stat -c %b "$MNT/g")" 8
		fstitch_mount_stop "$MNT"
		assert_fsck_clean "$IMG"
	done
}

@test "an open directory that rmdir removed has size 0 and no links, as on Linux" {
	new_image 8M
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/d"
	run -0 python3 - "$MNT/d" <<-'EOF'
		import os, sys
		fd = os.open(sys.argv[1], os.O_RDONLY)
		os.rmdir(sys.argv[1])
		st = os.fstat(fd)
		print(st.st_size, st.st_nlink, st.st_blocks, os.listdir(fd))
	EOF
	# (its block stays allocated until it is closed)
	assert_output "0 0 2 []"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "a loop of mkdir and rmdir, or ln -s and rm, grows its directory a few blocks, not one each" {
	make_stock_image "$IMG" 64M -t ext2 -b 1024
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/d" "$MNT/s"
	# (60 iterations: before, the first directory grew to 61440 bytes)
	for i in $(seq 60); do
		mkdir "$MNT/d/e$i"
		rmdir "$MNT/d/e$i"
		ln -s x "$MNT/s/l$i"
		rm "$MNT/s/l$i"
	done
	# removals not yet on disk are kept clear of for a few blocks (4 at
	# most), then written over
	[ "$(stat -c %s "$MNT/d")" -le 5120 ] || fail "d: $(stat -c %s "$MNT/d") bytes"
	[ "$(stat -c %s "$MNT/s")" -le 5120 ] || fail "s: $(stat -c %s "$MNT/s") bytes"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "an unlinked file stays readable while open and is freed on close" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	head -c 3M /dev/urandom >"$SCRATCH/data"
	cp "$SCRATCH/data" "$MNT/f"
	sync -f "$MNT"
	free0=$(stat -f -c %f "$MNT")
	exec 5<"$MNT/f"
	rm "$MNT/f"
	[ ! -e "$MNT/f" ]
	cmp "$SCRATCH/data" /dev/fd/5
	exec 5<&-
	# the release reaches the daemon asynchronously
	for ((i = 0; i < 100; i++)); do
		[ "$(stat -f -c %f "$MNT")" -gt "$free0" ] && break
		sleep 0.05
	done
	[ "$(stat -f -c %f "$MNT")" -gt "$free0" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "an unlinked file the kernel holds opens again through /proc/PID/fd until its last close" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	head -c 3M /dev/urandom >"$SCRATCH/data"
	cp "$SCRATCH/data" "$MNT/f"
	cp "$SCRATCH/data" "$MNT/g"
	sync -f "$MNT"
	free0=$(stat -f -c %f "$MNT")
	# another process opens this shell's descriptor anew
	exec 5<"$MNT/f"
	rm "$MNT/f"
	cmp "$SCRATCH/data" "/proc/$BASHPID/fd/5"
	exec 5<&-
	# only an O_PATH descriptor holds g (no open): reopened for reading
	# and writing through /proc/self/fd, as on the kernel's ext2
	run -0 python3 - "$MNT/g" "$SCRATCH/data" <<-'EOF'
		import os, sys
		path, want = sys.argv[1], open(sys.argv[2], "rb").read()
		p = os.open(path, os.O_PATH)
		os.unlink(path)
		fd = os.open("/proc/self/fd/%d" % p, os.O_RDWR)
		got = os.pread(fd, len(want) + 1, 0)
		os.pwrite(fd, b"tail", len(want))
		os.close(fd)
		fd = os.open("/proc/self/fd/%d" % p, os.O_RDONLY)
		print(got == want, os.fstat(fd).st_nlink, os.pread(fd, 8, len(want)))
		os.close(fd)
		os.close(p)
	EOF
	assert_output "True 0 b'tail'"
	# both are freed once the kernel lets go (FORGET follows the last
	# close): their data blocks at least
	want=$((free0 + 2 * 3145728 / $(stat -f -c %S "$MNT")))
	for ((i = 0; i < 100; i++)); do
		[ "$(stat -f -c %f "$MNT")" -ge "$want" ] && break
		sleep 0.05
	done
	[ "$(stat -f -c %f "$MNT")" -ge "$want" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R 'ls /' "$IMG"
	refute_output --regexp ' [fg] '
}

# handle_of PATH: the file handle the kernel gives out for PATH
# (name_to_handle_at), as FUSE encodes it: "NODEID GENERATION".
handle_of() {
	python3 - "$1" <<-'EOF'
		import ctypes, os, struct, sys
		libc = ctypes.CDLL(None, use_errno=True)
		buf = ctypes.create_string_buffer(8 + 128)
		struct.pack_into("I", buf, 0, 128)
		mnt = ctypes.c_int()
		if libc.name_to_handle_at(-100, sys.argv[1].encode(), buf, ctypes.byref(mnt), 0):
		    sys.exit("name_to_handle_at: " + os.strerror(ctypes.get_errno()))
		hi, lo, gen = struct.unpack_from("III", buf, 8)
		print(hi << 32 | lo, gen)
	EOF
}

@test "an inode number reused after a delete comes back with a new generation" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo old >"$MNT/f"
	read -r ino gen1 < <(handle_of "$MNT/f")
	fstitch_mount_stop "$MNT"
	assert_equal "$(debugfs -R 'stat /f' "$IMG" 2>/dev/null | grep -o 'Generation: [0-9]*')" \
		"Generation: $gen1"
	# a later mount frees the number, and the next one hands it out
	# again: each mount is a new daemon, so nothing it remembers helps
	fstitch_mount_start "$IMG" "$MNT"
	rm "$MNT/f"
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT"
	echo new >"$MNT/g"
	read -r ino2 gen2 < <(handle_of "$MNT/g")
	assert_equal "$ino2" "$ino"
	assert_not_equal "$gen2" "$gen1"
	# and within one mount, once the free is on disk
	rm "$MNT/g"
	sync -f "$MNT"
	echo newer >"$MNT/h"
	read -r ino3 gen3 < <(handle_of "$MNT/h")
	assert_equal "$ino3" "$ino"
	assert_not_equal "$gen3" "$gen2"
	fstitch_mount_stop "$MNT"
	assert_equal "$(debugfs -R 'stat /h' "$IMG" 2>/dev/null | grep -o 'Generation: [0-9]*')" \
		"Generation: $gen3"
	assert_fsck_clean "$IMG"
}

@test "a change through one name shows at once through another: attributes are cached, never stale" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	cd "$MNT"
	printf abc >f
	stat -c %s g 2>/dev/null || true # a negative entry for g, cached
	ln f g
	assert_equal "$(stat -c '%h %s' g f)" "$(printf '2 3\n2 3')"
	printf defg >>f
	assert_equal "$(stat -c %s g)" 7
	chmod 600 f
	assert_equal "$(stat -c %a g)" 600
	truncate -s 2 g
	assert_equal "$(stat -c %s f)" 2
	assert_equal "$(cat f)" ab
	rm g
	assert_equal "$(stat -c %h f)" 1
	[ ! -e g ]
	# rename over: the name now holds the other inode, and the inode it
	# replaced, still linked elsewhere, lost one link
	ln f k
	printf xyz >h
	ino=$(stat -c %i h)
	mv h f
	assert_equal "$(stat -c '%i %s %h' f)" "$ino 3 1"
	assert_equal "$(stat -c '%s %h' k)" "2 1"
	[ ! -e h ]
	mkdir d
	assert_equal "$(stat -c %h .)" 4
	mv d d2
	rmdir d2
	assert_equal "$(stat -c %h .)" 3
	cd /
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "close is no FUSE request: the kernel sends one FLUSH, is told there is nothing to do, and stops" {
	new_image 32M
	# -d: libfuse prints every request the daemon gets
	fstitch_mount_start "$IMG" "$MNT" -d
	for i in 1 2 3 4 5; do
		echo "$i" >"$MNT/f$i"
	done
	for i in 1 2 3 4 5; do
		assert_equal "$(cat "$MNT/f$i")" "$i"
	done
	# ten closes, ten FLUSH requests if the daemon took them
	n=$(grep -ac 'opcode: FLUSH' "$FSTITCH_MOUNT_LOG")
	[ "$n" -le 1 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "a sparse file beyond 4 GiB keeps its size and allocates only what was written" {
	new_image 64M
	fstitch_mount_start "$IMG" "$MNT"
	truncate -s 5G "$MNT/sparse"
	printf 'tail' | dd of="$MNT/sparse" bs=1 seek=$((5 * 1024 * 1024 * 1024 - 4)) conv=notrunc status=none
	printf 'head' | dd of="$MNT/sparse" conv=notrunc status=none
	assert_equal "$(stat -c %s "$MNT/sparse")" 5368709120
	# two data blocks and their indirect blocks: far below a megabyte
	kib=$(du -k "$MNT/sparse" | cut -f1)
	[ "$kib" -lt 1024 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	assert_equal "$(stat -c %s "$MNT/sparse")" 5368709120
	assert_equal "$(tail -c 4 "$MNT/sparse")" tail
	assert_equal "$(head -c 4 "$MNT/sparse")" head
	# a hole in the middle reads as zeros
	run -0 cmp -n 4096 <(dd if="$MNT/sparse" bs=4096 skip=100000 count=1 status=none) /dev/zero
	fstitch_mount_stop "$MNT"
}

@test "a directory with 20000 entries lists every one, also after a remount" {
	new_image 64M -N 30000
	fstitch_mount_start "$IMG" "$MNT"
	mkdir "$MNT/big"
	(cd "$MNT/big" && seq -f 'entry-%05g' 1 20000 | xargs touch)
	assert_equal "$(ls -f "$MNT/big" | grep -c '^entry-')" 20000
	rm "$MNT/big/entry-10000"
	[ ! -e "$MNT/big/entry-10000" ]
	[ -e "$MNT/big/entry-10001" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	fstitch_mount_start "$IMG" "$MNT"
	assert_equal "$(ls "$MNT/big" | wc -l)" 19999
	fstitch_mount_stop "$MNT"
}

@test "mounting an image that was not cleanly unmounted warns once, and mounts" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	echo data >"$MNT/f"
	kill_mount
	fstitch_mount_start "$IMG" "$MNT"
	ls "$MNT" >/dev/null
	fstitch_mount_stop "$MNT"
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output "fstitch-mount: warning: '$IMG' was not cleanly unmounted; run e2fsck"
	# still unclean after a clean unmount, until e2fsck has run
	fstitch_mount_start "$IMG" "$MNT"
	fstitch_mount_stop "$MNT"
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output --partial "was not cleanly unmounted"
	e2fsck -fy "$IMG" >/dev/null 2>&1 || true
	fstitch_mount_start "$IMG" "$MNT"
	fstitch_mount_stop "$MNT"
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output ""
}

# kill_mount: kill -9 the daemon on $MNT and clear its dead mount, so that
# the image holds what was on disk at that moment.
kill_mount() {
	kill -9 "$FSTITCH_MOUNT_PID"
	wait "$FSTITCH_MOUNT_PID" 2>/dev/null || true
	fuse_unmount "$MNT"
}

# in_image PATH...: each path's contents as debugfs reads them from $IMG
# (a directory's names, a file's data), one line each.
in_image() {
	local p
	for p in "$@"; do
		if [ "$(debugfs -R "stat $p" "$IMG" 2>/dev/null | sed -n 's/.*Type: \([a-z]*\).*/\1/p')" = directory ]; then
			# (ls -p: /INO/MODE/UID/GID/NAME/SIZE/; a freed entry has INO 0)
			echo "$p: $(debugfs -R "ls -p $p" "$IMG" 2>/dev/null |
				awk -F/ '$2 + 0 > 0 && $6 != "." && $6 != ".." { print $6 }' | LC_ALL=C sort | tr '\n' ' ')"
		else
			echo "$p: $(debugfs -R "cat $p" "$IMG" 2>/dev/null)"
		fi
	done
}

@test "fsync of a directory puts its new, removed and renamed names on disk" {
	new_image 32M
	# (nothing is written but what a sync asks for)
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400
	mkdir "$MNT/p"
	echo old >"$MNT/p/f"
	echo gone >"$MNT/p/g"
	sync "$MNT/p/f" "$MNT/p/g" "$MNT/p" "$MNT"
	# the careful replace: the new file's data, the rename, the directory
	echo new >"$MNT/p/tmp"
	sync "$MNT/p/tmp"
	mv "$MNT/p/tmp" "$MNT/p/f"
	rm "$MNT/p/g"
	touch "$MNT/p/n"
	mkdir "$MNT/p/d"
	sync "$MNT/p"
	# (after the last sync: lost)
	echo lost >"$MNT/p/lost"
	kill_mount
	run -0 in_image /p /p/f /p/d
	assert_output "/p: d f n 
/p/f: new
/p/d: "
	e2fsck -fy "$IMG" >/dev/null 2>&1 || true
	run -0 e2fsck -fn "$IMG"
}

@test "a SQLite commit with synchronous=extra survives a kill -9 of the daemon" {
	new_image 32M
	# (nothing is written but what a sync asks for)
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400
	sqlite3 "$MNT/db" 'pragma journal_mode=delete; create table t(x); insert into t values (1);' >/dev/null
	# under synchronous=extra SQLite fsyncs the directory after removing
	# its rollback journal: the removal is what commits
	sqlite3 "$MNT/db" 'pragma synchronous=extra; insert into t values (2);'
	kill_mount
	e2fsck -fy "$IMG" >/dev/null 2>&1 || true
	fstitch_mount_start "$IMG" "$MNT"
	# (a journal left behind would roll the commit back)
	[ ! -e "$MNT/db-journal" ]
	run -0 sqlite3 "$MNT/db" 'select group_concat(x) from t;'
	assert_output "1,2"
	fstitch_mount_stop "$MNT"
}

@test "chattr +S and +D, and -o sync and dirsync, put a change on disk before it returns" {
	# (128-byte inodes: an ACL takes a block of its own)
	new_image 32M -I 128
	# (nothing is written but what a sync asks for)
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400
	mkdir "$MNT/plain" "$MNT/D" "$MNT/S"
	echo old >"$MNT/D/old"
	chattr +D "$MNT/D"
	chattr +S "$MNT/S"
	setfacl -d -m u:1234:rwx "$MNT/S"
	sync "$MNT/D/old" "$MNT/plain" "$MNT/D" "$MNT/S" "$MNT"
	touch "$MNT/D/a"
	rm "$MNT/D/old"
	# a new file in S takes its sync flag: its name and its data, and
	# the ACLs it takes from S (which its name does not wait for)
	echo data >"$MNT/S/f"
	mkdir "$MNT/S/sub"
	# (and one in a plain directory, after the last sync, is lost)
	echo lost >"$MNT/plain/g"
	run -0 lsattr "$MNT/S/f"
	assert_output --regexp '^--S-'
	kill_mount
	run -0 in_image /plain /D /S /S/f
	assert_output "/plain: 
/D: a 
/S: f sub 
/S/f: data"
	run -0 debugfs -R "ea_list /S/f" "$IMG"
	assert_output --partial "system.posix_acl_access (28) = 01 00 00 00 01 00 06 00 02 00 07 00 d2 04 00 00"
	run -0 debugfs -R "ea_list /S/sub" "$IMG"
	assert_output --partial "system.posix_acl_default (28) = 01 00 00 00 01 00 07 00 02 00 07 00 d2 04 00 00"
	assert_output --partial "system.posix_acl_access (28)"
	e2fsck -fy "$IMG" >/dev/null 2>&1 || true

	# -o dirsync: names in every directory
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400,dirsync
	mkdir "$MNT/plain/sub"
	mv "$MNT/D/a" "$MNT/plain/a"
	# (a name, not data)
	echo lost >"$MNT/plain/h"
	kill_mount
	run -0 in_image /plain /D /plain/h
	assert_output "/plain: a h sub 
/D: 
/plain/h: "
	e2fsck -fy "$IMG" >/dev/null 2>&1 || true

	# -o sync: every change; a file's data and attributes as well
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400,sync
	echo kept >"$MNT/plain/h"
	chmod 600 "$MNT/plain/a"
	kill_mount
	run -0 in_image /plain/h
	assert_output "/plain/h: kept"
	run -0 debugfs -R "stat /plain/a" "$IMG"
	assert_output --regexp 'Mode: +0600'
	run -0 e2fsck -fn "$IMG"
}

# Crash states are checked with fstitch-crash (common.bash): the daemon
# records every block write and barrier (FSTITCH_RECORD) of the workload
# of crash_workload into $SCRATCH/rec/log, writing only at its flush point
# and at the unmount (so the log is the same every run), and every state
# the crash model gives is checked.

# record_run [fstitch-mount options...]: the workload recorded under a
# daemon with those options.
record_run() {
	crash_workload_image "$IMG" "$MNT"
	crash_workload_record "$IMG" "$MNT" "$@"
}

# Power failure, not just a killed process: the recorder's log gives every
# state the disk may be in (completed rounds plus any subset of the round in
# flight), so this is where ordering shows, and where consistency=none fails.
@test "power failure at any crash state of a daemon run leaves only benign damage" {
	record_run
	assert_crash_pass softupdates "$SCRATCH/rec" --fsck none --no-mount -- bash -c fsck_not_dangerous
	# after the last write (the final flush) the image is clean
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	assert_fsck_clean "$SCRATCH/final.img"
}

@test "the same power failures with consistency=none do leave dangerous damage" {
	record_run -o consistency=none
	assert_crash_fail consistency=none "$SCRATCH/rec" --fsck none --no-mount -- bash -c fsck_not_dangerous
}

# What a user finds after the crash, once e2fsck -fy has run (as
# fstitch-crash check does), in the mount of the state: every file reads,
# v is the old or the new one, x1 is there whole or not at all, and the
# file system takes a new directory.
crash_state_usable() {
	find . -xdev -type f -exec cat {} + >/dev/null || return 1
	case $(cat v) in
	0 | 1) ;;
	*)
		echo "v holds '$(cat v)'"
		return 1
		;;
	esac
	[ ! -e x1 ] || diff -r "$SCRATCH/tree" x1 || return 1
	mkdir after-crash
}

# A kill -9 of the daemon leaves the image with every write already handed
# to the kernel: some of the round in flight, in block order, on top of the
# rounds before, which is one of the states above.  So every place a kill
# could land is checked here, the same every run, instead of a few places
# that depend on when the kill comes.
@test "after a crash at any state, e2fsck -fy repairs, and the mount reads every file and takes new ones" {
	record_run
	export -f crash_state_usable
	export SCRATCH
	assert_crash_pass softupdates "$SCRATCH/rec" --rw -- bash -c crash_state_usable
}

@test "the same crashes with consistency=none do leave a state that is not usable" {
	record_run -o consistency=none
	export -f crash_state_usable
	export SCRATCH
	assert_crash_fail consistency=none "$SCRATCH/rec" --rw -- bash -c crash_state_usable
}

# The real kill -9, where it can land the same way every time: with the
# daemon held before its final flush (FSTITCH_TEST_HOLD), after the
# workload's flush point and nothing since, the image must be exactly the
# state of the flush point.
@test "kill -9 of the daemon before its final flush: the image is the flush point's, and mounts again" {
	crash_workload_image "$IMG" "$MNT"
	hold_start
	# (noblkdev: a fuseblk unmount would wait for the held flush)
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev,flush_interval=86400
	unset FSTITCH_TEST_HOLD
	crash_workload "$MNT"
	fusermount3 -u "$MNT"
	hold_wait
	kill -KILL "$FSTITCH_MOUNT_PID"
	fstitch_mount_stop "$MNT" && rc=0 || rc=$?
	assert_equal "$rc" $((128 + 9))
	assert_fsck_not_dangerous "$IMG"
	e2fsck -fy "$IMG" >/dev/null 2>&1 && rc=0 || rc=$?
	[ "$rc" -le 1 ] || fail "e2fsck -fy could not repair the image (exit $rc)"
	assert_fsck_clean "$IMG"
	# at the flush point: w1 written whole, nothing of what came after
	mkdir "$SCRATCH/out"
	debugfs -R "rdump / $SCRATCH/out" "$IMG" >/dev/null 2>&1
	assert_equal "$(cat "$SCRATCH/out/v")" 0
	diff -r "$SCRATCH/tree" "$SCRATCH/out/w1"
	diff -r "$SCRATCH/tree" "$SCRATCH/out/x0"
	assert [ ! -e "$SCRATCH/out/x1" ]
	# it mounts again, the tree is readable, and it takes new files
	fstitch_mount_start "$IMG" "$MNT"
	find "$MNT" -xdev -type f -exec cat {} + >/dev/null
	mkdir "$MNT/after-crash"
	fstitch_mount_stop "$MNT"
}

# The crash tests above rely on this rule of the classifier (design.md
# §3, lead's decision): i_blocks too high is an accounting leak, too low is
# not something soft updates may leave.
@test "the fsck classifier calls a too-high i_blocks benign and a too-low one dangerous" {
	make_stock_image "$IMG" 8M
	debugfs -w -R 'write /etc/services f' "$IMG" >/dev/null 2>&1
	assert_fsck_clean "$IMG"
	blocks=$(debugfs -R 'stat f' "$IMG" 2>/dev/null | sed -n 's/.*Blockcount: \([0-9]*\).*/\1/p')
	[ "$blocks" -gt 4 ]
	cp "$IMG" "$SCRATCH/high.img"
	debugfs -w -R "sif f blocks $((blocks + 8))" "$SCRATCH/high.img" >/dev/null 2>&1
	run fsck_classify "$SCRATCH/high.img"
	assert_output benign
	debugfs -w -R "sif f blocks $((blocks - 2))" "$IMG" >/dev/null 2>&1
	run fsck_classify "$IMG"
	assert_output dangerous
}

@test "a missing source is refused with exit status 8" {
	run -8 --separate-stderr "$MOUNT" -f "$SCRATCH/nope.img" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: cannot open '$SCRATCH/nope.img': No such file or directory"
	run ! mountpoint -q "$MNT"
}

@test "a file of random bytes is refused with exit status 8 and left unchanged" {
	head -c 8M /dev/urandom >"$IMG"
	sum=$(file_sum "$IMG")
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "fstitch-mount: cannot open '$IMG': "* ]]
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "an ext4 image with extents is refused naming the feature, and left unchanged" {
	make_stock_image "$IMG" 32M
	mke2fs -q -F -t ext4 "$IMG" >/dev/null
	sum=$(file_sum "$IMG")
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == "fstitch-mount: cannot open '$IMG': "* ]]
	# the first unsupported feature it meets, by name (extents, flex_bg, ...)
	[[ $stderr == *": feature '"*"' is not supported" ]]
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "an xfs or swap image is refused naming what it holds, in the words fstitch-mkfs uses" {
	local mkfs
	mkfs=$(fstitch_cmd fstitch-mkfs)
	truncate -s 300M "$IMG"
	mkfs.xfs -q -L precious "$IMG"
	sum=$(file_sum "$IMG")
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' holds an xfs file system (label \"precious\"), not ext2"
	run -8 --separate-stderr "$mkfs" "$IMG"
	assert_equal "$stderr" "fstitch-mkfs: '$IMG' holds an xfs file system (label \"precious\"); use -F to overwrite"
	assert_equal "$(file_sum "$IMG")" "$sum"
	rm "$IMG"
	truncate -s 8M "$IMG"
	mkswap "$IMG" >/dev/null
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' holds a swap signature, not ext2"
	run ! mountpoint -q "$MNT"
}

@test "an image already mounted by fstitch is refused as in use" {
	new_image 32M
	# root's mount is on a loop device, which makes the image mounted
	fstitch_mount_start "$IMG" "$MNT"
	L=$(findmnt -n -o SOURCE "$MNT")
	mkdir "$SCRATCH/mnt2"
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$SCRATCH/mnt2" 3>&-
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "fstitch-mount: '$IMG' is mounted (through $L): the same file system must not be mounted twice"
	run ! mountpoint -q "$SCRATCH/mnt2"
	echo still >"$MNT/f"
	fstitch_mount_stop "$MNT"
	# a plain mount leaves only the daemon's lock on the image
	fstitch_mount_start "$IMG" "$MNT" -o noblkdev
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$SCRATCH/mnt2" 3>&-
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "fstitch-mount: '$IMG' is in use by another fstitch-mount (mounted, or still writing back after an unmount); lock_wait=SECONDS waits for it"
	# lock_wait= waits only as long as it is told to
	run -8 --separate-stderr "$MOUNT" -f -o lock_wait=0.3 "$IMG" "$SCRATCH/mnt2" 3>&-
	assert_equal "$stderr" "fstitch-mount: '$IMG' is in use by another fstitch-mount (mounted, or still writing back after an unmount); gave up waiting"
	run ! mountpoint -q "$SCRATCH/mnt2"
	# the first mount is unaffected
	echo still2 >"$MNT/g"
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	run -0 debugfs -R 'cat /f' "$IMG"
	assert_line still
	run -0 debugfs -R 'cat /g' "$IMG"
	assert_line still2
}

@test "bad option values are refused with exit status 64 and the image untouched" {
	new_image 32M
	sum=$(file_sum "$IMG")
	run -64 --separate-stderr "$MOUNT" -f -o cache=abc "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'cache': 'abc' (it takes a size from 1M to 1T, such as 512M)"
	run -64 --separate-stderr "$MOUNT" -f -o consistency=ordered "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'consistency': 'ordered' (it takes softupdates, none, journal or journal-data)"
	# a cache beyond physical memory (this machine has less than 1 TiB)
	mem_kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
	if [ "$mem_kib" -lt $((1 << 30)) ]; then
		run -64 --separate-stderr "$MOUNT" -f -o cache=1T "$IMG" "$MNT" 3>&-
		assert_regex "$stderr" "^fstitch-mount: bad value for option 'cache': '1T' is more than this machine's memory \([0-9.]+ GiB\)$"
	fi
	run -64 --separate-stderr "$MOUNT" -f -o flush_interval=-1 "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'flush_interval': '-1' (it takes seconds above 0 and at most 86400, with at most three decimals)"
	run -64 --separate-stderr "$MOUNT" -f -o flush_interval=1.2345 "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'flush_interval': '1.2345' (it takes seconds above 0 and at most 86400, with at most three decimals)"
	run -64 --separate-stderr "$MOUNT" -f -o commit=0 "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'commit': '0' (it takes seconds above 0 and at most 86400, with at most three decimals)"
	run -64 --separate-stderr "$MOUNT" -f -o rename_order=some "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'rename_order': 'some' (it takes all, file or process)"
	run -64 --separate-stderr "$MOUNT" -f -o errors=ignore "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'errors': 'ignore' (it takes continue, remount-ro or panic)"
	run -64 --separate-stderr "$MOUNT" -f -o rw,frobnicate "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: unknown option 'frobnicate'"
	run -64 --separate-stderr "$MOUNT" -f -o cache "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: option 'cache' needs a value"
	run -64 --separate-stderr "$MOUNT" -f -o max_threads=0 "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'max_threads': '0' (it takes a number from 1 to 1024)"
	run -64 --separate-stderr "$MOUNT" -f --max-threads=1025 "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option '--max-threads': '1025' (it takes a number from 1 to 1024)"
	run -64 --separate-stderr "$MOUNT" -f -o lock_wait=soon "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'lock_wait': 'soon' (it takes seconds above 0 and at most 86400, with at most three decimals)"
	run -64 --separate-stderr "$MOUNT" -f -o statsfile=/nonexistent/dir/s.json "$IMG" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad value for option 'statsfile': '/nonexistent/dir/s.json': No such file or directory"
	run -64 "$MOUNT" --no-such-flag "$IMG" "$MNT" 3>&-
	run -64 "$MOUNT" "$IMG" 3>&-
	run -64 "$MOUNT" "$IMG" "$MNT" extra 3>&-
	run ! mountpoint -q "$MNT"
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "a mount point that is not a directory is refused with exit status 32" {
	new_image 32M
	sum=$(file_sum "$IMG")
	touch "$SCRATCH/file"
	run -32 --separate-stderr "$MOUNT" -f "$IMG" "$SCRATCH/file" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad mount point '$SCRATCH/file': Not a directory"
	run -32 --separate-stderr "$MOUNT" -f "$IMG" "$SCRATCH/none" 3>&-
	assert_equal "$stderr" "fstitch-mount: bad mount point '$SCRATCH/none': No such file or directory"
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "an unknown LABEL= or UUID= source is refused with exit status 8" {
	run -8 --separate-stderr "$MOUNT" -f LABEL=no-such-fstitch-label "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: cannot find 'LABEL=no-such-fstitch-label': no block device has this LABEL"
	run -8 "$MOUNT" -f UUID=01234567-89ab-cdef-0123-456789abcdef "$MNT" 3>&-
}

@test "a corrupt block pointer is an EIO for that file and a log line, the rest keeps working" {
	make_stock_image "$IMG" 8M
	debugfs -w -R 'write /etc/services f' "$IMG" >/dev/null 2>&1
	debugfs -w -R 'write /etc/services g' "$IMG" >/dev/null 2>&1
	debugfs -w -R 'sif f block[2] 99999999' "$IMG" >/dev/null 2>&1
	fstitch_mount_start "$IMG" "$MNT"
	run cat "$MNT/f"
	assert_failure
	assert_output --partial "Input/output error"
	cmp /etc/services "$MNT/g"
	echo ok >"$MNT/new"
	fstitch_mount_stop "$MNT"
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output --partial "fstitch-mount: I/O error: inode 12: block 99999999"
}

# corrupt_image: $IMG with two copies of /etc/services, f and g, and f's
# third block pointer out of range.
corrupt_image() {
	make_stock_image "$IMG" 8M "$@"
	debugfs -w -R 'write /etc/services f' "$IMG" >/dev/null 2>&1
	debugfs -w -R 'write /etc/services g' "$IMG" >/dev/null 2>&1
	debugfs -w -R 'sif f block[2] 99999999' "$IMG" >/dev/null 2>&1
}

@test "errors=continue: the corruption marks the superblock with errors, changes go on" {
	corrupt_image
	assert_equal "$(fs_state "$IMG")" clean
	fstitch_mount_start "$IMG" "$MNT" -o errors=continue
	run cat "$MNT/f"
	assert_failure
	echo ok >"$MNT/new"
	fstitch_mount_stop "$MNT"
	assert_equal "$(fs_state "$IMG")" "clean with errors"
	run --separate-stderr debugfs -R 'cat /new' "$IMG"
	assert_output ok
	# e2fsck checks it even without -f, and finds the bad pointer.
	run -4 e2fsck -n "$IMG"
	assert_output --partial "contains a file system with errors"
}

@test "a corrupt image whose corruption is never met stays clean" {
	corrupt_image
	fstitch_mount_start "$IMG" "$MNT" -o errors=remount-ro
	cmp /etc/services "$MNT/g"
	echo ok >"$MNT/new"
	fstitch_mount_stop "$MNT"
	assert_equal "$(fs_state "$IMG")" clean
}

@test "errors=remount-ro: after the corruption changes fail with EROFS, earlier ones are kept" {
	corrupt_image
	fstitch_mount_start "$IMG" "$MNT" -o errors=remount-ro,flush_interval=3600
	echo before >"$MNT/before"
	run cat "$MNT/f"
	assert_failure
	run -1 touch "$MNT/after"
	assert_output --partial "Read-only file system"
	cmp /etc/services "$MNT/g"
	fstitch_mount_stop "$MNT"
	assert_equal "$(fs_state "$IMG")" "clean with errors"
	run --separate-stderr debugfs -R 'cat /before' "$IMG"
	assert_output before
	run debugfs -R 'stat /after' "$IMG"
	assert_output --partial "File not found"
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output --partial "fstitch-mount: I/O error: inode 12: block 99999999"
}

@test "the superblock's errors behaviour (tune2fs -e) applies when errors= is not given" {
	corrupt_image -e remount-ro
	fstitch_mount_start "$IMG" "$MNT"
	run cat "$MNT/f"
	assert_failure
	run -1 touch "$MNT/after"
	assert_output --partial "Read-only file system"
	fstitch_mount_stop "$MNT"
	# errors=continue overrides it.
	corrupt_image -e remount-ro
	fstitch_mount_start "$IMG" "$MNT" -o errors=continue
	run cat "$MNT/f"
	assert_failure
	touch "$MNT/after"
	fstitch_mount_stop "$MNT"
}

@test "errors=panic: the daemon writes back, unmounts and exits 1 at the first corruption" {
	corrupt_image
	fstitch_mount_start "$IMG" "$MNT" -o errors=panic,flush_interval=3600
	echo before >"$MNT/before"
	run cat "$MNT/f"
	assert_failure
	# it unmounts by itself: wait for that, then for its exit status
	wait_for_unmount "$MNT"
	fstitch_mount_stop "$MNT" && rc=0 || rc=$?
	assert_equal "$rc" 1
	assert_equal "$(fs_state "$IMG")" "clean with errors"
	run --separate-stderr debugfs -R 'cat /before' "$IMG"
	assert_output before
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output --partial "fstitch-mount: I/O error: inode 12: block 99999999"
	assert_output --partial "errors=panic"
}

@test "corruption log lines are rate limited to 10 a minute" {
	corrupt_image
	fstitch_mount_start "$IMG" "$MNT"
	for i in $(seq 15); do
		cat "$MNT/f" >/dev/null 2>&1 || true
	done
	fstitch_mount_stop "$MNT"
	run grep -c "block 99999999" "$FSTITCH_MOUNT_LOG"
	assert_output 10
}

@test "unmount with dirty data and a long flush interval loses nothing" {
	new_image 64M
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600,cache=64M
	head -c 12M /dev/urandom >"$SCRATCH/big"
	cp "$SCRATCH/big" "$MNT/big"
	mkdir "$MNT/many"
	for i in $(seq 1 200); do echo "$i" >"$MNT/many/$i"; done
	rm "$MNT/many/17"
	fstitch_mount_stop "$MNT" # the daemon's exit status: 0
	assert_fsck_clean "$IMG"
	# read back with another tool, without fstitch in the way
	debugfs -R "dump /big $SCRATCH/big.back" "$IMG" >/dev/null 2>&1
	cmp "$SCRATCH/big" "$SCRATCH/big.back"
	run debugfs -R 'cat /many/200' "$IMG"
	assert_output --partial 200
	fstitch_mount_start "$IMG" "$MNT"
	assert_equal "$(ls "$MNT/many" | wc -l)" 199
	cmp "$SCRATCH/big" "$MNT/big"
	fstitch_mount_stop "$MNT"
}

@test "a final flush that fails (host file system full) is reported with exit status 1" {
	mkdir "$SCRATCH/small"
	mount -t tmpfs -o size=16M tmpfs "$SCRATCH/small"
	track_mount "$SCRATCH/small" kernel
	IMG=$SCRATCH/small/fs.img
	make_stock_image "$IMG" 64M -N 2048 # sparse: 64M cannot fit in 16M
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600
	head -c 20M /dev/urandom >"$MNT/big"
	fstitch_mount_stop "$MNT" && rc=0 || rc=$?
	assert_equal "$rc" 1
	run cat "$FSTITCH_MOUNT_LOG"
	assert_output --partial "fstitch-mount: final flush of '$IMG' failed: No space left on device"
}

@test "SIGTERM unmounts, flushes and exits 0" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=3600
	echo data >"$MNT/f"
	kill -TERM "$FSTITCH_MOUNT_PID"
	_fstitch_mount_wait "$FSTITCH_MOUNT_PID" # its exit status: 0
	wait_for_unmount "$MNT"
	assert_fsck_clean "$IMG"
	run debugfs -R 'cat /f' "$IMG"
	assert_output --partial data
}

@test "-o consistency=none mounts and works" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT" -o consistency=none
	mkdir "$MNT/d"
	seq 10000 >"$MNT/d/f"
	mv "$MNT/d/f" "$MNT/g"
	assert_equal "$(wc -l <"$MNT/g")" 10000
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "cache=, flush_interval= and consistency= reach the engine (seen by fstitch-stat)" {
	stat_cmd=$(fstitch_cmd fstitch-stat)
	make_stock_image "$IMG" 32M -b 4096
	fstitch_mount_start "$IMG" "$MNT" -o cache=8M,flush_interval=42.5,consistency=none
	run -0 "$stat_cmd" --json "$MNT"
	assert_equal "$(jq -c .mode <<<"$output")" \
		'{"consistency":"none","flush_interval_ms":42500,"block_size":4096,"max_blocks":2048,"dirty_limit":1024}'
	fstitch_mount_stop "$MNT"
	# the same size in bytes is four times the blocks at 1 KiB
	make_stock_image "$IMG" 32M -b 1024
	fstitch_mount_start "$IMG" "$MNT" -o cache=8M
	run -0 "$stat_cmd" --json "$MNT"
	assert_equal "$(jq -r '.mode | "\(.consistency) \(.max_blocks)"' <<<"$output")" "softupdates 8192"
	fstitch_mount_stop "$MNT"
}

@test "-o ro refuses writes and leaves the image unchanged" {
	new_image 32M
	sum=$(file_sum "$IMG")
	fstitch_mount_start "$IMG" "$MNT" -o ro
	ls "$MNT" >/dev/null
	run ! touch "$MNT/x"
	fstitch_mount_stop "$MNT"
	assert_equal "$(file_sum "$IMG")" "$sum"
}

@test "an immutable image or one on a read-only file system is refused with a hint to use -o ro" {
	new_image 32M
	sum=$(file_sum "$IMG")
	chattr +i "$IMG" || skip "chattr +i is not supported here"
	run -8 --separate-stderr "$MOUNT" -f "$IMG" "$MNT" 3>&-
	chattr -i "$IMG"
	assert_equal "$stderr" "fstitch-mount: cannot open '$IMG' for writing: Operation not permitted; -o ro mounts it read-only"
	run ! mountpoint -q "$MNT"
	# a read-only file system: a tmpfs of our own, remounted ro
	mkdir "$SCRATCH/rofs"
	mount -t tmpfs -o size=40M rofs "$SCRATCH/rofs"
	track_mount "$SCRATCH/rofs" kernel
	cp "$IMG" "$SCRATCH/rofs/fs.img"
	mount -o remount,ro "$SCRATCH/rofs"
	run -8 --separate-stderr "$MOUNT" -f "$SCRATCH/rofs/fs.img" "$MNT" 3>&-
	assert_equal "$stderr" "fstitch-mount: cannot open '$SCRATCH/rofs/fs.img' for writing: Read-only file system; -o ro mounts it read-only"
	# and the hint works
	fstitch_mount_start "$SCRATCH/rofs/fs.img" "$MNT" -o ro
	assert [ -d "$MNT/lost+found" ]
	fstitch_mount_stop "$MNT"
	assert_equal "$(file_sum "$SCRATCH/rofs/fs.img")" "$sum"
}

@test "works as a mount helper: mount.fuse.fstitch and mount.fuse3's TYPE#SOURCE form" {
	new_image 32M
	ln -s "$MOUNT" "$SCRATCH/mount.fuse.fstitch"
	# what mount(8) runs for an fstab line "IMG MNT fuse.fstitch defaults,noauto 0 0"
	run -0 "$SCRATCH/mount.fuse.fstitch" "$IMG" "$MNT" -o rw,noauto,noatime -t fuse.fstitch 3>&-
	track_mount "$MNT" fuse
	mountpoint -q "$MNT"
	grep " $MNT fuseblk.fstitch " /proc/mounts | grep -q noatime
	fusermount3 -u "$MNT"
	for ((i = 0; i < 200; i++)); do
		flock -n "$IMG" true && break
		sleep 0.05
	done
	# mount.fuse3 runs "fstitch-mount IMG MNT -o OPTS" from PATH
	PATH=$FSTITCH_BIN:$PATH run -0 mount.fuse3 "fstitch-mount#$IMG" "$MNT" -o nofail,noatime 3>&-
	mountpoint -q "$MNT"
	fusermount3 -u "$MNT"
	for ((i = 0; i < 200; i++)); do
		flock -n "$IMG" true && break
		sleep 0.05
	done
	assert_fsck_clean "$IMG"
}

@test "user.fstitch.control names the patchgroup socket on every path but is not listed" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	mkdir -p "$MNT/a/b"
	touch "$MNT/a/b/f"
	run -0 python3 - "$MNT" <<-'EOF'
		import errno, os, stat, sys
		m = sys.argv[1]
		f = m + "/a/b/f"
		vals = {os.getxattr(p, "user.fstitch.control")
		        for p in (m, m + "/a", f)}
		assert len(vals) == 1, vals
		sock = vals.pop().decode()
		assert stat.S_ISSOCK(os.stat(sock).st_mode), sock
		for p in (m, f):
		    assert os.listxattr(p) == [], p
		def err(fn, *a):
		    try:
		        fn(*a)
		    except OSError as e:
		        return e.errno
		    return 0
		# other attributes are real ones, and the control one is not
		# among them
		assert err(os.getxattr, m + "/a", "user.other") == errno.ENODATA
		assert err(os.getxattr, f, "security.capability") == errno.ENODATA
		os.setxattr(f, "user.other", b"1")
		assert os.listxattr(f) == ["user.other"], os.listxattr(f)
		os.removexattr(f, "user.other")
		assert err(os.removexattr, f, "user.other") == errno.ENODATA
		# the control attribute is read only
		assert err(os.setxattr, f, "user.fstitch.control", b"/x") == errno.EPERM
		assert err(os.removexattr, f, "user.fstitch.control") == errno.EPERM
		assert os.getxattr(f, "user.fstitch.control").decode() == sock
		print(sock)
	EOF
	sock=$output
	fstitch_mount_stop "$MNT"
	# the socket goes away with the daemon
	[ ! -e "$sock" ]
}

@test "getfattr -d, cp -a and tar --xattrs keep attributes across the mount and copy no control attribute" {
	new_image 32M
	mkdir "$SCRATCH/src"
	echo data >"$SCRATCH/src/f"
	setfattr -n user.colour -v blue "$SCRATCH/src/f"
	fstitch_mount_start "$IMG" "$MNT"
	run -0 --separate-stderr cp -a "$SCRATCH/src/f" "$MNT/f"
	assert_equal "$stderr" ""
	mkdir "$MNT/t"
	tar --xattrs -cf "$SCRATCH/in.tar" -C "$SCRATCH/src" f
	run -0 --separate-stderr tar --xattrs --xattrs-include='*' -xf "$SCRATCH/in.tar" -C "$MNT/t"
	assert_equal "$stderr" ""
	assert_equal "$(cat "$MNT/f" "$MNT/t/f")" "$(printf 'data\ndata')"
	run -0 --separate-stderr getfattr --only-values -n user.colour "$MNT/f"
	assert_output blue
	run -0 --separate-stderr getfattr --only-values -n user.colour "$MNT/t/f"
	assert_output blue
	# out of the mount: the attribute comes along, nothing of fstitch's
	mkdir "$SCRATCH/out"
	run -0 cp -a "$MNT/f" "$MNT/t" "$SCRATCH/out/"
	tar --xattrs -cf "$SCRATCH/out.tar" -C "$MNT" f t
	run -0 tar --xattrs -tvvf "$SCRATCH/out.tar"
	refute_output --partial fstitch
	run -0 getfattr -R -d -m - "$SCRATCH/out"
	refute_output --partial fstitch
	assert_output --partial 'user.colour="blue"'
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "large writes arrive as 1 MiB requests (max_write), and -d logs every request" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT" -d
	dd if=/dev/urandom of="$MNT/f" bs=1M count=4 status=none
	cmp <(head -c 4M "$MNT/f") "$MNT/f"
	fstitch_mount_stop "$MNT"
	# libfuse's debug lines: "opcode: WRITE (16), nodeid: N, insize: 1048656"
	# (1 MiB of data plus an 80-byte header)
	n=$(grep -c 'WRITE (16).*insize: 1048656' "$FSTITCH_MOUNT_LOG")
	[ "$n" -ge 4 ]
}

@test "statfs reports the image's size and free space" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	free0=$(stat -f -c %f "$MNT")
	head -c 4M /dev/zero >"$MNT/f"
	sync "$MNT/f"
	free1=$(stat -f -c %f "$MNT")
	bs=$(stat -f -c %S "$MNT")
	[ $(((free0 - free1) * bs)) -ge $((4 * 1024 * 1024)) ]
	total=$(($(stat -f -c %b "$MNT") * bs))
	[ "$total" -gt $((28 * 1024 * 1024)) ] && [ "$total" -le $((32 * 1024 * 1024)) ]
	fstitch_mount_stop "$MNT"
}

@test "--help lists the exit statuses and the completion knows every long option" {
	run -0 "$MOUNT" --help
	assert_output --partial "64  bad command line"
	help_opts=$(grep -oE -- '--[a-z][a-z-]+' <<<"$output" | sort -u)
	comp=$FSTITCH_ROOT/completions/fstitch-mount.bash
	for o in $help_opts; do
		grep -q -- "$o" "$comp" || fail "completion lacks $o"
	done
	for o in consistency= cache= flush_interval= lock_wait= max_threads= statsfile= ro allow_other; do
		grep -q -- "$o" "$comp" || fail "completion lacks -o $o"
	done
	run -0 "$MOUNT" --version
	assert_output --regexp '^fstitch-mount \(fstitch\) [0-9]'
}

@test "fallocate and posix_fallocate give zeroed blocks and the size; other modes are refused" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	# leave old contents in the free blocks that preallocation will take
	yes STALEDATA | head -c 20M >"$SCRATCH/old"
	cp "$SCRATCH/old" "$MNT/old"
	sync "$MNT/old"
	rm "$MNT/old"
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT"
	free0=$(stat -f -c %f "$MNT")
	run -0 fallocate -l 16M "$MNT/f"
	assert_equal "$(stat -c %s "$MNT/f")" 16777216
	[ "$(stat -c %b "$MNT/f")" -ge 32768 ]
	cmp -n 16M "$MNT/f" /dev/zero
	# posix_fallocate past the end of a short file keeps its bytes
	printf 0123456789 >"$MNT/g"
	run -0 python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.posix_fallocate(fd, 100, 3 << 20)' "$MNT/g"
	assert_equal "$(stat -c %s "$MNT/g")" $((100 + (3 << 20)))
	assert_equal "$(head -c 10 "$MNT/g")" 0123456789
	cmp -n $((3 << 20)) -i 10 "$MNT/g" /dev/zero
	# keep-size fills holes inside the file, and nothing past its end
	truncate -s 1M "$MNT/h"
	run -0 fallocate -n -l 1M "$MNT/h"
	[ "$(du -k "$MNT/h" | cut -f1)" -ge 1024 ]
	run ! fallocate -n -l 2M "$MNT/h"
	assert_equal "$(stat -c %s "$MNT/h")" 1048576
	# zeroing a range and the other modes are not supported
	run ! fallocate -z -o 0 -l 64K "$MNT/g"
	run ! fallocate -c -o 0 -l 64K "$MNT/g"
	assert_equal "$(head -c 10 "$MNT/g")" 0123456789
	# more than the free space: ENOSPC, and nothing changed
	used=$(($(stat -f -c %f "$MNT")))
	run -1 --separate-stderr fallocate -l 40M "$MNT/huge"
	[[ "$stderr" == *"No space left on device"* ]]
	assert_equal "$(stat -c %s "$MNT/huge")" 0
	assert_equal "$(stat -f -c %f "$MNT")" "$used"
	[ "$free0" -gt "$used" ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	# after a remount, and read by another tool: zeros, never old contents
	debugfs -R "dump /f $SCRATCH/f.back" "$IMG" >/dev/null 2>&1
	assert_equal "$(stat -c %s "$SCRATCH/f.back")" 16777216
	cmp -n 16M "$SCRATCH/f.back" /dev/zero
	fstitch_mount_start "$IMG" "$MNT"
	cmp -n 16M "$MNT/f" /dev/zero
	run ! grep -l STALEDATA "$MNT/f" "$MNT/g" "$MNT/h"
	fstitch_mount_stop "$MNT"
}

@test "fallocate --punch-hole frees the blocks and leaves what the same punches leave elsewhere" {
	local ref=$SCRATCH/ref spec free0 blocks0 blocks1
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT"
	head -c 3M /dev/urandom >"$SCRATCH/data"
	cp "$SCRATCH/data" "$MNT/f"
	cp "$SCRATCH/data" "$ref"
	sync "$MNT/f"
	free0=$(stat -f -c %f "$MNT")
	blocks0=$(stat -c %b "$MNT/f")
	# partial blocks, the direct blocks, a whole indirect tree, parts of
	# the double indirect tree, and from the middle past the end; the
	# reference file is on the host's file system, which punches too
	for spec in "-o 3000 -l 8000" "-o 12288 -l 262144" "-o 300000 -l 100000" \
		"-o 1048576 -l 1048576" "-o 3000000 -l 1000000" "-o 5 -l 1"; do
		# shellcheck disable=SC2086 # offset and length
		fallocate -p $spec "$MNT/f"
		# shellcheck disable=SC2086
		fallocate -p $spec "$ref"
	done
	cmp "$MNT/f" "$ref"
	assert_equal "$(stat -c %s "$MNT/f")" $((3 << 20))
	blocks1=$(stat -c %b "$MNT/f")
	[ "$blocks1" -lt "$blocks0" ]
	# what the file gave up is free again (1 KiB blocks, 512-byte units)
	assert_equal "$(stat -f -c %f "$MNT")" $((free0 + (blocks0 - blocks1) / 2))
	# SEEK_HOLE finds the first punched block
	run -0 python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.lseek(fd, 0, os.SEEK_HOLE))' "$MNT/f"
	assert_output 3072
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
	# the image as another tool reads it
	debugfs -R "dump /f $SCRATCH/f.back" "$IMG" >/dev/null 2>&1
	cmp "$SCRATCH/f.back" "$ref"
	# punching all of it leaves no block, not even an indirect one
	fstitch_mount_start "$IMG" "$MNT"
	cmp "$MNT/f" "$ref"
	fallocate -p -o 0 -l 3M "$MNT/f"
	assert_equal "$(stat -c %b "$MNT/f")" 0
	assert_equal "$(stat -c %s "$MNT/f")" $((3 << 20))
	cmp -n 3M "$MNT/f" /dev/zero
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

# falloc_record [fstitch-mount options...]: free blocks full of an old
# pattern, then a daemon run (recorded, as for record_run: written only at
# the unmount) that preallocates a file over them.
falloc_record() {
	make_stock_image "$IMG" 8M
	fstitch_mount_start "$IMG" "$MNT"
	yes STALEDATA | head -c 6M >"$SCRATCH/old"
	cp "$SCRATCH/old" "$MNT/old"
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT"
	rm "$MNT/old"
	fstitch_mount_stop "$MNT"
	mkdir -p "$SCRATCH/rec"
	export FSTITCH_RECORD=$SCRATCH/rec/log
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=86400 "$@"
	unset FSTITCH_RECORD
	fallocate -l 5M "$MNT/new"
	fstitch_mount_stop "$MNT"
	[ -s "$SCRATCH/rec/log" ]
}

# The check run in every state: /new shows none of the old contents.
no_stale() {
	debugfs -R "dump /new $FSTITCH_IMAGE.new" "$FSTITCH_IMAGE" >/dev/null 2>&1 || true
	if [ -f "$FSTITCH_IMAGE.new" ] && grep -q STALEDATA "$FSTITCH_IMAGE.new"; then
		echo "/new shows old disk contents"
		return 1
	fi
	rm -f "$FSTITCH_IMAGE.new"
}

@test "a power failure during fallocate never shows old disk contents in the file" {
	falloc_record
	export -f no_stale
	assert_crash_pass softupdates "$SCRATCH/rec" --fsck none --no-mount -- bash -c no_stale
	# the final state holds the whole file, all zeros
	crash_final_image "$SCRATCH/rec" "$SCRATCH/final.img"
	debugfs -R "dump /new $SCRATCH/new.out" "$SCRATCH/final.img" >/dev/null 2>&1
	assert_equal "$(stat -c %s "$SCRATCH/new.out")" 5242880
	cmp -n 5M "$SCRATCH/new.out" /dev/zero
}

@test "the same power failures with consistency=none do show old contents (the check can fail)" {
	falloc_record -o consistency=none
	export -f no_stale
	assert_crash_fail consistency=none "$SCRATCH/rec" --fsck none --no-mount -- bash -c no_stale
}

@test "SEEK_DATA and SEEK_HOLE follow the block map, so cp --sparse and tar -S keep holes; copy_file_range falls back" {
	new_image 64M
	fstitch_mount_start "$IMG" "$MNT"
	printf a | dd of="$MNT/sp" status=none
	printf b | dd of="$MNT/sp" bs=1 seek=$((10 << 20)) conv=notrunc status=none
	truncate -s $((12 << 20)) "$MNT/sp"
	truncate -s 5M "$MNT/hole"
	: >"$MNT/empty"
	seq 100000 >"$MNT/dense"
	truncate -s 5G "$MNT/big"
	printf z | dd of="$MNT/big" bs=1 seek=$((5 * 1024 * 1024 * 1024 - 1)) conv=notrunc status=none
	run -0 python3 - "$MNT" <<-'EOF'
		import errno, os, sys
		m = sys.argv[1]
		bs = os.statvfs(m).f_bsize
		def seek(name, off, how):
		    fd = os.open(m + "/" + name, os.O_RDONLY)
		    try:
		        return os.lseek(fd, off, how)
		    except OSError as e:
		        return -e.errno
		    finally:
		        os.close(fd)
		D, H, ENXIO = os.SEEK_DATA, os.SEEK_HOLE, -errno.ENXIO
		ten = 10 << 20
		assert seek("sp", 0, D) == 0
		assert seek("sp", 0, H) == bs
		assert seek("sp", 1, D) == 1
		assert seek("sp", bs, D) == ten - ten % bs
		assert seek("sp", ten, H) == ten - ten % bs + bs
		assert seek("sp", ten + bs, D) == ENXIO
		assert seek("sp", 12 << 20, D) == ENXIO
		assert seek("sp", 12 << 20, H) == ENXIO
		assert seek("hole", 0, D) == ENXIO
		assert seek("hole", 4096, H) == 4096
		assert seek("empty", 0, D) == ENXIO
		size = os.stat(m + "/dense").st_size
		assert seek("dense", 0, H) == size
		assert seek("dense", 5, D) == 5
		# past the double indirect range: the walk skips absent subtrees
		last = (5 << 30) - 1
		assert seek("big", 0, D) == last - last % bs
		assert seek("big", last - last % bs, H) == 5 << 30
	EOF
	# copy_file_range is not served (ENOSYS): the kernel copies by reading
	# and writing instead, and the caller sees it work
	run -0 python3 -c 'import os, sys
a = os.open(sys.argv[1], os.O_RDONLY)
b = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
print(os.copy_file_range(a, b, os.fstat(a).st_size))' "$MNT/dense" "$MNT/dense2"
	assert_output "$(stat -c %s "$MNT/dense")"
	cmp "$MNT/dense" "$MNT/dense2"
	# copies inside the mount and out of it keep the holes
	cp --sparse=always "$MNT/sp" "$MNT/sp2"
	cp "$MNT/big" "$SCRATCH/big"
	cmp "$MNT/sp" "$MNT/sp2"
	# (5 GiB of holes are not read back through FUSE: size and tail do)
	assert_equal "$(stat -c %s "$SCRATCH/big")" $((5 << 30))
	assert_equal "$(tail -c 1 "$SCRATCH/big")" z
	[ "$(du -k "$MNT/sp2" | cut -f1)" -lt 64 ]
	[ "$(du -k "$SCRATCH/big" | cut -f1)" -lt 64 ]
	tar -S -cf "$SCRATCH/sp.tar" -C "$MNT" sp big
	[ "$(stat -c %s "$SCRATCH/sp.tar")" -lt $((64 << 10)) ]
	mkdir "$MNT/x"
	tar -xf "$SCRATCH/sp.tar" -C "$MNT/x"
	cmp "$MNT/sp" "$MNT/x/sp"
	assert_equal "$(tail -c 1 "$MNT/x/big")" z
	[ "$(du -k "$MNT/x/big" | cut -f1)" -lt 64 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}

@test "a lost patchgroup ordering is logged per event, rate limited, and counted" {
	new_image 32M
	# fault injection: every request's pgsrv_leave counts as failed
	FSTITCH_FAULT_PGLOST=1 fstitch_mount_start "$IMG" "$MNT"
	for i in $(seq 1 40); do echo "$i" >"$MNT/f$i"; done
	fstitch_mount_stop "$MNT"
	run grep -c "^fstitch-mount: patchgroup ordering lost for a change (" "$FSTITCH_MOUNT_LOG"
	assert_output 10
	run grep -m1 "patchgroup ordering lost" "$FSTITCH_MOUNT_LOG"
	assert_output --regexp '^fstitch-mount: patchgroup ordering lost for a change \([a-z]+\): the engine refused a dependency \(1 so far\)$'
	n=$(sed -n 's/^fstitch-mount: \([0-9]*\) changes lost their patchgroup ordering during this mount$/\1/p' \
		"$FSTITCH_MOUNT_LOG")
	# at least a create and a write for each file
	[ "$n" -ge 80 ]
	# and without the fault, not a word
	fstitch_mount_start "$IMG" "$MNT"
	echo x >"$MNT/g"
	fstitch_mount_stop "$MNT"
	run ! grep -q "ordering" "$FSTITCH_MOUNT_LOG"
	assert_fsck_clean "$IMG"
}

@test "unmount then an immediate remount never sees lost data: the lock lasts until the flush ends" {
	new_image 64M
	# a plain mount, whose unmount returns before the final flush (the
	# default fuseblk one waits: tests/mount-safety.bats)
	local round k
	for round in 1 2 3; do
		head -c 6M /dev/urandom >"$SCRATCH/d$round"
		if [ "$round" = 1 ]; then
			run -0 "$MOUNT" -o noblkdev,flush_interval=3600,cache=64M "$IMG" "$MNT" 3>&-
		fi
		track_mount "$MNT" fuse
		cp "$SCRATCH/d$round" "$MNT/d$round"
		fusermount3 -u "$MNT"
		# (not "i": bats' run uses that name)
		# at once: the old daemon may still be writing back
		if [ "$round" = 2 ]; then
			# without lock_wait: refused while it does, never a stale view
			run --separate-stderr "$MOUNT" -o noblkdev,flush_interval=3600,cache=64M "$IMG" "$MNT" 3>&-
			echo "# remount right after the unmount: exit status $status" >&3
			if [ "$status" = 8 ]; then
				[[ "$stderr" == *"is in use by another fstitch-mount"* ]]
				timeout 60 flock "$IMG" true
				run -0 "$MOUNT" -o noblkdev,flush_interval=3600,cache=64M "$IMG" "$MNT" 3>&-
			else
				assert_equal "$status" 0
			fi
		else
			run -0 "$MOUNT" -o noblkdev,flush_interval=3600,cache=64M,lock_wait=60 "$IMG" "$MNT" 3>&-
		fi
		for ((k = 1; k <= round; k++)); do
			cmp "$SCRATCH/d$k" "$MNT/d$k"
		done
	done
	fusermount3 -u "$MNT"
	# how a script waits for a background daemon's final flush
	timeout 60 flock "$IMG" true
	assert_fsck_clean "$IMG"
}

@test "statsfile= writes the final counters in fstitch-stat's JSON schema once all is flushed" {
	new_image 32M
	stat_cmd=$(fstitch_cmd fstitch-stat)
	echo stale >"$SCRATCH/stats.json"
	cd "$SCRATCH"
	fstitch_mount_start "$IMG" "$MNT" -o statsfile=stats.json,flush_interval=3600
	# an old file does not pass for this run's
	[ ! -e "$SCRATCH/stats.json" ]
	head -c 2M /dev/urandom >"$MNT/f"
	run -0 "$stat_cmd" --json "$MNT"
	live=$output
	fstitch_mount_stop "$MNT"
	run -0 jq -r '[.schema, .view, .blocks.dirty, .patches.pending, .io.write_errors,
		.groups.served, .mode.flush_interval_ms] | map(tostring) | join(" ")' "$SCRATCH/stats.json"
	assert_output "fstitch-stat/1 summary 0 0 0 true 3600000"
	# all 2 MiB of data went out
	bs=$(jq .mode.block_size "$SCRATCH/stats.json")
	[ "$(jq .io.block_writes "$SCRATCH/stats.json")" -ge $((2 * 1024 * 1024 / bs)) ]
	[ "$(jq .io.barriers "$SCRATCH/stats.json")" -ge 1 ]
	# the same members as fstitch-stat --json prints
	assert_equal "$(jq -c '[paths | map(tostring) | join(".")] | sort' "$SCRATCH/stats.json")" \
		"$(jq -c '[paths | map(tostring) | join(".")] | sort' <<<"$live")"
	# in the background (the daemon changes to /): the relative path still
	# means the directory it was given in, and the file is there by the
	# time the image lock is free
	run -0 "$MOUNT" -o statsfile=bg.json "$IMG" "$MNT" 3>&-
	track_mount "$MNT" fuse
	echo x >"$MNT/x"
	fusermount3 -u "$MNT"
	timeout 60 flock "$IMG" true
	assert_equal "$(jq -r .schema "$SCRATCH/bg.json")" fstitch-stat/1
}

@test "-o max_threads= and --max-threads set the thread limit, the last one given wins" {
	new_image 32M
	fstitch_mount_start "$IMG" "$MNT" --max-threads=8 -o max_threads=1
	tree_tar "$SCRATCH/tree.tar" 300
	two_tars() {
		local p1 p2
		tar -xf "$SCRATCH/tree.tar" -C "$MNT/$1" &
		p1=$!
		tar -xf "$SCRATCH/tree.tar" -C "$MNT/$1" --transform 's,^,2/,' &
		p2=$!
		wait "$p1" && wait "$p2"
	}
	mkdir "$MNT/a" "$MNT/b"
	two_tars a
	# the main thread, libfuse's, the flusher, the patchgroup socket's and
	# one worker
	assert_equal "$(ls /proc/"$FSTITCH_MOUNT_PID"/task | wc -l)" 5
	fstitch_mount_stop "$MNT"
	# the other way round: workers are added under load
	fstitch_mount_start "$IMG" "$MNT" -o max_threads=1 --max-threads=8
	two_tars b
	[ "$(ls /proc/"$FSTITCH_MOUNT_PID"/task | wc -l)" -gt 5 ]
	fstitch_mount_stop "$MNT"
	assert_fsck_clean "$IMG"
}
