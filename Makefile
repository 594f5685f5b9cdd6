# fstitch: one non-recursive Makefile.
#   make            build libfstitch and the commands into $(BUILD)
#   make check      install missing packages, build, run unit and bats tests
#   make asan       the unit tests under address and undefined sanitizers
#   make demo       a short end-to-end run on a default image
#   make bench      benchmarks (tests/bench), report under build/bench
#   make fuzz       libFuzzer targets (clang), run FUZZ_TIME=s or FUZZ_RUNS=n each
#   make install    PREFIX=/usr/local DESTDIR=
# V=1 shows full commands.

VERSION := 0.1.0
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
# mount(8) looks for its helpers (mount.fuse.fstitch) only in /sbin, whatever
# the prefix, as ntfs-3g's rootsbindir does.
MOUNTHELPERDIR ?= /sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# bats helpers for users' own crash tests (fstitch-crash(1)).
BATSDIR ?= $(PREFIX)/share/fstitch/bats

BUILD ?= build
CC ?= cc
OPT ?= -O2 -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wformat=2 -Wundef -Wno-unused-parameter \
	-Wmissing-declarations -Wvla
PKGS := fuse3 ext2fs com_err blkid uuid libnbd
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS = -std=gnu11 $(OPT) $(WARN) -fPIC -pthread -D_GNU_SOURCE \
	-D_FILE_OFFSET_BITS=64 -DFSTITCH_VERSION='"$(VERSION)"' \
	-Ilib $(PKG_CFLAGS) $(SANITIZE) $(CFLAGS)
ALL_LDFLAGS = -pthread $(SANITIZE) $(LDFLAGS)
LIBS = $(PKG_LIBS) -lpthread

ifeq ($(V),1)
Q :=
quiet = @:
else
Q := @
quiet = @printf '  %-6s %s\n'
endif

