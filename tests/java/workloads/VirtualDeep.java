package workloads;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.locks.LockSupport;

/**
 * Two virtual threads (JDK 21 and later; compiled for 11, so built by reflection), each
 * {@link #DEPTH} frames down in {@link #down}, then looping in {@link #work}: computing,
 * allocating, and parking 1 ms. A remounted virtual thread gets only its top frames back on
 * the carrier's stack; the {@code down} frames below stay frozen in its continuation's stack
 * chunk until it returns into them, which it never does.
 */
public class VirtualDeep {
    static final int DEPTH = 150;
    static volatile long sink;
    static volatile Object kept;

    static void down(int depth) {
        if (depth == 0) {
            work();
        } else {
            down(depth - 1);
        }
    }

    static void work() {
        while (true) {
            long s = 0;
            for (int i = 0; i < 300_000; i++) {
                s += i * 31L ^ (s >>> 3);
                if ((i & 1023) == 0) {
                    kept = new long[64];
                }
            }
            sink = s;
            LockSupport.parkNanos(1_000_000);
        }
    }

    public static void main(String[] args) throws Exception {
        Class<?> ofVirtual = Class.forName("java.lang.Thread$Builder$OfVirtual");
        Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
        ThreadFactory factory = (ThreadFactory) ofVirtual.getMethod("factory").invoke(builder);
        for (int t = 0; t < 2; t++) {
            factory.newThread(() -> down(DEPTH)).start();
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
