package workloads;

import java.util.ArrayList;
import java.util.List;

/**
 * Stress for profilers: short-lived threads started and ended all the time (four at a time,
 * each living a few milliseconds), each allocating garbage, plus a thread forcing collections
 * (a GC storm). Prints READY and runs until killed.
 */
public class Churn {
    static volatile Object sink;

    public static void main(String[] args) throws Exception {
        Thread collector = new Thread(Churn::collect, "churn-gc");
        collector.setDaemon(true);
        collector.start();
        System.out.println("READY");
        int n = 0;
        while (true) {
            List<Thread> batch = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                Thread t = new Thread(Churn::work, "churn-" + n++);
                t.start();
                batch.add(t);
            }
            for (Thread t : batch) {
                t.join();
            }
            Thread.sleep(15);
        }
    }

    /** A few milliseconds of allocation, so that each thread lives through some samples. */
    static void work() {
        for (int i = 0; i < 100_000; i++) {
            sink = new byte[256];
        }
    }

    static void collect() {
        while (true) {
            System.gc();
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
