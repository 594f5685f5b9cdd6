#!/usr/bin/env bats
# fstitch-stat on a live mount: numbers that agree with each other during a
# workload and drain to zero after a flush, JSON with every documented
# member (checked by jq), dot that Graphviz renders, patchgroup states, a
# dependency between groups explained by --why, and clear errors.

load common

setup() {
	common_setup
	STAT=$(fstitch_cmd fstitch-stat)
	PGRUN=$(fstitch_cmd pgrun)
	PGCREATE=$(fstitch_cmd pgcreate)
	PGDEPEND=$(fstitch_cmd pgdepend)
	PGCLOSE=$(fstitch_cmd pgclose)
	IMG=$SCRATCH/fs.img
	MNT=$SCRATCH/mnt
	make_image "$IMG" 32M
	# A long flush interval keeps the workload's patches in memory while
	# the tests look at them.
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=60
	cd "$MNT"
}

teardown() {
	cd /
	common_teardown
	fstitch_mount_reap
}

workload() {
	local i
	mkdir -p d
	for i in $(seq 1 40); do
		echo "file $i" >"d/f$i"
	done
	dd if=/dev/urandom of=big bs=64k count=8 status=none
	mv d/f1 d/g1
	rm d/f2
}

# json_get FILTER: evaluate a jq filter on a fresh summary.
json_get() {
	"$STAT" --json | jq -er "$1"
}

@test "the summary during a workload has numbers that agree with each other" {
	workload
	run -0 "$STAT" --json
	echo "$output" >"$SCRATCH/s.json"
	# Each relation is one jq expression that must be true.
	local rel
	for rel in \
		'.blocks.dirty > 0' \
		'.blocks.dirty <= .blocks.cached' \
		'.blocks.ready <= .blocks.dirty' \
		'.blocks.inflight <= .blocks.dirty' \
		'.patches.pending > 0' \
		'.patches.pending <= .patches.created' \
		'.patches.committed <= .patches.created' \
		'.patches.hard + .patches.soft == .patches.byte + .patches.bit' \
		'.memory.undo_bytes <= .memory.engine_bytes' \
		'.memory.dirty_bytes == .blocks.dirty * .mode.block_size' \
		'.memory.engine_bytes <= .memory.peak_engine_bytes' \
		'.memory.dirty_bytes <= .memory.peak_dirty_bytes' \
		'(.memory.engine_dirty_ratio - .memory.engine_bytes / .memory.dirty_bytes) | fabs < 0.001' \
		'(.memory.engine_cache_ratio - .memory.engine_bytes / (.blocks.cached * .mode.block_size)) | fabs < 0.001' \
		'.io.barriers <= .io.rounds' \
		'.io.rollback_writes <= .io.block_writes' \
		'.mode.consistency == "softupdates"' \
		'.mode.flush_interval_ms == 60000'; do
		jq -e "$rel" "$SCRATCH/s.json" >/dev/null || {
			echo "false: $rel" >&2
			cat "$SCRATCH/s.json" >&2
			return 1
		}
	done
	# The per-block view agrees with the summary.
	run -0 "$STAT" --blocks --json --limit 100000
	echo "$output" >"$SCRATCH/b.json"
	jq -e '.block_list | length > 0' "$SCRATCH/b.json"
	jq -e '[.block_list[] | .ready <= .patches and .hard <= .patches and .patches > 0] | all' \
		"$SCRATCH/b.json"
	jq -e '(.block_list | length) == .blocks.dirty' "$SCRATCH/b.json"
	jq -e '[.block_list[].age_ms] as $a | $a == ($a | sort | reverse)' "$SCRATCH/b.json"
	# And the text form says the same in words.
	run -0 "$STAT"
	assert_line --regexp '^blocks: +[0-9]+ cached, [1-9][0-9]* dirty'
	assert_line --regexp '^mode: +consistency softupdates, flush interval 1m00s'
	assert_line --regexp '^memory: +undo .*engine/cache [0-9.]+%$'
}

