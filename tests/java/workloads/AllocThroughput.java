package workloads;

import java.util.concurrent.atomic.LongAdder;

/**
 * An allocation-heavy workload that reports its own throughput, for measuring the overhead of
 * allocation sampling: worker threads (first argument, default 2) each run operations that
 * allocate short-lived objects of mixed sizes from a few sites (a small object, a long[16],
 * a byte[] of 64..2047 bytes, a StringBuilder and its String), touch them and drop them; the
 * second argument (default 0) adds that many frames under the loop, for deeper stacks. Every
 * 100 ms a line "ops <epoch millis> <total operations>" goes to stdout. Prints READY first and
 * runs until killed.
 */
public class AllocThroughput {
    static final LongAdder OPS = new LongAdder();
    static volatile long sink;

    static final class Point {
        final long x;
        final long y;

        Point(long x, long y) {
            this.x = x;
            this.y = y;
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int depth = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        OpsReport.run(threads, "alloc", () -> descend(depth), OPS);
    }

    static long descend(int frames) {
        if (frames == 0) {
            work();
            return 0;
        }
        return descend(frames - 1) + frames;
    }

    static void work() {
        long seed = Thread.currentThread().getId() * 0x9E3779B97F4A7C15L;
        while (true) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            sink = operation(seed);
            OPS.increment();
        }
    }

    static long operation(long seed) {
        Point p = point(seed);
        long[] words = words(seed);
        byte[] bytes = bytes(seed);
        String text = text(seed);
        return p.x ^ p.y ^ words[(int) (seed >>> 60)] ^ bytes[bytes.length - 1] ^ text.length();
    }

    static Point point(long seed) {
        return new Point(seed, seed >>> 7);
    }

    static long[] words(long seed) {
        long[] words = new long[16];
        for (int i = 0; i < words.length; i++) {
            words[i] = seed + i;
        }
        return words;
    }

    static byte[] bytes(long seed) {
        byte[] bytes = new byte[64 + (int) ((seed >>> 40) & 1983)];
        bytes[bytes.length - 1] = (byte) seed;
        return bytes;
    }

    static String text(long seed) {
        return new StringBuilder(32).append("op-").append(seed & 0xFFFF).toString();
    }
}
