package workloads;

import java.util.ArrayList;
import java.util.List;

/** Idles with a named thread and a retained allocation; prints READY once started. */
public class Sleeper {
    /** Objects of a class the tests look for in heap histograms. */
    static final class RetainedMarker {
        final long[] payload = new long[4];
    }

    static final List<RetainedMarker> RETAINED = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 1000; i++) {
            RETAINED.add(new RetainedMarker());
        }
        Thread worker = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "jtap-test-worker");
        worker.setDaemon(true);
        worker.start();
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