@test "the data of a file deleted before the flusher reached it is not written" {
	dd if=/dev/urandom of=gone bs=64k count=4 status=none
	[ "$(json_get '.io.blocks_discarded')" = 0 ]
	rm gone
	run -0 json_get '.io.blocks_discarded'
	[ "$output" -ge 64 ]
	run -0 "$STAT"
	assert_line --regexp '^writes: .* rollback rewrites \([0-9.]+%\), [1-9][0-9]* blocks freed unwritten$'
}

@test "after a sync nothing is dirty and no patch is pending" {
	workload
	[ "$(json_get .blocks.dirty)" -gt 0 ]
	# fsync of the root directory syncs the file system (fsync is a
	# durability point); then wait for any round still in flight.
	sync .
	local n
	for ((n = 0; n < 600; n++)); do
		[ "$(json_get '.blocks.dirty + .patches.pending + .blocks.inflight')" = 0 ] && break
		sleep 0.1
	done
	run -0 "$STAT" --json
	echo "$output" | jq -e '.blocks.dirty == 0 and .patches.pending == 0 and .blocks.ready == 0'
	echo "$output" | jq -e '.memory.undo_bytes == 0 and .io.block_writes > 0 and .io.barriers > 0'
	run -0 "$STAT" --blocks
	assert_output "(no dirty blocks)"
}

@test "--json has every documented member, in every view" {
	workload
	local m
	run -0 "$STAT" --json
	echo "$output" >"$SCRATCH/s.json"
	python3 -m json.tool "$SCRATCH/s.json" >/dev/null
	for m in .schema .view .limit .truncated \
		.mode.consistency .mode.flush_interval_ms .mode.block_size .mode.max_blocks \
		.mode.dirty_limit \
		.blocks.cached .blocks.dirty .blocks.inflight .blocks.ready .blocks.oldest_dirty_ms \
		.patches.pending .patches.byte .patches.bit .patches.empty .patches.hard \
		.patches.soft .patches.created .patches.merged .patches.committed \
		.patches.undo_dropped \
		.memory.undo_bytes .memory.engine_bytes .memory.dirty_bytes \
		.memory.engine_dirty_ratio .memory.engine_cache_ratio .memory.peak_engine_bytes .memory.peak_dirty_bytes \
		.io.rounds .io.barriers .io.block_writes .io.rollback_writes .io.write_errors \
		.io.barrier_errors .io.dirty_waits .io.blocks_discarded .io.round_in_flight \
		.device.kind .device.flushes .device.flush_mean_ms .device.flush_max_ms \
		.device.fua_rounds .device.reconnects \
		.groups.served .groups.known .groups.open .groups.engaged .groups.sealed \
		.groups.closed .groups.counted; do
		jq -e "$m != null" "$SCRATCH/s.json" >/dev/null || {
			echo "missing $m" >&2
			return 1
		}
	done
	jq -e '.schema == "fstitch-stat/1" and .view == "summary"' "$SCRATCH/s.json"
	jq -e '.journal == null' "$SCRATCH/s.json"

	run -0 "$STAT" --blocks --json
	echo "$output" | jq -e '.block_list[0] | has("block") and has("patches") and has("ready")
		and has("hard") and has("undo_bytes") and has("age_ms") and has("state")
		and has("partial")'

	local blk
	blk=$(echo "$output" | jq -r '.block_list[0].block')
	run -0 "$STAT" --patches "$blk" --json
	echo "$output" | jq -e --argjson b "$blk" '.view == "patches" and .block == $b
		and (.patch_list | length > 0) and has("waited_for") and has("edges")'
	echo "$output" | jq -e '.patch_list[0] | has("id") and has("type") and has("block")
		and has("offset") and has("length") and has("undo_bytes") and has("hard")
		and has("held") and has("inflight") and has("waits_other_blocks")
		and has("waits_same_block") and has("afters") and has("group") and has("role")'

	run -0 "$STAT" --why "$blk" --json
	echo "$output" | jq -e '.view == "why" and (.why.end | IN("clean","ready","inflight",
		"held","write","depth","lost")) and (.why.chain | type == "array")'

	run -0 "$STAT" --groups --json
	echo "$output" | jq -e '.view == "groups" and (.group_list | type == "array")'

	run -0 "$STAT" --json 0.2 2
	assert_equal "${#lines[@]}" 2
	echo "${lines[1]}" | jq -e '.view == "rates" and .interval_s > 0 and
		(.rates | has("block_writes") and has("rounds") and has("barriers")
		and has("rollback_writes") and has("patches_created") and has("patches_merged")
		and has("patches_committed"))'
}

