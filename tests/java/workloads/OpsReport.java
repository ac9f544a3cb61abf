package workloads;

import java.util.concurrent.atomic.LongAdder;

/**
 * The throughput workloads' common frame: starts worker threads, prints READY, then every
 * 100 ms a line "ops <epoch millis> <total operations>" for the overhead benchmarks to read.
 */
final class OpsReport {
    private OpsReport() {}

    /** Runs {@code threads} daemon threads named {@code name-N} doing {@code work}; never returns. */
    static void run(int threads, String name, Runnable work, LongAdder ops) throws InterruptedException {
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(work, name + "-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        System.out.println("READY");
        while (true) {
            Thread.sleep(100);
            System.out.println("ops " + System.currentTimeMillis() + " " + ops.sum());
        }
    }
}