LIB_SRC := $(wildcard lib/*/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
# The public library is the C API and the client half of the control
# protocol: nothing else, so that it needs no libext2fs or libfuse and
# exports only what <fstitch/patchgroup.h> declares.
API_SRC := $(wildcard lib/api/*.c) lib/proto/ctl_client.c
API_OBJ := $(API_SRC:%.c=$(BUILD)/%.o)
API_SYM := lib/api/libfstitch.sym
# Only the API's own objects hide their symbols: the commands define
# variables glibc must see (argp_program_version).
$(API_OBJ): ALL_CFLAGS += -fvisibility=hidden
CMD_SRC := $(wildcard cmd/*.c)
CMDS := $(CMD_SRC:cmd/%.c=$(BUILD)/bin/%)
# tests/unit/test_*.c are test programs; other .c files there are helpers
# linked into every test program.
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_HELP_SRC := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_HELP_OBJ := $(UNIT_HELP_SRC:%.c=$(BUILD)/%.o)
UNITS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# tests/support/*.c: what the C tests and the bats suites' tools share (the
# e2fsck judge), in one archive linked into both.
SUPPORT_SRC := $(wildcard tests/support/*.c)
SUPPORT_OBJ := $(SUPPORT_SRC:%.c=$(BUILD)/%.o)
LIBTEST := $(BUILD)/libfstitch-tests.a
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCHES := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
# Everything in lib/, for the commands and tests (never installed).
LIBINT := $(BUILD)/libfstitch-internal.a
LIBA := $(BUILD)/libfstitch.a
LIBSO := $(BUILD)/libfstitch.so.0

.PHONY: all check check-build check-asan-build unit bats asan demo bench \
	install uninstall clean deps format lint fuzz fuzz-build
.DEFAULT_GOAL := all
# Keep object files of test and command programs between runs.
.SECONDARY:

all: $(LIBINT) $(LIBA) $(LIBSO) $(CMDS) $(BUILD)/fstitch.pc

deps:
	$(Q)bash .ci/deps.sh

$(BUILD)/%.o: %.c
	$(quiet) CC $<
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIBINT): $(LIB_OBJ)
	$(quiet) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

# The static API library is one relocatable object whose hidden symbols are
# made local, so that a program's own ctl_connect cannot clash with ours.
$(LIBTEST): $(SUPPORT_OBJ)
	$(quiet) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBA): $(API_OBJ)
	$(quiet) AR $@
	$(Q)ld -r -o $(BUILD)/libfstitch-api.o $^ && \
		objcopy --localize-hidden $(BUILD)/libfstitch-api.o && \
		rm -f $@ && ar rcs $@ $(BUILD)/libfstitch-api.o

$(LIBSO): $(API_OBJ) $(API_SYM)
	$(quiet) LD $@
	$(Q)$(CC) -shared -Wl,-soname,libfstitch.so.0 -Wl,--version-script=$(API_SYM) \
		-Wl,-z,defs $(ALL_LDFLAGS) -o $@ $(API_OBJ)

$(BUILD)/bin/%: $(BUILD)/cmd/%.o $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBINT) $(LIBS)

# pgrun starts once per link of a shell chain of groups, so its start-up
# is on every link's path: linked statically (position independent, so it
# keeps address-space randomisation), it maps no shared library and
# resolves no symbol before main, which saves most of the page faults of
# starting it.  It needs nothing of $(LIBS).  Sanitizer builds cannot link
# statically and keep the default.
PGRUN_STATIC := $(if $(SANITIZE),,-static-pie)
$(BUILD)/bin/pgrun: $(BUILD)/cmd/pgrun.o $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) $(PGRUN_STATIC) -o $@ $< $(LIBINT) -lpthread

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(UNIT_HELP_OBJ) $(LIBTEST) $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(UNIT_HELP_OBJ) $(LIBTEST) $(LIBINT) $(LIBS) -lcmocka

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBINT) $(LIBS) -lm

$(BUILD)/fstitch.pc: Makefile
	@mkdir -p $(@D)
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
		'includedir=$(INCLUDEDIR)' '' 'Name: fstitch' \
		'Description: Featherstitch patchgroups for FUSE file systems' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir}' \
		'Libs: -L$${libdir} -lfstitch' 'Libs.private: -pthread' > $@

# The test runner prints one summary line "N passed, N failed" and fails if
# anything failed.
# The corrupt-image test also runs under ASan/UBSan in check: its promise is
# "no out-of-bounds access", which only a sanitizer can see.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
CHECK_ASAN := test_e2_corrupt test_jbd2

# check builds two jobs at once (the sanitizer build alongside the other)
# unless make was given a -j of its own; the packages come first, as the
# compiler needs them.
CHECK_J = $(if $(findstring -j,$(MAKEFLAGS)),,-j2)

check: deps
	$(Q)$(MAKE) --no-print-directory $(CHECK_J) check-build
	$(Q)BUILD=$(BUILD) bash tests/run.sh

check-build: all $(UNITS) $(BENCHES) check-asan-build

check-asan-build:
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT='-O1 -g' \
		SANITIZE='$(ASAN_FLAGS)' $(CHECK_ASAN:%=$(BUILD)/asan/tests/%) \
		$(FUZZ_REPLAYS:$(BUILD)/%=$(BUILD)/asan/%)

unit: all $(UNITS)
	$(Q)BUILD=$(BUILD) bash tests/run.sh unit

bats: all
	$(Q)BUILD=$(BUILD) bash tests/run.sh bats

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build/asan OPT='-O1 -g' \
		SANITIZE='$(ASAN_FLAGS)' unit

demo: deps all
	$(Q)BUILD=$(BUILD) bash tests/demo.sh

bench: all $(BENCHES)
	$(Q)bash .ci/deps.sh bench
	$(Q)BUILD=$(BUILD) bash tests/bench/run.sh $(BENCH_ARGS)

# The other patchgroup calls are documented in pg_create(3).
PG_MANLINKS := pg_depend pg_engage pg_disengage pg_sync pg_close pg_set_control \
	pg_fsync_policy pg_order_policy pg_status pg_switch pg_leave

# Every directory install makes that was not there before is listed in
# INSTALLED_DIRS, so that uninstall removes those (once empty) and no others.
INSTALL_DIRS := $(BINDIR) $(SBINDIR) $(MOUNTHELPERDIR) $(LIBDIR) \
	$(INCLUDEDIR)/fstitch $(PKGCONFIGDIR) $(BASHCOMPDIR) $(BATSDIR) \
	$(PREFIX)/share/fstitch \
	$(addprefix $(MANDIR)/man,$(sort $(subst .,,$(suffix $(wildcard man/*.[1-8])))))
INSTALLED_DIRS = $(DESTDIR)$(PREFIX)/share/fstitch/installed-dirs

install: all
	set -e; new=; for d in $(INSTALL_DIRS:%=$(DESTDIR)%); do \
		m=$$d; while [ -n "$$m" ] && [ ! -e "$$m" ]; do new="$$new $$m"; m=$${m%/*}; done; \
		install -d $$d; done; \
		for d in $$new; do echo "$$d"; done >>$(INSTALLED_DIRS)
	for c in $(CMDS); do install -m 755 $$c $(DESTDIR)$(BINDIR)/; done
	[ ! -e $(BUILD)/bin/fstitch-mkfs ] || \
		ln -sf $(BINDIR)/fstitch-mkfs $(DESTDIR)$(SBINDIR)/mkfs.fstitch
	[ ! -e $(BUILD)/bin/fstitch-mount ] || \
		ln -sf $(BINDIR)/fstitch-mount $(DESTDIR)$(MOUNTHELPERDIR)/mount.fuse.fstitch
	install -m 644 $(LIBA) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libfstitch.so.0 $(DESTDIR)$(LIBDIR)/libfstitch.so
	install -m 644 lib/fstitch/*.h $(DESTDIR)$(INCLUDEDIR)/fstitch/
	install -m 644 $(BUILD)/fstitch.pc $(DESTDIR)$(PKGCONFIGDIR)/
	for m in man/*.[1-8]; do [ -e "$$m" ] || continue; \
		s=$${m##*.}; install -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
	[ ! -e man/pg_create.3 ] || for f in $(PG_MANLINKS); do \
		ln -sf pg_create.3 $(DESTDIR)$(MANDIR)/man3/$$f.3; done
	# man(1) finds the command links' names too, through .so pages as
	# e2fsprogs installs mkfs.ext2.8.
	[ ! -e man/fstitch-mkfs.8 ] || \
		echo '.so man8/fstitch-mkfs.8' >$(DESTDIR)$(MANDIR)/man8/mkfs.fstitch.8
	[ ! -e man/fstitch-mount.8 ] || \
		echo '.so man8/fstitch-mount.8' >$(DESTDIR)$(MANDIR)/man8/mount.fuse.fstitch.8
	for f in completions/*.bash; do [ -e "$$f" ] || continue; \
		n=$$(basename $$f .bash); \
		install -m 644 $$f $(DESTDIR)$(BASHCOMPDIR)/$$n; done
	[ ! -e completions/fstitch-mkfs.bash ] || \
		ln -sf fstitch-mkfs $(DESTDIR)$(BASHCOMPDIR)/mkfs.fstitch
	[ ! -e completions/fstitch-mount.bash ] || \
		ln -sf fstitch-mount $(DESTDIR)$(BASHCOMPDIR)/mount.fuse.fstitch
	install -m 644 share/bats/*.bash $(DESTDIR)$(BATSDIR)/

uninstall:
	for c in $(CMDS); do rm -f $(DESTDIR)$(BINDIR)/$${c##*/}; done
	rm -f $(DESTDIR)$(SBINDIR)/mkfs.fstitch $(DESTDIR)$(MOUNTHELPERDIR)/mount.fuse.fstitch
	rm -f $(DESTDIR)$(LIBDIR)/libfstitch.a $(DESTDIR)$(LIBDIR)/libfstitch.so*
	rm -rf $(DESTDIR)$(INCLUDEDIR)/fstitch
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/fstitch.pc
	for m in man/*.[1-8]; do [ -e "$$m" ] || continue; s=$${m##*.}; \
		rm -f $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done
	for f in $(PG_MANLINKS); do rm -f $(DESTDIR)$(MANDIR)/man3/$$f.3; done
	rm -f $(DESTDIR)$(MANDIR)/man8/mkfs.fstitch.8 $(DESTDIR)$(MANDIR)/man8/mount.fuse.fstitch.8
	for f in completions/*.bash; do [ -e "$$f" ] || continue; \
		rm -f $(DESTDIR)$(BASHCOMPDIR)/$$(basename $$f .bash); done
	rm -f $(DESTDIR)$(BASHCOMPDIR)/mkfs.fstitch $(DESTDIR)$(BASHCOMPDIR)/mount.fuse.fstitch
	for f in share/bats/*.bash; do rm -f $(DESTDIR)$(BATSDIR)/$${f##*/}; done
	# The directories install made, children first, each only if empty.
	dirs=$$(sort -ru $(INSTALLED_DIRS) 2>/dev/null); rm -f $(INSTALLED_DIRS); \
		for d in $$dirs $(DESTDIR)$(BATSDIR) $(DESTDIR)$(PREFIX)/share/fstitch; do \
		[ ! -d "$$d" ] || rmdir --ignore-fail-on-non-empty "$$d"; done

