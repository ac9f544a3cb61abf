/*
 * A JNI library that leaks, for the nativemem engine's tests (workloads.NativeLeak): `leak`
 * allocates blocks it never frees (kept in a list so the compiler cannot drop them), `churn`
 * allocates more bytes but frees each block at once. Declared without jni.h (the JNI types it
 * uses are int and pointers), so it builds without a JDK's headers.
 */
#include <stdlib.h>
#include <string.h>

struct block {
    struct block *next;
};

static struct block *leaked;
static volatile long churned;

/* Keeps a new block of `size` bytes for good. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLeak_leak(void *env, void *cls, int size) {
    (void)env;
    (void)cls;
    struct block *b = malloc((size_t)size);
    if (b != NULL) {
        memset(b, 1, (size_t)size);
        b->next = leaked;
        leaked = b;
    }
}

/* Allocates `count` blocks of `size` bytes and frees each one at once. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLeak_churn(void *env, void *cls, int size, int count) {
    (void)env;
    (void)cls;
    for (int i = 0; i < count; i++) {
        char *b = calloc(1, (size_t)size);
        if (b != NULL) {
            b[size - 1] = (char)i;
            churned += b[size - 1];
            free(b);
        }
    }
}
