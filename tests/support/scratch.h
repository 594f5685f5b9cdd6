/* Scratch files of the C tests and of the bats suites' tools: one place
 * decides where they go.  libc only. */
#ifndef FSTITCH_TESTS_SCRATCH_H
#define FSTITCH_TESTS_SCRATCH_H

/* A directory for scratch files: $E2T_TMPDIR, /dev/shm, $TMPDIR or /tmp. */
const char *e2t_tmpdir(void);
/* A new empty scratch file path (malloc'd; the file exists, empty), or NULL.
 * tag goes into the name. */
char *e2t_tmpfile(const char *tag);
/* A new scratch directory (malloc'd), or NULL. */
char *e2t_tmpdir_new(const char *tag);

#endif