@test "--dot output renders with Graphviz" {
	workload
	a=$("$PGCREATE")
	run -0 "$STAT" --dot
	echo "$output" >"$SCRATCH/g.dot"
	assert_line --regexp '^digraph fstitch \{$'
	assert_line --regexp 'subgraph cluster_b[0-9]+ \{'
	assert_line --regexp '-> p[0-9]+;$'
	assert_line --partial "of group $a"
	run -0 dot -Tsvg "$SCRATCH/g.dot" -o "$SCRATCH/g.svg"
	grep -q '<svg' "$SCRATCH/g.svg"
	# --limit bounds the nodes drawn.
	run -0 "$STAT" --dot --limit 3
	[ "$(grep -cE '^\s+p[0-9]+ \[label' <<<"$output")" -le 3 ]
	echo "$output" | dot -Tsvg >/dev/null
	"$PGCLOSE" "$a"
}

@test "patchgroups show with the state pgcreate, pgdepend and pgrun gave them" {
	a=$("$PGCREATE")
	b=$("$PGCREATE")
	"$PGDEPEND" "$a" "$b"
	"$PGRUN" --group "$b" -- sh -c 'echo x > f'
	run -0 "$STAT" --groups --json
	echo "$output" >"$SCRATCH/g.json"
	jq -e --argjson a "$a" '.group_list[] | select(.id == $a) |
		.sealed and (.closed | not) and (.released | not) and .afters == 1 and .engaged == 0' \
		"$SCRATCH/g.json"
	jq -e --argjson b "$b" '.group_list[] | select(.id == $b) |
		.released and (.sealed | not) and (.closed | not) and .befores == 1 and .changes > 0' \
		"$SCRATCH/g.json"
	jq -e '.groups.known >= 2 and .groups.sealed >= 1 and .groups.open >= 2' "$SCRATCH/g.json"
	run -0 "$STAT" --groups
	assert_line --regexp "^ *$a +[0-9]+ +open,sealed "
	assert_line --regexp "^ *$b +[0-9]+ +open,released "
	# Closed groups say so (until they are durable and forgotten).
	"$PGCLOSE" "$b"
	run -0 "$STAT" --groups --json
	echo "$output" | jq -e --argjson b "$b" \
		'[.group_list[] | select(.id == $b)] | length == 0 or .[0].closed'
	"$PGCLOSE" "$a"
}

