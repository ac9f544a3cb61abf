package workloads;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Burns CPU in three methods on three threads, in a 1:2:4 ratio of CPU time (0.2, 0.4 and
 * 0.8 of a core by default): each thread paces itself on its own CPU clock, so the ratio
 * holds on a machine with spare cores. Prints READY once all three run; runs until killed,
 * or for the number of seconds given as the first argument, then prints DONE and exits.
 * A second argument scales the three rates (e.g. 0.5 for 0.1/0.2/0.4 of a core).
 */
public class Burn {
    static volatile long sink;
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : Double.MAX_VALUE;
        double scale = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        Thread one = start("burn-one", 0.2 * scale, Burn::burnOne);
        Thread two = start("burn-two", 0.4 * scale, Burn::burnTwo);
        Thread four = start("burn-four", 0.8 * scale, Burn::burnFour);
        System.out.println("READY");
        long end = System.nanoTime() + (long) Math.min(seconds * 1e9, Long.MAX_VALUE / 2);
        while (System.nanoTime() < end) {
            Thread.sleep(Math.max(1, Math.min(100, (end - System.nanoTime()) / 1_000_000)));
        }
        System.out.println("DONE");
        System.exit(0);
    }

    interface Work {
        void run(int iterations);
    }

    static Thread start(String name, double share, Work work) {
        Thread thread = new Thread(() -> pace(share, work), name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /** Runs work in small chunks, sleeping whenever this thread's CPU time is ahead of share × wall time. */
    static void pace(double share, Work work) {
        long wallStart = System.nanoTime();
        long cpuStart = MX.getCurrentThreadCpuTime();
        while (true) {
            work.run(20_000);
            long wall = System.nanoTime() - wallStart;
            long cpu = MX.getCurrentThreadCpuTime() - cpuStart;
            if (cpu > share * wall) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    static void burnOne(int iterations) {
        long x = sink;
        for (int i = 0; i < iterations; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }

    static void burnTwo(int iterations) {
        long x = sink;
        for (int i = 0; i < iterations; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }

    static void burnFour(int iterations) {
        long x = sink;
        for (int i = 0; i < iterations; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }
}
