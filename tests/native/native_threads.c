/*
 * Native threads the JVM never sees, for the profiler's signal-safety tests: two spawner
 * threads start short-lived threads one after another, and all of them allocate and free
 * blocks too big for malloc's per-thread cache, so they hold an arena lock often, a new
 * thread from its very first malloc (which sets that cache up). None of them ever calls into the
 * JVM, so the JVM's thread-local data does not exist on them.
 *
 * Loaded by workloads.NativeThreads with System.load; the spawners start in JNI_OnLoad.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long finished;

/* Allocates and frees blocks too big for malloc's per-thread cache. */
static void churn(void) {
    for (int i = 0; i < 64; i++) {
        size_t size = 2048 + (size_t)i * 977 % 60000;
        char *block = malloc(size);
        if (block != NULL) {
            memset(block, i, size);
            free(block);
        }
    }
}

static void *short_lived(void *unused) {
    (void)unused;
    churn();
    atomic_fetch_add(&finished, 1);
    return NULL;
}

/* Churns itself too, so that engines timing only the threads present at their start (cpu,
 * ctimer) also catch a native thread inside malloc. */
static void *spawner(void *unused) {
    (void)unused;
    for (;;) {
        churn();
        pthread_t thread;
        if (pthread_create(&thread, NULL, short_lived, NULL) == 0) {
            pthread_join(thread, NULL);
        }
    }
    return NULL;
}

/* JNI_VERSION_1_6; jni.h is not needed for these two signatures. */
int JNI_OnLoad(void *vm, void *reserved) {
    (void)vm;
    (void)reserved;
    for (int i = 0; i < 2; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, spawner, NULL) == 0) {
            pthread_detach(thread);
        }
    }
    return 0x00010006;
}

/* static native long finished() of workloads.NativeThreads. */
long long Java_workloads_NativeThreads_finished(void *env, void *clazz) {
    (void)env;
    (void)clazz;
    return atomic_load(&finished);
}