@test "--why explains a change that waits for another group's changes" {
	# a's change stays in memory (flush interval 60 s); b is made to
	# follow a, so b's change waits: b's head -> a's tail -> a's change.
	# (b appends to a's file: a new file's own inode and data would not
	# wait, only its name: fstitch(7), Patchgroups.)
	a=$("$PGCREATE")
	"$PGRUN" --group "$a" -- sh -c 'echo first > ga'
	b=$("$PGCREATE")
	"$PGDEPEND" "$a" "$b"
	"$PGRUN" --group "$b" -- sh -c 'echo second >> ga'
	local blk found=
	for blk in $("$STAT" --blocks --json --limit 100000 | jq -r '.block_list[].block'); do
		"$STAT" --why "$blk" --json >"$SCRATCH/w.json"
		if jq -e --argjson a "$a" --argjson b "$b" '
			[.why.chain[] | select(.group == $b and .role == "head")] | length > 0' \
			"$SCRATCH/w.json" >/dev/null &&
			jq -e --argjson a "$a" '
			[.why.chain[] | select(.group == $a and .role == "tail")] | length > 0' \
				"$SCRATCH/w.json" >/dev/null; then
			found=$blk
			break
		fi
	done
	[ -n "$found" ] || {
		echo "no block's --why chain goes through group $b's head and group $a's tail" >&2
		return 1
	}
	# The chain ends at a patch that only waits for the next round.
	jq -e '.why.end == "write" or .why.end == "held"' "$SCRATCH/w.json"
	run -0 "$STAT" --why "$found"
	assert_line --regexp "^block $found waits:$"
	assert_line --partial "head of group $b"
	assert_line --partial "tail of group $a"
	assert_line --regexp '^cause: '
	# The patches view of the same block names what its patches wait for.
	run -0 "$STAT" --patches "$found"
	assert_line --regexp "^block $found: [0-9]+ unwritten patches$"
	assert_output --partial "head of group $b"
	"$PGCLOSE" "$a"
	"$PGCLOSE" "$b"
}

@test "under consistency=journal the summary shows the transactions and the log" {
	cd /
	fstitch_mount_stop "$MNT"
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o consistency=journal,commit=3600,flush_interval=3600
	cd "$MNT"
	mkdir d
	echo a >d/f
	run -0 "$STAT"
	assert_line --regexp '^mode: +consistency journal,'
	# mke2fs starts the journal at sequence 1; its 1 KiB log has 1023
	# blocks after its superblock
	assert_line --regexp '^journal: +transaction 1 running \([1-9][0-9]* blocks, [0-9]+ ordered data changes\); 0 committing, 0 held, 0 checkpointing, 0 checkpointed; log 0 of 1023 blocks used; 0 commits, 0 blocks logged$'
	sync d/f
	json_get '.journal | .running_tid == 2 and .running_blocks == 0 and .commits == 1
		and .logged_blocks > 0 and .log_used > .logged_blocks and .log_total == 1023
		and .committing == 0 and .held == 1 and .checkpointing == 0
		and .checkpointed == 0'
}

# jstates: the journal's committing, held, checkpointing and checkpointed
# counts, as the JSON summary gives them.
jstates() {
	"$STAT" --json | jq -er '.journal | "\(.committing) \(.held) \(.checkpointing) \(.checkpointed)"'
}

@test "the summary shows each state a committed transaction goes through" {
	# With the timer and the flusher an hour away, only the file system's
	# own rules move a transaction on: an fsync makes its commit durable
	# and holds it; a commit that takes the held ones past a quarter of
	# the 1023-block log lets them all go home; the next fsync's rounds
	# write them there; a journal-data write too big for one transaction
	# commits a piece that nothing makes durable.  Each step's block
	# counts stay clear of the quarter (255) by tens of blocks.
	cd /
	fstitch_mount_stop "$MNT"
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" \
		-o consistency=journal-data,commit=3600,flush_interval=3600
	cd "$MNT"
	echo a >f
	sync f
	run -0 jstates
	assert_output '0 1 0 0'
	run -0 "$STAT"
	assert_line --regexp '^journal: +transaction 2 running .*; 0 committing, 1 held, 0 checkpointing, 0 checkpointed; '
	# 150 blocks more: two held, 171 log blocks
	dd if=/dev/zero of=g bs=1k count=150 status=none
	sync g
	run -0 jstates
	assert_output '0 2 0 0'
	# 150 more take them past 255: all three go, none home yet
	dd if=/dev/zero of=h bs=1k count=150 status=none
	sync h
	run -0 jstates
	assert_output '0 0 3 0'
	run -0 "$STAT"
	assert_line --regexp '; 0 committing, 0 held, 3 checkpointing, 0 checkpointed; '
	# one small commit: its fsync writes the three home, and holds it
	echo b >i
	sync i
	run -0 jstates
	assert_output '0 1 0 3'
	# 300 blocks do not fit one transaction: a piece is committed on
	# its own, its commit block not written; that commit took the held
	# ones past the quarter and let them go
	dd if=/dev/zero of=j bs=1k count=300 status=none
	run -0 jstates
	assert_output '1 0 1 0'
	json_get '.journal | .running_blocks > 0 and .log_used > 0'
}

