package workloads;

/**
 * Leaks native memory from a JNI library (tests/native/native_leak.c, whose path is the first
 * argument): every 2 ms {@code leakSite} keeps 4 KiB for good, while {@code churnSite}
 * allocates 16 blocks of 16 KiB and frees them at once (16 times the bytes, none kept); every
 * other time {@code mapLeakSite} keeps a 4 KiB mapping and {@code mapChurnSite} maps and
 * unmaps 4 of 16 KiB. Prints READY once running.
 */
public class NativeLeak {
    static native void leak(int size);

    static native void churn(int size, int count);

    static native void mapLeak(int size);

    static native void mapChurn(int size, int count);

    static void leakSite() {
        leak(4096);
    }

    static void churnSite() {
        churn(16384, 16);
    }

    static void mapLeakSite() {
        mapLeak(4096);
    }

    static void mapChurnSite() {
        mapChurn(16384, 4);
    }

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        System.out.println("READY");
        for (long i = 0; ; i++) {
            leakSite();
            churnSite();
            if (i % 2 == 0) {
                mapLeakSite();
                mapChurnSite();
            }
            Thread.sleep(2);
        }
    }
}
