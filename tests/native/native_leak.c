/*
 * A JNI library that leaks, for the nativemem engine's tests (workloads.NativeLeak): `leak`
 * allocates blocks it never frees (kept in a list so the compiler cannot drop them), `churn`
 * allocates more bytes but frees each block at once; `mapLeak` and `mapChurn` do the same
 * with anonymous mappings (`mmap`, `munmap`). Declared without jni.h (the JNI types it
 * uses are int and pointers), so it builds without a JDK's headers.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* Maps `size` bytes of anonymous memory, touches them and keeps them for good. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLeak_mapLeak(void *env, void *cls, int size) {
    (void)env;
    (void)cls;
    char *m = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
        m[0] = 1;
    }
}

/* Maps `count` times `size` bytes and unmaps each mapping at once. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLeak_mapChurn(void *env, void *cls, int size, int count) {
    (void)env;
    (void)cls;
    for (int i = 0; i < count; i++) {
        char *m = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            m[0] = (char)i;
            churned += m[0];
            munmap(m, (size_t)size);
        }
    }
}
