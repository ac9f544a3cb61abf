package workloads;

/**
 * Deep stacks that are all different, for profile reports of hundreds of megabytes:
 * {@code DeepStacks <levels> <threads>} runs threads named {@code deep-<i>} that each recurse
 * {@code levels} levels (two frames each: {@code down} and one of four methods picked by
 * pseudo-random bits), spin for about a millisecond at the bottom, unwind and take a new
 * path; nearly every sample of such a thread therefore has a stack of its own.
 */
public class DeepStacks {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int levels = Integer.parseInt(args[0]);
        int threads = Integer.parseInt(args[1]);
        for (int i = 0; i < threads; i++) {
            long seed = 0x9E3779B97F4A7C15L * (i + 1);
            Thread thread = new Thread(null, () -> run(levels, seed), "deep-" + i, 64L << 20);
            thread.setDaemon(true);
            thread.start();
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void run(int levels, long seed) {
        while (true) {
            seed = next(seed);
            sink += a(seed, levels);
        }
    }

    static long next(long seed) {
        return seed * 6364136223846793005L + 1442695040888963407L;
    }

    /** Goes one frame deeper through the method the seed's top bits pick. */
    static long down(long seed, int left) {
        if (left == 0) {
            return spin(seed);
        }
        long next = next(seed);
        switch ((int) (next >>> 62)) {
            case 0: return a(next, left - 1);
            case 1: return b(next, left - 1);
            case 2: return c(next, left - 1);
            default: return d(next, left - 1);
        }
    }

    static long a(long seed, int left) {
        return down(seed, left) + 1;
    }

    static long b(long seed, int left) {
        return down(seed, left) + 2;
    }

    static long c(long seed, int left) {
        return down(seed, left) + 3;
    }

    static long d(long seed, int left) {
        return down(seed, left) + 4;
    }

    static long spin(long seed) {
        long end = System.nanoTime() + 1_000_000;
        long x = seed;
        while (System.nanoTime() < end) {
            x = next(x);
        }
        return x;
    }
}
