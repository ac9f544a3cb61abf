package workloads;

import java.util.concurrent.atomic.LongAdder;

/**
 * A lock-heavy workload that reports its own throughput, for measuring the overhead of lock
 * profiling: worker threads (first argument, default 4) each run operations that update a
 * counter under one shared monitor (contended: the threads wait for each other), then do some
 * work under a monitor of their own (uncontended) and some outside any monitor. Every 100 ms a
 * line "ops <epoch millis> <total operations>" goes to stdout. Prints READY first and runs
 * until killed.
 */
public class LockThroughput {
    static final LongAdder OPS = new LongAdder();
    static final Object SHARED = new Object();
    static long shared;
    static volatile long sink;

    static final class Own {
        long value;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        OpsReport.run(threads, "lock", LockThroughput::work, OPS);
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

    static long contended(long h) {
        synchronized (SHARED) {
            for (int i = 0; i < 200; i++) {
                shared = Long.rotateLeft(shared ^ h, 13) * 0xC2B2AE3D27D4EB4FL;
            }
            return h ^ shared;
        }
    }

    static long uncontended(Own own, long h) {
        synchronized (own) {
            for (int i = 0; i < 200; i++) {
                own.value = Long.rotateLeft(own.value ^ h, 17) * 0x9E3779B97F4A7C15L;
            }
            return h + own.value;
        }
    }

    static long outside(long h) {
        for (int i = 0; i < 2000; i++) {
            h = Long.rotateLeft(h, 5) * 0x9E3779B97F4A7C15L + i;
        }
        return h;
    }
}
