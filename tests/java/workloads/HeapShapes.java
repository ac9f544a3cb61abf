package workloads;

import java.util.ArrayList;
import java.util.List;

/**
 * Retains objects of known classes and counts, prints READY, then stays quiet (no allocation)
 * so that heap histograms taken one after the other agree. An optional argument retains
 * about that many MiB more in 64-byte arrays (to make a big heap for benchmarks).
 */
public class HeapShapes {
    /** 20 000 retained instances. */
    static final class Inner {
        final int id;

        Inner(int id) {
            this.id = id;
        }
    }

    static final List<Object> RETAINED = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 20_000; i++) {
            RETAINED.add(new Inner(i));
        }
        for (int i = 0; i < 3_000; i++) {
            RETAINED.add(new int[2][3]);
        }
        for (int i = 0; i < 5_000; i++) {
            RETAINED.add(new String[] {"a", "b"});
        }
        long fillMib = args.length > 0 ? Long.parseLong(args[0]) : 0;
        for (long i = 0; i < fillMib * 1024 * 1024 / 80; i++) {
            RETAINED.add(new byte[64]);
        }
        System.gc();
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
