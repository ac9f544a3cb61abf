package real;

import java.lang.management.ManagementFactory;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DriverManager;

/**
 * A real program with work of known cost injected into it, the ground truth of the accuracy
 * benchmark: {@code Injected <h2|javac> <percent> [javac source dir]} runs the program's own
 * unit of work on one thread ({@code injected-worker}) — an H2 transaction as
 * {@link H2Load} runs it, or a javac round as {@link JavacLoop} runs it — and after each unit
 * spends what that unit cost, scaled so that {@code percent} % of the thread's CPU time goes to
 * {@link #injectedCpu} and {@code percent} % of its allocated bytes to {@link #injectedAlloc}.
 *
 * <p>What each part really took is measured on the thread itself (its CPU time, wall time and
 * allocated bytes), and printed as running totals every 250 ms: {@code TRUTH <time ms since
 * the epoch> <cpu ns: injected total> <wall ns: injected total> <bytes: injected total>},
 * where "injected" counts the method of the same kind ({@code injectedCpu}'s CPU and wall
 * time, {@code injectedAlloc}'s bytes) and "total" the whole thread. A profiler's share of
 * the thread's samples in that method should be the difference of two such lines over its
 * window. Prints READY after the first unit.
 */
public class Injected {
    static volatile long sink;
    static volatile Object kept;
    static long multiplier = 6364136223846793005L;
    static long increment = 1442695040888963407L;
    static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    /** Running totals: cpu injected, cpu total, wall injected, wall total, bytes injected, bytes total. */
    static final long[] TOTALS = new long[6];

    public static void main(String[] args) throws Exception {
        double share = Double.parseDouble(args[1]) / 100;
        Runnable unit = args[0].equals("h2") ? h2Unit() : JavacLoop.javacRound(Paths.get(args[2]));
        Thread worker = new Thread(() -> work(unit, share / (1 - share)), "injected-worker");
        worker.setDaemon(true);
        worker.start();
        boolean ready = false;
        while (true) {
            Thread.sleep(250);
            long[] totals;
            synchronized (TOTALS) {
                totals = TOTALS.clone();
            }
            if (totals[1] == 0) {
                continue;
            }
            if (!ready) {
                System.out.println("READY");
                ready = true;
            }
            System.out.printf("TRUTH %d %d %d %d %d %d %d%n", System.currentTimeMillis(),
                    totals[0], totals[1], totals[2], totals[3], totals[4], totals[5]);
            System.out.flush();
        }
    }

    /**
     * The worker: batches of the program's units, each followed by injected work of `ratio`
     * times its cost. A batch lasts about {@link #BATCH_NANOS} of CPU, so that the clock reads
     * at its edges (a system call each, on the boundary of two parts) are a tiny part of it.
     */
    static void work(Runnable unit, double ratio) {
        int units = 1;
        while (true) {
            long cpu0 = THREADS.getCurrentThreadCpuTime();
            long wall0 = System.nanoTime();
            long bytes0 = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
            for (int i = 0; i < units; i++) {
                unit.run();
            }
            long cpu1 = THREADS.getCurrentThreadCpuTime();
            long wall1 = System.nanoTime();
            long bytes1 = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
            injectedCpu((long) ((cpu1 - cpu0) * ratio));
            long cpu2 = THREADS.getCurrentThreadCpuTime();
            long wall2 = System.nanoTime();
            long bytes2 = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
            injectedAlloc((long) ((bytes1 - bytes0) * ratio));
            long cpu3 = THREADS.getCurrentThreadCpuTime();
            long wall3 = System.nanoTime();
            long bytes3 = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
            synchronized (TOTALS) {
                TOTALS[0] += cpu2 - cpu1;
                TOTALS[1] += cpu3 - cpu0;
                TOTALS[2] += wall2 - wall1;
                TOTALS[3] += wall3 - wall0;
                TOTALS[4] += bytes3 - bytes2;
                TOTALS[5] += bytes3 - bytes0;
            }
            long perUnit = Math.max(1, (cpu1 - cpu0) / units);
            units = (int) Math.max(1, Math.min(10_000, BATCH_NANOS / perUnit));
        }
    }

    /** CPU time of one batch of units. */
    static final long BATCH_NANOS = 5_000_000;

    /** Steps of the burn loop per nanosecond of CPU, as last measured. */
    static double stepsPerNanosecond = 0.5;

    /**
     * Burns about `cpuNanos` of this thread's CPU time and allocates nothing. The loop runs as
     * many steps as the last measured speed says the time takes, reading the CPU clock (a
     * system call, where JFR's execution sampler does not look) once or twice a call.
     */
    static void injectedCpu(long cpuNanos) {
        long now = THREADS.getCurrentThreadCpuTime();
        long end = now + cpuNanos;
        long x = sink, a = multiplier, c = increment;
        while (now < end) {
            long steps = Math.max(1_000, (long) ((end - now) * stepsPerNanosecond));
            for (long i = 0; i < steps; i++) {
                x = x * a + c;
            }
            long after = THREADS.getCurrentThreadCpuTime();
            if (after > now) {
                stepsPerNanosecond = 0.5 * stepsPerNanosecond + 0.5 * steps / (double) (after - now);
            }
            now = after;
        }
        sink = x;
    }

    /** Allocates about `bytes` in 1 KiB arrays, each dropped at once. */
    static void injectedAlloc(long bytes) {
        for (long done = 0; done < bytes; done += 1040) {
            kept = new byte[1024];
        }
    }

    /** One H2 transaction of {@link H2Load}'s per call. */
    static Runnable h2Unit() throws Exception {
        H2Load.createTable();
        Connection connection = DriverManager.getConnection(H2Load.URL);
        connection.setAutoCommit(false);
        return () -> {
            try {
                H2Load.transaction(connection);
                connection.commit();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
    }
}
