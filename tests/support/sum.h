/* A fast 64-bit sum of bytes, for the tests to tell crash-state images
 * apart (not a cryptographic hash).  libc only. */
#ifndef FSTITCH_TESTS_SUM_H
#define FSTITCH_TESTS_SUM_H

#include <stddef.h>
#include <stdint.h>

/* The sum of no bytes: where a sum starts. */
#define E2T_SUM_START 0xcbf29ce484222325ull

/* Sum h carried on over the len bytes at data: FNV-1a a word at a time,
 * each word's product folded down once more. */
uint64_t e2t_sum_more(uint64_t h, const void *data, size_t len);

#endif
