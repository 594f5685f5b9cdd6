/* The libFuzzer entry points every target defines (LLVMFuzzerInitialize
 * only where a target needs set-up).  The same files link either with
 * libFuzzer (make fuzz, clang) or with replay.c (make check, any
 * compiler), which runs each corpus file once. */
#ifndef FSTITCH_FUZZ_H
#define FSTITCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
