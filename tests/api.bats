#!/usr/bin/env bats
# libfstitch as an application sees it: the shared and static libraries
# export exactly the functions <fstitch/patchgroup.h> declares, need nothing
# but libc, and a program with symbols of its own that share the library's
# internal names still talks to the daemon.

load common

setup() {
	common_setup
	SO=$FSTITCH_BUILD/libfstitch.so.0
	AR=$FSTITCH_BUILD/libfstitch.a
	HDR=$FSTITCH_ROOT/lib/fstitch/patchgroup.h
	[ -e "$SO" ] && [ -e "$AR" ]
}

teardown() {
	cd /
	common_teardown
	fstitch_mount_reap
}

# The functions the header declares, one per line, sorted.
header_functions() {
	sed -n 's/^\(pg_t\|int\) \(pg_[a-z_]*\)(.*/\2/p' "$HDR" | sort
}

@test "the header declares the twelve patchgroup calls" {
	run header_functions
	assert_success
	assert_equal "$(echo "$output" | wc -l)" 12
	assert_line pg_create
	assert_line pg_status
}

@test "libfstitch.sym lists exactly the functions of patchgroup.h" {
	want=$(header_functions)
	got=$(sed -n '/global:/,/local:/s/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' \
		"$FSTITCH_ROOT/lib/api/libfstitch.sym" | sort)
	assert_equal "$got" "$want"
}

@test "libfstitch.so exports exactly the functions of patchgroup.h" {
	want=$(header_functions)
	# Every defined dynamic symbol, data included, but the version node.
	got=$(nm -D --defined-only "$SO" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort)
	assert_equal "$got" "$want"
}

@test "libfstitch.a defines no global symbol but the patchgroup calls" {
	want=$(header_functions)
	got=$(nm -g --defined-only "$AR" | awk 'NF == 3 { print $3 }' | sort)
	assert_equal "$got" "$want"
}

@test "libfstitch.so needs only libc" {
	run -0 readelf -d "$SO"
	assert_line --regexp 'NEEDED.*libc\.so'
	refute_line --regexp 'NEEDED.*(ext2fs|com_err|blkid|uuid|fuse)'
}

@test "fstitch.pc links only -lfstitch" {
	run -0 grep '^Libs:' "$FSTITCH_BUILD/fstitch.pc"
	assert_output 'Libs: -L${libdir} -lfstitch'
}

# A program that defines functions with the library's internal names: they
# must neither be called by the library nor break it.
clash_program() {
	cat >"$SCRATCH/clash.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <fstitch/patchgroup.h>

int ctl_connect(const char *path, int *fd);
int ctl_call(int fd, const void *req, void *rep);

int ctl_connect(const char *path, int *fd)
{
	(void)path;
	(void)fd;
	return -EPERM;
}

int ctl_call(int fd, const void *req, void *rep)
{
	(void)fd;
	(void)req;
	(void)rep;
	return -EPERM;
}

int main(void)
{
	pg_t g = pg_create();

	if (g < 0) {
		perror("pg_create");
		return 1;
	}
	if (pg_engage(g) < 0 || pg_disengage(g) < 0 || pg_close(g) < 0) {
		perror("pg call");
		return 1;
	}
	printf("%lld\n", (long long)g);
	return 0;
}
C
}

@test "a program with its own ctl_connect creates groups through libfstitch.so" {
	clash_program
	run -0 cc -I"$FSTITCH_ROOT/lib" -o "$SCRATCH/clash" "$SCRATCH/clash.c" \
		-L"$FSTITCH_BUILD" -l:libfstitch.so.0 -Wl,-rpath,"$FSTITCH_BUILD"
	make_image "$SCRATCH/fs.img" 16M
	fstitch_mount_start "$SCRATCH/fs.img" "$SCRATCH/mnt"
	cd "$SCRATCH/mnt"
	run -0 "$SCRATCH/clash"
	assert_output --regexp '^[1-9][0-9]*$'
}

@test "a program with its own ctl_connect creates groups through libfstitch.a" {
	clash_program
	run -0 cc -I"$FSTITCH_ROOT/lib" -o "$SCRATCH/clash" "$SCRATCH/clash.c" \
		"$AR" -pthread
	make_image "$SCRATCH/fs.img" 16M
	fstitch_mount_start "$SCRATCH/fs.img" "$SCRATCH/mnt"
	cd "$SCRATCH/mnt"
	run -0 "$SCRATCH/clash"
	assert_output --regexp '^[1-9][0-9]*$'
}