@test "an image with a journal is mounted under journal unless a mode is given" {
	cd /
	fstitch_mount_stop "$MNT"
	make_stock_image "$SCRATCH/e3.img" 16M -t ext3 -b 1024
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT"
	run -0 "$STAT" -C "$MNT"
	assert_line --regexp '^mode: +consistency journal,'
	assert_line --regexp '^journal: +transaction [0-9]+ running'
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$SCRATCH/e3.img" "$MNT" -o consistency=softupdates
	run -0 "$STAT" -C "$MNT"
	assert_line --regexp '^mode: +consistency softupdates,'
	refute_line --regexp '^journal:'
}

@test "with ordering off (consistency=none) the same groups leave nothing waiting" {
	# The control for the test above: without dependencies no block's
	# chain can go through a group, so that test cannot pass by accident.
	cd /
	fstitch_mount_stop "$MNT"
	fstitch_mount_start "$IMG" "$MNT" -o flush_interval=60,consistency=none
	cd "$MNT"
	a=$("$PGCREATE")
	"$PGRUN" --group "$a" -- sh -c 'echo first > ga'
	b=$("$PGCREATE")
	"$PGDEPEND" "$a" "$b"
	"$PGRUN" --group "$b" -- sh -c 'echo x > f'
	run -0 "$STAT" --json
	echo "$output" | jq -e '.mode.consistency == "none" and .blocks.dirty > 0'
	echo "$output" | jq -e '.blocks.ready == .blocks.dirty'
	local blk n=0
	for blk in $("$STAT" --blocks --json --limit 100000 | jq -r '.block_list[].block'); do
		run -0 "$STAT" --why "$blk" --json
		echo "$output" | jq -e '.why.end == "ready" and .why.chain == []'
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
	"$PGCLOSE" "$a"
	"$PGCLOSE" "$b"
}

@test "a block with nothing to write is explained as clean" {
	# the last block of the 32 MiB file system (1 KiB blocks)
	run -0 "$STAT" --why 32767
	assert_output "block 32767 is clean: it has nothing waiting to be written"
	run -0 "$STAT" --patches 32767 --json
	echo "$output" | jq -e '.patch_list == []'
}

@test "a block past the end of the file system is an error, not clean" {
	local arg
	for arg in --why=32768 --why=999999 --patches=32768 "--why=32768 --json"; do
		# shellcheck disable=SC2086 # split on purpose
		run -1 --separate-stderr "$STAT" $arg
		assert_output ""
		[ "$stderr" = "fstitch-stat: no such block ${arg//[^0-9]/}: past the end of the file system" ]
	done
}

