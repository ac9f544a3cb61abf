package workloads;

import java.util.ArrayList;
import java.util.List;

/**
 * Allocates from three known sites, each object 1040 bytes (16-byte header + 1024 bytes of
 * payload): {@code intSite} one int[256] per round, {@code longSite} two long[128],
 * {@code byteSite} four byte[1024] — bytes in the ratio 1:2:4. With the argument
 * {@code retain}, the int[] objects are kept (the newest 40 000, about 40 MiB) and the others
 * dropped at once. Paces itself to about 100 MiB/s; prints READY once running.
 */
public class AllocSites {
    static volatile Object sink;
    static final List<Object> KEPT = new ArrayList<>();
    static final int KEEP = 40_000;
    static boolean retain;
    static int next;

    static void intSite() {
        int[] a = new int[256];
        if (retain) {
            if (KEPT.size() < KEEP) {
                KEPT.add(a);
            } else {
                KEPT.set(next++ % KEEP, a);
            }
        } else {
            sink = a;
        }
    }

    static void longSite() {
        sink = new long[128];
    }

    static void byteSite() {
        sink = new byte[1024];
    }

    public static void main(String[] args) throws Exception {
        retain = args.length > 0 && args[0].equals("retain");
        System.out.println("READY");
        long bytesPerRound = 7 * 1040;
        long perMillisecond = 100L * 1024 * 1024 / 1000 / bytesPerRound;
        long start = System.nanoTime();
        for (long round = 0; ; round++) {
            intSite();
            longSite();
            longSite();
            byteSite();
            byteSite();
            byteSite();
            byteSite();
            if (round % perMillisecond == 0) {
                long ahead = round / perMillisecond - (System.nanoTime() - start) / 1_000_000;
                if (ahead > 0) {
                    Thread.sleep(ahead);
                }
            }
        }
    }
}
