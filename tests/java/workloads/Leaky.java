package workloads;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * A leak beside an equal allocation rate that is collected: every millisecond {@code remember}
 * keeps a 2 KiB array in a list that is never emptied (the leak, about 2 MiB/s) and
 * {@code discard} makes one of the same size that is dropped at once, while {@code churn}
 * allocates short-lived garbage at about 100 MiB/s so that young collections come every
 * second or so. Prints READY once running; runs until killed.
 */
public class Leaky {
    static final List<byte[]> CACHE = new ArrayList<>();
    static volatile byte[] last;
    static volatile Object escaped;

    public static void main(String[] args) {
        Thread garbage = new Thread(Leaky::churnForever, "churner");
        garbage.setDaemon(true);
        garbage.start();
        System.out.println("READY");
        long start = System.nanoTime();
        for (long round = 0; ; round++) {
            remember();
            discard();
            long ahead = round - (System.nanoTime() - start) / 1_000_000;
            if (ahead > 0) {
                LockSupport.parkNanos(ahead * 1_000_000);
            }
        }
    }

    static void remember() {
        CACHE.add(new byte[2048]);
    }

    static void discard() {
        last = new byte[2048];
    }

    static void churnForever() {
        long start = System.nanoTime();
        for (long round = 0; ; round++) {
            churn();
            // 100 arrays of 1 KiB per 1 ms round: about 100 MiB/s.
            long ahead = round - (System.nanoTime() - start) / 1_000_000;
            if (ahead > 0) {
                LockSupport.parkNanos(ahead * 1_000_000);
            }
        }
    }

    static void churn() {
        // Each array escapes (the JIT would not allocate it otherwise) and dies at once.
        for (int i = 0; i < 100; i++) {
            escaped = new long[128];
        }
    }
}
