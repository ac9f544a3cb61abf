package workloads;

import java.util.concurrent.atomic.LongAdder;

/**
 * A CPU-bound workload that reports its own throughput, for measuring profiler overhead:
 * worker threads (first argument, default 2) hash arrays through a few method calls, and
 * every 100 ms a line "ops <epoch millis> <total operations>" goes to stdout. With a second
 * argument {@code depth}, each operation first descends that many frames (two methods in
 * turn, which the JIT compiles apart, not as one loop) and hashes at the bottom: a steady
 * deep-stack workload. Prints READY first and runs until killed.
 */
public class Throughput {
    static final LongAdder OPS = new LongAdder();
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int depth = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        OpsReport.run(threads, "throughput", () -> work(depth), OPS);
    }

    static void work(int depth) {
        long[] data = new long[256];
        for (int i = 0; i < data.length; i++) {
            data[i] = i * 0x9E3779B97F4A7C15L;
        }
        while (true) {
            sink = depth == 0 ? round(data) : down(data, depth);
            OPS.increment();
        }
    }

    static long down(long[] data, int left) {
        return left == 0 ? round(data) : across(data, left - 1) + 1;
    }

    static long across(long[] data, int left) {
        return left == 0 ? round(data) : down(data, left - 1) ^ 1;
    }

    static long round(long[] data) {
        long h = 0;
        for (int i = 0; i < data.length; i++) {
            h = mix(h, data[i]);
        }
        return fold(h);
    }

    static long mix(long h, long v) {
        return Long.rotateLeft(h ^ v, 27) * 0xC2B2AE3D27D4EB4FL;
    }

    static long fold(long h) {
        return h ^ (h >>> 33);
    }
}