@test "ENG% stays a share of the cache when little is dirty" {
	local i
	mkdir d
	for i in $(seq 1 1500); do
		echo "file $i" >"d/f$i"
	done
	sync .
	for ((i = 0; i < 600; i++)); do
		[ "$(json_get '.blocks.dirty + .blocks.inflight')" = 0 ] && break
		sleep 0.1
	done
	# A few dirty blocks, next to the committed patches the cached
	# inodes still hold: engine memory over dirty data would be
	# thousands of percent.
	echo one >small
	run -0 "$STAT" --json
	echo "$output" >"$SCRATCH/s.json"
	jq -e '.blocks.dirty > 0 and .blocks.dirty < 10' "$SCRATCH/s.json"
	jq -e '.memory.engine_cache_ratio < 1 and
		(.memory.engine_cache_ratio - .memory.engine_bytes /
		 (.blocks.cached * .mode.block_size) | fabs) < 0.000001' "$SCRATCH/s.json"
	run -0 "$STAT" 1 1
	assert_line --index 0 --regexp 'ENG%'
	local eng
	eng=$(echo "${lines[1]}" | grep -o '[0-9.]*%' | head -n 1)
	eng=${eng%\%}
	# the same share as --json gives (the figures are a moment apart)
	awk -v e="$eng" 'BEGIN { exit !(e >= 0 && e < 100) }'
	run -0 "$STAT"
	assert_line --regexp '^memory: +undo .*engine/cache [0-9]+\.[0-9]%$'
	eng=$(echo "$output" | sed -n 's|^memory:.*engine/cache \([0-9.]*\)%$|\1|p')
	awk -v e="$eng" 'BEGIN { exit !(e >= 0 && e < 100) }'
}

@test "the mount can be named by a path inside it, -C or FSTITCH_CONTROL" {
	mkdir -p sub/dir
	cd /
	run -0 "$STAT" "$MNT/sub/dir"
	assert_line --regexp '^blocks: '
	run -0 "$STAT" -C "$MNT/sub"
	assert_line --regexp '^blocks: '
	FSTITCH_CONTROL=$MNT run -0 "$STAT" --json
	cd "$MNT/sub"
	run -0 "$STAT" 0.1 2
	assert_line --index 0 --regexp '^ +DIRTY +PENDING'
	assert_equal "${#lines[@]}" 3
}

@test "-q prints nothing and its status says whether the path is in a live mount" {
	run -0 "$STAT" -q
	assert_output ""
	run -1 --separate-stderr "$STAT" -q "$SCRATCH"
	assert_output ""
	assert_equal "$stderr" "fstitch-stat: '$SCRATCH' is not inside an fstitch mount"
}

@test "a closed standard output is an error, not written into the control socket" {
	# The socket would get descriptor 1, and the report would go to the
	# daemon as requests.
	run -1 --separate-stderr sh -c 'exec "$@" >&-' _ "$STAT"
	assert_equal "$stderr" "fstitch-stat: cannot write the output: Bad file descriptor"
	run -0 "$STAT" -q
}

@test "-v adds why the oldest dirty block waits" {
	workload
	run -0 "$STAT" -v
	assert_line --regexp '^blocks: '
	assert_line "oldest dirty block:"
	assert_line --regexp '^block [0-9]+ (waits:|is )'
}

@test "a path outside any fstitch mount is a clear one-line error, status 1" {
	cd "$SCRATCH"
	run -1 --separate-stderr "$STAT"
	assert_equal "$stderr" "fstitch-stat: '.' is not inside an fstitch mount"
	assert_output ""
	run -1 --separate-stderr "$STAT" /nonexistent/path
	assert_equal "$stderr" "fstitch-stat: cannot use '/nonexistent/path': No such file or directory"
	run -1 --separate-stderr "$STAT" -C /proc
	assert_equal "$stderr" "fstitch-stat: '/proc' is not inside an fstitch mount"
}

@test "bad arguments are a clear message and status 64" {
	local args
	while IFS='|' read -r args msg; do
		# shellcheck disable=SC2086
		run -64 --separate-stderr "$STAT" $args
		assert_equal "${stderr_lines[0]}" "fstitch-stat: $msg"
	done <<'EOF'
--why=abc|invalid block number 'abc'
--patches=-1|invalid block number '-1'
--limit=0|invalid limit '0' (1 to 100000)
--limit=100001|invalid limit '100001' (1 to 100000)
--watch=0|invalid interval '0' (seconds, 0.01 to 86400)
--blocks --groups|--blocks, --groups, --patches and --why are exclusive
--dot --json|--dot and --json are exclusive
1 0|invalid count '0'
. 0|invalid interval '0' (seconds, 0.01 to 86400)
. 1.2.3|invalid interval '1.2.3' (seconds, 0.01 to 86400)
1 2 3|invalid argument '3'
-q 1|-q cannot be used with an interval
. -C .|give either MOUNTPOINT or -C DIR, not both
--bogus|unrecognized option '--bogus'
EOF
	run -0 "$STAT" --help
	assert_output --partial "Exit status: 0 done, 1 failed"
}

