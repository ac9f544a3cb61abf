package workloads;

/**
 * One thread per kind of Java frame, for profilers to tell apart: `interpretedLoop` is meant
 * to stay in the interpreter (run with -XX:CompileCommand=exclude on it), `compiledLoop` to be
 * compiled on its own (dontinline) and `inlinedMix`, which it calls, to be inlined into it
 * (inline). Prints READY once both threads run; runs until killed.
 */
public class FrameKinds {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Thread interpreted = new Thread(() -> {
            while (true) {
                sink += interpretedLoop(100_000);
            }
        }, "interpreted");
        Thread compiled = new Thread(() -> {
            while (true) {
                sink += compiledLoop(1_000_000);
            }
        }, "compiled");
        for (Thread t : new Thread[] {interpreted, compiled}) {
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }

    static long interpretedLoop(int iterations) {
        long x = sink;
        for (int i = 0; i < iterations; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    static long compiledLoop(int iterations) {
        long x = sink;
        for (int i = 0; i < iterations; i++) {
            x = inlinedMix(x + i);
        }
        return x;
    }

    /** A 64-bit finaliser: enough instructions for samples to land in its inlined copy. */
    static long inlinedMix(long x) {
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        x *= 0xc4ceb9fe1a85ec53L;
        x ^= x >>> 33;
        return x;
    }
}
