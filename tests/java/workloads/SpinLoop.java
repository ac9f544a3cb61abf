package workloads;

/**
 * A traced method whose body is a loop without calls, which the JIT inlines into a hot
 * caller: what a trace under a threshold must still time (a compiler free to move or merge
 * the probes' two clock reads would see such a call last no time). The main thread calls
 * {@link Spin#spin} 200,000 times briefly, then once for 40 million iterations (tens of
 * milliseconds), and again; after each long call it prints {@code LONG <calls so far>
 * <milliseconds>}. Prints {@code READY} after three seconds of warm-up.
 */
public class SpinLoop {
    static final class Spin {
        static long spin(long n) {
            long x = 0;
            for (long i = 0; i < n; i++) {
                x = x * 31 + i;
            }
            return x;
        }
    }

    public static void main(String[] args) {
        long sink = 0;
        long longCalls = 0;
        long warmUntil = System.nanoTime() + 3_000_000_000L;
        boolean ready = false;
        while (true) {
            for (int i = 0; i < 200_000; i++) {
                sink += Spin.spin(100);
            }
            long start = System.nanoTime();
            sink += Spin.spin(40_000_000);
            long took = System.nanoTime() - start;
            longCalls++;
            System.out.println("LONG " + longCalls + " " + took / 1_000_000 + " " + (sink & 1));
            if (!ready && start > warmUntil) {
                System.out.println("READY");
                ready = true;
            }
        }
    }
}