@test "a daemon that went away is a clear error, status 1" {
	local sock
	sock=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.fstitch.control").decode())' "$MNT")
	cd /
	fstitch_mount_stop "$MNT"
	run -1 --separate-stderr "$STAT" "$sock"
	assert_equal "${#stderr_lines[@]}" 1
	assert_output ""
	[[ $stderr == "fstitch-stat: "* ]]
}

@test "a mount whose daemon was killed is a clear error, status 1" {
	cd /
	kill -9 "$FSTITCH_MOUNT_PID"
	wait "$FSTITCH_MOUNT_PID" 2>/dev/null || true
	run -1 --separate-stderr "$STAT" "$MNT"
	assert_output ""
	assert_equal "$stderr" "fstitch-stat: cannot use '$MNT': its fstitch daemon is gone (the mount is dead)"
}

@test "--why and --patches name extended-attribute blocks" {
	echo x >f
	# too big for the inode: the value goes to an attribute block
	setfattr -n user.k -v "$(head -c 300 /dev/zero | tr '\0' k)" f
	local blk found= waiter=
	for blk in $("$STAT" --blocks --json --limit 100000 | jq -r '.block_list[].block'); do
		if "$STAT" --why "$blk" --json | jq -e '.block_kind == "attribute"' >/dev/null; then
			found=$blk
			break
		fi
	done
	[ -n "$found" ] || {
		echo "no dirty block is named an attribute block" >&2
		return 1
	}
	run -0 "$STAT" --why "$found"
	assert_output --regexp "^attribute block $found "
	# the inode that points to it waits for it, and --patches says so
	for blk in $("$STAT" --blocks --json --limit 100000 | jq -r '.block_list[].block'); do
		if "$STAT" --patches "$blk" | grep -q "on attribute block $found"; then
			waiter=$blk
			break
		fi
	done
	[ -n "$waiter" ]
	run -0 "$STAT" --patches "$waiter" --json
	echo "$output" | jq -e --argjson b "$found" \
		'[.waited_for[] | select(.block == $b and .block_kind == "attribute")] | length > 0'
	# other blocks are not named
	run -0 "$STAT" --why 1 --json
	echo "$output" | jq -e '.block_kind == null'
}

@test "INTERVAL COUNT and --watch=SECONDS COUNT print COUNT lines, as vmstat" {
	workload
	# --watch=SECONDS then a number: the number is the count
	run -0 timeout 60 "$STAT" --watch=0.05 3
	assert_equal "${#lines[@]}" 4
	assert_line --index 0 --regexp '^ +DIRTY +PENDING'
	run -0 timeout 60 "$STAT" --watch 0.05 "$MNT" 2
	assert_equal "${#lines[@]}" 3
	run -64 --separate-stderr "$STAT" --watch=1 2 3
	assert_equal "${stderr_lines[0]}" "fstitch-stat: invalid argument '3'"
	# the first line comes at once, with rates since the mount started:
	# COUNT 1 never waits for the (hour-long) interval
	run -0 timeout 60 "$STAT" 3600 1
	assert_equal "${#lines[@]}" 2
	run -0 timeout 60 "$STAT" --json 3600 1
	assert_equal "${#lines[@]}" 1
	# the workload's writes, averaged since the mount: not zero
	echo "$output" | jq -e '.view == "rates" and .interval_s > 0 and
		.rates.patches_created > 0'
	run -0 timeout 60 "$STAT" --blocks 3600 1
	assert_line --index 0 --regexp '^-- at 0\.[0-9]s$'
}
