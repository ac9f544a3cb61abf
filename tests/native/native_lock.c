/*
 * A JNI library whose threads contend on one pthread mutex, for the nativelock engine's tests
 * (workloads.NativeLock): `contend` takes the shared mutex and holds it for `micros`
 * microseconds (asleep), so the other threads calling it wait; `alone` takes a mutex of its
 * own that no other thread wants (uncontended: never a wait). Declared without jni.h (the
 * JNI types it uses are int and pointers), so it builds without a JDK's headers.
 */
#include <pthread.h>
#include <time.h>

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static volatile long held;

/* Holds the shared mutex for `micros` microseconds. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLock_contend(void *env, void *cls, int micros) {
    (void)env;
    (void)cls;
    pthread_mutex_lock(&shared);
    struct timespec pause = {0, (long)micros * 1000L};
    nanosleep(&pause, NULL);
    held++;
    pthread_mutex_unlock(&shared);
}

/* Takes and releases a mutex no other thread uses, `count` times. */
__attribute__((noinline, visibility("default"))) void Java_workloads_NativeLock_alone(void *env, void *cls, int count) {
    (void)env;
    (void)cls;
    static __thread pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
    for (int i = 0; i < count; i++) {
        pthread_mutex_lock(&own);
        held++;
        pthread_mutex_unlock(&own);
    }
}
