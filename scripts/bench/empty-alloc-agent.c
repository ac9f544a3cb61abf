/* The floor of allocation sampling's cost, for scripts/bench-alloc.sh: a JVMTI agent whose
 * SampledObjectAlloc callback does nothing, so what a window with it costs is HotSpot's own
 * sampled-allocation path, which any JVMTI allocation sampler pays. Loaded with
 * `jcmd JVMTI.agent_load` (each load calls Agent_OnAttach): option "start:BYTES" enables the
 * event at that mean interval, "stop" disables it and gives the capability back, so that
 * another agent can take it. Not part of jtap. */
#include <jvmti.h>
#include <stdlib.h>
#include <string.h>

static jvmtiEnv *jvmti;

static void JNICALL nothing(jvmtiEnv *env, JNIEnv *jni, jthread thread, jobject object,
                            jclass klass, jlong size) {}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved) {
    if (jvmti == NULL && (*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_11) != JNI_OK)
        return 1;
    jvmtiCapabilities capabilities;
    memset(&capabilities, 0, sizeof capabilities);
    capabilities.can_generate_sampled_object_alloc_events = 1;
    if (options != NULL && strncmp(options, "start:", 6) == 0) {
        jvmtiEventCallbacks callbacks;
        memset(&callbacks, 0, sizeof callbacks);
        callbacks.SampledObjectAlloc = nothing;
        if ((*jvmti)->AddCapabilities(jvmti, &capabilities) != JVMTI_ERROR_NONE ||
            (*jvmti)->SetEventCallbacks(jvmti, &callbacks, sizeof callbacks) != JVMTI_ERROR_NONE ||
            (*jvmti)->SetHeapSamplingInterval(jvmti, atoi(options + 6)) != JVMTI_ERROR_NONE ||
            (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE,
                                               JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) != JVMTI_ERROR_NONE)
            return 2;
        return 0;
    }
    if (options != NULL && strcmp(options, "stop") == 0) {
        (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC,
                                           NULL);
        (*jvmti)->RelinquishCapabilities(jvmti, &capabilities);
        return 0;
    }
    return 3;
}
