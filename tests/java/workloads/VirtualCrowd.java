package workloads;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * 10,000 virtual threads (JDK 21 and later; compiled for 11, so built by reflection), half
 * named {@code crowd-N}, half unnamed, each looping: {@link #work} on its own, then
 * {@link #guarded} under one shared {@link ReentrantLock} (so its waiters park, unmounted),
 * then a 1 ms park. One holder in 16 parks 100 µs before it lets go of the lock: the others
 * wait for it even when the scheduler runs them all on one carrier (its second one sometimes
 * idles in {@code ForkJoinPool.awaitWork} for seconds, and two carriers never met at the lock).
 */
public class VirtualCrowd {
    static final int THREADS = 10_000;
    static final ReentrantLock LOCK = new ReentrantLock();
    static volatile long sink;
    static long guardedTotal;
    static int holds;

    static long work(long seed, int rounds) {
        long s = seed;
        for (int i = 0; i < rounds; i++) {
            s += i * 31L ^ (s >>> 3);
        }
        return s;
    }

    static void guarded(long seed) {
        LOCK.lock();
        try {
            guardedTotal += work(seed, 3_000);
            if (++holds % 16 == 0) {
                LockSupport.parkNanos(100_000);
            }
        } finally {
            LOCK.unlock();
        }
    }

    public static void main(String[] args) throws Exception {
        Class<?> ofVirtual = Class.forName("java.lang.Thread$Builder$OfVirtual");
        Object named = Thread.class.getMethod("ofVirtual").invoke(null);
        named = ofVirtual.getMethod("name", String.class, long.class).invoke(named, "crowd-", 0L);
        Object unnamed = Thread.class.getMethod("ofVirtual").invoke(null);
        ThreadFactory[] factories = {
            (ThreadFactory) ofVirtual.getMethod("factory").invoke(named),
            (ThreadFactory) ofVirtual.getMethod("factory").invoke(unnamed),
        };
        for (int t = 0; t < THREADS; t++) {
            long seed = t;
            factories[t % 2].newThread(() -> {
                while (true) {
                    sink += work(seed, 20_000);
                    guarded(seed);
                    LockSupport.parkNanos(1_000_000);
                }
            }).start();
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
