package workloads;

import java.util.concurrent.atomic.LongAdder;

/**
 * A CPU-bound workload that reports its own throughput, for measuring profiler overhead:
 * worker threads (first argument, default 2) hash arrays through a few method calls, and
 * every 100 ms a line "ops <epoch millis> <total operations>" goes to stdout. Prints READY
 * first and runs until killed.
 */
public class Throughput {
    static final LongAdder OPS = new LongAdder();
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        OpsReport.run(threads, "throughput", Throughput::work, OPS);
    }

    static void work() {
        long[] data = new long[256];
        for (int i = 0; i < data.length; i++) {
            data[i] = i * 0x9E3779B97F4A7C15L;
        }
        while (true) {
            sink = round(data);
            OPS.increment();
        }
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
