#!/usr/bin/env bats
# The layering of lib/ (doc/design.md): which folder may include what.  A
# failure names the file and the include that breaks the rule.

load common

setup() {
	cd "$FSTITCH_ROOT"
}

# includes: every "#include "dir/file.h"" as "FILE INCLUDED", where INCLUDED
# is the path under lib/ (a bare name is the including file's own folder).
includes() {
	local f inc dir
	for f in lib/*/*.[ch] cmd/*.c tests/unit/*.[ch] tests/support/*.[ch] tests/tools/*.c \
		tests/bench/*.c; do
		dir=${f%/*}
		while IFS= read -r inc; do
			case $inc in
			*/*) printf '%s %s\n' "$f" "$inc" ;;
			*) printf '%s %s\n' "$f" "${dir#lib/}/$inc" ;;
			esac
		done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
	done
}

@test "a private header (*_int.h) is included only from its own folder" {
	run bash -c "$(declare -f includes); includes" 
	assert_success
	bad=$(echo "$output" | awk '$2 ~ /_int\.h$/ {
		split($1, a, "/"); split($2, b, "/")
		if (a[1] != "lib" || a[2] != b[1]) print }')
	assert_equal "$bad" ""
}

@test "product layers include neither lib/cli nor test code" {
	run bash -c "$(declare -f includes); includes"
	assert_success
	bad=$(echo "$output" | awk '$1 ~ /^lib\// && $1 !~ /^lib\/cli\// && ($2 ~ /^cli\// || $2 ~ /tests/)')
	assert_equal "$bad" ""
}

@test "the public library includes only the API and the protocol client" {
	run bash -c "$(declare -f includes); includes"
	assert_success
	bad=$(echo "$output" | awk '($1 ~ /^lib\/api\// || $1 == "lib/proto/ctl_client.c" ||
		$1 == "lib/proto/ctl.h") && $2 !~ /^(api|proto|fstitch)\//')
	assert_equal "$bad" ""
}

# layer_table: the layer table of doc/design.md §2, one row per line:
# "LAYER USED..." ("any" for a layer that may use every other, nothing
# after LAYER for one that uses none).
layer_table() {
	local folder what uses
	while IFS='|' read -r _ folder what uses _; do
		folder=${folder//[\` ]/}
		[[ $folder == lib/* ]] || continue
		uses=${uses//,/ }
		uses=${uses//–/}
		echo ${folder#lib/} $uses
	done <doc/design.md
}

# layer_uses: every include of one layer by another, from lib/, as
# "FROM TO FILE HEADER" (FILE includes HEADER, a path under lib/).
layer_uses() {
	local f inc from to
	while read -r f inc; do
		[[ $f == lib/* ]] || continue
		from=${f#lib/}
		from=${from%%/*}
		to=${inc%%/*}
		[ "$from" = "$to" ] || echo "$from $to $f $inc"
	done < <(includes)
}

@test "the layer table has one row for each folder of lib/, in order" {
	run layer_table
	assert_success
	table=$output
	# Every folder has a row and every row a folder.
	assert_equal "$(cut -d' ' -f1 <<<"$table" | sort)" \
		"$(for d in lib/*/; do d=${d%/}; echo "${d#lib/}"; done | sort)"
	# A layer uses only layers listed above it, so the table has no cycle.
	bad=
	seen=" "
	while read -r layer uses; do
		for u in $uses; do
			[ "$u" = any ] || [[ $seen == *" $u "* ]] || bad+="$layer uses $u, listed below it"$'\n'
		done
		seen+="$layer "
	done <<<"$table"
	assert_equal "$bad" ""
}

@test "each folder includes only the layers its row in doc/design.md lists" {
	declare -A may
	while read -r layer uses; do
		may[$layer]=" $uses "
	done < <(layer_table)
	run layer_uses
	assert_success
	bad=
	while read -r from to f inc; do
		[ -n "$from" ] || continue
		case ${may[$from]- any } in
		*" any "* | *" $to "*) ;;
		*) bad+="$f includes $inc, which the row of $from does not list"$'\n' ;;
		esac
	done <<<"$output"
	assert_equal "$bad" ""
}

@test "each use in the layer table of doc/design.md is an include" {
	run layer_uses
	assert_success
	uses=$output
	bad=
	while read -r layer listed; do
		for u in $listed; do
			[ "$u" = any ] && continue
			grep -q "^$layer $u " <<<"$uses" ||
				bad+="the row of $layer lists $u, which no file of lib/$layer/ includes"$'\n'
		done
	done < <(layer_table)
	assert_equal "$bad" ""
}

@test "the library never prints or exits outside lib/cli" {
	run grep -nE '\b(printf|fprintf|vprintf|vfprintf|dprintf|puts|fputs|fputc|putchar|perror|warnx?|errx?|syslog|_?exit|abort|error)\(' \
		$(ls lib/*/*.[ch] | grep -v '^lib/cli/')
	# grep exits 1 when nothing matched: that is the pass.
	assert_failure 1
}
