package workloads;

import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A lock-heavy workload that reports its own throughput, for measuring the overhead of lock
 * profiling: worker threads (first argument, default 4) each run operations that update a
 * counter under one shared lock (contended: the threads wait for each other), then do some
 * work under a lock of their own (uncontended) and some outside any lock. The locks are
 * monitors ({@code synchronized}), or {@code ReentrantLock}s with the second argument
 * {@code reentrant}. Every 100 ms a line "ops <epoch millis> <total operations>" goes to
 * stdout. Prints READY first and runs until killed.
 */
public class LockThroughput {
    static final LongAdder OPS = new LongAdder();
    static final Object SHARED = new Object();
    static final ReentrantLock SHARED_LOCK = new ReentrantLock();
    static long shared;
    static volatile long sink;

    static final class Own {
        final ReentrantLock lock = new ReentrantLock();
        long value;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        boolean reentrant = args.length > 1 && args[1].equals("reentrant");
        OpsReport.run(threads, "lock", reentrant ? LockThroughput::workReentrant : LockThroughput::work, OPS);
    }

    static void work() {
        Own own = new Own();
        long h = Thread.currentThread().getId();
        while (true) {
            h = contended(h);
            h = uncontended(own, h);
            h = outside(h);
            sink = h;
            OPS.increment();
        }
    }

    static void workReentrant() {
        Own own = new Own();
        long h = Thread.currentThread().getId();
        while (true) {
            h = contendedReentrant(h);
            h = uncontendedReentrant(own, h);
            h = outside(h);
            sink = h;
            OPS.increment();
        }
    }

    static long contended(long h) {
        synchronized (SHARED) {
            return mixShared(h);
        }
    }

    static long uncontended(Own own, long h) {
        synchronized (own) {
            return mixOwn(own, h);
        }
    }

    /** The work done under the shared lock. */
    static long mixShared(long h) {
        for (int i = 0; i < 200; i++) {
            shared = Long.rotateLeft(shared ^ h, 13) * 0xC2B2AE3D27D4EB4FL;
        }
        return h ^ shared;
    }

    /** The work done under a thread's own lock. */
    static long mixOwn(Own own, long h) {
        for (int i = 0; i < 200; i++) {
            own.value = Long.rotateLeft(own.value ^ h, 17) * 0x9E3779B97F4A7C15L;
        }
        return h + own.value;
    }

    static long contendedReentrant(long h) {
        SHARED_LOCK.lock();
        try {
            return mixShared(h);
        } finally {
            SHARED_LOCK.unlock();
        }
    }

    static long uncontendedReentrant(Own own, long h) {
        own.lock.lock();
        try {
            return mixOwn(own, h);
        } finally {
            own.lock.unlock();
        }
    }

    static long outside(long h) {
        for (int i = 0; i < 2000; i++) {
            h = Long.rotateLeft(h, 5) * 0x9E3779B97F4A7C15L + i;
        }
        return h;
    }
}