format:
	clang-format -i lib/*/*.[ch] cmd/*.c tests/unit/*.[ch] tests/support/*.[ch]

lint:
	for m in man/*.[1-8]; do mandoc -Tlint -Wwarning $$m; done

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# Small test tools (tests/tools/*.c, each with its own main) used by bats.
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOLS := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/tools/%)
all: $(TOOLS)
$(BUILD)/tests/tools/%: $(BUILD)/tests/tools/%.o $(LIBTEST) $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBTEST) $(LIBINT) $(LIBS)

# Fuzzing (tests/fuzz).  Each target tests/fuzz/fuzz_NAME.c defines
# LLVMFuzzerTestOneInput.  `make fuzz` builds it with clang and libFuzzer
# under ASan and UBSan into build/fuzz and runs each target in turn
# (tests/fuzz/run.sh: FUZZ_TIME seconds or FUZZ_RUNS executions each,
# FUZZ_TARGETS to choose).  The same sources linked with replay.c, built by
# the ordinary compiler, replay the committed corpus in make check.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAYS := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/replay_%)
FUZZ_CC ?= clang-14
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
FUZZ_TIME ?=
FUZZ_RUNS ?=
FUZZ_TARGETS ?= $(FUZZ_NAMES)

$(BUILD)/tests/fuzz/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(LIBINT)
	$(quiet) LD $@
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Linked with -fsanitize=fuzzer: libFuzzer supplies main.  Objects are
# built with fuzzer-no-link, so the library is instrumented for coverage.
$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(LIBINT)
	$(quiet) LD $@
	$(Q)$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

fuzz-build: $(FUZZ_NAMES:%=$(BUILD)/fuzz_%)

fuzz:
	$(Q)bash .ci/deps.sh fuzz
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/fuzz CC=$(FUZZ_CC) OPT='-O1 -g' \
		SANITIZE='-fsanitize=fuzzer-no-link $(FUZZ_SANITIZE)' fuzz-build
	$(Q)FUZZ_BUILD=$(BUILD)/fuzz FUZZ_TIME='$(FUZZ_TIME)' FUZZ_RUNS='$(FUZZ_RUNS)' \
		bash tests/fuzz/run.sh $(FUZZ_TARGETS)
